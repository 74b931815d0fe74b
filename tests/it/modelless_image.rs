//! Model-less serving of an image task ("INFaaS: Automated Model-less Inference Serving", §3.3):
//! `text_orientation`, is a cropped line of printed text upright or rotated 180 degrees, served by
//! three architectures of real, different accuracy that scripts/make_orientation_family.py writes
//! (a softmax regression and a small convolutional net trained here, and PaddleOCR's pretrained
//! direction classifier). They are registered through the real `weir model register`; `weir model
//! list` and `show` give three architectures in order of accuracy; then `weir serve --repository`
//! answers queries on real validation images: a high `min_accuracy` picks the most accurate
//! architecture, a loose one with a tight latency the cheapest, and each pick's served classes
//! score the accuracy its registration measured.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use weir_infaas::query::Requirements;
use weir_infaas::repository::Repository;
use weir_infaas::select::{cold_rank, inference_ms, matches};
use weir_infaas::variant::Variant;

use crate::cli::{weir, weir_ok};
use crate::common::{temp_dir, weir_home};
use crate::serve::Server;

const TASK: &str = "text_orientation";
/// The architectures, least accurate first.
const ARCHITECTURES: [&str; 3] = ["orientation_tiny", "orientation_conv", "orientation_ppocr"];
const OUTPUT: &str = "save_infer_model/scale_0.tmp_1";
/// One example's shape: x[1,3,48,192].
const SHAPE: [usize; 4] = [1, 3, 48, 192];
/// A small grid: fp32, one thread, level `all`, dynamic and batch-1 builds; the median of three
/// timed calls, so one slow call cannot make the tiny model look slower than the conv net.
const GRID: [&str; 9] = [
    "--threads",
    "1",
    "--levels",
    "all",
    "--batches",
    "1",
    "--no-int8",
    "--runs",
    "3",
];

/// A file the set-up writes, which must be there.
fn setup_file(rel: &str) -> PathBuf {
    let path = weir_home().join(rel);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/setup.sh (it writes the text_orientation family)",
        path.display()
    );
    path
}

fn validation_path() -> PathBuf {
    setup_file("data/orientation_validation.jsonl")
}

/// `weir model register NAME --task text_orientation ...` with [`GRID`] into `root`.
fn register(name: &str, root: &Path) {
    let onnx = setup_file(&format!("models/{name}.onnx"));
    let out = weir()
        .args(["model", "register", name, "--task", TASK, "--onnx"])
        .arg(&onnx)
        .arg("--validation")
        .arg(validation_path())
        .args(GRID)
        .arg("--repository")
        .arg(root)
        .output()
        .expect("weir runs");
    assert!(
        out.status.success(),
        "register {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The validation set: each example's flat pixels and label.
fn examples() -> Vec<(Vec<f64>, usize)> {
    let text = std::fs::read_to_string(validation_path()).expect("validation set");
    text.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("a JSON line");
            let x: Vec<f64> = v["inputs"]["x"]
                .as_array()
                .expect("inputs.x")
                .iter()
                .map(|n| n.as_f64().expect("a number"))
                .collect();
            assert_eq!(x.len(), SHAPE.iter().product::<usize>());
            (x, v["label"].as_u64().expect("label") as usize)
        })
        .collect()
}

/// The best accuracy of each architecture's variants, as `weir model list --task` prints it.
fn listed_accuracies(root: &Path) -> Vec<f64> {
    let root = root.display().to_string();
    let list = weir_ok(&["model", "list", "--task", TASK, "--repository", &root]);
    let rows: Vec<Vec<&str>> = list
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{list}");
    ARCHITECTURES
        .iter()
        .map(|arch| {
            let row = rows
                .iter()
                .find(|r| r[0] == *arch)
                .unwrap_or_else(|| panic!("{arch} listed: {list}"));
            assert_eq!(row[1], TASK, "{list}");
            assert_eq!(row[2], "2", "dynamic and batch-1 builds: {list}");
            row[3].parse().expect("an accuracy")
        })
        .collect()
}

/// What the server picks with nothing loaded: among the local variants meeting `req` for one
/// row, the least load + inference time, ties by name (INFaaS getVariant, cold).
fn cold_pick(variants: &[Variant], req: &Requirements) -> String {
    variants
        .iter()
        .filter(|v| matches(v, req, 1))
        .min_by(|a, b| {
            cold_rank(a, 1)
                .total_cmp(&cold_rank(b, 1))
                .then_with(|| a.name.cmp(&b.name))
        })
        .expect("a variant meets the requirements")
        .name
        .clone()
}

