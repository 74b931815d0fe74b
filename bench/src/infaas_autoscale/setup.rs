//! What one run stands on: the repository (the model registered once for every executor type),
//! and per run a fresh `weir serve` with its executors — launched by its autoscaler for INFaaS
//! and SM⁺, started here and pre-loaded for Clipper⁺'s fixed pool. Everything is stopped when
//! the run ends (the serve process with SIGTERM, so it drains; the executors it launched die
//! with it).

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;
use weir::cli::model::{register, RegisterArgs, RepositoryArg};
use weir_infaas::repository::Repository;

use super::{AutoscaleBenchConfig, Knobs, System};
use crate::process::{executor_command, free_endpoint, serve_command, spawn_ready, ServeProcess};

/// The task the model is registered under.
pub const TASK: &str = "digits";
/// The control key the front end signs load commands with.
const KEY: &[u8] = b"weir-bench infaas-autoscale control key";
/// Longest a deployment may take to answer its first query.
const FIRST_ANSWER: Duration = Duration::from_secs(90);

/// An emulated executor type.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorType {
    /// Its name (a variant's hardware).
    pub name: String,
    /// Price per instance-second.
    pub price_per_s: f64,
    /// A call of n rows takes `base_ms + per_row_ms × n`.
    pub base_ms: f64,
    /// See `base_ms`.
    pub per_row_ms: f64,
    /// A variant load takes this long.
    pub load_ms: f64,
}

impl ExecutorType {
    fn latency_arg(&self) -> String {
        format!("{},{}", self.base_ms, self.per_row_ms)
    }
}

/// The registered repository and the files every run shares.
pub struct Prepared {
    dir: PathBuf,
    repository: Repository,
    key: PathBuf,
    /// One validation row, the queries' input.
    row: Vec<f32>,
}

/// Registers the model for every type into `dir/repository`.
pub(super) fn prepare(config: &AutoscaleBenchConfig, dir: &Path) -> Result<Prepared> {
    std::fs::create_dir_all(dir)?;
    let hardware = dir.join("hardware.yaml");
    let mut yaml = String::from("types:\n");
    for t in &config.types {
        yaml += &format!(
            "  - {{name: {}, price_per_s: {}, emulate_latency: \"{}\", load_ms: {}}}\n",
            t.name,
            t.price_per_s,
            t.latency_arg(),
            t.load_ms
        );
    }
    std::fs::write(&hardware, yaml)?;
    let root = dir.join("repository");
    register(&RegisterArgs {
        name: config.model.0.clone(),
        task: TASK.into(),
        onnx: config.model.1.clone(),
        validation: config.validation.clone(),
        repository: RepositoryArg {
            repository: root.clone(),
        },
        hardware: Some(hardware),
        int8: None,
        no_int8: true,
        threads: vec![1],
        levels: vec!["all".into()],
        batches: vec![1],
        runs: 3,
    })
    .context("registering the model")?;
    let key = dir.join("control.key");
    std::fs::write(&key, KEY)?;
    let text = std::fs::read_to_string(&config.validation)?;
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap_or("{}"))?;
    let row: Vec<f32> = first["inputs"]["x"]
        .as_array()
        .ok_or_else(|| anyhow!("{}: no inputs.x", config.validation.display()))?
        .iter()
        .filter_map(|v| v.as_f64().map(|f| f as f32))
        .collect();
    Ok(Prepared {
        repository: Repository::open(&root)?,
        dir: dir.to_path_buf(),
        key,
        row,
    })
}

impl Prepared {
    /// The name of the variant on `hardware` built for batch `batch`.
    fn variant(&self, hardware: &str, batch: u32) -> Result<String> {
        self.repository
            .variants_of_task(TASK)
            .find(|v| v.config.hardware == hardware && v.config.fixed_batch == Some(batch))
            .map(|v| v.name.clone())
            .ok_or_else(|| anyhow!("no batch-{batch} variant on `{hardware}`"))
    }
}

/// One system's processes, stopped on drop.
pub(super) struct Deployment {
    /// The front end's HTTP address.
    pub addr: String,
    /// Taken when stopped, so that it stops before the executors started here.
    serve: Option<ServeProcess>,
    executors: Vec<Child>,
    /// The request parameters the system's queries carry.
    parameters: serde_json::Value,
    row: Vec<f32>,
    /// Price of the fixed pool's variant, per instance-second.
    price: f64,
}

