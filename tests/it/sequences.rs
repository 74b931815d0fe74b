//! Per-sequence state (Triton's sequence batcher with implicit state): a stateful node keeping one
//! state per client sequence, each request naming its sequence in `parameters`. Sequences
//! interleave through `weir serve` and each one's outputs equal running it alone in ONNX Runtime;
//! the bound on live sequences answers 429, `sequence_end` and the idle timeout free slots, and
//! under NSPB a SIGKILLed primary in the middle of sequences changes no sequence's outputs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ort::value::TensorRef;
use weir::{NamedTensor, OrtRuntime, Tensor};

use crate::common::{assert_close, channel, model, named, signal, temp_dir, Replies};
use crate::hams::{executors_section, journal, start_graph, Member};
use crate::serve::Server;

const INFER: &str = "/v2/models/seq/infer";

/// The `seq` graph: `seq_state.onnx` per sequence (state [2, batch, 8], batch on axis 1), with
/// `max_sequences` and `idle_timeout_ms`, on `replicas` under `replication` (in-process when
/// empty).
pub(crate) fn seq_graph(
    max_sequences: usize,
    idle_timeout_ms: u64,
    executors: &[&Member],
    replication: &str,
) -> String {
    let mut yaml = "name: seq\ninputs:\n  - {name: x, dtype: f32, shape: [4]}\n".to_string();
    yaml.push_str(&executors_section(executors));
    yaml.push_str(&format!(
        "nodes:\n  - model:\n      id: rnn\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 64}}\n      state:\n        inputs: [state]\n        outputs: [state_out]\n        per_sequence: {{batch_axis: 1, idle_timeout_ms: {idle_timeout_ms}, max_sequences: {max_sequences}}}\n",
        model("seq_state.onnx").display()
    ));
    if !executors.is_empty() {
        let names: Vec<&str> = executors.iter().map(|m| m.name.as_str()).collect();
        yaml.push_str(&format!(
            "      replicas: [{}]\n      replication: {replication}\n",
            names.join(", ")
        ));
    }
    yaml.push_str("outputs:\n  - {name: y, from: rnn.y}\n");
    yaml
}

/// Step `t` of sequence `s`'s input.
pub(crate) fn step_input(s: usize, t: usize) -> Vec<f32> {
    (0..4)
        .map(|k| ((s * 131 + t * 17 + k) as f32 * 0.37).sin())
        .collect()
}

/// Sequence `s` of `steps` steps run alone in ONNX Runtime, one call per step from a zero
/// state: each step's `y`.
pub(crate) fn reference(s: usize, steps: usize) -> Vec<Vec<f32>> {
    let inputs: Vec<Vec<f32>> = (0..steps).map(|t| step_input(s, t)).collect();
    alone(&SEQ_STATE, &inputs)
}

/// A recurrent model as the references run it: file, row input, state input and output (the
/// state's shape for one row), row output, and a scalar `sr` input when it takes one.
struct Recurrent {
    file: &'static str,
    input: &'static str,
    state: (&'static str, &'static str, [usize; 3]),
    output: &'static str,
    sample_rate: Option<i64>,
}

const SEQ_STATE: Recurrent = Recurrent {
    file: "seq_state.onnx",
    input: "x",
    state: ("state", "state_out", [2, 1, 8]),
    output: "y",
    sample_rate: None,
};

const SILERO: Recurrent = Recurrent {
    file: "pretrained/silero_vad.onnx",
    input: "input",
    state: ("state", "stateN", [2, 1, 128]),
    output: "output",
    sample_rate: Some(16_000),
};

