//! `weir-bench hams --divergence`: consistency under non-determinism (HAMS, Figs. 2 and 3).
//!
//! An online-learned classifier (`online_logreg.onnx`: a softmax regression whose weights are
//! its state) serves the digits: even requests train it (the first 177 rows of the digits test
//! file, with their labels), odd ones query it (the other 182 rows, the paper's 182-sample test
//! set). Both executors run with `--perturb`, so each batch's rows, and with them the gradient
//! sum's floating-point order, follow a seed chosen per (node, version, epoch): a re-execution
//! is not bit-identical to the first run, as on a GPU.
//!
//! Per checkpoint interval N, the primary is SIGKILLed half an interval after a checkpoint (after
//! a warm-up); the promoted backup replays the N/2 or so batches since that checkpoint. The journal
//! (`weir::hams::journal`) then says how many *released* rows were run again and how the rerun
//! differs from what the client got: bitwise, after rounding each probability to 8 bits, and by
//! label (argmax). Under NSPB the same experiment releases only durable versions, which are
//! never run again, so every count must be zero however much the rolled-back re-executions
//! diverge.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use rand::{Rng, SeedableRng};
use weir::hams::journal::{check, read_dir, Divergence};

use crate::hams::{
    closed_loop_of, median, start_graph, stateful_node, Deployment, HamsBenchConfig, MemberExtras,
};
use weir::workload::read_labelled_rows;
use weir::{NamedTensor, Tensor};

/// Rows of the digits file that train the model; the rest are the test set.
const TRAIN_ROWS: usize = 177;

/// One trial: a failover of the learner's primary under load.
#[derive(Debug, Clone)]
pub struct DivergenceTrial {
    /// Batches the promoted member replayed (checkpoints) or 0 (NSPB).
    pub replayed: u64,
    /// Versions the learner ran more than once (replayed or rolled back).
    pub reexecuted: usize,
    /// Of those, versions whose rerun produced other outputs.
    pub diverged: usize,
    /// What reruns did to released rows.
    pub divergence: Divergence,
    /// Conflicting releases the checker found: a reply that carries other outputs than the durable
    /// version it passed (the journal checker's "no conflicting outputs" violations).
    pub conflicts: usize,
    /// Every request answered once, none failed.
    pub answered_once: bool,
}

/// The trials of one (mode, interval).
#[derive(Debug, Clone)]
pub struct DivergenceRow {
    /// `checkpoint` or `nspb`.
    pub mode: &'static str,
    /// Batches between checkpoints (`checkpoint` only).
    pub interval: u64,
    /// The trials.
    pub trials: Vec<DivergenceTrial>,
}

/// The digits file's rows: 64 pixel values and the label.
fn digits(models: &Path) -> Result<Vec<(Vec<f32>, usize)>> {
    let path = models.join("digits_test.csv");
    let rows: Vec<(Vec<f32>, usize)> = read_labelled_rows(&path, "pixels", 64)?
        .into_iter()
        .map(|(x, label)| (x, usize::try_from(label).unwrap_or(usize::MAX)))
        .collect();
    if rows.len() <= TRAIN_ROWS {
        return Err(anyhow!(
            "{} has {} rows; the experiment needs more than {TRAIN_ROWS}",
            path.display(),
            rows.len()
        ));
    }
    Ok(rows)
}

/// Request `i` of the workload: even ones train on the training rows, odd ones query the test set.
fn request(rows: &[(Vec<f32>, usize)], i: usize) -> Vec<NamedTensor> {
    let train = i.is_multiple_of(2);
    let (x, label) = if train {
        &rows[(i / 2) % TRAIN_ROWS]
    } else {
        let test = rows.len() - TRAIN_ROWS;
        &rows[TRAIN_ROWS + (i / 2) % test]
    };
    let mut onehot = vec![0.0; 10];
    if let Some(v) = onehot.get_mut(*label) {
        *v = 1.0;
    }
    let named = |name: &str, tensor: Tensor| NamedTensor {
        name: name.into(),
        tensor,
    };
    vec![
        named("pixels", Tensor::f32(vec![64], x.clone())),
        named("label", Tensor::f32(vec![10], onehot)),
        named(
            "train",
            Tensor::f32(vec![1], vec![if train { 1.0 } else { 0.0 }]),
        ),
    ]
}

