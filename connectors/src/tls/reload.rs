//! [`ServerTls`]: the rustls configurations the listeners hand new connections, and their
//! reload when the files change.
//!
//! The configurations sit behind one lock as `Arc`s; a handshake clones the `Arc` it starts with
//! and never looks again, so a reload swaps what *new* handshakes get while every open connection
//! keeps the session (and certificate) it negotiated. Nothing is dropped by a rotation.
//!
//! A reload is asked for two ways: SIGHUP, the operator's (or an orchestrator's) explicit "the
//! files changed", and a poll every [`RELOAD_POLL`] comparing each file's modification time, size
//! and inode with those seen at the last load, for rotations that signal nothing (a Kubernetes
//! secret volume swaps a symbolic link, cert-manager rewrites the files). The stamps are taken
//! before the files are read, so a file changing during a read is read again at the next poll.
//! A reload that fails (bad PEM, a key that does not fit the certificate, a missing file) keeps
//! the configurations in use, logs an error naming the file, and remembers the stamps it saw, so
//! the same broken files are not retried every poll; a later change retries.
//!
//! Registering for SIGHUP replaces the signal's default action (ending the process) for the
//! process's lifetime; it is done only when TLS is on.

use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::config::{Material, TlsError, TlsFiles};

/// How often the reloader compares the files' stamps with the last load's.
pub const RELOAD_POLL: Duration = Duration::from_secs(2);

/// The application protocol a listener speaks, offered in the handshake (ALPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// HTTP/1.1: the HTTP listener.
    Http1,
    /// HTTP/2: the gRPC listener (gRPC clients refuse a TLS server without `h2`).
    H2,
}

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

/// The stamp of `path`, `None` when it cannot be read (missing, mid-rotation).
fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    // `metadata` follows symbolic links: a swapped link target is a change.
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: meta.ino(),
    })
}

/// The configurations in use and the stamps of the files they (or the last failed reload) saw.
struct Current {
    http: Arc<ServerConfig>,
    h2: Arc<ServerConfig>,
    stamps: Vec<Option<Stamp>>,
}

/// The TLS configurations of the process's listeners, reloadable (see the module docs).
pub struct ServerTls {
    files: TlsFiles,
    current: RwLock<Current>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads `files` and builds both listeners' configurations.
    ///
    /// # Errors
    /// When a file cannot be read, is not PEM, lacks its certificate or key, or the key does not
    /// fit the certificate.
    pub fn load(files: TlsFiles) -> Result<Arc<ServerTls>, TlsError> {
        let stamps = stamps(&files);
        let (http, h2) = build(&files)?;
        Ok(Arc::new(ServerTls {
            files,
            current: RwLock::new(Current { http, h2, stamps }),
        }))
    }

    /// The files this was loaded from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Whether clients must present a certificate.
    pub fn mutual(&self) -> bool {
        self.files.client_ca.is_some()
    }

    /// The configuration a new handshake on a listener speaking `alpn` uses.
    pub fn config(&self, alpn: Alpn) -> Arc<ServerConfig> {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        match alpn {
            Alpn::Http1 => Arc::clone(&current.http),
            Alpn::H2 => Arc::clone(&current.h2),
        }
    }

    /// Reads the files again and, if they are good, makes them the configuration of new
    /// handshakes.
    ///
    /// # Errors
    /// As [`ServerTls::load`]; the configuration in use is kept then.
    pub fn reload(&self) -> Result<(), TlsError> {
        let stamps = stamps(&self.files);
        let built = build(&self.files);
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        current.stamps = stamps;
        let (http, h2) = built?;
        current.http = http;
        current.h2 = h2;
        Ok(())
    }

    /// Whether a file's stamp differs from the last load's (or last failed reload's).
    pub fn changed(&self) -> bool {
        let now = stamps(&self.files);
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        current.stamps != now
    }

