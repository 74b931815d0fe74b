//! The PEM files of `--tls-cert`, `--tls-key` and `--tls-client-ca`, read and checked, and the
//! rustls server configurations made from them.
//!
//! Each file is read as a regular file of at most [`MAX_PEM_BYTES`] (a FIFO or a device would
//! block, a huge file would be read whole). The key must match the chain's first certificate
//! (rustls compares the public keys), so a half-finished rotation (a new certificate beside the
//! old key) is refused rather than served. The crypto provider is rustls' `ring`, named
//! explicitly so no process-wide default has to be installed first.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use weir_engine::paths::{read_capped, FileError, FileRules};

/// Largest PEM file read: a chain or a CA bundle is a few KiB, a system bundle a few hundred.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// The files a TLS listener is configured from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain (PEM, leaf first).
    pub cert: PathBuf,
    /// The server's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// When set, clients must present a certificate that chains to one of these CAs (PEM).
    pub client_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// Every file named, in the order they are read.
    pub fn paths(&self) -> Vec<&Path> {
        let mut paths = vec![self.cert.as_path(), self.key.as_path()];
        paths.extend(self.client_ca.as_deref());
        paths
    }
}

/// Why the TLS files cannot be used. Every variant names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Missing, unreadable, not a regular file, or over 1 MiB.
    #[error("TLS file: {0}")]
    File(#[from] FileError),
    /// Not valid PEM.
    #[error("{path}: not valid PEM: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the PEM reader said.
        message: String,
    },
    /// No `CERTIFICATE` block.
    #[error("{path}: holds no PEM certificate")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// No private key block.
    #[error("{path}: holds no PEM private key (PKCS#8, RSA or EC)")]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// The key is unusable or does not belong to the certificate.
    #[error("{key} does not fit {cert}: {source}")]
    Key {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        source: rustls::Error,
    },
    /// A client CA certificate rustls refuses, or no CA at all.
    #[error("{path}: client CA: {message}")]
    ClientCa {
        /// The CA file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The protocol versions of the provider (a bug if it ever happens).
    #[error("TLS settings: {0}")]
    Settings(rustls::Error),
}

/// What the files hold, read once and shared by every listener's configuration.
pub(super) struct Material {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    client_roots: Option<Arc<RootCertStore>>,
    files: TlsFiles,
}

fn pem_error(path: &Path, e: &pem::Error) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    Ok(read_capped(path, MAX_PEM_BYTES, &FileRules::default())?)
}

/// Every certificate in the PEM file at `path` (at least one).
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, &e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The first private key in the PEM file at `path`.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        pem::Error::NoItemsFound => TlsError::NoKey {
            path: path.to_path_buf(),
        },
        other => pem_error(path, &other),
    })
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Material {
    /// Reads and checks `files`.
    pub(super) fn read(files: &TlsFiles) -> Result<Material, TlsError> {
        let chain = certificates(&files.cert)?;
        let key = private_key(&files.key)?;
        let client_roots = match &files.client_ca {
            None => None,
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for cert in certificates(path)? {
                    roots.add(cert).map_err(|e| TlsError::ClientCa {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                }
                Some(Arc::new(roots))
            }
        };
        let material = Material {
            chain,
            key,
            client_roots,
            files: files.clone(),
        };
        // Checks the key against the certificate now, once, with the error naming both files.
        material.config(&[])?;
        Ok(material)
    }

    /// A server configuration offering `alpn` (in preference order).
    pub(super) fn config(&self, alpn: &[&[u8]]) -> Result<ServerConfig, TlsError> {
        let provider = provider();
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Settings)?;
        let builder = match &self.client_roots {
            None => builder.with_no_client_auth(),
            Some(roots) => {
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::clone(roots), provider)
                        .build()
                        .map_err(|e| TlsError::ClientCa {
                            path: self.files.client_ca.clone().unwrap_or_default(),
                            message: e.to_string(),
                        })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|source| TlsError::Key {
                cert: self.files.cert.clone(),
                key: self.files.key.clone(),
                source,
            })?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }
}
