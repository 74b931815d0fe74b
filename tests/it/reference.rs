//! ONNX Runtime's own answers, from its Python API in the set-up venv (`tests/python/ort_reference.py`):
//! the reference every datatype and shape test compares served outputs with. Tensors here carry
//! their full shape (batch dimension included where the model has one).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use weir::{DType, Tensor, TensorData};

use crate::common::{repo, weir_home};

/// The elements of `data` as JSON values, exactly (64-bit integers as integers, halves widened).
pub fn json_elements(data: &TensorData) -> Vec<Value> {
    match data {
        TensorData::Bool(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::U8(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::U16(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::U32(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::U64(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::I8(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::I16(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::I32(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::I64(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::F16(v) => v.iter().map(|&x| json!(f64::from(x))).collect(),
        TensorData::F32(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::F64(v) => v.iter().map(|&x| json!(x)).collect(),
        TensorData::Bf16(v) => v.iter().map(|&x| json!(f64::from(x))).collect(),
        TensorData::Bytes(v) => v
            .iter()
            .map(|b| json!(String::from_utf8_lossy(b)))
            .collect(),
    }
}

/// JSON `data` of type `dtype` read back as elements.
///
/// # Panics
/// When an element does not fit `dtype` (the reference writes exact values).
pub fn elements_from_json(dtype: DType, data: &[Value]) -> TensorData {
    let int = |v: &Value| v.as_i64().expect("an integer");
    let uint = |v: &Value| v.as_u64().expect("an unsigned integer");
    let float = |v: &Value| match v {
        Value::String(s) => s.parse::<f64>().unwrap_or(match s.as_str() {
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            _ => f64::NAN,
        }),
        other => other.as_f64().expect("a number"),
    };
    match dtype {
        DType::Bool => {
            TensorData::Bool(data.iter().map(|v| v.as_bool().expect("a bool")).collect())
        }
        DType::U8 => TensorData::U8(data.iter().map(|v| uint(v) as u8).collect()),
        DType::U16 => TensorData::U16(data.iter().map(|v| uint(v) as u16).collect()),
        DType::U32 => TensorData::U32(data.iter().map(|v| uint(v) as u32).collect()),
        DType::U64 => TensorData::U64(data.iter().map(uint).collect()),
        DType::I8 => TensorData::I8(data.iter().map(|v| int(v) as i8).collect()),
        DType::I16 => TensorData::I16(data.iter().map(|v| int(v) as i16).collect()),
        DType::I32 => TensorData::I32(data.iter().map(|v| int(v) as i32).collect()),
        DType::I64 => TensorData::I64(data.iter().map(int).collect()),
        DType::F16 => TensorData::F16(data.iter().map(|v| half::f16::from_f64(float(v))).collect()),
        DType::F32 => TensorData::F32(data.iter().map(|v| float(v) as f32).collect()),
        DType::F64 => TensorData::F64(data.iter().map(float).collect()),
        DType::Bf16 => TensorData::Bf16(
            data.iter()
                .map(|v| half::bf16::from_f64(float(v)))
                .collect(),
        ),
        DType::Bytes => TensorData::Bytes(
            data.iter()
                .map(|v| v.as_str().expect("a string").as_bytes().to_vec())
                .collect(),
        ),
    }
}

/// Runs `tests/python/<script>` in the set-up's venv with `stdin`; returns exit code and output.
pub fn python(script: &str, args: &[&str], stdin: &Value) -> (i32, String, String) {
    let mut child = Command::new(weir_home().join("venv/bin/python"))
        .arg(repo().join("tests/python").join(script))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the venv's python runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.to_string().as_bytes())
        .expect("request written");
    let out = child.wait_with_output().expect("python finishes");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `t` with a batch dimension of one in front (a request as a batched model takes it).
pub fn batch_of_one(t: &Tensor) -> Tensor {
    Tensor {
        shape: [vec![1], t.shape.clone()].concat(),
        data: t.data.clone(),
    }
}

/// `t` without its first (batch) dimension of one (a batched model's answer to one request).
pub fn first_of_batch(t: &Tensor) -> Tensor {
    Tensor {
        shape: t.shape.get(1..).unwrap_or_default().to_vec(),
        data: t.data.clone(),
    }
}

/// An Open Inference Protocol JSON request body carrying `inputs` (their full shapes).
pub fn request_json(inputs: &[(&str, &Tensor)]) -> Value {
    json!({
        "inputs": inputs
            .iter()
            .map(|(name, t)| json!({
                "name": name,
                "datatype": t.dtype().oip_name(),
                "shape": t.shape,
                "data": json_elements(&t.data),
            }))
            .collect::<Vec<_>>(),
    })
}

/// The `outputs` of an Open Inference Protocol JSON reply, as tensors by name.
///
/// # Panics
/// When the reply is not one (the reference and weir write exact values of known types).
pub fn outputs_from_json(reply: &Value) -> Vec<(String, Tensor)> {
    reply["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .map(|o| {
            let dtype = DType::from_oip_name(o["datatype"].as_str().expect("datatype"))
                .expect("a known datatype");
            let shape = o["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .map(|d| d.as_u64().expect("a size") as usize)
                .collect();
            let data = elements_from_json(dtype, o["data"].as_array().expect("data"));
            (
                o["name"].as_str().expect("name").to_string(),
                Tensor { shape, data },
            )
        })
        .collect()
}

/// Runs `model` on `inputs` in ONNX Runtime (Python, CPU) and returns every output by name.
///
/// # Panics
/// When the reference script fails (its message is shown).
pub fn ort_reference(model: &Path, inputs: &[(&str, &Tensor)]) -> Vec<(String, Tensor)> {
    let model = model.display().to_string();
    let (code, stdout, stderr) = python("ort_reference.py", &[&model], &request_json(inputs));
    assert_eq!(code, 0, "ort_reference.py failed: {stderr}");
    let reply: Value = serde_json::from_str(&stdout).expect("reply is JSON");
    outputs_from_json(&reply)
}
