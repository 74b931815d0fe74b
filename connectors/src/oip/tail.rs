//! The binary part of a request body decoded as it arrives: each input's bytes go straight into
//! its typed elements, which become the Arrow column ONNX Runtime reads in place. A tensor is
//! copied once between the transport's read buffers and the model, with no contiguous body in
//! between and no second pass over it.
//!
//! Only a layout [`super::binary_layout`] accepted is decoded this way (fixed-width types whose
//! every bit pattern is an element, sizes that add up); the transport reads any other body
//! whole, and [`super::parse_infer_request`] names what is wrong with it. The decoded parts go
//! through the same parser as whole bodies ([`super::parse_infer_request_split`]).
//!
//! Sizes: the layout's sizes add up to the bytes the transport declared and already charged to
//! its budget, so reserving each part up front allocates nothing the client has not been
//! allowed; bytes past the layout are refused, and a body that ends early is told apart.

use weir_engine::tensor::{DType, TensorData};

use super::element::{for_dtype, OipElement};

/// Why the bytes did not fill the layout exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TailError {
    /// More bytes arrived than the layout holds.
    #[error("more binary bytes than the header's sizes")]
    Overrun,
    /// The body ended before the layout was filled.
    #[error("the body ended inside the binary data")]
    Short,
}

/// Decodes the binary inputs of one body from the chunks the transport receives, in order.
#[derive(Debug)]
pub struct TailDecoder {
    /// Each binary input's elements so far, with its size in bytes.
    parts: Vec<(TensorData, usize)>,
    /// The part being filled (parts before it are full).
    current: usize,
    /// Bytes of the current part received.
    filled: usize,
    /// The start of an element split between two chunks.
    carry: [u8; 8],
    carry_len: usize,
}

impl TailDecoder {
    /// A decoder for `layout` (element type and byte size per binary input, as
    /// [`super::binary_layout`] returns it), each part's elements reserved up front.
    pub fn new(layout: &[(DType, usize)]) -> TailDecoder {
        let parts = layout
            .iter()
            .map(|&(dtype, size)| {
                let n = size / dtype.byte_width().unwrap_or(1);
                (for_dtype!(dtype, T => T::wrap(Vec::with_capacity(n))), size)
            })
            .collect();
        let mut decoder = TailDecoder {
            parts,
            current: 0,
            filled: 0,
            carry: [0; 8],
            carry_len: 0,
        };
        decoder.skip_full();
        decoder
    }

    /// Moves past the parts already full (those of 0 bytes, or the one just completed).
    fn skip_full(&mut self) {
        while self
            .parts
            .get(self.current)
            .is_some_and(|&(_, size)| self.filled == size)
        {
            self.current += 1;
            self.filled = 0;
        }
    }

    /// Decodes the next `bytes` of the binary data.
    ///
    /// # Errors
    /// [`TailError::Overrun`] when they pass the layout's end.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<(), TailError> {
        while !bytes.is_empty() {
            let Some((part, size)) = self.parts.get_mut(self.current) else {
                return Err(TailError::Overrun);
            };
            let width = part.dtype().byte_width().unwrap_or(1);
            let take = (*size - self.filled).min(bytes.len());
            let (mut mine, rest) = bytes.split_at(take);
            bytes = rest;
            self.filled += take;
            if self.carry_len > 0 {
                let n = (width - self.carry_len).min(mine.len());
                self.carry[self.carry_len..self.carry_len + n].copy_from_slice(&mine[..n]);
                self.carry_len += n;
                mine = &mine[n..];
                if self.carry_len == width {
                    append_le(part, &self.carry[..width]);
                    self.carry_len = 0;
                }
            }
            let whole = mine.len() - mine.len() % width;
            append_le(part, &mine[..whole]);
            let split = &mine[whole..];
            self.carry[..split.len()].copy_from_slice(split);
            self.carry_len += split.len();
            self.skip_full();
        }
        Ok(())
    }

    /// The binary inputs' elements, in input order.
    ///
    /// # Errors
    /// [`TailError::Short`] when the layout is not filled.
    pub fn finish(self) -> Result<Vec<TensorData>, TailError> {
        if self.current < self.parts.len() {
            return Err(TailError::Short);
        }
        Ok(self.parts.into_iter().map(|(data, _)| data).collect())
    }
}

