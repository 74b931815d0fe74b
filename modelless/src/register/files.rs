//! The files of a registration: the model's signature read from its ONNX file, the int8 build
//! (given, or made by ONNX Runtime's `quantize_dynamic` through `scripts/quantize.py`), the
//! fixed-batch rewrites, and the hidden staging folder they are written into before the model
//! appears.

use std::path::{Path, PathBuf};
use std::process::Command;

use weir_engine::onnx::{read_metadata, ElementType, TensorInfo};
use weir_engine::paths::{read_capped, FileRules};
use weir_engine::tensor::Dim;
#[cfg(feature = "variant-rewrite")]
use weir_infaas::repository::generate::fix_batch;
use weir_infaas::repository::generate::Build;
use weir_infaas::repository::layout::{write_atomic, REGISTERED_FILE, VERSION_DIR};
use weir_infaas::repository::{Repository, Signature, TensorSignature};
use weir_infaas::variant::Precision;

use super::{Int8, RegisterError, Registration};

/// The longest tail of the quantizer's error output kept in the error.
const QUANTIZE_ERROR_CHARS: usize = 2000;

/// The signature of the ONNX file at `path`: float or integer tensors, each with a dynamic batch
/// dimension first.
pub(super) fn signature_of(path: &Path) -> Result<Signature, RegisterError> {
    let bad = |message: String| RegisterError::Model {
        file: path.display().to_string(),
        message,
    };
    let meta = read_metadata(path).map_err(|e| bad(e.to_string()))?;
    let tensor = |t: &TensorInfo| -> Result<TensorSignature, RegisterError> {
        let dtype = match t.element {
            ElementType::Supported(d) => d,
            other => return Err(bad(format!("`{}` has element type {other:?}", t.name))),
        };
        let dims = t
            .dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => Some(*n as u64),
                Dim::Dynamic => None,
            })
            .collect();
        Ok(TensorSignature {
            name: t.name.clone(),
            dtype,
            dims,
        })
    };
    let sig = Signature {
        inputs: meta.inputs.iter().map(tensor).collect::<Result<_, _>>()?,
        outputs: meta.outputs.iter().map(tensor).collect::<Result<_, _>>()?,
    };
    if let Some(t) = sig
        .inputs
        .iter()
        .chain(&sig.outputs)
        .find(|t| t.dims.first() != Some(&None))
    {
        return Err(bad(format!(
            "`{}` has no dynamic batch dimension first (shape {:?})",
            t.name, t.dims
        )));
    }
    Ok(sig)
}

/// The first `rel` found under the current folder, the executable's folder, or their parents.
fn find_up(rel: &str) -> Option<PathBuf> {
    let roots = [
        std::env::current_dir().ok(),
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf)),
    ];
    roots
        .into_iter()
        .flatten()
        .flat_map(|r| r.ancestors().map(|a| a.join(rel)).collect::<Vec<_>>())
        .find(|p| p.exists())
}

/// Makes `out` from `onnx` with `scripts/quantize.py`, run by `$WEIR_PYTHON` or the set-up's
/// virtual environment.
fn quantize(onnx: &Path, out: &Path) -> Result<(), RegisterError> {
    let script = find_up("scripts/quantize.py").ok_or_else(|| {
        RegisterError::Quantize(
            "scripts/quantize.py not found; give the int8 file or make none".into(),
        )
    })?;
    let python = match std::env::var_os("WEIR_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("WEIR_HOME")
            .map(|h| PathBuf::from(h).join("venv/bin/python"))
            .filter(|p| p.exists())
            .or_else(|| find_up(".weir/venv/bin/python"))
            .ok_or_else(|| {
                RegisterError::Quantize("no python with onnxruntime (run scripts/setup.sh, or set WEIR_PYTHON); or give the int8 file or make none".into())
            })?,
    };
    let result = Command::new(&python)
        .arg(&script)
        .arg(onnx)
        .arg(out)
        .output()
        .map_err(|e| RegisterError::Quantize(format!("running {}: {e}", python.display())))?;
    if !result.status.success() {
        let err = String::from_utf8_lossy(&result.stderr);
        let skip = err.chars().count().saturating_sub(QUANTIZE_ERROR_CHARS);
        let tail: String = err.chars().skip(skip).collect();
        return Err(RegisterError::Quantize(format!(
            "{} {} failed: {tail}",
            python.display(),
            script.display()
        )));
    }
    Ok(())
}

/// A fresh staging folder for `name` in the repository.
pub(super) fn staging(repo: &Repository, name: &str) -> Result<PathBuf, RegisterError> {
    let dir = repo
        .root()
        .join(format!(".staging-{name}-{}", std::process::id()));
    let io = |e: std::io::Error| RegisterError::Io {
        path: dir.display().to_string(),
        source: e,
    };
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io)?;
    }
    std::fs::create_dir_all(dir.join(VERSION_DIR)).map_err(io)?;
    Ok(dir)
}

/// Writes every build's file into `version` (the staging version folder).
pub(super) fn write_builds(
    r: &Registration,
    sig: &Signature,
    builds: &[Build],
    version: &Path,
) -> Result<(), RegisterError> {
    let rules = FileRules::default();
    let read = |path: &Path| {
        read_capped(path, rules.max_model_bytes, &rules).map_err(|e| RegisterError::Model {
            file: path.display().to_string(),
            message: e.to_string(),
        })
    };
    let fp32 = read(&r.onnx)?;
    write_atomic(&version.join(REGISTERED_FILE), &fp32)?;
    let int8_dyn = version.join(
        Build {
            precision: Precision::Int8,
            fixed_batch: None,
        }
        .file_name(),
    );
    if builds.iter().any(|b| b.precision == Precision::Int8) {
        match &r.int8 {
            Int8::Given(f) => {
                if signature_of(f)? != *sig {
                    return Err(RegisterError::Setting {
                        setting: "int8",
                        message: format!("{}: its signature differs from the model's", f.display()),
                    });
                }
                write_atomic(&int8_dyn, &read(f)?)?;
            }
            Int8::Quantize => quantize(&version.join(REGISTERED_FILE), &int8_dyn)?,
            Int8::None => {}
        }
    }
    #[cfg(feature = "variant-rewrite")]
    for b in builds {
        let Some(batch) = b.fixed_batch else { continue };
        let base = match b.precision {
            Precision::Fp32 => fp32.clone(),
            Precision::Int8 => read(&int8_dyn)?,
        };
        let fixed = fix_batch(&base, batch).map_err(|e| RegisterError::Model {
            file: r.onnx.display().to_string(),
            message: e.to_string(),
        })?;
        write_atomic(&version.join(b.file_name()), &fixed)?;
    }
    Ok(())
}