impl Deployment {
    /// Starts `system`'s front end and executors.
    pub(super) fn start(
        config: &AutoscaleBenchConfig,
        prepared: &Prepared,
        system: System,
        knobs: Knobs,
        label: &str,
    ) -> Result<Deployment> {
        let root = prepared.dir.join("repository");
        let log =
            std::fs::File::create(prepared.dir.join(format!("serve-{system:?}-{label}.log")))?;
        let mut serve = serve_command()?;
        serve.args(["--repository".as_ref(), root.as_os_str()]);
        serve.args(["--control-key-file".as_ref(), prepared.key.as_os_str()]);
        let timeout_ms = super::drive::EXPIRE.as_millis().to_string();
        serve.args(["--http", "127.0.0.1:0", "--request-timeout-ms", &timeout_ms]);
        // The load's connections idle between requests at low rates; they stay open.
        serve.args(["--header-timeout-ms", "3600000"]);
        let mut executors = Vec::new();
        let (parameters, price) = match system.variant() {
            None => (json!({"latency_ms": config.slo_ms}), 0.0),
            Some((hardware, batch)) => {
                let price = config
                    .types
                    .iter()
                    .find(|t| t.name == hardware)
                    .map_or(0.0, |t| t.price_per_s);
                (
                    json!({"variant": prepared.variant(hardware, batch)?}),
                    price,
                )
            }
        };
        let fixed = system.fixed_instances();
        if fixed > 0 {
            // Clipper⁺: a fixed pool, each executor holding the variant from the start.
            let (hardware, _) = system.variant().unwrap_or(("cpu", 1));
            let t = config
                .types
                .iter()
                .find(|t| t.name == hardware)
                .ok_or_else(|| anyhow!("no executor type `{hardware}`"))?;
            let variant = parameters["variant"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            for i in 0..fixed {
                let name = format!("fixed-{hardware}-{i}-{}", std::process::id());
                let endpoint = free_endpoint()?;
                let mut cmd = executor_command(&name, &endpoint)?;
                cmd.args(["--repository".as_ref(), root.as_os_str()]);
                cmd.args(["--control-key-file".as_ref(), prepared.key.as_os_str()]);
                cmd.args(["--emulate-latency", &t.latency_arg()]);
                cmd.args(["--emulate-load-ms", &t.load_ms.to_string()]);
                executors.push(spawn_ready(&mut cmd, &name)?);
                serve.args(["--executor", &format!("{name}={hardware}")]);
                serve.args(["--zenoh-connect", &endpoint]);
                serve.args(["--preload", &format!("{variant}={name}")]);
            }
        } else {
            let listen = free_endpoint()?;
            let file = prepared.dir.join(format!("autoscale-{system:?}.yaml"));
            std::fs::write(
                &file,
                autoscale_file(config, prepared, &root, &listen, knobs)?,
            )?;
            serve.args(["--zenoh-listen", &listen]);
            serve.args(["--autoscale".as_ref(), file.as_os_str()]);
        }
        // The autoscaler's decisions go to the run's log, with their reasons.
        if std::env::var_os("WEIR_LOG").is_none() {
            serve.env("WEIR_LOG", "warn,weir_infaas=info");
        }
        let serve = match ServeProcess::start(&mut serve, log, FIRST_ANSWER) {
            Ok(s) => s,
            Err(e) => {
                for mut x in executors {
                    let _ = x.kill();
                    let _ = x.wait();
                }
                return Err(e).with_context(|| {
                    format!(
                        "weir serve for {} (its log is in {})",
                        system.name(),
                        prepared.dir.display()
                    )
                });
            }
        };
        Ok(Deployment {
            addr: serve.addr.clone(),
            serve: Some(serve),
            executors,
            parameters,
            row: prepared.row.clone(),
            price,
        })
    }

    /// A request's JSON body, by id.
    pub(super) fn body(&self) -> impl Fn(&str) -> String + Sync + '_ {
        move |id| {
            json!({"id": id, "parameters": self.parameters,
                "inputs": [{"name": "x", "shape": [1, self.row.len()], "datatype": "FP32", "data": self.row}]})
            .to_string()
        }
    }

    /// Sends single queries until one is answered 200 (executors joining, the first load).
    pub(super) fn wait_served(&self, path: &str, body: &impl Fn(&str) -> String) -> Result<()> {
        let deadline = Instant::now() + FIRST_ANSWER;
        let mut n = 0;
        loop {
            let text = body(&format!("first-{n}"));
            let status = super::drive::post(&self.addr, path, &text).map(|(status, _)| status);
            if matches!(status, Ok(200)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("no query answered within {FIRST_ANSWER:?}: last {status:?}");
            }
            n += 1;
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The fixed pool's price per instance-second.
    pub(super) fn fixed_price(&self) -> f64 {
        self.price
    }

    /// Stops the front end (SIGTERM: it drains, then its launched executors go with it) and the
    /// executors started here.
    pub(super) fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        // The front end drains first; dropping it stops it.
        drop(self.serve.take());
        for e in &mut self.executors {
            let _ = e.kill();
            let _ = e.wait();
        }
        self.executors.clear();
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The `--autoscale` file: the paper's settings but for `knobs`, one to `max_executors`
/// executors per type, launched from this binary.
fn autoscale_file(
    config: &AutoscaleBenchConfig,
    prepared: &Prepared,
    root: &Path,
    listen: &str,
    knobs: Knobs,
) -> Result<String> {
    let mut autoscale = json!({
        "workers": {"min_per_type": 1, "max_per_type": config.max_executors},
    });
    for (field, value) in [
        ("threshold", knobs.threshold),
        ("tick_s", knobs.tick_s),
        ("lambda_per_s", knobs.lambda_per_s),
        ("slack_qps", knobs.slack_qps),
    ] {
        if let Some(v) = value {
            autoscale[field] = json!(v);
        }
    }
    let exe = std::env::current_exe()?;
    let mut launch = serde_json::Map::new();
    for t in &config.types {
        launch.insert(
            t.name.clone(),
            json!([
                exe,
                "executor",
                "--name",
                "{name}",
                "--connect",
                listen,
                "--repository",
                root,
                "--control-key-file",
                prepared.key,
                "--emulate-latency",
                t.latency_arg(),
                "--emulate-load-ms",
                t.load_ms.to_string()
            ]),
        );
    }
    // JSON is YAML: the file is written as one JSON object.
    Ok(serde_json::to_string_pretty(
        &json!({"autoscale": autoscale, "launch": launch}),
    )?)
}
