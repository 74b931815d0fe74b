//! W3C Trace Context (`traceparent`, `tracestate`) and the sampling decision a front end takes for
//! each request.
//!
//! The decision is OpenTelemetry's `ParentBased(TraceIdRatioBased(ratio))`: a request whose
//! client sent a valid `traceparent` follows the client's `sampled` flag; a request without one (or
//! with a malformed one, which is ignored rather than refused) starts a new trace, sampled when
//! the trace id falls under the ratio (the same test OpenTelemetry's SDKs make on the id's low 63
//! bits, so every process decides alike for one trace id).

use std::sync::Arc;

/// Longest `tracestate` kept (the W3C limit is 32 members of at most 256 characters; a longer
/// header is dropped, not cut).
pub const TRACESTATE_MAX_BYTES: usize = 512;

/// The identity of one span within its trace, as a `traceparent` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanContext {
    /// The trace, 16 bytes, not all zero.
    pub trace_id: [u8; 16],
    /// The span, 8 bytes, not all zero.
    pub span_id: [u8; 8],
    /// Whether the trace is sampled (flag bit 0).
    pub sampled: bool,
}

impl SpanContext {
    /// Parses a `traceparent` header value (`00-<32 hex>-<16 hex>-<2 hex>`). `None` for anything
    /// malformed: a wrong length or separator, upper-case or non-hex digits, an all-zero id, or
    /// version `ff`. A later version is read by its first four fields, as the specification asks.
    pub fn parse(value: &str) -> Option<SpanContext> {
        let value = value.trim();
        let b = value.as_bytes();
        if b.len() < 55 || !value.is_char_boundary(55) {
            return None;
        }
        if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let version = hex_bytes::<1>(&value[0..2])?;
        match version[0] {
            0xff => return None,
            // Version 00 is exactly 55 characters; a later one may add fields after a dash.
            0x00 if b.len() != 55 => return None,
            _ if b.len() > 55 && b[55] != b'-' => return None,
            _ => {}
        }
        let trace_id = hex_bytes::<16>(&value[3..35])?;
        let span_id = hex_bytes::<8>(&value[36..52])?;
        let flags = hex_bytes::<1>(&value[53..55])?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(SpanContext {
            trace_id,
            span_id,
            sampled: flags[0] & 1 == 1,
        })
    }

    /// The `traceparent` header value naming this span.
    pub fn traceparent(&self) -> String {
        let mut s = String::with_capacity(55);
        s.push_str("00-");
        push_hex(&mut s, &self.trace_id);
        s.push('-');
        push_hex(&mut s, &self.span_id);
        s.push_str(if self.sampled { "-01" } else { "-00" });
        s
    }

    /// The trace id as 32 lower-case hex digits (how logs and collectors show it).
    pub fn trace_id_hex(&self) -> String {
        let mut s = String::with_capacity(32);
        push_hex(&mut s, &self.trace_id);
        s
    }
}

/// `N` bytes from exactly `2N` lower-case hex digits.
fn hex_bytes<const N: usize>(text: &str) -> Option<[u8; N]> {
    let b = text.as_bytes();
    if b.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (digit(b[2 * i])? << 4) | digit(b[2 * i + 1])?;
    }
    Some(out)
}

fn push_hex(s: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
}

/// What a front end decided for one request: the trace it belongs to, the id of its server span
/// (the `traceparent` the response carries), the client's span when it sent one, and whether
/// the request is sampled (its spans recorded and exported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTrace {
    /// The request's server span: trace id, its own span id, the sampling decision.
    pub span: SpanContext,
    /// The client's span (the server span's parent), when the request carried a valid
    /// `traceparent`.
    pub parent: Option<[u8; 8]>,
    /// The client's `tracestate`, passed on unchanged (bounded by [`TRACESTATE_MAX_BYTES`]).
    pub state: Option<Arc<str>>,
}

/// The sampling rule of a front end: OpenTelemetry's `ParentBased(TraceIdRatioBased(ratio))`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    /// Bound on the trace id's low 63 bits below which a new trace is sampled.
    bound: u64,
}

impl Sampler {
    /// Samples new traces at `ratio` (clamped to `0..=1`); a client's decision is always
    /// followed.
    pub fn new(ratio: f64) -> Sampler {
        let ratio = if ratio.is_nan() {
            0.0
        } else {
            ratio.clamp(0.0, 1.0)
        };
        let bound = if ratio >= 1.0 {
            u64::MAX
        } else {
            (ratio * (1u64 << 63) as f64) as u64
        };
        Sampler { bound }
    }

    /// Whether a new trace of id `trace_id` is sampled.
    pub fn samples(&self, trace_id: &[u8; 16]) -> bool {
        let mut low = [0u8; 8];
        low.copy_from_slice(&trace_id[8..]);
        (u64::from_be_bytes(low) >> 1) < self.bound
    }

