//! `weir serve` with TLS on HTTP and gRPC, as a real process, against certificates the test makes
//! with the openssl command (a CA, a server certificate for 127.0.0.1, a client certificate, and
//! a second CA with a client certificate of its own): Triton's own clients (tritonclient.http and
//! tritonclient.grpc with `ssl=True`, through tests/python/tls_client.py) answered correctly;
//! under `--tls-client-ca` a client certificate of another CA, or none, refused; a rotation (files
//! replaced) picked up by new connections while an open one keeps working, a broken rotation
//! refused with the old certificate kept; plaintext on a TLS port refused at once.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use serde_json::Value;
use weir_connectors::grpc::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use weir_connectors::grpc::proto::ServerLiveRequest;

use crate::common::{model, signal, temp_dir, TempDir};
use crate::grpc::runtime;
use crate::ops::{replace_file, wait_until, Launched};
use crate::reference::python;
use crate::serve::mlp_graph;

/// Longest a client here waits on a socket: a safety net against a hung test, never a measure.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(20);

/// Certificates made for one test (see the module docs).
struct Pki {
    dir: TempDir,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let pki = Pki {
            dir: temp_dir(&format!("tls-{tag}")),
        };
        pki.ca("ca");
        pki.ca("other-ca");
        pki.issue("ca", "server", "server");
        pki.issue("ca", "client", "client");
        pki.issue("other-ca", "rogue", "client");
        pki
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.0.join(file)
    }

    fn arg(&self, file: &str) -> String {
        self.path(file).display().to_string()
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir.0)
            .output()
            .expect("the openssl command runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A self-signed CA `<name>.pem` / `<name>.key`.
    fn ca(&self, name: &str) {
        self.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=weir test {name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
        ]);
    }

    /// A certificate `<name>.pem` / `<name>.key` signed by CA `ca`, for a `server` (127.0.0.1,
    /// localhost) or a `client`.
    fn issue(&self, ca: &str, name: &str, role: &str) {
        let ext = match role {
            "server" => "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
            _ => "subjectAltName=DNS:client.weir.test\nextendedKeyUsage=clientAuth\n",
        };
        let ext_file = format!("{name}.ext");
        std::fs::write(
            self.path(&ext_file),
            format!("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n{ext}"),
        )
        .expect("extensions file");
        self.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ]);
        let serial = format!("0x{:x}", rand::random::<u64>() | 1);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-set_serial",
            &serial,
            "-days",
            "2",
            "-extfile",
            &ext_file,
            "-out",
            &format!("{name}.pem"),
        ]);
    }

    /// DER of the first certificate in `<name>.pem`.
    fn der(&self, name: &str) -> Vec<u8> {
        CertificateDer::pem_file_iter(self.path(&format!("{name}.pem")))
            .expect("pem")
            .next()
            .expect("a certificate")
            .expect("valid")
            .to_vec()
    }
}

