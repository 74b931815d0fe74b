//! What the long-running commands (`weir serve`, `weir executor`) share: the process's zenoh
//! security, installed once before any session opens, and stopping on SIGTERM or Ctrl-C.

use std::path::Path;

use anyhow::{Context, Result};

/// Installs this process's zenoh configuration file and HAMS control key, when given: both are
/// one per process, read once before any session opens.
pub(super) fn install_zenoh_security(
    zenoh_config: Option<&Path>,
    control_key_file: Option<&Path>,
) -> Result<()> {
    if let Some(path) = zenoh_config {
        weir_connectors::zenoh_peer::use_config_file(path)?;
    }
    if let Some(path) = control_key_file {
        let max = crate::hams::control_auth::MAX_KEY_FILE_BYTES;
        let text = weir_engine::paths::read_capped(path, max, &Default::default())?;
        crate::hams::control_auth::use_key(&text)
            .with_context(|| format!("the control key file {}", path.display()))?;
    }
    Ok(())
}

/// Completes on SIGTERM or Ctrl-C.
pub(super) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
