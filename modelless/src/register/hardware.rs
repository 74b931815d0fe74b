//! The executor types a model's variants are made for (a hardware file): a name, a price per
//! second, the device, and for a type this machine only stands in for, the latency
//! `weir executor --emulate-latency BASE_MS,PER_ROW_MS` holds each call for and its load time.
//!
//! ```yaml
//! types:
//!   - name: local
//!     price_per_s: 1.0
//!   - name: accel
//!     price_per_s: 4.0
//!     emulate_latency: "2,0.02"   # BASE_MS,PER_ROW_MS
//!     load_ms: 400
//!   - name: cuda
//!     price_per_s: 8.0
//!     device: cuda                # only where the ONNX Runtime library has CUDA
//! ```
//!
//! Without the file there is one type, `local`, at 1.0 per second. The file is read capped and
//! every refusal names the field (`types[1].price_per_s`).

use std::path::Path;

use serde::Deserialize;
use weir_engine::paths::{read_capped, FileRules};
use weir_engine::spec::Device;
use weir_executor::emulation::LatencyProfile;
use weir_infaas::repository::layout::check_name;
use weir_infaas::repository::profile::Emulation;

use super::RegisterError;

/// The largest hardware file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// One executor type.
#[derive(Debug, Clone, PartialEq)]
pub struct HardwareType {
    /// Its name, as executors and variants carry it.
    pub name: String,
    /// What a second of it costs.
    pub price_per_s: f64,
    /// Where its sessions run.
    pub device: Device,
    /// The latency it stands in for, when this machine only emulates it.
    pub emulation: Option<Emulation>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    types: Vec<TypeSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypeSpec {
    name: String,
    price_per_s: f64,
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    emulate_latency: Option<String>,
    #[serde(default)]
    load_ms: Option<f64>,
}

/// The default: one `local` CPU type at 1.0 per second.
#[must_use]
pub fn local() -> Vec<HardwareType> {
    vec![HardwareType {
        name: "local".into(),
        price_per_s: 1.0,
        device: Device::Cpu,
        emulation: None,
    }]
}

/// Reads the types in `path`.
///
/// # Errors
/// When the file cannot be read, is not UTF-8, or a field is refused.
pub fn read(path: &Path) -> Result<Vec<HardwareType>, RegisterError> {
    let bad = |message: String| RegisterError::Hardware {
        file: path.display().to_string(),
        message,
    };
    let bytes =
        read_capped(path, MAX_FILE_BYTES, &FileRules::default()).map_err(|e| bad(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
    parse(&text).map_err(bad)
}

fn parse(text: &str) -> Result<Vec<HardwareType>, String> {
    let file: File = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    if file.types.is_empty() {
        return Err("types: needs at least one executor type".into());
    }
    let mut out: Vec<HardwareType> = Vec::new();
    for (i, t) in file.types.into_iter().enumerate() {
        let field = |f: &str| format!("types[{i}].{f}");
        check_name("hardware type", &t.name).map_err(|e| format!("{}: {e}", field("name")))?;
        if out.iter().any(|o| o.name == t.name) {
            return Err(format!("{}: `{}` appears twice", field("name"), t.name));
        }
        if !(t.price_per_s.is_finite() && t.price_per_s >= 0.0) {
            return Err(format!(
                "{}: {} is not a price ≥ 0",
                field("price_per_s"),
                t.price_per_s
            ));
        }
        let device = match t.device.as_deref() {
            None | Some("cpu") => Device::Cpu,
            Some("cuda") => Device::Cuda,
            Some(other) => {
                return Err(format!(
                    "{}: `{other}` is not `cpu` or `cuda`",
                    field("device")
                ))
            }
        };
        let latency = t
            .emulate_latency
            .as_deref()
            .map(str::parse::<LatencyProfile>)
            .transpose()
            .map_err(|e| format!("{}: {e}", field("emulate_latency")))?;
        if let Some(ms) = t.load_ms {
            if !(ms.is_finite() && ms >= 0.0) {
                return Err(format!("{}: {ms} is not a time ≥ 0", field("load_ms")));
            }
            if latency.is_none() {
                return Err(format!(
                    "{}: only an emulated type (with emulate_latency) declares its load time",
                    field("load_ms")
                ));
            }
        }
        out.push(HardwareType {
            name: t.name,
            price_per_s: t.price_per_s,
            device,
            emulation: latency.map(|l| Emulation {
                base_ms: l.base_ms,
                per_row_ms: l.per_row_ms,
                load_ms: t.load_ms,
            }),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_types_and_names_bad_fields() {
        let t = parse("types:\n  - name: local\n    price_per_s: 1\n  - name: accel\n    price_per_s: 4\n    emulate_latency: \"2,0.5\"\n    load_ms: 300\n").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[1].emulation,
            Some(Emulation {
                base_ms: 2.0,
                per_row_ms: 0.5,
                load_ms: Some(300.0)
            })
        );
        for (text, want) in [
            ("types: []", "at least one"),
            (
                "types:\n  - name: ../x\n    price_per_s: 1\n",
                "types[0].name",
            ),
            (
                "types:\n  - name: a\n    price_per_s: -1\n",
                "types[0].price_per_s",
            ),
            (
                "types:\n  - name: a\n    price_per_s: 1\n    emulate_latency: x\n",
                "types[0].emulate_latency",
            ),
            (
                "types:\n  - name: a\n    price_per_s: 1\n    load_ms: 3\n",
                "types[0].load_ms",
            ),
            (
                "types:\n  - name: a\n    price_per_s: 1\n    device: tpu\n",
                "types[0].device",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