/// `m` run alone in ONNX Runtime on `inputs` (one row per call) from a zero state: each call's
/// output.
fn alone(m: &Recurrent, inputs: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let rt = OrtRuntime::get().expect("ONNX Runtime loads");
    let mut session = rt
        .session("reference", &model(m.file), 1, false)
        .expect("session");
    let (state_in, state_out, shape) = m.state;
    let mut state = vec![0.0f32; shape.iter().product()];
    let sr = [m.sample_rate.unwrap_or(0)];
    let mut ys = Vec::with_capacity(inputs.len());
    for x in inputs {
        let mut feed = vec![
            (
                m.input,
                TensorRef::from_array_view((vec![1usize, x.len()], x.as_slice()))
                    .expect("input")
                    .into_dyn(),
            ),
            (
                state_in,
                TensorRef::from_array_view((shape.to_vec(), state.as_slice()))
                    .expect("state")
                    .into_dyn(),
            ),
        ];
        if m.sample_rate.is_some() {
            feed.push((
                "sr",
                TensorRef::from_array_view((Vec::<usize>::new(), &sr[..]))
                    .expect("sr")
                    .into_dyn(),
            ));
        }
        let outputs = session.run(feed).expect("run");
        let (_, y) = outputs[m.output]
            .try_extract_tensor::<f32>()
            .expect("output");
        let (_, next) = outputs[state_out]
            .try_extract_tensor::<f32>()
            .expect("state output");
        ys.push(y.to_vec());
        state = next.to_vec();
    }
    ys
}

