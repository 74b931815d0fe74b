//! TLS on the HTTP and gRPC listeners, with rustls: one certificate chain and key for both, and
//! optionally a CA that client certificates must chain to (mutual TLS).
//!
//! - `config.rs`: the PEM files read (regular files, each capped) and turned into rustls server
//!   configurations, one per listener's ALPN (`http/1.1` for HTTP, `h2` for gRPC, which needs it);
//! - `reload.rs`: [`ServerTls`], the configurations in use, swapped whole when the files change
//!   (on SIGHUP, or when a poll sees their modification time, size or inode change). A swap only
//!   affects handshakes that start after it: open connections keep the session they negotiated.
//!   A reload that fails keeps the configuration in use and logs an error naming the file;
//! - `accept.rs`: one accepted TCP connection through the handshake, under the listener's
//!   header/idle timeout so a client that never finishes it cannot hold a connection slot. A
//!   client that speaks plaintext to a TLS port is told so (HTTP: a plain 400) and closed at once.
//!
//! The listeners (`http/listener.rs`, `grpc/listener.rs`) call `accept` for every connection and
//! serve what it returns, a `Conn`, plain or encrypted alike.

mod accept;
mod config;
mod reload;

pub(crate) use accept::{accept, Conn, Plaintext};
pub use config::{TlsError, TlsFiles};
pub use reload::{Alpn, ServerTls, RELOAD_POLL};
