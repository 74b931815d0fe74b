//! Loading the ONNX Runtime shared library (once per process) and building sessions.
//!
//! weir uses the official `libonnxruntime.so` from PyPI's `onnxruntime` wheel, which
//! `scripts/setup.sh` unpacks into `.weir/onnxruntime/`; `ort`'s `load-dynamic` feature opens it at
//! run time, so nothing is downloaded at build time. The library is found, in order, at
//! `$WEIR_ORT_DYLIB`, `$ORT_DYLIB_PATH`, `$WEIR_HOME/onnxruntime/`, and `.weir/onnxruntime/` in the
//! current folder, the executable's folder or any of their parents. This is the only place a
//! `Session` is created, so every session gets the same options.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::logging::LogLevel;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::Session;
use tracing::info;
use weir_engine::spec::{Device, GraphLevel};

use super::ExecError;

const LIBRARY: &str = "libonnxruntime.so";

/// How one session runs.
#[derive(Debug, Clone, Copy)]
pub struct SessionSettings<'a> {
    /// Intra-op threads.
    pub intra_op_threads: usize,
    /// Whether ONNX Runtime's threads spin while idle.
    pub spinning: bool,
    /// The device.
    pub device: Device,
    /// Pins the intra-op workers (ONNX Runtime's `session.intra_op_thread_affinities`, see
    /// [`super::pinning::CorePins::workers`]); `None`: the OS places them.
    pub worker_affinity: Option<&'a str>,
    /// The graph-optimisation level.
    pub level: GraphLevel,
}

impl Default for SessionSettings<'_> {
    fn default() -> Self {
        SessionSettings {
            intra_op_threads: 1,
            spinning: false,
            device: Device::Cpu,
            worker_affinity: None,
            level: GraphLevel::All,
        }
    }
}

/// The loaded runtime.
#[derive(Debug, Clone)]
pub struct OrtRuntime {
    env: Environment,
    library: PathBuf,
}

static RUNTIME: OnceLock<Result<OrtRuntime, String>> = OnceLock::new();

fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for var in ["WEIR_ORT_DYLIB", "ORT_DYLIB_PATH"] {
        if let Some(p) = std::env::var_os(var) {
            out.push(PathBuf::from(p));
        }
    }
    if let Some(home) = std::env::var_os("WEIR_HOME") {
        out.push(PathBuf::from(home).join("onnxruntime").join(LIBRARY));
    }
    let mut roots = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        roots.push(cwd);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        roots.push(dir);
    }
    for root in roots {
        for dir in root.ancestors() {
            out.push(dir.join(".weir").join("onnxruntime").join(LIBRARY));
        }
    }
    out
}

/// Where the runtime library would be loaded from, if one is found.
pub fn find_library() -> Option<PathBuf> {
    candidates().into_iter().find(|p| p.is_file())
}

impl OrtRuntime {
    /// The process-wide runtime, loading the library on first use.
    ///
    /// # Errors
    /// [`ExecError::RuntimeMissing`] when no library is found or it fails to load; the message
    /// says where weir looked and how to fix it.
    pub fn get() -> Result<OrtRuntime, ExecError> {
        RUNTIME
            .get_or_init(|| {
                let library = find_library().ok_or_else(|| {
                    "libonnxruntime.so not found; run scripts/setup.sh, or set WEIR_ORT_DYLIB to the library".to_string()
                })?;
                let env = ort::init_from(&library)
                    .map_err(|e| format!("loading {}: {e}", library.display()))?
                    .with_name("weir")
                    .build()
                    .map_err(|e| format!("starting ONNX Runtime from {}: {e}", library.display()))?;
                info!(library = %library.display(), "ONNX Runtime loaded.");
                Ok(OrtRuntime { env, library })
            })
            .clone()
            .map_err(ExecError::RuntimeMissing)
    }

    /// The library file in use.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// ONNX Runtime's build description (version, commit, flags).
    pub fn build_info(&self) -> &'static str {
        ort::info()
    }

    /// A CPU session for `path` with `intra_op_threads` threads; spinning per `spinning`.
    ///
    /// # Errors
    /// [`ExecError::Session`] with ONNX Runtime's message.
    pub fn session(
        &self,
        node: &str,
        path: &Path,
        intra_op_threads: usize,
        spinning: bool,
    ) -> Result<Session, ExecError> {
        let settings = SessionSettings {
            intra_op_threads,
            spinning,
            ..SessionSettings::default()
        };
        self.session_on(node, path, &settings)
    }

    /// A session for `path` as `settings` say. For CUDA the CUDA execution provider is required,
    /// not a hint: the library must be the `onnxruntime-gpu` build (point `WEIR_ORT_DYLIB` at
    /// it), or this fails with ONNX Runtime's reason rather than silently running on the CPU.
    ///
    /// # Errors
    /// [`ExecError::Session`] with ONNX Runtime's message.
    pub fn session_on(
        &self,
        node: &str,
        path: &Path,
        settings: &SessionSettings<'_>,
    ) -> Result<Session, ExecError> {
        let SessionSettings {
            intra_op_threads,
            spinning,
            device,
            worker_affinity,
            level,
        } = *settings;
        let level = match level {
            GraphLevel::Disabled => GraphOptimizationLevel::Disable,
            GraphLevel::Basic => GraphOptimizationLevel::Level1,
            GraphLevel::Extended => GraphOptimizationLevel::Level2,
            GraphLevel::All => GraphOptimizationLevel::All,
        };
        let wrap = |e: ort::Error| ExecError::Session {
            node: node.to_string(),
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let option =
            |r: Result<SessionBuilder, ort::Error<SessionBuilder>>| r.map_err(|e| wrap(e.into()));
        let builder = Session::builder(&self.env).map_err(wrap)?;
        let builder = option(builder.with_log_level(LogLevel::Error))?;
        let builder = option(builder.with_optimization_level(level))?;
        let builder = option(builder.with_intra_threads(intra_op_threads))?;
        let builder = option(builder.with_inter_threads(1))?;
        let builder = option(builder.with_intra_op_spinning(spinning))?;
        let builder = option(builder.with_inter_op_spinning(spinning))?;
        let builder = match worker_affinity {
            Some(a) => option(builder.with_config_entry("session.intra_op_thread_affinities", a))?,
            None => builder,
        };
        let mut builder =
            match device {
                Device::Cpu => builder,
                Device::Cuda => option(builder.with_execution_providers([
                    ort::ep::CUDA::default().build().error_on_failure(),
                ]))?,
            };
        builder.commit_from_file(path).map_err(wrap)
    }
}
