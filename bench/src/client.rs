//! The benchmarks' HTTP/1.1 client: keep-alive connections posting prepared inference requests
//! (the Open Inference Protocol, JSON or binary bodies) and the closed loop that drives them.
//!
//! A connection is anything that posts a [`Prepared`] request and reads the reply ([`Poster`]):
//! a plain [`Client`] here, a TLS one in `tls`. Both read replies with [`read_reply`], so the two
//! transports differ in nothing but the transport. The closed loop takes its connections already
//! open: the clock measures requests, never handshakes.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use crate::overhead::quantile_ms;

/// One measurement: requests/s, p50 ms, p99 ms.
pub type Measured = (f64, f64, f64);

/// A prepared request: head and body.
pub(crate) struct Prepared {
    pub(crate) head: Vec<u8>,
    pub(crate) body: Vec<u8>,
}

impl Prepared {
    /// An inference request to `model` on `addr`: a JSON `header`, then `binary` data (the Open
    /// Inference Protocol's binary extension) when there is any.
    pub(crate) fn infer(addr: &str, model: &str, header: &str, binary: &[u8]) -> Prepared {
        let extra = if binary.is_empty() {
            String::new()
        } else {
            format!("Inference-Header-Content-Length: {}\r\n", header.len())
        };
        let body = [header.as_bytes(), binary].concat();
        let head = format!("POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n", body.len()).into_bytes();
        Prepared { head, body }
    }
}

/// The request of one row of `shape` (`data` its elements) to input `x`, asking for output `y`.
pub(crate) fn prepare(
    addr: &str,
    model: &str,
    shape: &[usize],
    data: &[f32],
    binary: bool,
) -> Prepared {
    let dims: Vec<String> = std::iter::once(1)
        .chain(shape.iter().copied())
        .map(|d| d.to_string())
        .collect();
    let dims = dims.join(",");
    if binary {
        let header = r#"{"inputs":[{"name":"x","shape":[DIMS],"datatype":"FP32","parameters":{"binary_data_size":BYTES}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}"#.replace("BYTES", &(data.len() * 4).to_string()).replace("DIMS", &dims);
        let values: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        Prepared::infer(addr, model, &header, &values)
    } else {
        let values: Vec<String> = data.iter().map(|x| x.to_string()).collect();
        let header = format!(
            r#"{{"inputs":[{{"name":"x","shape":[{dims}],"datatype":"FP32","data":[{}]}}]}}"#,
            values.join(",")
        );
        Prepared::infer(addr, model, &header, &[])
    }
}

/// Reads one HTTP/1.1 reply (status line, headers, a `Content-Length` body) from `r`.
pub(crate) fn read_reply(r: &mut impl BufRead) -> Result<(u16, Vec<u8>)> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("bad status line `{line}`"))?;
    let length = read_headers(r)?.unwrap_or(0);
    let mut body = vec![0u8; length];
    r.read_exact(&mut body)?;
    Ok((status, body))
}

/// Reads header lines up to the blank line that ends them (or the end of the stream); returns the
/// `Content-Length`, if one was given.
pub(crate) fn read_headers(r: &mut impl BufRead) -> Result<Option<usize>> {
    let mut length = None;
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            return Ok(length);
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = Some(v.trim().parse()?);
            }
        }
    }
}

/// A keep-alive connection that posts prepared requests and reads the status.
pub(crate) trait Poster: Send {
    fn post(&mut self, prepared: &Prepared) -> Result<u16>;
}

/// A keep-alive HTTP/1.1 connection over plain TCP.
pub(crate) struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    pub(crate) fn connect(addr: &str) -> Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Client {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    /// Posts `body` (with `head` already holding the request line and headers); returns the
    /// status and the reply's body.
    pub(crate) fn exchange(&mut self, head: &[u8], body: &[u8]) -> Result<(u16, Vec<u8>)> {
        self.writer.write_all(head)?;
        self.writer.write_all(body)?;
        read_reply(&mut self.reader)
    }

    /// `GET path` from `addr` (the server this connection goes to); returns the status and the
    /// reply's body.
    pub(crate) fn get(&mut self, addr: &str, path: &str) -> Result<(u16, Vec<u8>)> {
        let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n");
        self.exchange(head.as_bytes(), b"")
    }

    /// Posts as [`Client::exchange`] does; returns the status.
    pub(crate) fn post(&mut self, head: &[u8], body: &[u8]) -> Result<u16> {
        self.exchange(head, body).map(|(status, _)| status)
    }
}

