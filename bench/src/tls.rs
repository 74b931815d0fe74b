//! The TLS experiment: what TLS costs `weir serve`'s HTTP path. One graph (squeezenet), two
//! in-process HTTP servers over it on loopback, one plaintext and one TLS (rustls, an ECDSA P-256
//! certificate made for the run with the openssl command), and keep-alive HTTP/1.1 clients
//! posting binary-tensor requests (602 KB each) to both, in turn, through the same closed loop:
//! only the transport differs. Each repeat measures plaintext and TLS back to back (alternating
//! which goes first) at each client concurrency; the table gives medians over repeats, the spread
//! (min–max), and TLS over plaintext as the median of the per-repeat ratios.
//!
//! Connections are opened before the clock starts and kept: this is the steady-state cost of
//! encrypting and decrypting bodies, not of handshakes.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use weir_connectors::http::{HttpConfig, HttpServer};
use weir_connectors::tls::{ServerTls, TlsFiles};

pub use crate::client::Measured;
use crate::client::{closed_loop, connect, prepare, read_reply, Poster, Prepared, Until};
use crate::http::{layout_for, LocalServer};
use crate::overhead::{first_input, model_input, spread, weir_graph, IMAGE};

/// Settings of the TLS experiment.
#[derive(Debug, Clone)]
pub struct TlsBenchConfig {
    /// The model (display name, file).
    pub model: (String, PathBuf),
    /// Client concurrencies.
    pub concurrency: Vec<usize>,
    /// Requests per measurement.
    pub requests: usize,
    /// Repetitions.
    pub repeats: usize,
}

/// One row: a concurrency, and every repeat's plaintext and TLS measurements.
#[derive(Debug, Clone)]
pub struct TlsRow {
    /// Client concurrency.
    pub concurrency: usize,
    /// Plaintext, per repeat.
    pub plain: Vec<Measured>,
    /// TLS, per repeat.
    pub tls: Vec<Measured>,
}

/// A keep-alive HTTP/1.1 connection over TLS.
struct TlsClient {
    stream: BufReader<StreamOwned<ClientConnection, TcpStream>>,
}

impl TlsClient {
    fn connect(addr: &str, config: &Arc<ClientConfig>) -> Result<TlsClient> {
        let tcp = TcpStream::connect(addr)?;
        tcp.set_nodelay(true)?;
        let name = ServerName::try_from("127.0.0.1")?;
        let conn = ClientConnection::new(Arc::clone(config), name)?;
        let mut stream = StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(TlsClient {
            stream: BufReader::with_capacity(64 << 10, stream),
        })
    }
}

impl Poster for TlsClient {
    fn post(&mut self, prepared: &Prepared) -> Result<u16> {
        let writer = self.stream.get_mut();
        writer.write_all(&prepared.head)?;
        writer.write_all(&prepared.body)?;
        writer.flush()?;
        read_reply(&mut self.stream).map(|(status, _)| status)
    }
}

/// A CA and a server certificate for 127.0.0.1 in `dir`, made with the openssl command.
fn make_certificates(dir: &Path) -> Result<TlsFiles> {
    let run = |args: &[&str]| -> Result<()> {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .context("running the openssl command (is it installed?)")?;
        if !out.status.success() {
            bail!("openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-days",
            "1",
            "-subj",
            "/CN=weir bench ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
    ]
    .concat())?;
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )?;
    run(&[
        &["req"][..],
        &ec,
        &[
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    ]
    .concat())?;
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-set_serial",
        "7",
        "-days",
        "1",
        "-extfile",
        "server.ext",
        "-out",
        "server.pem",
    ])?;
    Ok(TlsFiles {
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        client_ca: None,
    })
}

fn client_config(ca: &Path) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A server over `graph` on a runtime of its own, with `tls` when given.
fn local_server(graph: &weir::RunningGraph, tls: Option<Arc<ServerTls>>) -> Result<LocalServer> {
    let config = HttpConfig {
        tls,
        ..HttpConfig::default()
    };
    let server = HttpServer::new(vec![graph.runtime_handle()], config, Vec::new());
    LocalServer::spawn(move |listener, stopped| async move {
        let _ = server.serve(listener, stopped).await;
    })
}

