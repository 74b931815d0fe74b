//! The benchmarks' gRPC client: unary `inference.GRPCInferenceService/ModelInfer` calls on one
//! HTTP/2 connection, made the way the HTTP experiment's client makes its requests, so the two
//! protocols are timed on equal terms.
//!
//! The HTTP client is a blocking loop over one socket that writes a prepared request and reads
//! the reply on the thread that times it; this client is the same loop over HTTP/2. A call is one
//! write (its HEADERS frame, a header block encoded once, and its DATA frames, the last with
//! END_STREAM, as gRPC's C core writes a unary call's batch), then frames are read until the
//! call's stream ends. The connection's own frames are answered on the way: SETTINGS are
//! acknowledged and applied (the peer's initial window and largest frame), PINGs echoed, and
//! WINDOW_UPDATEs credited, so a large request waits for the server's window as HTTP/2 requires.
//! The client opens its own receive windows wide (and tops the connection's up), so the server
//! never waits on it.
//!
//! Its header block is HPACK-indexed as gRPC's C core and `h2` index theirs: the first call adds
//! its fields to the server's dynamic table, every later call names them by index (when the
//! server's table has room for them; literals otherwise). The reply's header blocks are skipped,
//! not decoded: the reply is the message between the response headers and the trailers, and a call
//! counts as answered when that message is a `ModelInferResponse` with outputs (a failed call is
//! trailers only, so it has none). An async client on `h2` (hyper's and tonic's HTTP/2) cost
//! eight times the HTTP client's instructions per request on a small model
//! (`benchmarks/grpc/README.md`): its tasks, wakers and HPACK state were timed as if they were the
//! server's.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;

use anyhow::{anyhow, bail, Context as _, Result};
use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use weir_connectors::grpc::proto::{ModelInferRequest, ModelInferResponse};

use crate::client::{timed_loops, Measured};

/// gRPC's message prefix: a compression flag and a big-endian length.
const PREFIX: usize = 5;

/// The largest reply a client reads.
const MAX_REPLY: usize = 64 << 20;

/// HTTP/2's connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The largest frame payload this client accepts: HTTP/2's default, which it never raises.
const MAX_FRAME: usize = 16_384;

/// The largest flow-control window HTTP/2 allows.
const MAX_WINDOW: i64 = (1 << 31) - 1;

/// Frame types and flags (RFC 9113 §6).
mod frame {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
}

/// A gRPC client on a connection of its own (see the module doc).
pub(crate) struct GrpcClient {
    write: TcpStream,
    read: BufReader<TcpStream>,
    /// The first call's header block (its fields added to the server's dynamic table).
    header_block: Vec<u8>,
    /// Every later call's header block (the fields by index), once the first call is sent.
    indexed_block: Option<Vec<u8>>,
    /// The server's HPACK dynamic table size (`SETTINGS_HEADER_TABLE_SIZE`).
    peer_table: usize,
    /// The next stream id (odd, rising).
    next_stream: u32,
    /// What the server still lets this client send on the connection.
    send_window: i64,
    /// The server's initial window for a new stream.
    stream_initial: i64,
    /// The server's largest frame payload.
    peer_max_frame: usize,
    /// DATA received since the connection's window was last topped up.
    received: i64,
    /// A frame's payload, reused.
    payload: Vec<u8>,
    /// The call being written, reused.
    out: Vec<u8>,
}

/// `message` with gRPC's prefix.
fn framed(message: &impl Message) -> Bytes {
    let len = message.encoded_len();
    let mut buf = BytesMut::with_capacity(PREFIX + len);
    buf.put_u8(0);
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    message
        .encode(&mut buf)
        .expect("the buffer holds the encoded length");
    buf.freeze()
}

