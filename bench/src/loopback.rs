//! The loopback floor: what moving one request's bytes and its reply's bytes costs over this
//! machine's TCP loopback, with the benchmarks' own client and no HTTP server, graph or model.
//!
//! An HTTP path's added latency over bare ONNX Runtime has a part no server can remove: the
//! client writes the request into the kernel, the kernel hands it to the server's socket, the
//! server reads it out, and the same again for the reply. [`FloorServer`] does nothing else: it
//! reads a request's head up to the blank line, reads the `Content-Length` body into one buffer
//! kept across requests, and writes a canned reply of the size it is given, in one write, from a
//! thread blocked on its socket (no runtime, no wake-up hand-offs). Timed with the same closed
//! loop as the real server, it is the reference an HTTP server's own cost is read against.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{anyhow, Result};

use crate::client::read_headers;

/// Largest request body the floor server reads: a bound, since the port is open on loopback.
const MAX_BODY: usize = 64 << 20;

/// A server that answers every request on a connection with the same reply, stopped on drop.
pub(crate) struct FloorServer {
    pub(crate) addr: String,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl FloorServer {
    /// Listens on a free loopback port; every request gets a `200` with `reply_body` bytes.
    pub(crate) fn start(reply_body: usize) -> Result<FloorServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let reply: Arc<[u8]> = [
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {reply_body}\r\n\r\n").as_bytes(),
            &vec![0u8; reply_body],
        ]
        .concat()
        .into();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let accept = std::thread::Builder::new()
            .name("floor-accept".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let reply = reply.clone();
                    // A connection's thread ends when its client closes it.
                    let _ =
                        std::thread::Builder::new()
                            .name("floor-conn".into())
                            .spawn(move || {
                                let _ = answer(conn, &reply);
                            });
                }
            })?;
        Ok(FloorServer {
            addr,
            stop,
            accept: Some(accept),
        })
    }
}

impl Drop for FloorServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(&self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Answers requests on `conn` until it closes or sends something that is not a request.
fn answer(conn: TcpStream, reply: &[u8]) -> Result<()> {
    conn.set_nodelay(true)?;
    let mut writer = conn.try_clone()?;
    let mut reader = BufReader::new(conn);
    let mut body = Vec::new();
    let mut request_line = String::new();
    loop {
        request_line.clear();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let length = read_headers(&mut reader)?
            .filter(|&n| n <= MAX_BODY)
            .ok_or_else(|| anyhow!("no usable Content-Length"))?;
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
        writer.write_all(reply)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Client;

    #[test]
    fn every_request_gets_the_canned_reply_and_a_connection_is_kept() {
        let server = FloorServer::start(4000).unwrap();
        let mut client = Client::connect(&server.addr).unwrap();
        let head = b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
        for _ in 0..3 {
            let (status, body) = client.exchange(head, b"hello").unwrap();
            assert_eq!((status, body.len()), (200, 4000));
        }
        drop(client);
        drop(server);
    }

    #[test]
    fn a_body_past_the_bound_closes_the_connection() {
        let server = FloorServer::start(10).unwrap();
        let mut client = Client::connect(&server.addr).unwrap();
        let head = format!(
            "POST /x HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert!(client.exchange(head.as_bytes(), b"").is_err());
    }
}