/// One model-less query of `x` to the task: the variant that served it and the class it gave.
fn classify(server: &Server, x: &[f64], parameters: &Value) -> (String, usize) {
    let body = json!({"parameters": parameters,
        "inputs": [{"name": "x", "shape": SHAPE, "datatype": "FP32", "data": x}]});
    let (status, text) = server.post(
        &format!("/v2/models/{TASK}/infer"),
        &[],
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).expect("a JSON reply");
    let output = &reply["outputs"][0];
    assert_eq!(output["name"], OUTPUT, "{reply}");
    let probs: Vec<f64> = output["data"]
        .as_array()
        .expect("output data")
        .iter()
        .map(|p| p.as_f64().expect("a number"))
        .collect();
    assert_eq!(probs.len(), 2, "{reply}");
    let variant = reply["parameters"]["variant"]
        .as_str()
        .expect("the variant in the reply")
        .to_string();
    (variant, usize::from(probs[1] > probs[0]))
}

#[test]
fn text_orientation_task_picks_architectures_by_accuracy_and_latency_on_real_images() {
    let dir = temp_dir("modelless-image");
    let root = dir.0.join("repository");
    for name in ARCHITECTURES {
        register(name, &root);
    }

    // Three architectures with distinct accuracies, least accurate first, as the set-up printed.
    let listed = listed_accuracies(&root);
    assert!(
        listed[0] + 0.05 < listed[1] && listed[1] + 0.02 < listed[2],
        "accuracies in order {ARCHITECTURES:?}: {listed:?}"
    );
    let show = weir_ok(&[
        "model",
        "show",
        "orientation_ppocr",
        "--repository",
        &root.display().to_string(),
    ]);
    assert!(show.contains(&format!("task {TASK}")), "{show}");
    assert!(
        show.contains("input  x f32 [None, Some(3), Some(48), Some(192)]"),
        "{show}"
    );
    assert!(
        show.contains(&format!("output {OUTPUT} f32 [None, Some(2)]")),
        "{show}"
    );
    assert!(
        show.contains("orientation_ppocr.fp32-all-t1-bdyn-local"),
        "{show}"
    );

    let repo = Repository::open(&root).expect("repository");
    let variants: Vec<Variant> = repo
        .variants_of_task(TASK)
        .filter(|v| v.config.hardware == "local")
        .cloned()
        .collect();
    assert_eq!(variants.len(), 6);
    for v in &variants {
        let arch = ARCHITECTURES
            .iter()
            .position(|a| *a == v.model)
            .expect("a known architecture");
        assert!(
            (v.accuracy - listed[arch]).abs() < 0.01,
            "{}: {} against {}",
            v.name,
            v.accuracy,
            listed[arch]
        );
    }

    // Loose accuracy, tight latency: only the fastest architecture's one-row latency qualifies.
    let fastest = variants
        .iter()
        .filter_map(|v| inference_ms(v, 1))
        .fold(f64::INFINITY, f64::min);
    let cheap = json!({"min_accuracy": 0.5, "latency_ms": fastest});
    let cheap_want = cold_pick(
        &variants,
        &Requirements {
            min_accuracy: Some(0.5),
            latency_ms: Some(fastest),
            ..Requirements::default()
        },
    );
    // High accuracy: between the two best architectures'.
    let high = (listed[1] + listed[2]) / 2.0;
    let accurate = json!({ "min_accuracy": high });
    let accurate_want = cold_pick(
        &variants,
        &Requirements {
            min_accuracy: Some(high),
            ..Requirements::default()
        },
    );

    let server = Server::start(&[], &["--repository", &root.display().to_string()]);
    let examples = examples();
    for (parameters, want, arch) in [
        (&cheap, &cheap_want, ARCHITECTURES[0]),
        (&accurate, &accurate_want, ARCHITECTURES[2]),
    ] {
        let v = repo.variant(want).expect("registered");
        assert_eq!(
            v.model, arch,
            "{parameters}: the repository's figures pick {want}"
        );
        let mut right = 0;
        for (x, label) in &examples {
            let (served, class) = classify(&server, x, parameters);
            assert_eq!(&served, want, "{parameters}");
            right += usize::from(class == *label);
        }
        let served = right as f64 / examples.len() as f64;
        assert!(
            served > 0.5 && (served - v.accuracy).abs() <= 0.02,
            "{parameters}: {want} answered {right} of {} right ({served}), registered at {}",
            examples.len(),
            v.accuracy
        );
    }
}
