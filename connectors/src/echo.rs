//! Client text quoted back in errors, cut to a bound.
//!
//! An error names what was wrong, and often quotes the client's own text to do so (an input
//! name, a datatype, an excerpt of a JSON parser's complaint). Quoted verbatim, a 5 MB input name
//! becomes a 5 MB error body, and every log line and metric label that carries it grows alike.
//! [`quote`] cuts any one quoted piece to [`QUOTE_MAX_CHARS`]; [`cap_error`] is the final cap on a
//! whole error text, applied where an error leaves the process (the HTTP error body, the stream
//! error document), so no path that forgot to quote can send an unbounded error.

use std::borrow::Cow;

/// Characters of client text one error quotes: enough to recognise a name or read a parser's
/// complaint, small enough that an error stays a line.
pub const QUOTE_MAX_CHARS: usize = 256;

/// Bytes of one error text, at most: room for a field path and several quoted pieces.
pub const ERROR_MAX_BYTES: usize = 4096;

/// Marks a cut.
const ELLIPSIS: char = '…';

/// `text` cut to [`QUOTE_MAX_CHARS`] characters (on a char boundary), with `…` when cut.
pub fn quote(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(QUOTE_MAX_CHARS) {
        None => Cow::Borrowed(text),
        Some((end, _)) => {
            let mut cut = String::with_capacity(end + ELLIPSIS.len_utf8());
            cut.push_str(&text[..end]);
            cut.push(ELLIPSIS);
            Cow::Owned(cut)
        }
    }
}

/// `text` cut to at most [`ERROR_MAX_BYTES`] bytes (on a char boundary, `…` included).
pub fn cap_error(mut text: String) -> String {
    if text.len() <= ERROR_MAX_BYTES {
        return text;
    }
    let mut end = ERROR_MAX_BYTES - ELLIPSIS.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push(ELLIPSIS);
    text
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn short_text_is_kept() {
        assert_eq!(quote("pixels"), "pixels");
        assert_eq!(cap_error("x: bad".into()), "x: bad");
    }

    proptest! {
        #[test]
        fn quotes_and_errors_stay_under_their_bounds(text in "\\PC{0,700}", repeat in 1usize..20) {
            let long = text.repeat(repeat);
            let q = quote(&long);
            prop_assert!(q.chars().count() <= QUOTE_MAX_CHARS + 1);
            prop_assert!(long.starts_with(q.trim_end_matches(ELLIPSIS)));
            let e = cap_error(long.clone());
            prop_assert!(e.len() <= ERROR_MAX_BYTES);
            prop_assert!(long.starts_with(e.trim_end_matches(ELLIPSIS)) || e == long);
        }
    }
}
