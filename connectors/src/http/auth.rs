//! Bearer-token auth: the token, how it is read from a file, and how a request's
//! `Authorization` header is checked against it.
//!
//! The token lives in a newtype whose `Debug` never prints it, so no config dump or log line
//! leaks it. The scheme is matched case-insensitively (RFC 7235), and the comparison takes time
//! that depends only on the length of what the client sent, never on the token's length or on
//! how many leading bytes matched.

use std::fmt;
use std::path::{Path, PathBuf};

use axum::http::{header, HeaderMap};
use tracing::warn;
use weir_engine::paths::{read_capped, FileError, FileRules};

/// A bearer token every endpoint but liveness requires.
#[derive(Clone)]
pub struct AuthToken(String);

impl fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

/// Why a token could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthTokenError {
    /// The token is empty (or only whitespace).
    #[error("the auth token is empty")]
    Empty,
    /// The token file could not be read.
    #[error("reading the auth token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The token file is not a regular file or is over the size cap.
    #[error("the auth token file: {0}")]
    File(#[from] FileError),
}

/// Largest token file read; a token is a few dozen bytes, anything far larger is a mistake.
const MAX_TOKEN_FILE_BYTES: u64 = 64 << 10;

impl AuthToken {
    /// A token from its text, trimmed of surrounding whitespace.
    ///
    /// # Errors
    /// When nothing is left after trimming.
    pub fn new(text: &str) -> Result<AuthToken, AuthTokenError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(AuthTokenError::Empty);
        }
        Ok(AuthToken(t.to_string()))
    }

    /// The token held in `path`, warning when other local users may read the file.
    ///
    /// # Errors
    /// When the file cannot be read, is not a regular file, is larger than 64 KiB, or holds an
    /// empty token.
    pub fn from_file(path: &Path) -> Result<AuthToken, AuthTokenError> {
        let read_err = |source| AuthTokenError::Read {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read_err)?;
        warn_if_shared(path, &meta);
        // Regular file only (a FIFO would block start-up), and never more than the cap read.
        let bytes = read_capped(path, MAX_TOKEN_FILE_BYTES, &FileRules::default())?;
        let text = String::from_utf8(bytes)
            .map_err(|e| read_err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        AuthToken::new(&text)
    }

    /// Whether `given` is this token, in time independent of the token's length.
    pub fn matches(&self, given: &str) -> bool {
        constant_time_eq(given.as_bytes(), self.0.as_bytes())
    }
}

#[cfg(unix)]
fn warn_if_shared(path: &Path, meta: &std::fs::Metadata) {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode();
    if mode & 0o044 != 0 {
        warn!(
            path = %path.display(),
            mode = format_args!("{:o}", mode & 0o777),
            "The auth token file is readable by group or others; chmod 600 it."
        );
    }
}

#[cfg(not(unix))]
fn warn_if_shared(_path: &Path, _meta: &std::fs::Metadata) {}

/// Compares every byte of `given` against the token (cycled), so the time taken depends only on
/// `given.len()`; a length mismatch is folded into the result rather than returned early.
fn constant_time_eq(given: &[u8], token: &[u8]) -> bool {
    if token.is_empty() {
        return false;
    }
    let mut diff = u8::from(given.len() != token.len());
    for (i, g) in given.iter().enumerate() {
        diff |= g ^ token[i % token.len()];
    }
    std::hint::black_box(diff) == 0
}

/// The credentials of an `Authorization: Bearer <token>` header value, scheme in any case.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim_matches(' '))
}

/// Whether `headers` carry `token` (always true without a token).
pub(crate) fn authorized(token: Option<&AuthToken>, headers: &HeaderMap) -> bool {
    let Some(token) = token else {
        return true;
    };
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .is_some_and(|given| token.matches(given))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, value.parse().expect("header value"));
        h
    }

    #[test]
    fn scheme_is_case_insensitive() {
        let t = AuthToken::new("s3cret").expect("token");
        for v in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "bEaReR  s3cret",
        ] {
            assert!(authorized(Some(&t), &headers(v)), "{v}");
        }
        for v in [
            "Basic s3cret",
            "Bearers3cret",
            "Bearer",
            "s3cret",
            "Bearer s3cre",
        ] {
            assert!(!authorized(Some(&t), &headers(v)), "{v}");
        }
        assert!(!authorized(Some(&t), &HeaderMap::new()));
        assert!(authorized(None, &HeaderMap::new()));
    }

    #[test]
    fn debug_never_prints_the_token() {
        let t = AuthToken::new("s3cret").expect("token");
        assert_eq!(format!("{t:?}"), "\"<redacted>\"");
        assert!(matches!(AuthToken::new("  \n"), Err(AuthTokenError::Empty)));
    }

    proptest! {
        #[test]
        fn only_the_exact_token_matches(token in "[!-~]{1,40}", given in "[!-~]{0,80}") {
            let t = AuthToken::new(&token).expect("token");
            prop_assert_eq!(t.matches(&given), given == token);
            prop_assert!(t.matches(&token));
        }
    }
}