impl TlsClient {
    /// The protocol version and cipher suite negotiated.
    fn negotiated(&self) -> String {
        let conn = &self.stream.get_ref().conn;
        let version = conn
            .protocol_version()
            .map_or("?".to_string(), |v| format!("{v:?}"));
        let suite = conn
            .negotiated_cipher_suite()
            .map_or("?".to_string(), |s| format!("{:?}", s.suite()));
        format!("{version} {suite}")
    }
}

/// Runs the TLS experiment; the rows, and the TLS version and cipher suite the clients negotiated.
///
/// # Errors
/// When the model, the certificates, a server or a run fails.
pub fn tls(config: &TlsBenchConfig) -> Result<(Vec<TlsRow>, String)> {
    let (_, path) = &config.model;
    let (input, output) =
        model_input(path).with_context(|| format!("reading {}", path.display()))?;
    let dir = std::env::temp_dir().join(format!("weir-bench-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let files = make_certificates(&dir)?;
    let client_tls = client_config(&dir.join("ca.pem"))?;
    let server_tls = ServerTls::load(files)?;
    let mut rows = Vec::new();
    let mut negotiated = String::new();
    for &c in &config.concurrency {
        let (graph, workload) = weir_graph(path, &input, &output, &IMAGE, layout_for(c))?;
        let data = first_input(&workload);
        let plain = local_server(&graph, None)?;
        let secure = local_server(&graph, Some(Arc::clone(&server_tls)))?;
        let plain_request = prepare(&plain.addr, "overhead", &IMAGE, &data, true);
        let tls_request = prepare(&secure.addr, "overhead", &IMAGE, &data, true);
        let plain_clients = || connect(&plain.addr, c);
        let tls_clients = || -> Result<Vec<Box<dyn Poster>>> {
            (0..c)
                .map(|_| {
                    Ok(Box::new(TlsClient::connect(&secure.addr, &client_tls)?) as Box<dyn Poster>)
                })
                .collect()
        };
        negotiated = TlsClient::connect(&secure.addr, &client_tls)?.negotiated();
        // Warm both paths (sessions, allocations, the TLS session's buffers).
        let warm = Until::Requests(4);
        closed_loop(plain_clients()?, std::slice::from_ref(&plain_request), warm)?;
        closed_loop(tls_clients()?, std::slice::from_ref(&tls_request), warm)?;
        let per_client = Until::Requests(config.requests.div_ceil(c));
        let plain_request = std::slice::from_ref(&plain_request);
        let tls_request = std::slice::from_ref(&tls_request);
        let mut row = TlsRow {
            concurrency: c,
            plain: Vec::new(),
            tls: Vec::new(),
        };
        for r in 0..config.repeats {
            eprintln!("c={c}: repeat {}/{}", r + 1, config.repeats);
            let (pc, tc) = (plain_clients()?, tls_clients()?);
            if r % 2 == 0 {
                row.plain.push(closed_loop(pc, plain_request, per_client)?);
                row.tls.push(closed_loop(tc, tls_request, per_client)?);
            } else {
                row.tls.push(closed_loop(tc, tls_request, per_client)?);
                row.plain.push(closed_loop(pc, plain_request, per_client)?);
            }
        }
        drop((plain, secure));
        graph.shutdown();
        rows.push(row);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok((rows, negotiated))
}

/// The TLS table as Markdown.
pub fn tls_table(rows: &[TlsRow]) -> String {
    let mut s = String::from(
        "| clients | plain req/s | TLS req/s | TLS / plain req/s | plain p50 ms | TLS p50 ms | TLS p50 − plain p50 ms | plain p99 ms | TLS p99 ms |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let pick = |v: &[Measured], f: fn(&Measured) -> f64| v.iter().map(f).collect::<Vec<_>>();
        let ratio: Vec<f64> = r
            .tls
            .iter()
            .zip(&r.plain)
            .map(|(t, p)| t.0 / p.0.max(1e-9))
            .collect();
        let delta: Vec<f64> = r.tls.iter().zip(&r.plain).map(|(t, p)| t.1 - p.1).collect();
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.concurrency,
            spread(&pick(&r.plain, |m| m.0), 1),
            spread(&pick(&r.tls, |m| m.0), 1),
            spread(&ratio, 3),
            spread(&pick(&r.plain, |m| m.1), 2),
            spread(&pick(&r.tls, |m| m.1), 2),
            spread(&delta, 2),
            spread(&pick(&r.plain, |m| m.2), 2),
            spread(&pick(&r.tls, |m| m.2), 2),
        ));
    }
    s
}
