//! Where weir's logs go and how they look: `tracing` events on stderr, as text or as one JSON
//! object per line (`--log-format`), filtered by `WEIR_LOG` (an `EnvFilter` directive list).
//!
//! The default filter, [`DEFAULT_FILTER`], keeps other crates' chatter at `warn` and lets the
//! access log (`weir::access`, one event per HTTP request and gRPC call) through at `info`.
//! `WEIR_LOG` replaces it whole; a serve started with `--no-access-log` adds
//! `weir::access=off` to whichever filter is in force. JSON lines carry the event's fields at the
//! top level beside `timestamp`, `level`, `target` and `message`, so a log shipper reads an
//! access-log line's `status` or `latency_ms` without unpacking anything. Text is coloured only
//! when stderr is a terminal.

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// The filter when `WEIR_LOG` is not set.
pub const DEFAULT_FILTER: &str = "warn,weir::access=info";

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The filter: `WEIR_LOG`, else [`DEFAULT_FILTER`]; the access log off when `access_log` is false.
fn filter(access_log: bool) -> EnvFilter {
    let filter =
        EnvFilter::try_from_env("WEIR_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    if access_log {
        return filter;
    }
    match "weir::access=off".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// Logs to stderr in `format`, filtered as the module docs say. A second call does nothing.
pub fn init(format: LogFormat, access_log: bool) {
    use std::io::IsTerminal;
    // Colours only for a person at a terminal; a file or a log shipper gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter(access_log))
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    // `try_init` fails only when a subscriber is already set (a benchmark started one).
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
