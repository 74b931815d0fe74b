//! `detokenize`: each request's token ids back into a text with a Hugging Face tokenizer's
//! decoder (word pieces joined, byte-level tokens turned back into UTF-8, …).
//!
//! An id the tokenizer's vocabulary does not hold is left out of the text, as the Hugging Face
//! library's `decode` does; an id that is negative or past `u32` cannot be a token and fails the
//! request. The text is at most the ids' count times the longest token, so its size follows the
//! input's, which the request limits already bound.

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;
use weir_engine::validate::TokenizerFile;

/// The text of every row's ids, one BYTES element per row.
///
/// # Errors
/// A message naming the row: ids not i64, an id outside `u32`, or the decoder failing.
pub fn detokenize(
    tokenizer: &TokenizerFile,
    skip_special_tokens: bool,
    input: &TensorColumn,
) -> Result<Vec<TensorColumn>, String> {
    let x = input
        .i64_values()
        .ok_or_else(|| format!("detokenize needs i64 token ids, got {}", input.dtype()))?;
    let rows = input.len();
    let mut texts = Vec::with_capacity(rows);
    for r in 0..rows {
        let ids = x[input.row_range(r)]
            .iter()
            .map(|&id| u32::try_from(id).map_err(|_| format!("row {r}: {id} is not a token id")))
            .collect::<Result<Vec<u32>, String>>()?;
        let text = tokenizer
            .tokenizer
            .decode(&ids, skip_special_tokens)
            .map_err(|e| format!("row {r}: the tokenizer's decoder failed: {e}"))?;
        texts.push(text.into_bytes());
    }
    let column = TensorColumn::from_data("text", vec![], rows, TensorData::Bytes(texts))
        .map_err(|e| e.to_string())?;
    Ok(vec![column])
}