    /// Decides for a request that carried `traceparent` and `tracestate` (header values, if
    /// sent). A missing or malformed `traceparent` starts a new trace; it never fails the
    /// request.
    pub fn decide(&self, traceparent: Option<&str>, tracestate: Option<&str>) -> RequestTrace {
        let span_id = new_span_id();
        match traceparent.and_then(SpanContext::parse) {
            Some(parent) => RequestTrace {
                span: SpanContext {
                    trace_id: parent.trace_id,
                    span_id,
                    sampled: parent.sampled,
                },
                parent: Some(parent.span_id),
                state: tracestate
                    .map(str::trim)
                    .filter(|s| !s.is_empty() && s.len() <= TRACESTATE_MAX_BYTES)
                    .map(Arc::from),
            },
            None => {
                let trace_id = new_trace_id();
                RequestTrace {
                    span: SpanContext {
                        trace_id,
                        span_id,
                        sampled: self.samples(&trace_id),
                    },
                    parent: None,
                    state: None,
                }
            }
        }
    }
}

/// A random trace id (never all zero).
pub fn new_trace_id() -> [u8; 16] {
    loop {
        let id: [u8; 16] = rand::random();
        if id != [0; 16] {
            return id;
        }
    }
}

/// A random span id (never all zero).
pub fn new_span_id() -> [u8; 8] {
    loop {
        let id: [u8; 8] = rand::random();
        if id != [0; 8] {
            return id;
        }
    }
}

/// The span id of what node `node` did in its batch `seq` for trace `trace_id`: derived, not
/// stored, so any process holding the three (the graph at its egress, the model operator that
/// carries the context to a remote executor) names the same span. A mix of the three through
/// SplitMix64's finaliser; never zero.
pub fn hop_span_id(trace_id: &[u8; 16], node: u32, seq: u64) -> [u8; 8] {
    let mut hi = [0u8; 8];
    let mut lo = [0u8; 8];
    hi.copy_from_slice(&trace_id[..8]);
    lo.copy_from_slice(&trace_id[8..]);
    let mut x = mix(u64::from_be_bytes(hi) ^ mix(u64::from_be_bytes(lo)));
    x = mix(x ^ u64::from(node).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    x = mix(x ^ seq);
    if x == 0 {
        x = 1;
    }
    x.to_be_bytes()
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let c = SpanContext::parse(VALID).unwrap();
        assert!(c.sampled);
        assert_eq!(c.traceparent(), VALID);
        assert_eq!(c.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let unsampled = SpanContext::parse(&VALID.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled);
        // A later version with an extra field is read by its first four.
        let later = format!("01{}-extra", &VALID[2..]);
        assert_eq!(SpanContext::parse(&later).unwrap().trace_id, c.trace_id);
    }

    #[test]
    fn malformed_traceparents_are_refused() {
        let bad: Vec<String> = vec![
            String::new(),
            "garbage".into(),
            VALID[..54].into(),
            format!("{VALID}0"),
            VALID.replace('4', "G"),
            VALID.to_uppercase(),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01".into(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01".into(),
            format!("ff{}", &VALID[2..]),
            VALID.replace('-', "_"),
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01".into(),
        ];
        for bad in &bad {
            assert_eq!(SpanContext::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_sampler_follows_a_parent_and_the_ratio_for_roots() {
        let never = Sampler::new(0.0);
        let always = Sampler::new(1.0);
        let t = never.decide(Some(VALID), Some("k=v"));
        assert!(t.span.sampled, "a sampled parent is honoured at ratio 0");
        assert_eq!(t.parent, Some(SpanContext::parse(VALID).unwrap().span_id));
        assert_eq!(t.state.as_deref(), Some("k=v"));
        assert_ne!(t.span.span_id, t.parent.unwrap());
        let unsampled = VALID.replace("-01", "-00");
        let t = always.decide(Some(unsampled.as_str()), None);
        assert!(
            !t.span.sampled,
            "an unsampled parent is honoured at ratio 1"
        );
        let t = always.decide(Some("nonsense"), None);
        assert!(
            t.span.sampled && t.parent.is_none(),
            "malformed: a new root"
        );
        assert!(!never.decide(None, None).span.sampled);
        let half = Sampler::new(0.5);
        let sampled = (0..2000)
            .filter(|_| half.decide(None, None).span.sampled)
            .count();
        assert!((800..1200).contains(&sampled), "{sampled} of 2000");
    }

    #[test]
    fn hop_span_ids_are_stable_and_distinct() {
        let t = [7u8; 16];
        assert_eq!(hop_span_id(&t, 3, 9), hop_span_id(&t, 3, 9));
        assert_ne!(hop_span_id(&t, 3, 9), hop_span_id(&t, 3, 10));
        assert_ne!(hop_span_id(&t, 3, 9), hop_span_id(&t, 4, 9));
        assert_ne!(hop_span_id(&t, 3, 9), hop_span_id(&[8u8; 16], 3, 9));
    }
}