/// Appends the little-endian elements `bytes` holds (a whole number of them) to `data`.
fn append_le(data: &mut TensorData, bytes: &[u8]) {
    macro_rules! arms {
        ($($variant:ident),*) => {
            match data {
                $(TensorData::$variant(v) => {
                    OipElement::extend_le(v, bytes);
                })*
                // Refused by the layout: never decoded here.
                TensorData::Bool(_) | TensorData::Bytes(_) => {}
            }
        };
    }
    arms!(U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64, Bf16);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::oip::{binary_layout, parse_infer_request, parse_infer_request_split};

    /// A binary body of an FP32 [2, 3] input, an INT64 [2] input, a JSON input and an FP16 [1]
    /// input, and its header's length.
    fn body() -> (Vec<u8>, usize) {
        let header = br#"{"inputs":[{"name":"a","shape":[2,3],"datatype":"FP32","parameters":{"binary_data_size":24}},{"name":"b","shape":[2],"datatype":"INT64","parameters":{"binary_data_size":16}},{"name":"c","shape":[1],"datatype":"INT32","data":[7]},{"name":"d","shape":[1],"datatype":"FP16","parameters":{"binary_data_size":2}}]}"#;
        let mut body = header.to_vec();
        for x in [1.5f32, -2.0, 3.25, f32::NAN, 0.0, 1e30] {
            body.extend_from_slice(&x.to_le_bytes());
        }
        for x in [i64::MIN, 42] {
            body.extend_from_slice(&x.to_le_bytes());
        }
        body.extend_from_slice(&half::f16::from_f32(0.5).to_le_bytes());
        (body, header.len())
    }

    proptest! {
        #[test]
        fn any_chunking_decodes_as_the_whole_body(cuts in proptest::collection::vec(0usize..60, 0..8)) {
            let (body, n) = body();
            let (json, tail) = body.split_at(n);
            let layout = binary_layout(json, tail.len()).expect("a decodable layout");
            let mut decoder = TailDecoder::new(&layout);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(tail.len())).collect();
            cuts.sort_unstable();
            let mut at = 0;
            for c in cuts.into_iter().chain([tail.len()]) {
                decoder.push(&tail[at..c]).unwrap();
                at = c;
            }
            let split = parse_infer_request_split(json, decoder.finish().unwrap(), tail.len()).unwrap();
            let whole = parse_infer_request(&body, Some(n)).unwrap();
            // NaN != NaN: compare the bits.
            prop_assert_eq!(format!("{split:?}"), format!("{whole:?}"));
        }
    }

    #[test]
    fn bytes_past_the_layout_or_short_of_it_are_refused() {
        let (body, n) = body();
        let (json, tail) = body.split_at(n);
        let layout = binary_layout(json, tail.len()).unwrap();
        let mut over = TailDecoder::new(&layout);
        over.push(tail).unwrap();
        assert_eq!(over.push(&[0]), Err(TailError::Overrun));
        let mut short = TailDecoder::new(&layout);
        short.push(&tail[..tail.len() - 1]).unwrap();
        assert_eq!(short.finish().err(), Some(TailError::Short));
    }

    #[test]
    fn layouts_it_cannot_decode_are_left_to_the_whole_body_parser() {
        let cases: [(&[u8], usize); 5] = [
            // BOOL bytes must be checked one by one.
            (br#"{"inputs":[{"name":"a","shape":[1],"datatype":"BOOL","parameters":{"binary_data_size":1}}]}"#, 1),
            // Sizes that do not add up to the tail.
            (br#"{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]}"#, 8),
            // A size that is not the shape's.
            (br#"{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":4}}]}"#, 4),
            // Not JSON.
            (b"{", 0),
            // Both data and a binary size.
            (br#"{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4}}]}"#, 4),
        ];
        for (json, tail) in cases {
            assert_eq!(
                binary_layout(json, tail),
                None,
                "{}",
                String::from_utf8_lossy(json)
            );
        }
    }
}