/// A client configuration trusting `pki`'s CA, presenting `client` (a name in `pki`) if given.
fn client_config(pki: &Pki, client: Option<&str>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(pki.path("ca.pem")).expect("ca") {
        roots.add(cert.expect("ca cert")).expect("root");
    }
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some(name) => {
            let chain = CertificateDer::pem_file_iter(pki.path(&format!("{name}.pem")))
                .expect("chain")
                .collect::<Result<Vec<_>, _>>()
                .expect("certs");
            let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{name}.key"))).expect("key");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client auth")
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// A keep-alive HTTP/1.1 connection over TLS.
struct TlsConn {
    stream: BufReader<StreamOwned<ClientConnection, TcpStream>>,
}

impl TlsConn {
    fn connect(addr: &str, config: &Arc<ClientConfig>) -> std::io::Result<TlsConn> {
        let tcp = TcpStream::connect(addr)?;
        tcp.set_read_timeout(Some(SOCKET_TIMEOUT))?;
        let name = ServerName::try_from("127.0.0.1").expect("server name");
        let conn =
            ClientConnection::new(Arc::clone(config), name).map_err(std::io::Error::other)?;
        let mut stream = StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(TlsConn {
            stream: BufReader::new(stream),
        })
    }

    /// The certificate the server presented on this connection.
    fn server_cert(&self) -> Vec<u8> {
        self.stream
            .get_ref()
            .conn
            .peer_certificates()
            .expect("server certificates")[0]
            .to_vec()
    }

    /// `GET path` on this connection; the status.
    fn get(&mut self, path: &str) -> std::io::Result<u16> {
        let head = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        self.stream.get_mut().write_all(head.as_bytes())?;
        self.stream.get_mut().flush()?;
        let mut line = String::new();
        self.stream.read_line(&mut line)?;
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut length = 0usize;
        loop {
            line.clear();
            self.stream.read_line(&mut line)?;
            if line.trim_end().is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        self.stream.read_exact(&mut body)?;
        Ok(status)
    }
}

/// `weir serve --http --grpc` with TLS from `pki` (and mutual TLS when `mutual`), then `extra`;
/// waits until it answers readiness over TLS.
fn start(pki: &Pki, mutual: bool, extra: &[&str]) -> Launched {
    let (cert, key, ca) = (
        pki.arg("server.pem"),
        pki.arg("server.key"),
        pki.arg("ca.pem"),
    );
    let mut args = vec![
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ];
    if mutual {
        args.extend(["--tls-client-ca", ca.as_str()]);
    }
    args.extend(extra);
    let server = Launched::start(&[mlp_graph()], &args, &["https", "grpcs"]);
    let config = client_config(pki, mutual.then_some("client"));
    let addr = server.addr("https").to_string();
    wait_until("ready over TLS", || {
        TlsConn::connect(&addr, &config)
            .and_then(|mut c| c.get("/v2/health/ready"))
            .is_ok_and(|s| s == 200)
    });
    server
}

/// Runs tls_client.py `protocol` against `addr` with `extra`; its JSON line.
fn tls_client(protocol: &str, addr: &str, pki: &Pki, extra: &[&str]) -> Value {
    let ca = pki.arg("ca.pem");
    let onnx = model("mlp_a.onnx").display().to_string();
    let mut args = vec![protocol, "--url", addr, "--ca", &ca, "--onnx", &onnx];
    args.extend(extra);
    let (code, out, err) = python("tls_client.py", &args, &Value::Null);
    assert_eq!(code, 0, "tls_client.py {args:?}:\n{out}\n{err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: `{out}`"))
}

#[test]
fn tritonclient_over_tls_on_http_and_grpc_matches_onnxruntime() {
    let pki = Pki::new("clients");
    let server = start(&pki, false, &["--header-timeout-ms", "3000"]);
    // A client that connects and never starts its handshake is closed by the header timeout.
    for scheme in ["https", "grpcs"] {
        let answer = plaintext_exchange(server.addr(scheme), b"");
        assert!(answer.is_empty(), "{scheme}: {answer:?}");
    }
    for (protocol, scheme) in [("http", "https"), ("grpc", "grpcs")] {
        let out = tls_client(protocol, server.addr(scheme), &pki, &[]);
        assert_eq!(out["answered"], 3, "{protocol}: {out}");
        let out = tls_client(
            protocol,
            server.addr(scheme),
            &pki,
            &["--expect", "plaintext-refused"],
        );
        assert_eq!(out["refused"], true, "{protocol}: {out}");
    }
}

#[test]
fn mutual_tls_refuses_a_client_certificate_of_another_ca_and_none() {
    let pki = Pki::new("mutual");
    let server = start(&pki, true, &[]);
    let (cert, key) = (pki.arg("client.pem"), pki.arg("client.key"));
    let (rogue, rogue_key) = (pki.arg("rogue.pem"), pki.arg("rogue.key"));
    for (protocol, scheme) in [("http", "https"), ("grpc", "grpcs")] {
        let addr = server.addr(scheme);
        let out = tls_client(protocol, addr, &pki, &["--cert", &cert, "--key", &key]);
        assert_eq!(out["answered"], 3, "{protocol}: {out}");
        let refused = ["--cert", &rogue, "--key", &rogue_key, "--expect", "refused"];
        let out = tls_client(protocol, addr, &pki, &refused);
        assert_eq!(
            out["refused"], true,
            "{protocol} with another CA's certificate: {out}"
        );
        let out = tls_client(protocol, addr, &pki, &["--expect", "refused"]);
        assert_eq!(
            out["refused"], true,
            "{protocol} without a certificate: {out}"
        );
    }
    // The same over a raw connection: the handshake or the first read fails.
    let rogue = client_config(&pki, None);
    let refused = TlsConn::connect(server.addr("https"), &rogue)
        .and_then(|mut c| c.get("/v2/health/live"))
        .is_err();
    assert!(refused, "a client without a certificate was served");
}

#[test]
fn a_rotated_certificate_reaches_new_connections_while_an_open_one_keeps_working() {
    let pki = Pki::new("rotate");
    // Idle kept-alive connections are closed after the header timeout: make it longer than the
    // test, so the open connection below stays open by that rule.
    let server = start(&pki, false, &["--header-timeout-ms", "600000"]);
    let addr = server.addr("https").to_string();
    let config = client_config(&pki, None);
    let first = pki.der("server");
    let mut open = TlsConn::connect(&addr, &config).expect("connects");
    assert_eq!(open.get("/v2/health/ready").expect("ready"), 200);
    assert_eq!(open.server_cert(), first);

    // 1. Files replaced, no signal: the change is seen by the poll.
    pki.issue("ca", "second", "server");
    let second = pki.der("second");
    replace_file(
        &pki.path("server.key"),
        &std::fs::read(pki.path("second.key")).unwrap(),
    );
    replace_file(
        &pki.path("server.pem"),
        &std::fs::read(pki.path("second.pem")).unwrap(),
    );
    wait_until("a new connection sees the rotated certificate", || {
        TlsConn::connect(&addr, &config).is_ok_and(|c| c.server_cert() == second)
    });
    assert_eq!(
        open.get("/v2/health/ready")
            .expect("the open connection still answers"),
        200
    );
    assert_eq!(open.server_cert(), first);

    // 2. A broken certificate file and SIGHUP: refused, naming the file; the second stays.
    replace_file(
        &pki.path("server.pem"),
        b"-----BEGIN CERTIFICATE-----\nnot base64!\n",
    );
    signal(server.child.id(), "-HUP");
    wait_until("the failed reload is logged", || {
        server
            .log_text()
            .lines()
            .any(|l| l.contains("not reloaded") && l.contains("server.pem"))
    });
    let conn = TlsConn::connect(&addr, &config).expect("still serving");
    assert_eq!(conn.server_cert(), second);

    // 3. A good certificate again, announced with SIGHUP.
    pki.issue("ca", "third", "server");
    let third = pki.der("third");
    replace_file(
        &pki.path("server.key"),
        &std::fs::read(pki.path("third.key")).unwrap(),
    );
    replace_file(
        &pki.path("server.pem"),
        &std::fs::read(pki.path("third.pem")).unwrap(),
    );
    signal(server.child.id(), "-HUP");
    wait_until("a new connection sees the third certificate", || {
        TlsConn::connect(&addr, &config).is_ok_and(|c| c.server_cert() == third)
    });
    assert_eq!(
        open.get("/v2/health/live")
            .expect("the first connection still answers"),
        200
    );
    assert_eq!(open.server_cert(), first);
}

/// Writes `request` on a new plain connection to `addr`; what came back before the server closed.
fn plaintext_exchange(addr: &str, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(SOCKET_TIMEOUT)).expect("timeout");
    s.write_all(request).expect("written");
    let mut answer = Vec::new();
    // Closed, or reset (closed with the client's bytes unread); a server that never closed
    // would fail this read with a timeout error instead.
    match s.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server did not close the connection: {e}"),
    }
    answer
}