fn graph_yaml(models: &Path, batch: usize, replication: &str, deployment: &Deployment) -> String {
    let mut yaml = String::from(
        "name: hams-divergence\ninputs:\n  - {name: pixels, dtype: f32, shape: [64]}\n  - {name: label, dtype: f32, shape: [10]}\n  - {name: train, dtype: f32, shape: [1]}\nexecutors:\n",
    );
    for (name, endpoint, _) in &deployment.members {
        yaml.push_str(&format!("  - {{name: {name}, endpoint: \"{endpoint}\"}}\n"));
    }
    yaml.push_str("nodes:\n  - normalize: {id: scaled, input: pixels, mean: [0.0], std: [16.0]}\n");
    yaml.push_str(&stateful_node(
        "learner",
        &models.join("online_logreg.onnx"),
        "{x: scaled.output, label: label, train: train}",
        ("w_in", "w_out"),
        batch,
        &deployment.replicas("learner"),
        replication,
    ));
    yaml.push_str("outputs:\n  - {name: probs, from: learner.probs}\n");
    yaml
}

fn journal_dir(tag: &str) -> Result<PathBuf> {
    let dir =
        std::env::temp_dir().join(format!("weir-hams-divergence-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn trial(
    config: &HamsBenchConfig,
    rows: &[(Vec<f32>, usize)],
    mode: &'static str,
    interval: u64,
    t: usize,
    rng: &mut rand::rngs::StdRng,
) -> Result<DivergenceTrial> {
    let tag = format!("{mode}-{interval}-{t}");
    let dir = journal_dir(&tag)?;
    let extras = MemberExtras {
        perturb: true,
        journal: Some(dir.clone()),
    };
    let mut d = Deployment::start_nodes(
        config,
        &[("learner", "online_logreg.onnx")],
        mode,
        &tag,
        &extras,
    )?;
    let replication = match mode {
        "checkpoint" => {
            format!("{{mode: checkpoint, detect_ms: 200, checkpoint_every: {interval}}}")
        }
        _ => "{mode: nspb, detect_ms: 200}".to_string(),
    };
    let graph = start_graph(
        &graph_yaml(&config.models, config.batch, &replication, &d),
        &tag,
    )?;
    if let Some(h) = graph.hams() {
        h.journal_to(&dir);
    }
    // Kill half an interval after a checkpoint (as the paper kills Lineage Stash at the 50th
    // batch of 150), after a warm-up of at least one interval and 400 requests, so the replay
    // covers about N/2 batches whatever the batch sizes; NSPB at a random request.
    let learner = graph
        .stateful_nodes()
        .into_iter()
        .find(|h| h.node == "learner");
    let warm_batches = interval.max(1) + 1;
    let half = interval / 2;
    let earliest = 400 + rng.random_range(0..200);
    let n = earliest + interval as usize * config.batch * 2 + 400;
    let mut killed = false;
    let run = {
        let primary = &mut d.members[0].2;
        closed_loop_of(
            &graph,
            n,
            config.concurrency,
            |i| request(rows, i),
            |i| {
                if killed || i < earliest {
                    return;
                }
                let last = learner.as_ref().map_or(0, |h| h.status().last_seq);
                // A window, not one version: a submission can see the count move by two.
                let phase = last % interval.max(1);
                let due = mode != "checkpoint"
                    || (last >= warm_batches && phase >= half && phase <= half + interval / 5);
                if due {
                    primary.kill();
                    killed = true;
                }
            },
        )
    };
    if !killed {
        graph.shutdown();
        return Err(anyhow!(
            "{mode} every {interval}: the kill point never came in {n} requests"
        ));
    }
    let replayed = graph
        .hams()
        .and_then(|h| h.recoveries().first().map(|r| r.replayed))
        .unwrap_or(0);
    graph.shutdown();
    drop(d);
    let events =
        read_dir(&dir).with_context(|| format!("reading the journal {}", dir.display()))?;
    let report = check(&events);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(DivergenceTrial {
        replayed,
        reexecuted: report.reexecuted,
        diverged: report.diverged,
        divergence: report.divergence,
        conflicts: report
            .violations
            .iter()
            .filter(|v| v.starts_with("no conflicting outputs"))
            .count(),
        answered_once: run.answered_once(n),
    })
}

/// Runs `config.trials` trials per checkpoint interval, and as many under NSPB.
///
/// # Errors
/// When an executor or the graph cannot start, or the journal cannot be read.
pub fn divergence(config: &HamsBenchConfig, intervals: &[u64]) -> Result<Vec<DivergenceRow>> {
    let rows = digits(&config.models)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut out = Vec::new();
    let plan = intervals
        .iter()
        .map(|&n| ("checkpoint", n))
        .chain(std::iter::once(("nspb", 0)));
    for (mode, interval) in plan {
        let trials = (0..config.trials.max(1))
            .map(|t| trial(config, &rows, mode, interval, t, &mut rng))
            .collect::<Result<Vec<_>>>()?;
        out.push(DivergenceRow {
            mode,
            interval,
            trials,
        });
    }
    Ok(out)
}

/// The rows as a Markdown table: medians over trials, totals in parentheses.
pub fn divergence_table(rows: &[DivergenceRow], config: &HamsBenchConfig) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "online softmax regression on the digits (177 training rows, 182 test rows, alternating), rows in a seeded order per (node, version, epoch), batches ≤ {} rows, {} clients; the primary SIGKILLed at a random request; {} trials per row; medians (totals over the trials)\n", config.batch, config.concurrency, config.trials);
    let _ = writeln!(s, "| mode | checkpoint every | replayed batches | versions run again | of them with other outputs | released rows run again | differ bitwise | differ at 8 bits | labels flipped | conflicting releases | answered once |\n|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let med = |f: &dyn Fn(&DivergenceTrial) -> usize| {
            median(r.trials.iter().map(|t| f(t) as f64).collect())
        };
        let cell = |f: &dyn Fn(&DivergenceTrial) -> usize| {
            let total: usize = r.trials.iter().map(f).sum();
            format!("{:.0} ({total})", med(f))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {}/{} |",
            r.mode,
            if r.mode == "checkpoint" {
                r.interval.to_string()
            } else {
                "—".into()
            },
            median(r.trials.iter().map(|t| t.replayed as f64).collect()),
            cell(&|t| t.reexecuted),
            cell(&|t| t.diverged),
            cell(&|t| t.divergence.rows),
            cell(&|t| t.divergence.differ),
            cell(&|t| t.divergence.differ_8bit),
            cell(&|t| t.divergence.label_flips),
            r.trials.iter().map(|t| t.conflicts).sum::<usize>(),
            r.trials.iter().filter(|t| t.answered_once).count(),
            r.trials.len()
        );
    }
    s
}

/// Points for the plot: (interval, median released rows differing bitwise, at 8 bits, labels).
pub fn divergence_points(rows: &[DivergenceRow]) -> Vec<(u64, f64, f64, f64)> {
    rows.iter()
        .filter(|r| r.mode == "checkpoint")
        .map(|r| {
            let med = |f: fn(&Divergence) -> usize| {
                median(r.trials.iter().map(|t| f(&t.divergence) as f64).collect())
            };
            (
                r.interval,
                med(|d| d.differ),
                med(|d| d.differ_8bit),
                med(|d| d.label_flips),
            )
        })
        .collect()
}
