//! The executors a HAMS graph runs on (per stateful node a primary, and a backup unless
//! replication is off) and the graph's YAML over them, per service graph.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::Result;
use rand::Rng;
use weir::{NamedTensor, Tensor};

use super::{HamsBenchConfig, Service};
use crate::process::{executor_command, free_endpoint, spawn_ready};

/// What a benchmark's executors run with beyond the defaults.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemberExtras {
    /// `--perturb`: each batch's rows in a seeded order per (node, version, epoch).
    pub perturb: bool,
    /// `WEIR_HAMS_JOURNAL`: the folder every member journals into.
    pub journal: Option<PathBuf>,
}

/// A `weir executor` serving stateful models, SIGKILLed when dropped.
pub(crate) struct MemberProcess {
    child: Child,
}

impl MemberProcess {
    fn spawn(
        name: &str,
        endpoint: &str,
        peers: &[String],
        models: &[(String, PathBuf)],
        compute_ms: f64,
        extras: &MemberExtras,
    ) -> Result<Self> {
        let mut cmd = executor_command(name, endpoint)?;
        if extras.perturb {
            cmd.arg("--perturb");
        }
        if let Some(dir) = &extras.journal {
            cmd.env("WEIR_HAMS_JOURNAL", dir);
        }
        for p in peers {
            cmd.args(["--connect", p]);
        }
        for (node, file) in models {
            cmd.arg("--stateful")
                .arg(format!("{node}={}", file.display()));
        }
        let child = spawn_ready(cmd.args(["--compute-ms", &compute_ms.to_string()]), name)?;
        Ok(MemberProcess { child })
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for MemberProcess {
    fn drop(&mut self) {
        self.signal("-CONT");
        self.kill();
    }
}

/// The executors of one graph: per stateful node, `[primary, backup]` (only the primary under
/// `none`): (name, endpoint, process).
pub(crate) struct Deployment {
    pub(crate) members: Vec<(String, String, MemberProcess)>,
}

impl Deployment {
    pub(crate) fn start(
        config: &HamsBenchConfig,
        service: Service,
        mode: &str,
        tag: &str,
    ) -> Result<Self> {
        Deployment::start_nodes(
            config,
            &service.stateful(),
            mode,
            tag,
            &MemberExtras::default(),
        )
    }

    /// Executors for stateful nodes `nodes` ((node, model file) pairs).
    pub(crate) fn start_nodes(
        config: &HamsBenchConfig,
        nodes: &[(&str, &str)],
        mode: &str,
        tag: &str,
        extras: &MemberExtras,
    ) -> Result<Self> {
        let mut members: Vec<(String, String, MemberProcess)> = Vec::new();
        let copies = if mode == "none" { 1 } else { 2 };
        for &(node, file) in nodes {
            for c in 0..copies {
                let name = format!("hb-{tag}-{node}-{c}");
                let endpoint = free_endpoint()?;
                let peers: Vec<String> = members.iter().map(|m| m.1.clone()).collect();
                let p = MemberProcess::spawn(
                    &name,
                    &endpoint,
                    &peers,
                    &[(node.to_string(), config.models.join(file))],
                    config.compute_ms,
                    extras,
                )?;
                members.push((name, endpoint, p));
            }
        }
        Ok(Deployment { members })
    }

    pub(crate) fn replicas(&self, node: &str) -> Vec<&str> {
        self.members
            .iter()
            .filter(|m| m.0.contains(&format!("-{node}-")))
            .map(|m| m.0.as_str())
            .collect()
    }
}

pub(crate) fn stateful_node(
    id: &str,
    file: &Path,
    input: &str,
    state: (&str, &str),
    batch: usize,
    replicas: &[&str],
    replication: &str,
) -> String {
    format!(
        "  - model:\n      id: {id}\n      path: {}\n      inputs: {input}\n      batching: {{max_size: {batch}}}\n      state: {{inputs: [{}], outputs: [{}]}}\n      replicas: [{}]\n      replication: {replication}\n",
        file.display(),
        state.0,
        state.1,
        replicas.join(", ")
    )
}

pub(crate) fn graph_yaml(
    config: &HamsBenchConfig,
    service: Service,
    mode: &str,
    d: &Deployment,
) -> String {
    let mut yaml = String::from("name: hams-bench\n");
    let m = |f: &str| config.models.join(f);
    let b = config.batch;
    let mode = &format!(
        "{{mode: {mode}, detect_ms: 200, checkpoint_every: {}}}",
        config.checkpoint_every
    );
    match service {
        Service::Online => yaml.push_str("inputs:\n  - {name: x, dtype: f32, shape: [512]}\n  - {name: label, dtype: f32, shape: [512]}\n  - {name: train, dtype: f32, shape: [1]}\n"),
        _ => yaml.push_str("inputs:\n  - {name: x, dtype: f32, shape: [16]}\n"),
    }
    yaml.push_str("executors:\n");
    for (name, endpoint, _) in &d.members {
        yaml.push_str(&format!("  - {{name: {name}, endpoint: \"{endpoint}\"}}\n"));
    }
    yaml.push_str("nodes:\n");
    match service {
        Service::Autopilot => {
            yaml.push_str(&format!("  - model: {{id: perception, path: {}, inputs: {{x: x}}, batching: {{max_size: {b}}}}}\n", m("affine.onnx").display()));
            yaml.push_str(&stateful_node(
                "motion",
                &m("gru_stream.onnx"),
                "{x: perception.y}",
                ("h_in", "h_out"),
                b,
                &d.replicas("motion"),
                mode,
            ));
            yaml.push_str(&stateful_node(
                "route",
                &m("gru_chain.onnx"),
                "{x: motion.y}",
                ("h_in", "h_out"),
                b,
                &d.replicas("route"),
                mode,
            ));
            yaml.push_str("  - argmax: {id: action, input: route.y}\noutputs:\n  - {name: y, from: action.index}\n");
        }
        Service::Tracker => {
            yaml.push_str(&format!("  - model: {{id: perception, path: {}, inputs: {{x: x}}, batching: {{max_size: {b}}}}}\n", m("affine.onnx").display()));
            yaml.push_str(&stateful_node(
                "track",
                &m("gru_stream.onnx"),
                "{x: perception.y}",
                ("h_in", "h_out"),
                b,
                &d.replicas("track"),
                mode,
            ));
            yaml.push_str("outputs:\n  - {name: y, from: track.y}\n");
        }
        Service::Online => {
            yaml.push_str(&stateful_node(
                "learner",
                &m("online_wide.onnx"),
                "{x: x, label: label, train: train}",
                ("w_in", "w_out"),
                b,
                &d.replicas("learner"),
                mode,
            ));
            yaml.push_str("outputs:\n  - {name: y, from: learner.probs}\n");
        }
    }
    yaml
}

pub(crate) fn request(service: Service, rng: &mut rand::rngs::StdRng) -> Vec<NamedTensor> {
    let named = |name: &str, tensor: Tensor| NamedTensor {
        name: name.into(),
        tensor,
    };
    match service {
        Service::Online => {
            let x: Vec<f32> = (0..512).map(|_| rng.random_range(-1.0..1.0)).collect();
            let mut label = vec![0.0; 512];
            label[rng.random_range(0..512)] = 1.0;
            let train = if rng.random_bool(0.5) { 1.0 } else { 0.0 };
            vec![
                named("x", Tensor::f32(vec![512], x)),
                named("label", Tensor::f32(vec![512], label)),
                named("train", Tensor::f32(vec![1], vec![train])),
            ]
        }
        _ => vec![named(
            "x",
            Tensor::f32(
                vec![16],
                (0..16).map(|_| rng.random_range(-1.0..1.0)).collect(),
            ),
        )],
    }
}