/// Appends a frame header to `out`.
fn put_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    out.extend_from_slice(&len[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// Appends an HPACK string literal (no Huffman coding) to `out`.
fn put_string(out: &mut Vec<u8>, s: &str) {
    put_integer(out, 7, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// Appends an HPACK integer with an `n`-bit prefix, the bits above it zero (RFC 7541 §5.1); the
/// caller sets a representation's pattern bits in its first byte.
fn put_integer(out: &mut Vec<u8>, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(value as u8);
        return;
    }
    out.push(max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// The fields of a unary call to `path` on `authority` that HPACK's static table does not hold
/// whole: (static index of the name, or 0 for a literal name; name; value).
fn literal_fields<'a>(authority: &'a str, path: &'a str) -> [(usize, &'a str, &'a str); 4] {
    [
        (4, ":path", path),
        (1, ":authority", authority),
        (31, "content-type", "application/grpc"),
        (0, "te", "trailers"),
    ]
}

/// The size an entry takes in a dynamic table (RFC 7541 §4.1).
fn entry_size(name: &str, value: &str) -> usize {
    name.len() + value.len() + 32
}

/// The header block of a unary call to `path` on `authority`: indexed static entries where the
/// whole field is in HPACK's static table, the other fields as literals (RFC 7541 appendix A),
/// added to the decoder's dynamic table when `index` is set (6-bit prefix, pattern `01`), else
/// not (4-bit prefix, pattern `0000`).
fn header_block(authority: &str, path: &str, index: bool) -> Vec<u8> {
    let (pattern, bits) = if index { (0x40, 6) } else { (0, 4) };
    let mut b = vec![0x80 | 3, 0x80 | 6]; // :method: POST, :scheme: http
    for (name_index, name, value) in literal_fields(authority, path) {
        let start = b.len();
        put_integer(&mut b, bits, name_index);
        b[start] |= pattern;
        if name_index == 0 {
            put_string(&mut b, name);
        }
        put_string(&mut b, value);
    }
    b
}

/// The header block naming, by index, the fields [`header_block`] with `index` added (the last
/// added is index 62, RFC 7541 §2.3.3).
fn indexed_block(fields: usize) -> Vec<u8> {
    let mut b = vec![0x80 | 3, 0x80 | 6];
    for i in (0..fields).rev() {
        let start = b.len();
        put_integer(&mut b, 7, 62 + i);
        b[start] |= 0x80;
    }
    b
}

impl GrpcClient {
    /// A client connected to `addr` (`host:port`, plain HTTP/2, `TCP_NODELAY` on), with the
    /// server's settings read.
    pub(crate) fn connect(addr: &str) -> Result<GrpcClient> {
        let tcp = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        tcp.set_nodelay(true)?;
        let mut client = GrpcClient {
            write: tcp.try_clone()?,
            read: BufReader::with_capacity(64 << 10, tcp),
            header_block: Vec::new(),
            indexed_block: None,
            peer_table: 4096,
            next_stream: 1,
            send_window: 65_535,
            stream_initial: 65_535,
            peer_max_frame: MAX_FRAME,
            received: 0,
            payload: Vec::new(),
            out: Vec::new(),
        };
        let mut hello = PREFACE.to_vec();
        // SETTINGS: no push (2 = 0), the largest initial stream window (4).
        put_header(&mut hello, 12, frame::SETTINGS, 0, 0);
        hello.extend_from_slice(&[0, 2, 0, 0, 0, 0]);
        hello.extend_from_slice(&[0, 4]);
        hello.extend_from_slice(&(MAX_WINDOW as u32).to_be_bytes());
        // The connection's window, opened as wide.
        put_header(&mut hello, 4, frame::WINDOW_UPDATE, 0, 0);
        hello.extend_from_slice(&((MAX_WINDOW - 65_535) as u32).to_be_bytes());
        client.write.write_all(&hello)?;
        // The server's SETTINGS come first (RFC 9113 §3.4).
        let (kind, _, _) = client.read_frame()?;
        if kind != frame::SETTINGS {
            bail!("the server did not open with SETTINGS");
        }
        // Index the fields when the server's table holds them all.
        let path = "/inference.GRPCInferenceService/ModelInfer";
        let fields = literal_fields(addr, path);
        let index = fields
            .iter()
            .map(|(_, n, v)| entry_size(n, v))
            .sum::<usize>()
            <= client.peer_table;
        client.header_block = header_block(addr, path, index);
        if index {
            client.indexed_block = Some(indexed_block(fields.len()));
        }
        Ok(client)
    }

    /// Reads one frame into `self.payload`, answering the connection's own frames (SETTINGS,
    /// PING, WINDOW_UPDATE on stream 0); returns its type, flags and stream.
    fn read_frame(&mut self) -> Result<(u8, u8, u32)> {
        let mut head = [0u8; 9];
        self.read.read_exact(&mut head)?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        if len > MAX_FRAME {
            bail!("a frame of {len} bytes, over the {MAX_FRAME} this client allows");
        }
        self.payload.resize(len, 0);
        self.read.read_exact(&mut self.payload)?;
        match kind {
            frame::SETTINGS if flags & frame::ACK == 0 => {
                for setting in self.payload.chunks_exact(6) {
                    let id = u16::from_be_bytes([setting[0], setting[1]]);
                    let value =
                        u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
                    match id {
                        1 => self.peer_table = value as usize,
                        4 => self.stream_initial = i64::from(value),
                        5 => self.peer_max_frame = (value as usize).clamp(MAX_FRAME, 1 << 24),
                        _ => {}
                    }
                }
                let mut ack = Vec::with_capacity(9);
                put_header(&mut ack, 0, frame::SETTINGS, frame::ACK, 0);
                self.write.write_all(&ack)?;
            }
            frame::PING if flags & frame::ACK == 0 => {
                let mut pong = Vec::with_capacity(17);
                put_header(&mut pong, self.payload.len(), frame::PING, frame::ACK, 0);
                pong.extend_from_slice(&self.payload);
                self.write.write_all(&pong)?;
            }
            frame::WINDOW_UPDATE if stream == 0 => {
                self.send_window += i64::from(window_increment(&self.payload)?);
            }
            frame::GOAWAY => bail!("the server closed the connection (GOAWAY)"),
            _ => {}
        }
        Ok((kind, flags, stream))
    }

    /// Sends `message` (a framed `ModelInferRequest`) and reads the reply, which must have
    /// outputs.
    pub(crate) fn infer(&mut self, message: &Bytes) -> Result<()> {
        let stream = self.next_stream;
        self.next_stream += 2;
        let mut stream_window = self.stream_initial;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        // The first call's block adds the fields to the server's table; later calls index them.
        let block = if stream == 1 {
            &self.header_block
        } else {
            self.indexed_block.as_ref().unwrap_or(&self.header_block)
        };
        put_header(
            &mut out,
            block.len(),
            frame::HEADERS,
            frame::END_HEADERS,
            stream,
        );
        out.extend_from_slice(block);
        // DATA frames as the windows allow; what they do not is sent as the server opens them.
        let mut sent = 0;
        while sent < message.len() {
            let room = self.send_window.min(stream_window);
            if room <= 0 {
                self.write.write_all(&out)?;
                out.clear();
                let (kind, _, on) = self.read_frame()?;
                match kind {
                    frame::WINDOW_UPDATE if on == stream => {
                        stream_window += i64::from(window_increment(&self.payload)?)
                    }
                    frame::RST_STREAM if on == stream => bail!("the server reset the call"),
                    _ => {}
                }
                continue;
            }
            let n = (message.len() - sent)
                .min(self.peer_max_frame)
                .min(room as usize);
            let last = sent + n == message.len();
            let flags = if last { frame::END_STREAM } else { 0 };
            put_header(&mut out, n, frame::DATA, flags, stream);
            out.extend_from_slice(&message[sent..sent + n]);
            sent += n;
            self.send_window -= n as i64;
            stream_window -= n as i64;
        }
        self.write.write_all(&out)?;
        self.out = out;
        let reply = self.read_reply(stream)?;
        let Some(message) = reply.get(PREFIX..) else {
            bail!("the call failed: its reply has no message (see the server's log)");
        };
        let reply = ModelInferResponse::decode(message).map_err(|e| anyhow!("the reply: {e}"))?;
        if reply.raw_output_contents.is_empty() {
            bail!("a reply without outputs");
        }
        Ok(())
    }

    /// Reads frames until `stream` ends; returns its DATA.
    fn read_reply(&mut self, stream: u32) -> Result<Vec<u8>> {
        let mut reply = Vec::new();
        loop {
            let (kind, flags, on) = self.read_frame()?;
            if on != stream {
                continue;
            }
            match kind {
                frame::DATA => {
                    self.received += self.payload.len() as i64;
                    let data = unpadded(&self.payload, flags)?;
                    if reply.len() + data.len() > PREFIX + MAX_REPLY {
                        bail!("a reply over {MAX_REPLY} bytes");
                    }
                    reply.extend_from_slice(data);
                }
                frame::RST_STREAM => bail!("the server reset the call"),
                _ => {}
            }
            if flags & frame::END_STREAM != 0 && matches!(kind, frame::DATA | frame::HEADERS) {
                break;
            }
        }
        // Keep the connection's receive window wide open.
        if self.received > MAX_WINDOW / 2 {
            let mut update = Vec::with_capacity(13);
            put_header(&mut update, 4, frame::WINDOW_UPDATE, 0, 0);
            update.extend_from_slice(&(self.received as u32).to_be_bytes());
            self.write.write_all(&update)?;
            self.received = 0;
        }
        Ok(reply)
    }
}

/// A WINDOW_UPDATE frame's increment.
fn window_increment(payload: &[u8]) -> Result<u32> {
    let b: [u8; 4] = payload
        .try_into()
        .map_err(|_| anyhow!("a WINDOW_UPDATE of {} bytes", payload.len()))?;
    Ok(u32::from_be_bytes(b) & 0x7fff_ffff)
}

/// A DATA frame's data without its padding.
fn unpadded(payload: &[u8], flags: u8) -> Result<&[u8]> {
    if flags & frame::PADDED == 0 {
        return Ok(payload);
    }
    let pad = *payload
        .first()
        .ok_or_else(|| anyhow!("an empty padded frame"))? as usize;
    payload
        .get(1..payload.len().saturating_sub(pad))
        .filter(|_| pad < payload.len())
        .ok_or_else(|| anyhow!("a frame padded past its end"))
}

/// Closed loop over gRPC: `concurrency` clients on connections of their own, `requests` of
/// `request` in all.
pub(crate) fn grpc_load(
    addr: &str,
    request: &ModelInferRequest,
    concurrency: usize,
    requests: usize,
) -> Result<Measured> {
    let per = requests.div_ceil(concurrency.max(1));
    let message = framed(request);
    let clients = (0..concurrency.max(1))
        .map(|_| GrpcClient::connect(addr))
        .collect::<Result<Vec<_>>>()?;
    timed_loops(
        clients,
        |_, i| i < per,
        |_, _, client| client.infer(&message),
    )
}

/// One timed unary call of `request` a call, over one connection to `addr`.
pub(crate) fn calling(
    addr: &str,
    request: &ModelInferRequest,
) -> Result<impl FnMut() -> Result<std::time::Duration>> {
    let message = framed(request);
    let mut client = GrpcClient::connect(addr)?;
    Ok(move || {
        let t = std::time::Instant::now();
        client.infer(&message)?;
        Ok(t.elapsed())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_follow_rfc_7541_examples() {
        // C.1.1: 10 with a 5-bit prefix; C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        put_integer(&mut out, 5, 10);
        assert_eq!(out, [10]);
        out.clear();
        put_integer(&mut out, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
    }

    #[test]
    fn later_calls_name_the_first_calls_fields_by_index() {
        let first = header_block("h:1", "/p", true);
        // :method, :scheme; then `:path` with its static name (index 4), added (pattern 01).
        assert_eq!(first[..5], [0x83, 0x86, 0x44, 2, b'/']);
        // te, the last field, has a literal name: pattern 01 with index 0.
        assert_eq!(first[first.len() - 13..first.len() - 10], [0x40, 2, b't']);
        let plain = header_block("h:1", "/p", false);
        assert_eq!(plain[2], 0x04, "not added: pattern 0000");
        // Four fields added: the last (te) is 62, the first (:path) 65.
        assert_eq!(
            indexed_block(4),
            [0x83, 0x86, 0x80 | 65, 0x80 | 64, 0x80 | 63, 0x80 | 62]
        );
    }

    #[test]
    fn padding_is_stripped_and_bounded() {
        assert_eq!(unpadded(&[2, 7, 8, 0, 0], frame::PADDED).unwrap(), &[7, 8]);
        assert!(unpadded(&[9, 1], frame::PADDED).is_err());
        assert_eq!(unpadded(&[1, 2], 0).unwrap(), &[1, 2]);
    }
}
