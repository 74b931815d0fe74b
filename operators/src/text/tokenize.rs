//! `tokenize`: one UTF-8 text per request into `input_ids` and `attention_mask` (`i64`, one
//! length per request) with a Hugging Face tokenizer, special tokens added.
//!
//! A text longer than the node's `max_length` tokens is refused rather than truncated: a cut text
//! gives a confident answer about words the model never saw, and the client can shorten it
//! knowingly. Before tokenizing, a text of more than [`MAX_BYTES_PER_TOKEN`] bytes per allowed
//! token is refused, so a hostile megabyte costs nothing to turn away.

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;
use weir_engine::validate::TokenizerFile;

/// Bytes of text allowed per token of `max_length` (no common tokenizer averages near it).
pub const MAX_BYTES_PER_TOKEN: usize = 64;

/// Token ids and attention masks of every row's text.
///
/// # Errors
/// A message naming the row: not one BYTES element, not UTF-8, longer than `max_length` tokens
/// (or its bytes over the cap), or the tokenizer failing.
pub fn tokenize(
    tokenizer: &TokenizerFile,
    max_length: usize,
    input: &TensorColumn,
) -> Result<Vec<TensorColumn>, String> {
    let TensorData::Bytes(texts) = input.data() else {
        return Err(format!("tokenize needs BYTES, got {}", input.dtype()));
    };
    let max_bytes = max_length.saturating_mul(MAX_BYTES_PER_TOKEN);
    let mut ids = Vec::new();
    let mut mask = Vec::new();
    let mut shapes = Vec::with_capacity(input.len());
    for r in 0..input.len() {
        let range = input.row_range(r);
        if range.len() != 1 {
            return Err(format!("row {r}: {} texts, expected one", range.len()));
        }
        let bytes = &texts[range.start];
        if bytes.len() > max_bytes {
            return Err(format!(
                "row {r}: the text is {} bytes, over the {max_bytes} allowed for max_length {max_length}",
                bytes.len()
            ));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| format!("row {r}: not UTF-8: {e}"))?;
        let encoding = tokenizer
            .tokenizer
            .encode(text, true)
            .map_err(|e| format!("row {r}: tokenizer failed: {e}"))?;
        let n = encoding.get_ids().len();
        if n > max_length {
            return Err(format!(
                "row {r}: the text is {n} tokens, over max_length {max_length}"
            ));
        }
        ids.extend(encoding.get_ids().iter().map(|&i| i64::from(i)));
        mask.extend(encoding.get_attention_mask().iter().map(|&m| i64::from(m)));
        shapes.push(vec![n]);
    }
    let column = |name: &str, data: Vec<i64>| {
        TensorColumn::from_ragged(name, shapes.clone(), TensorData::I64(data))
            .map_err(|e| e.to_string())
    };
    Ok(vec![
        column("input_ids", ids)?,
        column("attention_mask", mask)?,
    ])
}