/// The parameters of step `t` of `steps` of sequence `s` (its id is `s + 1`).
fn params(s: usize, t: usize, steps: usize) -> String {
    let mut p = format!(r#""sequence_id":{}"#, s + 1);
    if t == 0 {
        p.push_str(r#","sequence_start":true"#);
    }
    if t + 1 == steps {
        p.push_str(r#","sequence_end":true"#);
    }
    format!("{{{p}}}")
}

/// An infer request body with `parameters` (JSON object text) and id `id`: one row of `x`.
fn body(id: &str, parameters: &str, x: &[f32]) -> Vec<u8> {
    body_of("x", id, parameters, x)
}

/// [`body`] for graph input `input`.
fn body_of(input: &str, id: &str, parameters: &str, x: &[f32]) -> Vec<u8> {
    let data: Vec<String> = x.iter().map(|v| format!("{v:?}")).collect();
    format!(
        r#"{{"id":"{id}","parameters":{parameters},"inputs":[{{"name":"{input}","datatype":"FP32","shape":[1,{}],"data":[{}]}}]}}"#,
        x.len(),
        data.join(",")
    )
    .into_bytes()
}

/// The `y` of a 200 reply, checked to carry request id `id`.
fn y_of(text: &str, id: &str) -> Vec<f32> {
    let json: serde_json::Value = serde_json::from_str(text).expect("JSON reply");
    assert_eq!(json["id"], id, "the reply answers its request: {text}");
    json["outputs"][0]["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|v| v.as_f64().expect("number") as f32)
        .collect()
}

/// `streams` sequences of `steps` steps posted to `path` of `server` on graph input `input`, one
/// client thread per sequence (each step sent once the last is answered), step `t` of sequence
/// `s` holding `data(s, t)`: each sequence's outputs, every reply checked to answer its request.
fn post_sequences(
    server: &Arc<Server>,
    path: &'static str,
    input: &'static str,
    (streams, steps): (usize, usize),
    data: fn(usize, usize) -> Vec<f32>,
) -> Vec<Vec<Vec<f32>>> {
    let clients: Vec<_> = (0..streams)
        .map(|s| {
            let server = Arc::clone(server);
            std::thread::spawn(move || {
                (0..steps)
                    .map(|t| {
                        let id = format!("s{s}-t{t}");
                        let req = body_of(input, &id, &params(s, t, steps), &data(s, t));
                        let (status, text) = server.post(path, &[], &req);
                        assert_eq!(status, 200, "{id}: {text}");
                        y_of(&text, &id)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    clients
        .into_iter()
        .map(|c| c.join().expect("client thread"))
        .collect()
}

#[test]
fn fifty_interleaved_sequences_through_serve_each_match_running_alone() {
    let (sequences, steps) = (50, 6);
    let server = Arc::new(Server::start(&[seq_graph(64, 60_000, &[], "")], &[]));
    let outputs = post_sequences(&server, INFER, "x", (sequences, steps), step_input);
    for (s, got) in outputs.iter().enumerate() {
        for (t, (g, want)) in got.iter().zip(reference(s, steps)).enumerate() {
            assert_close(g, &want, 1e-5, &format!("sequence {s} step {t}"));
        }
    }
    // Every sequence ended: all 64 slots are free again.
    for s in 100..164 {
        let (status, text) = server.post(
            INFER,
            &[],
            &body("again", &params(s, 0, 2), &step_input(s, 0)),
        );
        assert_eq!(status, 200, "{text}");
    }
}

/// Chunk `t` of audio stream `s`: 512 samples at 16 kHz, a tone whose loudness and pitch
/// change from chunk to chunk over a little noise.
fn audio_chunk(s: usize, t: usize) -> Vec<f32> {
    let pitch = 180.0 + 40.0 * s as f32;
    let loud = if (s + t).is_multiple_of(3) { 0.02 } else { 0.4 };
    (0..512)
        .map(|i| {
            let n = (t * 512 + i) as f32;
            let noise = ((n * 12.9898 + s as f32 * 78.233).sin() * 43_758.547).fract() - 0.5;
            loud * (std::f32::consts::TAU * pitch * n / 16_000.0).sin() + 0.01 * noise
        })
        .collect()
}

#[test]
fn interleaved_audio_streams_through_silero_vad_match_each_stream_alone() {
    // graphs/silero_vad.yaml: real weights, a scalar `sr` constant, state [2, batch, 128].
    let graph = std::fs::read_to_string(crate::common::repo().join("graphs/silero_vad.yaml"))
        .expect("graphs/silero_vad.yaml")
        .replace(
            "../.weir/",
            &format!("{}/", crate::common::weir_home().display()),
        );
    let (streams, chunks) = (8, 5);
    let server = Arc::new(Server::start(&[graph], &[]));
    let outputs = post_sequences(
        &server,
        "/v2/models/silero_vad/infer",
        "audio",
        (streams, chunks),
        audio_chunk,
    );
    for (s, got) in outputs.iter().enumerate() {
        let inputs: Vec<Vec<f32>> = (0..chunks).map(|t| audio_chunk(s, t)).collect();
        for (t, (g, want)) in got.iter().zip(alone(&SILERO, &inputs)).enumerate() {
            // Silence-like audio scores near 0.0005: compare relative to the value, tightly
            // enough that another stream's state would show.
            let tol = want.iter().fold(0.0f32, |m, v| m.max(v.abs())) * 1e-5;
            assert_close(g, &want, tol, &format!("stream {s} chunk {t}"));
        }
    }
}

#[test]
fn the_sequence_bound_answers_429_and_an_end_or_the_idle_timeout_frees_a_slot() {
    let server = Server::start(&[seq_graph(2, 400, &[], "")], &[]);
    let post = |params: &str| server.post(INFER, &[], &body("r", params, &step_input(0, 0)));
    assert_eq!(post(r#"{"sequence_id":1,"sequence_start":true}"#).0, 200);
    assert_eq!(
        post(r#"{"sequence_id":"two","sequence_start":true}"#).0,
        200
    );
    let (status, text) = post(r#"{"sequence_id":3,"sequence_start":true}"#);
    assert_eq!(status, 429, "{text}");
    assert!(
        text.contains("sequence_start") && text.contains("2 sequence slots"),
        "{text}"
    );
    // An end frees its slot (after its own step).
    assert_eq!(post(r#"{"sequence_id":1,"sequence_end":true}"#).0, 200);
    assert_eq!(post(r#"{"sequence_id":3,"sequence_start":true}"#).0, 200);
    // Ended, unknown or unnamed sequences are the client's error, naming the field.
    for (params, field) in [
        (r#"{"sequence_id":1}"#, "parameters.sequence_id"),
        (r#"{"sequence_id":99}"#, "parameters.sequence_id"),
        (r#"{"other":1}"#, "parameters.sequence_id"),
        (r#"{"sequence_id":{"a":1}}"#, "parameters.sequence_id"),
        (
            r#"{"sequence_id":3,"sequence_end":"yes"}"#,
            "parameters.sequence_end",
        ),
    ] {
        let (status, text) = post(params);
        assert_eq!(status, 400, "{params}: {text}");
        assert!(text.contains(field), "{params}: {text}");
    }
    let (status, text) = server.post(
        INFER,
        &[],
        br#"{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}"#,
    );
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("parameters.sequence_id"), "{text}");
    // Idle past the timeout: both held sequences are dropped when the next request comes.
    std::thread::sleep(Duration::from_millis(600));
    let (status, text) = post(r#"{"sequence_id":3}"#);
    assert_eq!(status, 400, "timed out: {text}");
    assert_eq!(post(r#"{"sequence_id":4,"sequence_start":true}"#).0, 200);
    assert_eq!(post(r#"{"sequence_id":5,"sequence_start":true}"#).0, 200);
}

/// Step requests of `sequences` sequences of `steps` steps, each sequence one request at a time
/// (its next step sent once the last is answered), all sequences interleaved; `during(n)` runs
/// after the `n`-th request is submitted. Returns each sequence's outputs and the answer counts.
fn run_sequences(
    graph: &weir::RunningGraph,
    sequences: usize,
    steps: usize,
    mut during: impl FnMut(usize),
) -> (Vec<Vec<Vec<f32>>>, HashMap<u64, usize>) {
    let replies = Replies::default();
    let (tx, rx) = channel();
    let submit = |s: usize, t: usize| {
        let tag = (s * steps + t) as u64;
        let x: NamedTensor = named("x", Tensor::f32(vec![4], step_input(s, t)));
        graph
            .runtime()
            .submit_until(
                vec![x],
                Some(Arc::from(params(s, t, steps))),
                None,
                replies.responder(tag, tx.clone()),
            )
            .expect("admitted");
    };
    let mut outputs = vec![Vec::with_capacity(steps); sequences];
    let mut sent = 0;
    for s in 0..sequences {
        submit(s, 0);
        sent += 1;
        during(sent);
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut done = 0;
    while done < sequences * steps && Instant::now() < deadline {
        let Ok((tag, r)) = rx.recv_timeout(Duration::from_secs(1)) else {
            continue;
        };
        done += 1;
        let (s, t) = (tag as usize / steps, tag as usize % steps);
        let reply = r.unwrap_or_else(|e| panic!("sequence {s} step {t}: {e}"));
        outputs[s].push(
            reply
                .output("y")
                .and_then(Tensor::as_f32)
                .expect("y")
                .to_vec(),
        );
        if t + 1 < steps {
            submit(s, t + 1);
            sent += 1;
            during(sent);
        }
    }
    assert_eq!(done, sequences * steps, "every step answered in time");
    // Anything answered twice would arrive now.
    std::thread::sleep(Duration::from_millis(300));
    while rx.try_recv().is_ok() {}
    (outputs, replies.counts())
}

#[test]
fn a_sigkilled_nspb_primary_in_the_middle_of_sequences_changes_no_sequence_outputs() {
    let (sequences, steps) = (20, 10);
    let dir = temp_dir("seq-kill");
    let models = [("rnn", "seq_state.onnx")];
    // A duplicating, reordering network: each batch's delta must still apply once, in order.
    let chaos = ["--duplicate-messages", "--reorder-messages"];
    let mut a = Member::start("seq-kill-a", &[], &models, &chaos, &dir.0);
    let b = Member::start("seq-kill-b", &[&a.endpoint], &models, &chaos, &dir.0);
    let path = dir.0.join("seq.yaml");
    std::fs::write(
        &path,
        seq_graph(64, 60_000, &[&a, &b], "{mode: nspb, detect_ms: 300}"),
    )
    .expect("graph written");
    let graph = start_graph(&path);
    graph.hams().expect("a HAMS manager").journal_to(&dir.0);
    let pid = a.pid();
    let (outputs, counts) = run_sequences(&graph, sequences, steps, |n| {
        if n == sequences * steps / 2 {
            signal(pid, "-KILL");
        }
    });
    a.sigkill();
    let recoveries = graph.hams().expect("manager").recoveries();
    assert_eq!(recoveries.len(), 1, "one failover: {recoveries:?}");
    graph.shutdown();
    for (s, got) in outputs.iter().enumerate() {
        for (t, (g, want)) in got.iter().zip(reference(s, steps)).enumerate() {
            assert_close(g, &want, 1e-5, &format!("sequence {s} step {t}"));
        }
    }
    assert_eq!(counts.len(), sequences * steps, "every request answered");
    assert!(counts.values().all(|&c| c == 1), "answered once each");
    let report = journal(&dir);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.released, sequences * steps);
    assert!(
        report.states_compared > 0,
        "the backup's tables were compared with its primary's: {report:?}"
    );
    drop(b);
}
