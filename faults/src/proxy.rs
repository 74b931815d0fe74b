//! A TCP fault proxy: what a link does to a stream that a namespace's link cannot show. The
//! kernel here has no `netem`, and a token bucket only slows a link; a proxy between a graph and
//! its executor adds latency, stalls a stream that stays open, and resets it, while both ends
//! keep running and see only their socket.
//!
//! Each accepted connection is dialled on to the target and pumped both ways by a reader and a
//! writer thread per direction, joined by a bounded queue of chunks stamped with the time they
//! were read:
//! - **delay**: a chunk is written no sooner than its stamp plus the delay, so latency is added
//!   without capping throughput (chunks read meanwhile wait in the queue, in order);
//! - **stall**: nothing is written; the queue fills, the reader stops reading and TCP's own flow
//!   control holds the sender, as a link that carries nothing does (memory stays bounded);
//! - **reset**: every connection open now is closed with an RST (`SO_LINGER` 0), both sides at
//!   once; connections made after it pass.
//!
//! Every thread polls with a short timeout, so a reset, a change of fault or the proxy's drop is
//! seen within tens of milliseconds.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the proxy does to the bytes it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Carries them as they come.
    Pass,
    /// Carries each chunk this long after it was read.
    Delay(Duration),
    /// Carries nothing; the streams stay open.
    Stall,
}

/// How often every thread looks at the fault, the reset count and the stop flag.
const POLL: Duration = Duration::from_millis(20);

/// Bytes read at once.
const CHUNK: usize = 64 * 1024;

/// Chunks queued per direction before the reader waits: 4 MiB at most in flight per direction.
const QUEUED: usize = 64;

/// A write that makes no progress this long ends the connection (the far end stopped reading).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Shared {
    fault: Mutex<Fault>,
    /// Raised by each reset: a connection made before it ends.
    resets: AtomicU64,
    stop: AtomicBool,
    accepted: AtomicU64,
}

impl Shared {
    fn fault(&self) -> Fault {
        *self.fault.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a connection made at reset count `born` must end.
    fn ended(&self, born: u64) -> bool {
        self.stop.load(Ordering::Acquire) || self.resets.load(Ordering::Acquire) != born
    }
}

/// A fault proxy on a free loopback port in front of one target.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Listens on a free port of 127.0.0.1 and carries every connection to `target`.
    pub fn start(target: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            fault: Mutex::new(Fault::Pass),
            resets: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("fault-proxy".into())
            .spawn(move || accept_loop(&listener, target, &s))?;
        Ok(FaultProxy {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the proxy does from now on, to open connections and new ones.
    pub fn set(&self, fault: Fault) {
        *self
            .shared
            .fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = fault;
    }

    /// Resets every connection open now.
    pub fn reset(&self) {
        self.shared.resets.fetch_add(1, Ordering::AcqRel);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Acquire)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, target: SocketAddr, shared: &Arc<Shared>) {
    let mut pumps: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((client, _)) => {
                shared.accepted.fetch_add(1, Ordering::AcqRel);
                if let Some(p) = connect(client, target, shared) {
                    pumps.extend(p);
                }
            }
            // Nothing to accept (or a failed accept): look again after a poll.
            Err(_) => std::thread::sleep(POLL),
        }
        pumps.retain(|p| !p.is_finished());
    }
    for p in pumps {
        let _ = p.join();
    }
}

/// Dials `target` for `client` and starts the four pump threads; `None` when the target cannot
/// be reached (the client's stream is dropped, as a dead host's would be refused).
fn connect(
    client: TcpStream,
    target: SocketAddr,
    shared: &Arc<Shared>,
) -> Option<Vec<JoinHandle<()>>> {
    let born = shared.resets.load(Ordering::Acquire);
    let server = TcpStream::connect_timeout(&target, Duration::from_secs(2)).ok()?;
    let mut threads = Vec::with_capacity(4);
    for (from, to) in [(&client, &server), (&server, &client)] {
        let (tx, rx) = sync_channel::<(Instant, Vec<u8>)>(QUEUED);
        let (reader, writer) = (prepare(from)?, prepare(to)?);
        let s = Arc::clone(shared);
        threads.push(std::thread::spawn(move || read_loop(reader, &tx, &s, born)));
        let s = Arc::clone(shared);
        threads.push(std::thread::spawn(move || {
            write_loop(writer, &rx, &s, born)
        }));
    }
    Some(threads)
}

/// A clone of `stream` with the timeouts the pumps poll by.
fn prepare(stream: &TcpStream) -> Option<TcpStream> {
    let s = stream.try_clone().ok()?;
    s.set_nodelay(true).ok()?;
    s.set_read_timeout(Some(POLL)).ok()?;
    s.set_write_timeout(Some(WRITE_TIMEOUT)).ok()?;
    Some(s)
}

/// Ends a connection with an RST: the last descriptor closed with `SO_LINGER` 0 sends one.
fn abort(stream: &TcpStream) {
    let _ = socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO));
    let _ = stream.shutdown(Shutdown::Read);
}