    /// Reloads on SIGHUP and when a poll every `poll` sees the files changed, until the task is
    /// aborted. Logs each reload (info) and each failure (error, naming the file).
    pub fn spawn_reloader(self: &Arc<Self>, poll: Duration) -> JoinHandle<()> {
        let tls = Arc::clone(self);
        tokio::spawn(async move {
            let mut hangup = match signal(SignalKind::hangup()) {
                Ok(s) => Some(s),
                Err(e) => {
                    warn!(error = %e, "SIGHUP cannot be caught; TLS files are reloaded on change only.");
                    None
                }
            };
            let mut tick = tokio::time::interval(poll.max(Duration::from_millis(100)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                let why = tokio::select! {
                    Some(()) = async {
                        match hangup.as_mut() {
                            Some(h) => h.recv().await,
                            None => std::future::pending().await,
                        }
                    } => "SIGHUP",
                    _ = tick.tick() => {
                        if !tls.changed() {
                            continue;
                        }
                        "the files changed"
                    }
                };
                match tls.reload() {
                    Ok(()) => info!(
                        cert = %tls.files.cert.display(),
                        reason = why,
                        "TLS certificates reloaded; new connections use them."
                    ),
                    Err(e) => error!(
                        error = %e,
                        reason = why,
                        "TLS certificates not reloaded; new connections keep the ones in use."
                    ),
                }
            }
        })
    }
}

fn stamps(files: &TlsFiles) -> Vec<Option<Stamp>> {
    files.paths().into_iter().map(stamp).collect()
}

/// The HTTP and gRPC configurations of `files`.
fn build(files: &TlsFiles) -> Result<(Arc<ServerConfig>, Arc<ServerConfig>), TlsError> {
    let material = Material::read(files)?;
    Ok((
        Arc::new(material.config(&[b"http/1.1"])?),
        Arc::new(material.config(&[b"h2"])?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A throwaway folder.
    struct Dir(std::path::PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dir(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("weir-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// A self-signed certificate and its key in `dir` as `<name>.pem` / `<name>.key`, made with
    /// the openssl command; `None` where openssl is not installed.
    fn self_signed(dir: &Path, name: &str) -> Option<TlsFiles> {
        let cert = dir.join(format!("{name}.pem"));
        let key = dir.join(format!("{name}.key"));
        let status = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "2", "-subj", &format!("/CN={name}")])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(TlsFiles {
            cert,
            key,
            client_ca: None,
        })
    }

    #[test]
    fn a_bad_reload_keeps_the_config_and_names_the_file() {
        let d = dir("bad");
        let Some(files) = self_signed(&d.0, "a") else {
            eprintln!("openssl not installed: skipped");
            return;
        };
        let tls = ServerTls::load(files.clone()).unwrap();
        let before = tls.config(Alpn::H2);
        assert_eq!(before.alpn_protocols, vec![b"h2".to_vec()]);
        assert_eq!(
            tls.config(Alpn::Http1).alpn_protocols,
            vec![b"http/1.1".to_vec()]
        );
        assert!(!tls.changed());
        std::fs::write(&files.cert, "-----BEGIN CERTIFICATE-----\nnot base64\n").unwrap();
        assert!(tls.changed());
        let e = tls.reload().unwrap_err().to_string();
        assert!(e.contains("a.pem"), "{e}");
        assert!(Arc::ptr_eq(&before, &tls.config(Alpn::H2)));
        // The failed reload's stamps are remembered: no retry until the files change again.
        assert!(!tls.changed());
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_naming_both() {
        let d = dir("mismatch");
        let (Some(a), Some(b)) = (self_signed(&d.0, "a"), self_signed(&d.0, "b")) else {
            eprintln!("openssl not installed: skipped");
            return;
        };
        let e = ServerTls::load(TlsFiles {
            cert: a.cert,
            key: b.key,
            client_ca: None,
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("b.key") && e.contains("a.pem"), "{e}");
    }

    #[test]
    fn a_rotation_swaps_the_config_of_new_handshakes() {
        let d = dir("rotate");
        let (Some(a), Some(b)) = (self_signed(&d.0, "a"), self_signed(&d.0, "b")) else {
            eprintln!("openssl not installed: skipped");
            return;
        };
        let tls = ServerTls::load(a.clone()).unwrap();
        let before = tls.config(Alpn::Http1);
        std::fs::rename(&b.cert, &a.cert).unwrap();
        std::fs::rename(&b.key, &a.key).unwrap();
        assert!(tls.changed());
        tls.reload().unwrap();
        assert!(!Arc::ptr_eq(&before, &tls.config(Alpn::Http1)));
        assert!(!tls.changed());
    }

    #[test]
    fn files_that_are_no_pem_are_refused_by_name() {
        let d = dir("nopem");
        let cert = d.0.join("c.pem");
        let key = d.0.join("k.pem");
        std::fs::write(&cert, "hello").unwrap();
        std::fs::write(&key, "").unwrap();
        let e = ServerTls::load(TlsFiles {
            cert,
            key,
            client_ca: None,
        })
        .unwrap_err();
        assert!(matches!(e, TlsError::NoCertificate { .. }), "{e}");
        assert!(e.to_string().contains("c.pem"), "{e}");
    }
}
