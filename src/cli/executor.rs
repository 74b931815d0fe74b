//! `weir executor`: serve ONNX models to graphs on other processes or hosts over zenoh, until
//! SIGTERM or Ctrl-C.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};

use super::process::{install_zenoh_security, shutdown_signal};

/// The flags of `weir executor`.
#[derive(Debug, Args)]
pub struct ExecutorArgs {
    /// Name graphs list in their `executors:` section; the key prefix is `weir/executor/<name>`.
    #[arg(long, default_value = "executor")]
    name: String,
    /// Key-expression prefix, instead of `weir/executor/<name>`.
    #[arg(long)]
    key: Option<String>,
    /// zenoh endpoint to listen on, e.g. `tcp/127.0.0.1:7447` (repeatable).
    #[arg(long)]
    listen: Vec<String>,
    /// zenoh endpoint to connect to, e.g. a graph's `--zenoh-listen` (repeatable).
    #[arg(long)]
    connect: Vec<String>,
    /// zenoh configuration file (JSON5): TLS, user/password, access control; see
    /// examples/zenoh-secure. Without one (or listen endpoints in it), listens on loopback only.
    #[arg(long, env = "WEIR_ZENOH_CONFIG")]
    zenoh_config: Option<PathBuf>,
    /// Key file shared by the graph and its executors: HAMS role assignments are signed with it
    /// (HMAC-SHA256) and executors apply only assignments that verify.
    #[arg(long, env = "WEIR_CONTROL_KEY_FILE")]
    control_key_file: Option<PathBuf>,
    /// A model to serve, as NAME=PATH; graphs reach it under their model node's id (repeatable).
    #[arg(long = "model", value_parser = parse_model_arg)]
    models: Vec<(String, PathBuf)>,
    /// A model (by NAME) served without a batch dimension, for a graph node with `batch: false`
    /// whose model's first dimension is dynamic or 1 (repeatable). Models whose first dimension
    /// cannot be a batch dimension are served so without it.
    #[arg(long = "unbatched", value_name = "NAME")]
    unbatched: Vec<String>,
    /// Padded batching for model NAME, as a graph's `batching.pad`: requests whose inputs differ
    /// only along the ONNX dimension DIM join one call, padded with VALUE, and each reply is cut
    /// back to its own length (repeatable), e.g. `--pad encoder=seq:0`.
    #[arg(long = "pad", value_name = "NAME=DIM:VALUE", value_parser = parse_pad_arg)]
    pad: Vec<(String, String, f64)>,
    /// A stateful model to serve (HAMS), as NAME=PATH: primary or backup of the graph's node
    /// NAME as the graph assigns it; its state tensors come with the assignment (repeatable).
    #[arg(long = "stateful", value_parser = parse_model_arg)]
    stateful: Vec<(String, PathBuf)>,
    /// Run each batch's rows of stateful models in a seeded order chosen per (node, version,
    /// epoch), journaled: the non-determinism of a GPU's reduction order or of racing inputs.
    #[arg(long)]
    perturb: bool,
    /// Delay every state tuple sent to a backup by this many milliseconds (a slow state link).
    #[arg(long, default_value_t = 0)]
    state_delay_ms: u64,
    /// Emulated extra compute per batch of a stateful model, in milliseconds (a sleep after the
    /// real inference: a GPU model's batch time without using this machine's cores).
    #[arg(long, default_value_t = 0.0)]
    compute_ms: f64,
    /// Chaos for tests: send every HAMS protocol message twice (receivers must act on each once).
    #[arg(long)]
    duplicate_messages: bool,
    /// Chaos for tests: swap every other pair of state tuples on the way to the backup.
    #[arg(long)]
    reorder_messages: bool,
    /// Device to run on: cpu or cuda.
    #[arg(long, default_value = "cpu", value_parser = parse_device)]
    device: crate::Device,
    /// Intra-op threads per session.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Sessions per model (requests run at once).
    #[arg(long, default_value_t = 1)]
    instances: usize,
    /// Most rows per call, for models with a dynamic batch dimension.
    #[arg(long, default_value_t = 8)]
    max_batch: usize,
    /// Warm-up calls each session of every model runs before the executor serves (seeded random
    /// values, one row, free dimensions taken as 1); 0: none.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    warmup_runs: u32,
    /// Longest a request waits for others to join its batch, in microseconds.
    #[arg(long, default_value_t = 0)]
    max_delay_us: u64,
    /// When a batch waits `--max-delay-us` for more: `when-busy` (only while every session of
    /// the model runs a call, each free session taking its share of the queue; a model with a
    /// free session runs a lone request at once) or `always` (a fixed timer).
    #[arg(long, value_enum, default_value_t = BatchWaitArg::WhenBusy)]
    batch_wait: BatchWaitArg,
    /// How large a call's batch may grow: `while-cheaper` (only while the model's calls have
    /// measured rows cheaper in larger calls, on CPU sessions of one thread) or `to-max-size`
    /// (always up to `--max-batch`).
    #[arg(long, value_enum, default_value_t = BatchGrowArg::WhileCheaper)]
    batch_grow: BatchGrowArg,
    /// Jobs each model's queue holds.
    #[arg(long, default_value_t = 64)]
    queue_capacity: usize,
    /// Emulate an instance F times slower (F ≥ 1): after each real inference, sleep (F − 1) × its
    /// measured time before replying (Kairos experiments; the price goes in the graph's labels).
    #[arg(long)]
    slowdown: Option<f64>,
    /// Emulate an instance type whose call of n rows takes BASE_MS + PER_ROW_MS × n milliseconds
    /// (e.g. `26.2,0.05` GPU-like, `3.4,0.33` CPU-like): each call is held until then, or for its
    /// real time if longer. Every job is then its own call (`--max-batch` does not apply).
    #[arg(long, value_name = "BASE_MS,PER_ROW_MS", conflicts_with = "slowdown")]
    emulate_latency: Option<weir_executor::emulation::LatencyProfile>,
    /// Emulate an instance type whose variant loads take at least MS milliseconds: a load
    /// command is answered, and the variant served, no sooner (the `load_ms` of the type in
    /// `weir model register --hardware`).
    #[arg(long, value_name = "MS", default_value_t = 0.0)]
    emulate_load_ms: f64,
    /// Model repository (model-less serving): the executor loads and unloads its variants on
    /// commands signed with the control key (`--control-key-file`), resolving each name here and
    /// checking its file's SHA-256.
    #[arg(long, env = "WEIR_REPOSITORY")]
    repository: Option<PathBuf>,
    /// OTLP/gRPC collector (`http://host:4317`) to export the spans of traced jobs to: a job a
    /// graph sends for a sampled request carries its node's span, and the executor's span (queue
    /// wait, ONNX Runtime call, batch size) goes under it. Off without it.
    #[arg(long, env = "WEIR_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
}

