//! KIND_GPU instance groups through the real process: where an NVIDIA device and the CUDA build
//! of ONNX Runtime (`scripts/setup.sh --gpu`) are found, the set-up's models are served from a
//! repository whose configurations ask for `instance_group [ { kind: KIND_GPU gpus: [0] } ]`,
//! and every answer equals ONNX Runtime's on the CPU in this process. Without them the test says
//! plainly that it skipped (and passes), unless `WEIR_REQUIRE_GPU` is set, as
//! `scripts/gpu-check.sh` sets it, when it fails saying what is missing.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{assert_close, direct_ort, model, temp_dir, weir_home};
use crate::serve::http;
use crate::triton_repository::{copy, serve_with_env, write};

/// The CUDA build of ONNX Runtime when a device is found too, or why not.
fn cuda_library() -> Result<PathBuf, String> {
    let listed = Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .map_err(|_| "nvidia-smi not found".to_string())?;
    let text = String::from_utf8_lossy(&listed.stdout);
    if !listed.status.success() || !text.lines().any(|l| l.starts_with("GPU ")) {
        return Err("nvidia-smi lists no GPU".into());
    }
    let lib = std::env::var_os("WEIR_GPU_ORT_DYLIB")
        .map(PathBuf::from)
        .unwrap_or_else(|| weir_home().join("onnxruntime-gpu/libonnxruntime.so"));
    let provider = lib
        .parent()
        .map(|d| d.join("libonnxruntime_providers_cuda.so"));
    if !lib.is_file() || !provider.is_some_and(|p| p.is_file()) {
        return Err(format!(
            "{} with its CUDA provider is missing (scripts/setup.sh --gpu fetches it)",
            lib.display()
        ));
    }
    Ok(lib)
}

/// A set-up model served on the GPU: its repository name and file, its input and the shape a
/// request gives it.
struct Case {
    name: &'static str,
    file: &'static str,
    input: &'static str,
    shape: &'static [usize],
}

const CASES: &[Case] = &[
    Case {
        name: "digits",
        file: "digits_mlp.onnx",
        input: "x",
        shape: &[2, 64],
    },
    Case {
        name: "squeezenet",
        file: "squeezenet_random.onnx",
        input: "data_0",
        shape: &[1, 3, 224, 224],
    },
    Case {
        name: "ocr_cls",
        file: "pretrained/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        input: "x",
        shape: &[1, 3, 48, 192],
    },
];

fn data(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect()
}

fn first_output(reply: &Value) -> Vec<f32> {
    reply["outputs"][0]["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no output data: {reply}"))
        .iter()
        .map(|v| v.as_f64().expect("a number") as f32)
        .collect()
}

#[test]
fn kind_gpu_instance_groups_run_on_cuda_equal_to_the_cpu() {
    let lib = match cuda_library() {
        Ok(lib) => lib,
        Err(why) if std::env::var_os("WEIR_REQUIRE_GPU").is_some() => {
            panic!("WEIR_REQUIRE_GPU is set but CUDA is not usable here: {why}")
        }
        Err(why) => {
            println!("skipped: no CUDA device ({why})");
            eprintln!("skipped: no CUDA device ({why})");
            return;
        }
    };
    let dir = temp_dir("triton-gpu");
    let root = dir.0.join("models");
    for c in CASES {
        copy(
            &model(c.file),
            &root.join(format!("{}/1/model.onnx", c.name)),
        );
        write(
            &root.join(format!("{}/config.pbtxt", c.name)),
            "instance_group [ { count: 1 kind: KIND_GPU gpus: [0] } ]\n",
        );
    }
    let server = serve_with_env(dir, root, &[], &[("WEIR_ORT_DYLIB", lib.as_path())]);
    for c in CASES {
        let n: usize = c.shape.iter().product();
        let x = data(n);
        let body =
            json!({"inputs": [{"name": c.input, "datatype": "FP32", "shape": c.shape, "data": x}]});
        let (code, reply) = http(
            &server.http,
            "POST",
            &format!("/v2/models/{}/infer", c.name),
            &[],
            body.to_string().as_bytes(),
        );
        assert_eq!(code, 200, "{}: {reply}", c.name);
        let reply: Value = serde_json::from_str(&reply).expect("JSON reply");
        let want = direct_ort(&model(c.file), c.input, c.shape, &x);
        // CUDA kernels sum in other orders than the CPU's: equal within float rounding.
        assert_close(&first_output(&reply), &want, 1e-3, c.name);
    }
    let (_, config) = http(&server.http, "GET", "/v2/models/digits/config", &[], b"");
    let config: Value = serde_json::from_str(&config).expect("JSON config");
    assert_eq!(
        config["instance_group"][0]["kind"],
        json!("KIND_GPU"),
        "{config}"
    );
}
