//! HTTP Basic credentials (RFC 7617): the password of an `Authorization: Basic <base64>` header,
//! decoded without a dependency. The header's length is capped before anything is decoded.

/// Longest credentials decoded; a token is a few dozen bytes.
const MAX_ENCODED: usize = 4096;

/// The password of a `Basic` header value (scheme in any case), or `None` when it is not one.
pub(super) fn password(value: &str) -> Option<String> {
    let (scheme, rest) = value.trim_start().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let encoded = rest.trim();
    if encoded.len() > MAX_ENCODED {
        return None;
    }
    let decoded = String::from_utf8(decode(encoded)?).ok()?;
    decoded.split_once(':').map(|(_, p)| p.to_string())
}

/// Standard base64 with padding; `None` on any other character or a bad length.
fn decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let chunks = bytes.chunks(4);
    let last = chunks.len().saturating_sub(1);
    for (i, chunk) in chunks.enumerate() {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i != last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let three = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&three[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_basic_credentials() {
        assert_eq!(password("Basic dTpw").as_deref(), Some("p")); // "u:p"
        assert_eq!(password("basic dTpwdw==").as_deref(), Some("pw")); // "u:pw"
        assert_eq!(password("Basic OnB3eA==").as_deref(), Some("pwx")); // ":pwx"
        for bad in [
            "Bearer dTpw",
            "Basic dTp",
            "Basic d=pw",
            "Basic ****",
            "Basic dXNlcg==",
        ] {
            assert_eq!(password(bad), None, "{bad}");
        }
        assert_eq!(password(&format!("Basic {}", "A".repeat(8192))), None);
    }
}