/// Variants resolved in the executor's own repository, read afresh for each command so that
/// models registered while it runs can be loaded.
#[derive(Debug)]
struct RepositoryVariants(PathBuf);

impl weir_executor::variants::VariantSource for RepositoryVariants {
    fn resolve(&self, name: &str) -> Result<weir_executor::variants::ResolvedVariant, String> {
        let repository =
            weir_infaas::repository::Repository::open(&self.0).map_err(|e| e.to_string())?;
        let variant = repository
            .variant(name)
            .ok_or_else(|| format!("no variant `{name}` in the executor's repository"))?;
        let path = repository.verify(variant).map_err(|e| e.to_string())?;
        Ok(weir_executor::variants::ResolvedVariant {
            path,
            intra_threads: usize::try_from(variant.config.intra_threads).unwrap_or(1),
            max_batch: usize::try_from(variant.max_batch).unwrap_or(1),
            fixed_batch: variant
                .config
                .fixed_batch
                .and_then(|b| usize::try_from(b).ok()),
            graph_level: variant.config.graph_level,
        })
    }
}

fn parse_model_arg(text: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=PATH"))?;
    if name.is_empty() || path.is_empty() {
        return Err(format!("`{text}` is not NAME=PATH"));
    }
    Ok((name.to_string(), PathBuf::from(path)))
}

fn parse_pad_arg(text: &str) -> Result<(String, String, f64), String> {
    let bad = || format!("`{text}` is not NAME=DIM:VALUE");
    let (name, rest) = text.split_once('=').ok_or_else(bad)?;
    let (dim, value) = rest.split_once(':').ok_or_else(bad)?;
    let value: f64 = value.parse().map_err(|_| bad())?;
    if name.is_empty() || dim.is_empty() || !value.is_finite() {
        return Err(bad());
    }
    Ok((name.to_string(), dim.to_string(), value))
}