fn read_loop(mut from: TcpStream, to: &SyncSender<(Instant, Vec<u8>)>, shared: &Shared, born: u64) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        if shared.ended(born) {
            abort(&from);
            return;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return,
        };
        let mut chunk = (Instant::now(), buf[..n].to_vec());
        loop {
            match to.try_send(chunk) {
                Ok(()) => break,
                Err(TrySendError::Full(c)) => {
                    if shared.ended(born) {
                        abort(&from);
                        return;
                    }
                    chunk = c;
                    std::thread::sleep(POLL);
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
    }
}

fn write_loop(mut to: TcpStream, from: &Receiver<(Instant, Vec<u8>)>, shared: &Shared, born: u64) {
    loop {
        if shared.ended(born) {
            abort(&to);
            return;
        }
        if shared.fault() == Fault::Stall {
            std::thread::sleep(POLL);
            continue;
        }
        let (read_at, bytes) = match from.recv_timeout(POLL) {
            Ok(c) => c,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => {
                // The other side closed its stream: pass the end on.
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
        };
        // Wait out the delay (and any stall begun meanwhile), a poll at a time.
        loop {
            if shared.ended(born) {
                abort(&to);
                return;
            }
            let due = match shared.fault() {
                Fault::Pass => break,
                Fault::Delay(d) => read_at + d,
                Fault::Stall => Instant::now() + POLL,
            };
            let now = Instant::now();
            if due <= now {
                break;
            }
            std::thread::sleep((due - now).min(POLL));
        }
        if to.write_all(&bytes).is_err() {
            abort(&to);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on a free port, serving one connection at a time until dropped.
    fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut s = s;
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn round_trip(c: &mut TcpStream, text: &[u8]) -> std::io::Result<Vec<u8>> {
        c.write_all(text)?;
        let mut got = vec![0u8; text.len()];
        c.read_exact(&mut got)?;
        Ok(got)
    }

    #[test]
    fn it_carries_stalls_and_resets_a_stream() {
        let proxy = FaultProxy::start(echo()).expect("proxy");
        let mut c = TcpStream::connect(proxy.addr()).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert_eq!(round_trip(&mut c, b"hello").expect("carried"), b"hello");

        proxy.set(Fault::Stall);
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        c.write_all(b"held").expect("written");
        let mut buf = [0u8; 4];
        assert!(c.read_exact(&mut buf).is_err(), "nothing crosses a stall");
        proxy.set(Fault::Pass);
        c.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        c.read_exact(&mut buf).expect("carried once the stall ends");
        assert_eq!(&buf, b"held");

        proxy.set(Fault::Delay(Duration::from_millis(50)));
        assert_eq!(round_trip(&mut c, b"late").expect("delayed"), b"late");
        proxy.set(Fault::Pass);

        proxy.reset();
        let mut one = [0u8; 1];
        let reset = c.read(&mut one);
        assert!(
            matches!(&reset, Err(e) if e.kind() == ErrorKind::ConnectionReset)
                || matches!(reset, Ok(0)),
            "the stream ends: {reset:?}"
        );
        let mut again = TcpStream::connect(proxy.addr()).expect("reconnect");
        again
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert_eq!(
            round_trip(&mut again, b"again").expect("new stream"),
            b"again"
        );
        assert_eq!(proxy.accepted(), 2);
    }
}