impl Poster for Client {
    fn post(&mut self, prepared: &Prepared) -> Result<u16> {
        Client::post(self, &prepared.head, &prepared.body)
    }
}

/// `n` plain connections to `addr`.
pub(crate) fn connect(addr: &str, n: usize) -> Result<Vec<Box<dyn Poster>>> {
    (0..n)
        .map(|_| Ok(Box::new(Client::connect(addr)?) as Box<dyn Poster>))
        .collect()
}

/// When each client of a closed loop stops.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Until {
    /// After this many requests each.
    Requests(usize),
    /// At this moment (a request in flight then is still awaited and counted).
    Deadline(Instant),
}

/// Closed loop over open connections: client `k` posts `requests` in turn from the `k`-th on
/// until `until`; every answer must be 200.
pub(crate) fn closed_loop(
    clients: Vec<Box<dyn Poster>>,
    requests: &[Prepared],
    until: Until,
) -> Result<Measured> {
    if requests.is_empty() {
        bail!("a closed loop needs a request to send");
    }
    timed_loops(
        clients,
        |_, i| match until {
            Until::Requests(n) => i < n,
            Until::Deadline(at) => Instant::now() < at,
        },
        |k, i, client| {
            let status = client.post(&requests[(k + i) % requests.len()])?;
            if status != 200 {
                bail!("HTTP {status}");
            }
            Ok(())
        },
    )
}

/// One closed loop per element of `states`, each on a thread of its own, started together: loop
/// `k` sends its `i`-th request (`send(k, i, state)`, timed) while `more(k, i)` says so. Returns
/// requests/s over the whole run, and the p50 and p99 of the sends in ms.
pub(crate) fn timed_loops<S: Send>(
    mut states: Vec<S>,
    more: impl Fn(usize, usize) -> bool + Sync,
    send: impl Fn(usize, usize, &mut S) -> Result<()> + Sync,
) -> Result<Measured> {
    let (more, send) = (&more, &send);
    let started = Instant::now();
    let latencies: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = states
            .iter_mut()
            .enumerate()
            .map(|(k, state)| {
                s.spawn(move || -> Result<Vec<Duration>> {
                    let mut out = Vec::new();
                    while more(k, out.len()) {
                        let t = Instant::now();
                        send(k, out.len(), state)?;
                        out.push(t.elapsed());
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("client thread panicked"))?)
            .collect::<Result<Vec<_>>>()
            .map(|v| v.concat())
    })?;
    let elapsed = started.elapsed();
    Ok((
        latencies.len() as f64 / elapsed.as_secs_f64(),
        quantile_ms(&latencies, 0.5)?,
        quantile_ms(&latencies, 0.99)?,
    ))
}

/// Closed loop over HTTP: `concurrency` plain connections to `addr`, `requests` of `prepared`
/// in all.
pub(crate) fn http_load(
    addr: &str,
    prepared: &Prepared,
    concurrency: usize,
    requests: usize,
) -> Result<Measured> {
    let per = Until::Requests(requests.div_ceil(concurrency.max(1)));
    closed_loop(
        connect(addr, concurrency)?,
        std::slice::from_ref(prepared),
        per,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_its_status_and_its_content_length_of_body() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 4\r\n\r\nbodyNEXT";
        let mut r = std::io::Cursor::new(&raw[..]);
        assert_eq!(read_reply(&mut r).unwrap(), (200, b"body".to_vec()));
        let mut bad = std::io::Cursor::new(&b"garbage\r\n\r\n"[..]);
        assert!(read_reply(&mut bad).is_err());
    }
}