#[test]
fn plaintext_on_a_tls_port_is_refused_at_once() {
    let pki = Pki::new("plaintext");
    let server = start(&pki, false, &["--header-timeout-ms", "600000"]);
    let answer = plaintext_exchange(
        server.addr("https"),
        b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    assert!(text.contains("TLS"), "{text}");
    // gRPC's plaintext preface: closed without an answer.
    let answer = plaintext_exchange(
        server.addr("grpcs"),
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0",
    );
    assert!(answer.is_empty(), "{answer:?}");
    // tonic's plaintext client gets an error, not a hang.
    let grpc = server.addr("grpcs").to_string();
    let failed = runtime().block_on(async move {
        let call = async {
            let mut client = GrpcInferenceServiceClient::new(channel_lazy(&grpc));
            client.server_live(ServerLiveRequest {}).await
        };
        tokio::time::timeout(SOCKET_TIMEOUT, call).await
    });
    assert!(matches!(failed, Ok(Err(_))), "{failed:?}");
    // Still serving TLS clients afterwards.
    let config = client_config(&pki, None);
    let mut conn = TlsConn::connect(server.addr("https"), &config).expect("connects");
    assert_eq!(conn.get("/v2/health/ready").expect("ready"), 200);
}

/// A plaintext channel to `addr` that connects on first use (so the failure is the call's).
fn channel_lazy(addr: &str) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect_lazy()
}
