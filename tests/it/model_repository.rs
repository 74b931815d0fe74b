//! The model repository of model-less serving (INFaaS's `register_model`, §3.1): the digits
//! family registered through the real `weir model register` process (real ONNX Runtime, real int8
//! quantisation), every variant listed with every field; list/show/remove; hostile repositories
//! and validation files refused naming the file, line and field.

use std::path::Path;
use std::process::Output;

use weir_infaas::repository::profile::batch_sizes;
use weir_infaas::repository::Repository;
use weir_infaas::variant::{Precision, Variant};

use crate::cli::{weir, weir_fails, weir_ok};
use crate::common::{model, temp_dir, weir_home};

/// `args` with `--repository <repository>` appended.
fn in_repo(args: &[&str], repository: &Path) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    v.extend(["--repository".to_string(), repository.display().to_string()]);
    v
}

fn ok(args: &[&str], repository: &Path) -> String {
    let args = in_repo(args, repository);
    weir_ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn fails(args: &[&str], repository: &Path) -> String {
    let args = in_repo(args, repository);
    weir_fails(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn validation() -> String {
    weir_home()
        .join("data/digits_validation.jsonl")
        .display()
        .to_string()
}

/// The small grid the registration tests use unless they say otherwise.
const SMALL_GRID: [&str; 8] = [
    "--threads",
    "1",
    "--levels",
    "basic,all",
    "--batches",
    "8",
    "--runs",
    "2",
];

/// `weir model register NAME --task digits --onnx ONNX --validation VALIDATION`, then `grid`.
fn register_args(name: &str, onnx: &Path, validation: &str, grid: &[&str]) -> Vec<String> {
    let onnx = onnx.display().to_string();
    let mut args = vec![
        "model",
        "register",
        name,
        "--task",
        "digits",
        "--onnx",
        &onnx,
        "--validation",
        validation,
    ];
    args.extend_from_slice(grid);
    args.iter().map(|a| a.to_string()).collect()
}

/// Registers `name` (`.weir/models/<name>.onnx`) into `repository` with the small grid, then
/// `extra`.
pub(crate) fn register(name: &str, repository: &Path, extra: &[&str]) -> Output {
    register_grid(name, repository, &[&SMALL_GRID[..], extra].concat())
}

/// Registers `name` (`.weir/models/<name>.onnx`) into `repository` with exactly `grid` (the
/// grid's flags, `--hardware`, `--no-int8`, …).
pub(crate) fn register_grid(name: &str, repository: &Path, grid: &[&str]) -> Output {
    weir_home();
    let args = register_args(name, &model(&format!("{name}.onnx")), &validation(), grid);
    weir()
        .args(in_repo(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            repository,
        ))
        .output()
        .expect("weir runs")
}

/// Registers `digits_tiny` into `repository` as one fp32 batch-1 variant (and its dynamic-batch
/// build) per executor type of the hardware file `hardware`, timed once: the quickest
/// registration the serving tests need. Panics with the command's stderr when it fails.
pub(crate) fn register_tiny_on(repository: &Path, hardware: &Path) {
    let hardware = hardware.display().to_string();
    let grid = [
        "--no-int8",
        "--threads",
        "1",
        "--levels",
        "all",
        "--batches",
        "1",
        "--runs",
        "1",
        "--hardware",
        &hardware,
    ];
    let out = register_grid("digits_tiny", repository, &grid);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a registration expected to fail; returns its stderr.
fn register_fails(name: &str, onnx: &Path, validation: &str, root: &Path) -> String {
    let args = register_args(
        name,
        onnx,
        validation,
        &[&SMALL_GRID[..], &["--no-int8"]].concat(),
    );
    fails(&args.iter().map(String::as_str).collect::<Vec<_>>(), root)
}

fn fp32_dynamic_accuracy(repo: &Repository, model: &str) -> f64 {
    repo.model(model)
        .expect("registered")
        .variants
        .iter()
        .find(|v| v.config.precision == Precision::Fp32 && v.config.fixed_batch.is_none())
        .expect("an fp32 dynamic variant")
        .accuracy
}

fn check_fields(repo: &Repository, v: &Variant) {
    let p = &v.profile;
    assert_eq!(
        p.latency_ms.keys().copied().collect::<Vec<_>>(),
        batch_sizes(v.max_batch),
        "{}",
        v.name
    );
    assert!(p.latency_ms.values().all(|ms| *ms > 0.0), "{}", v.name);
    assert!(p.load_ms > 0.0 && p.saturation_qps > 0.0, "{}", v.name);
    assert!(v.accuracy > 0.0 && v.accuracy <= 1.0, "{}", v.name);
    assert_eq!(
        v.max_batch,
        v.config.fixed_batch.unwrap_or(64),
        "{}",
        v.name
    );
    assert_eq!(v.task, "digits");
    repo.verify(v).expect("sha256 matches the file");
}

#[test]
fn digits_family_registers_with_every_field_and_cli_lists_shows_removes() {
    let dir = temp_dir("model-repo");
    let root = dir.0.join("repository");
    let hw = dir.0.join("hardware.yaml");
    std::fs::write(
        &hw,
        "types:\n  - name: local\n    price_per_s: 1.0\n  - name: accel\n    price_per_s: 4.0\n    emulate_latency: \"3,0.25\"\n    load_ms: 200\n  - name: cuda\n    price_per_s: 8.0\n    device: cuda\n",
    )
    .unwrap();
    let hw_arg = hw.display().to_string();
    for name in ["digits_tiny", "digits_mlp", "digits_wide"] {
        let out = register(name, &root, &["--hardware", &hw_arg]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(
            stderr.contains("Hardware type skipped") && stderr.contains("hardware=cuda"),
            "{stderr}"
        );
    }
    let repo = Repository::open(&root).unwrap();
    assert_eq!(repo.models().count(), 3);
    // fp32 and int8 × dynamic and b8 × two levels × one thread count × two types.
    for m in repo.models() {
        assert_eq!(m.variants.len(), 2 * 2 * 2 * 2, "{}", m.name);
        assert_eq!(m.validation_examples, 359);
    }
    assert_eq!(repo.variants_of_task("digits").count(), 48);
    for v in repo.variants() {
        check_fields(&repo, v);
        match v.config.hardware.as_str() {
            "local" => assert_eq!(v.price_per_s, 1.0),
            "accel" => {
                assert_eq!(v.price_per_s, 4.0);
                assert!(v.profile.load_ms >= 200.0);
                for (b, ms) in &v.profile.latency_ms {
                    assert!(*ms >= 3.0 + 0.25 * f64::from(*b), "{}: {b}: {ms}", v.name);
                }
            }
            other => panic!("unexpected hardware {other}"),
        }
    }
    let named = repo
        .variant("digits_mlp.int8-all-t1-b8-accel")
        .expect("named variant");
    assert!(named.file.ends_with("/1/int8-b8.onnx"), "{}", named.file);

    let (tiny, mlp, wide) = (
        fp32_dynamic_accuracy(&repo, "digits_tiny"),
        fp32_dynamic_accuracy(&repo, "digits_mlp"),
        fp32_dynamic_accuracy(&repo, "digits_wide"),
    );
    assert!(tiny + 0.05 < mlp && mlp < wide, "{tiny} {mlp} {wide}");
    for v in repo.variants() {
        let fp32 = fp32_dynamic_accuracy(&repo, &v.model);
        assert!(
            (v.accuracy - fp32).abs() <= 0.03,
            "{}: {} vs {fp32}",
            v.name,
            v.accuracy
        );
    }
    assert!(repo
        .variants()
        .any(|v| v.config.precision == Precision::Int8));

    let list = ok(&["model", "list"], &root);
    for name in ["digits_tiny", "digits_mlp", "digits_wide"] {
        assert!(list.contains(name), "{list}");
    }
    assert!(!ok(&["model", "list", "--task", "speech"], &root).contains("digits"));
    let show = ok(&["model", "show", "digits_mlp"], &root);
    assert!(
        show.contains("digits_mlp.int8-basic-t1-bdyn-local"),
        "{show}"
    );
    assert!(show.contains("1:") && show.contains("64:"), "{show}");
    ok(&["model", "remove", "digits_tiny"], &root);
    assert!(!ok(&["model", "list"], &root).contains("digits_tiny"));
    assert!(!root.join("digits_tiny").exists());
    assert!(fails(&["model", "show", "digits_tiny"], &root).contains("no model `digits_tiny`"));

    // Another model of the task must have its signature; names stay single components.
    let v = validation();
    let e = register_fails("affine", &model("affine.onnx"), &v, &root);
    assert!(e.contains("signature differs from model"), "{e}");
    let e = register_fails("../x", &model("digits_tiny.onnx"), &v, &root);
    assert!(e.contains("model `../x`"), "{e}");
}

#[test]
fn hostile_repositories_are_refused_naming_file_and_field() {
    let dir = temp_dir("model-repo-hostile");
    let root = dir.0.join("repository");
    let out = register("digits_tiny", &root, &["--no-int8", "--levels", "all"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = root.join("digits_tiny/model.json");
    let good = std::fs::read_to_string(&meta).unwrap();
    let json: serde_json::Value = serde_json::from_str(&good).unwrap();

    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut j = json.clone();
        f(&mut j);
        serde_json::to_string(&j).unwrap()
    };
    // Cut just after a comma, so the parser runs out of text wherever the cut lands
    // (a cut inside a map key is a different error).
    let cut = good[..good.len() / 2].rfind(',').map_or(1, |i| i + 1);
    let cases: Vec<(String, &str)> = vec![
        (good[..cut].to_string(), "model.json: EOF"),
        (
            edit(&|j| j["variants"][1]["file"] = "../../etc/passwd".into()),
            "field `variants[1].file`",
        ),
        (
            edit(&|j| j["variants"][0]["file"] = "digits_tiny/1/../../x.onnx".into()),
            "field `variants[0].file`",
        ),
        (
            edit(&|j| j["variants"][0]["sha256"] = "zz".into()),
            "field `variants[0].sha256`",
        ),
        (
            edit(&|j| j["variants"][0]["accuracy"] = 1.5.into()),
            "field `variants[0].accuracy`",
        ),
        (
            edit(&|j| j["variants"][0]["model"] = "other".into()),
            "field `variants[0].model`",
        ),
        (edit(&|j| j["name"] = "other".into()), "field `name`"),
        (format!("{good}{}", " ".repeat(5 << 20)), "is larger than"),
    ];
    for (text, want) in &cases {
        std::fs::write(&meta, text).unwrap();
        let e = Repository::open(&root).unwrap_err().to_string();
        assert!(
            e.contains("digits_tiny/model.json") && e.contains(want),
            "{want}: {e}"
        );
        let e = fails(&["model", "list"], &root);
        assert!(e.contains(want), "{want}: {e}");
    }

    // A well-formed entry whose file does not hold the bytes it names.
    let wrong = edit(&|j| j["variants"][0]["sha256"] = "0".repeat(64).into());
    std::fs::write(&meta, wrong).unwrap();
    let repo = Repository::open(&root).unwrap();
    let v = repo.variants().next().unwrap();
    let e = repo.verify(v).unwrap_err().to_string();
    assert!(e.contains("sha256") && e.contains(&v.name), "{e}");
    // A link out of the repository is not followed.
    std::fs::write(&meta, &good).unwrap();
    let file = root.join("digits_tiny/1/model.onnx");
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(model("digits_tiny.onnx"), &file).unwrap();
    let repo = Repository::open(&root).unwrap();
    let v = repo
        .variants()
        .find(|v| v.file.ends_with("model.onnx"))
        .unwrap();
    assert!(repo
        .file_path(v)
        .unwrap_err()
        .to_string()
        .contains("outside the repository"));
}

#[test]
fn bad_validation_files_are_refused_naming_the_line() {
    let dir = temp_dir("model-repo-validation");
    let root = dir.0.join("repository");
    let good = std::fs::read_to_string(validation()).unwrap();
    let first = good.lines().next().unwrap().to_string();
    let row = |values: &str, label: &str| {
        format!("{{\"inputs\": {{\"x\": [{values}]}}, \"label\": {label}}}")
    };
    let zeros = vec!["0"; 64].join(",");
    let cases = [
        (
            row(&vec!["0"; 63].join(","), "1"),
            ":2: inputs.x: has 63 values",
        ),
        (
            row(&format!("NaN,{}", vec!["0"; 63].join(",")), "1"),
            ":2: line",
        ),
        (
            row(&format!("1e39,{}", vec!["0"; 63].join(",")), "1"),
            ":2: inputs.x[0]: is not a finite float32",
        ),
        (row(&zeros, "10"), ":2: label: 10 is not a class in 0..10"),
        (
            format!("{}\n", " ".repeat(10 << 20)),
            ":2: line: longer than",
        ),
    ];
    for (i, (bad, want)) in cases.iter().enumerate() {
        let file = dir.0.join(format!("bad{i}.jsonl"));
        std::fs::write(&file, format!("{first}\n{bad}\n")).unwrap();
        let e = register_fails(
            "digits_tiny",
            &model("digits_tiny.onnx"),
            &file.display().to_string(),
            &root,
        );
        assert!(e.contains(&format!("bad{i}.jsonl{want}")), "{want}: {e}");
    }
    assert_eq!(Repository::open(&root).unwrap().models().count(), 0);
}