fn parse_device(text: &str) -> Result<crate::Device, String> {
    match text {
        "cpu" => Ok(crate::Device::Cpu),
        "cuda" => Ok(crate::Device::Cuda),
        other => Err(format!("unknown device `{other}` (cpu or cuda)")),
    }
}

/// `--emulate-load-ms` as a duration: finite, at least 0, at most an hour.
fn emulated_load(ms: f64) -> Result<std::time::Duration> {
    if !(ms.is_finite() && (0.0..=3_600_000.0).contains(&ms)) {
        anyhow::bail!("--emulate-load-ms: {ms} is not a time between 0 and 3600000");
    }
    Ok(std::time::Duration::from_secs_f64(ms / 1e3))
}

/// Serves the models asked for until SIGTERM or Ctrl-C.
///
/// # Errors
/// When zenoh, a model or the security files cannot be set up.
pub fn run(args: ExecutorArgs) -> Result<()> {
    install_zenoh_security(
        args.zenoh_config.as_deref(),
        args.control_key_file.as_deref(),
    )?;
    let spans = args
        .otlp_endpoint
        .as_deref()
        .map(|endpoint| {
            weir_otel::OtlpSink::start(endpoint, &format!("weir-executor-{}", args.name))
        })
        .transpose()?
        .map(|sink| sink as std::sync::Arc<dyn weir_engine::trace::SpanSink>);
    let options = weir_executor::server::ExecutorOptions {
        spans,
        name: args.name.clone(),
        key: args.key,
        listen: args.listen,
        connect: args.connect,
        models: args.models,
        device: args.device,
        threads: args.threads,
        instances: args.instances,
        max_batch: args.max_batch,
        warmup_runs: args.warmup_runs,
        max_delay: std::time::Duration::from_micros(args.max_delay_us),
        wait: match args.batch_wait {
            BatchWaitArg::WhenBusy => weir_engine::spec::BatchWait::WhenBusy,
            BatchWaitArg::Always => weir_engine::spec::BatchWait::Always,
        },
        grow: match args.batch_grow {
            BatchGrowArg::WhileCheaper => weir_engine::spec::BatchGrow::WhileCheaper,
            BatchGrowArg::ToMaxSize => weir_engine::spec::BatchGrow::ToMaxSize,
        },
        queue_capacity: args.queue_capacity,
        emulation: weir_executor::emulation::Emulation::from_options(
            args.slowdown,
            args.emulate_latency,
        )?,
        emulated_load: emulated_load(args.emulate_load_ms)?,
        unbatched: args.unbatched,
        pad: args.pad,
        stateful: args.stateful,
        variants: args.repository.map(|dir| {
            std::sync::Arc::new(RepositoryVariants(dir))
                as std::sync::Arc<dyn weir_executor::variants::VariantSource>
        }),
        stateful_options: weir_executor::stateful::StatefulOptions {
            threads: args.threads,
            perturb: args.perturb,
            state_delay: std::time::Duration::from_millis(args.state_delay_ms),
            compute: std::time::Duration::from_secs_f64(args.compute_ms.max(0.0) / 1e3),
            duplicate_messages: args.duplicate_messages,
            reorder_messages: args.reorder_messages,
        },
    };
    let server = weir_executor::server::ExecutorServer::start(&options)
        .with_context(|| format!("starting executor `{}`", args.name))?;
    println!(
        "weir executor {} serving {} under {}",
        args.name,
        server.models().join(","),
        server.key_prefix()
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(shutdown_signal());
    eprintln!("weir executor {}: stopping", args.name);
    server.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emulated_load_time_is_a_bounded_number_of_milliseconds() {
        assert_eq!(
            emulated_load(250.0).expect("valid"),
            std::time::Duration::from_millis(250)
        );
        assert_eq!(
            emulated_load(0.0).expect("valid"),
            std::time::Duration::ZERO
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, 3_600_001.0] {
            let e = emulated_load(bad).expect_err("refused").to_string();
            assert!(e.contains("--emulate-load-ms"), "{e}");
        }
    }
}

/// `--batch-wait`: the command-line spelling of a graph's `batching.wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BatchWaitArg {
    /// Wait for company only while every session of the model runs a call.
    WhenBusy,
    /// Always wait up to `--max-delay-us`.
    Always,
}

/// `--batch-grow`: the command-line spelling of a graph's `batching.grow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BatchGrowArg {
    /// Only while larger calls have measured cheaper per row.
    WhileCheaper,
    /// Always up to `--max-batch`.
    ToMaxSize,
}
