//! Hostile bodies against the parser: the shape bombs, nesting and oversized text that broke
//! it, then proptest fuzzing over arbitrary bytes and structured mutations (random shapes with
//! zero, huge and wrapping dimensions, datatypes, nested data, binary header lengths and
//! `binary_data_size` values). Properties: never panics; what it accepts holds exactly the
//! shape's element count, never more elements than the body has bytes; valid requests
//! round-trip.

use proptest::prelude::*;

use super::*;
use crate::echo::{ERROR_MAX_BYTES, QUOTE_MAX_CHARS};
use weir_engine::tensor::TensorData;

fn field_of(body: &str) -> String {
    parse_infer_request(body.as_bytes(), None)
        .unwrap_err()
        .field
}

#[test]
fn shape_bombs_are_refused_naming_the_shape() {
    let data64 = format!("[{}]", vec!["1"; 64].join(","));
    for (shape, data) in [
        ("[1099511627776,0]", "[]".to_string()),
        ("[288230376151711745,64]", data64),
        ("[4611686018427387904,0]", "[]".to_string()),
        ("[18446744073709551615,2]", "[1]".to_string()),
        ("[4294967296,4294967296,0]", "[]".to_string()),
        ("[1.5]", "[1]".to_string()),
    ] {
        let body = format!(
            r#"{{"inputs":[{{"name":"pixels","shape":{shape},"datatype":"FP32","data":{data}}}]}}"#
        );
        assert_eq!(field_of(&body), "inputs[0] (pixels).shape", "{shape}");
    }
    // A count that fits sizes nothing: the data decides, and is named.
    let body =
        r#"{"inputs":[{"name":"x","shape":[18446744073709551615],"datatype":"FP32","data":[1]}]}"#;
    let err = parse_infer_request(body.as_bytes(), None).unwrap_err();
    assert_eq!(err.field, "inputs[0] (x).data");
    assert!(err
        .message
        .contains("needs 18446744073709551615 elements, got 1"));
}

#[test]
fn binary_shapes_are_checked_against_binary_data_size() {
    let header = r#"{"inputs":[{"name":"x","shape":[1099511627776,0],"datatype":"INT64","parameters":{"binary_data_size":8}}]}"#;
    let mut body = header.as_bytes().to_vec();
    body.extend_from_slice(&[0; 8]);
    let err = parse_infer_request(&body, Some(header.len())).unwrap_err();
    assert_eq!(err.field, "inputs[0] (x).shape");
    let header = r#"{"inputs":[{"name":"x","shape":[1099511627776,2],"datatype":"INT64","parameters":{"binary_data_size":8}}]}"#;
    let mut body = header.as_bytes().to_vec();
    body.extend_from_slice(&[0; 8]);
    let err = parse_infer_request(&body, Some(header.len())).unwrap_err();
    assert_eq!(err.field, "inputs[0] (x).parameters.binary_data_size");
    let header = r#"{"inputs":[{"name":"x","shape":[1],"datatype":"INT64","parameters":{"binary_data_size":18446744073709551615}}]}"#;
    let err = parse_infer_request(header.as_bytes(), Some(header.len())).unwrap_err();
    assert_eq!(err.field, "inputs[0] (x).parameters.binary_data_size");
}

#[test]
fn nested_data_stops_at_the_shapes_count() {
    let body =
        r#"{"inputs":[{"name":"x","shape":[2,2],"datatype":"INT64","data":[[1,2],[3,4],[5,6]]}]}"#;
    let err = parse_infer_request(body.as_bytes(), None).unwrap_err();
    assert_eq!(err.field, "inputs[0] (x).data");
    assert!(
        err.message.contains("more than the shape's 4"),
        "{}",
        err.message
    );
    let body = r#"{"inputs":[{"name":"x","shape":[3],"datatype":"INT64","data":[[1],[2,[3]]]}]}"#;
    let r = parse_infer_request(body.as_bytes(), None).unwrap();
    assert_eq!(r.inputs[0].data, TensorData::I64(vec![1, 2, 3]));
    let body = r#"{"inputs":[{"name":"x","shape":[2],"datatype":"INT64","data":[1,2.5]}]}"#;
    assert!(parse_infer_request(body.as_bytes(), None)
        .unwrap_err()
        .message
        .contains("element 1 is `2.5`: not an integer literal"));
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let depth = 100_000;
    let data = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let body =
        format!(r#"{{"inputs":[{{"name":"x","shape":[1],"datatype":"FP32","data":{data}}}]}}"#);
    assert_eq!(field_of(&body), "inputs[0] (x).data");
    let body = format!(
        r#"{{"parameters":{{"a":{data}}},"inputs":[{{"name":"x","shape":[1],"datatype":"FP32","data":[1]}}]}}"#
    );
    // Deep parameters are kept as text; they are within the byte cap here only if short.
    assert_eq!(
        parse_infer_request(body.as_bytes(), None)
            .unwrap_err()
            .field,
        "parameters"
    );
}

#[test]
fn echoed_client_text_is_cut_short() {
    let name = "n".repeat(5 << 20);
    let body =
        format!(r#"{{"inputs":[{{"name":"{name}","shape":[1],"datatype":"{name}","data":[1]}}]}}"#);
    let err = parse_infer_request(body.as_bytes(), None).unwrap_err();
    assert!(err.field.starts_with("inputs[0] (nnn"));
    assert!(err.field.len() < QUOTE_MAX_CHARS * 4 + 64);
    assert!(err.to_string().len() < ERROR_MAX_BYTES);
    let body =
        format!(r#"{{"inputs":[{{"name":"x","shape":["{name}"],"datatype":"FP32","data":[1]}}]}}"#);
    let err = parse_infer_request(body.as_bytes(), None).unwrap_err();
    assert_eq!(err.field, "body");
    assert!(err.to_string().len() < ERROR_MAX_BYTES);
}

#[test]
fn parameters_are_raw_text_under_a_cap() {
    let body = r#"{"parameters":{"slo_ms":5, "binary_data_output":true},"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}"#;
    let r = parse_infer_request(body.as_bytes(), None).unwrap();
    assert!(r.binary_by_default);
    assert_eq!(
        r.parameters.as_deref(),
        Some(r#"{"slo_ms":5, "binary_data_output":true}"#)
    );
    let body =
        r#"{"parameters":{ },"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}"#;
    assert_eq!(
        parse_infer_request(body.as_bytes(), None)
            .unwrap()
            .parameters,
        None
    );
    let big = "x".repeat(PARAMETERS_MAX_BYTES);
    let body = format!(
        r#"{{"parameters":{{"p":"{big}"}},"inputs":[{{"name":"x","shape":[1],"datatype":"FP32","data":[1]}}]}}"#
    );
    assert_eq!(field_of(&body), "parameters");
    let body =
        r#"{"parameters":[1],"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}"#;
    assert_eq!(field_of(body), "parameters");
    let body =
        r#"{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1],"parameters":7}]}"#;
    assert_eq!(field_of(body), "inputs[0] (x).parameters");
}

/// A request of one input `x` with binary data `data`, shape `shape` and `binary_data_size`
/// `size`; parsed, it must fail on `field` with a message holding `says`.
fn refuse_binary(datatype: &str, shape: &str, size: usize, data: &[u8], field: &str, says: &str) {
    let header = format!(
        r#"{{"inputs":[{{"name":"x","shape":{shape},"datatype":"{datatype}","parameters":{{"binary_data_size":{size}}}}}]}}"#
    );
    let mut body = header.clone().into_bytes();
    body.extend_from_slice(data);
    let err = parse_infer_request(&body, Some(header.len())).unwrap_err();
    assert_eq!(err.field, field, "{datatype} {shape}: {err}");
    assert!(err.message.contains(says), "{datatype} {shape}: {err}");
}

#[test]
fn hostile_binary_bytes_are_refused_before_allocating() {
    let size_field = "inputs[0] (x).parameters.binary_data_size";
    // A length prefix past the end, and the largest one a prefix can state.
    refuse_binary(
        "BYTES",
        "[1]",
        6,
        b"\x05\0\0\0ab",
        size_field,
        "length 5 passes the 2 bytes left",
    );
    refuse_binary(
        "BYTES",
        "[1]",
        5,
        b"\xff\xff\xff\xffa",
        size_field,
        "length 4294967295",
    );
    // A prefix cut short.
    refuse_binary(
        "BYTES",
        "[2]",
        6,
        b"\0\0\0\0\x01\0",
        size_field,
        "too few for a 4-byte length",
    );
    // Fewer or more elements than the shape's, though every prefix holds.
    refuse_binary(
        "BYTES",
        "[3]",
        8,
        &[0; 8],
        size_field,
        "2 elements, but the shape needs 3",
    );
    refuse_binary(
        "BYTES",
        "[1]",
        8,
        &[0; 8],
        size_field,
        "4 bytes remain after the shape's 1 elements",
    );
    // Fixed widths: the size must be the shape's count times the width.
    refuse_binary(
        "FP16",
        "[3]",
        4,
        &[0; 4],
        size_field,
        "needs 3 elements of 2 bytes",
    );
    refuse_binary("BOOL", "[2]", 2, &[1, 7], size_field, "byte 7 is neither 0");
    // A size past the body.
    refuse_binary(
        "UINT8",
        "[4]",
        4,
        &[0; 3],
        size_field,
        "only 3 binary bytes remain",
    );
}

#[test]
fn json_values_outside_their_datatype_name_the_element() {
    let cases = [
        (
            "UINT8",
            "[1, 256]",
            "element 1 is `256`: outside UINT8's range 0..=255",
        ),
        (
            "INT8",
            "[-129]",
            "element 0 is `-129`: outside INT8's range -128..=127",
        ),
        ("UINT16", "[-1]", "outside UINT16's range"),
        ("INT32", "[2147483648]", "outside INT32's range"),
        (
            "UINT32",
            "[1, 2.5]",
            "element 1 is `2.5`: not an integer literal",
        ),
        (
            "INT64",
            "[1e3]",
            "element 0 is `1000`: not an integer literal",
        ),
        (
            "UINT64",
            "[18446744073709551616]",
            "element 0 is `18446744073709552000`",
        ),
        (
            "FP16",
            "[65504, 65520]",
            "element 1 is `65520`: beyond FP16's largest finite value",
        ),
        ("BF16", "[-1e39]", "beyond BF16's largest finite value"),
        ("FP32", "[3.5e38]", "beyond FP32's largest finite value"),
        ("FP32", "[\"Inf\"]", "a string other than"),
        ("FP64", "[1e400]", "number out of range"),
        ("BOOL", "[true, 1]", "element 1 is `1`: not true or false"),
        ("BYTES", "[\"a\", 1]", "element 1 is `1`: not a string"),
        ("INT16", "[null]", "element 0 is null, not a INT16 value"),
    ];
    for (datatype, data, says) in cases {
        let body = format!(
            r#"{{"inputs":[{{"name":"x","shape":[{n}],"datatype":"{datatype}","data":{data}}}]}}"#,
            n = data.matches(',').count() + 1
        );
        let err = parse_infer_request(body.as_bytes(), None).unwrap_err();
        assert_eq!(err.field, "inputs[0] (x).data", "{datatype} {data}");
        assert!(
            err.message.contains(says),
            "{datatype} {data}: {}",
            err.message
        );
    }
}

/// Checks what a parse produced against the body it came from.
fn assert_bounded(body: &[u8], parsed: &Result<InferRequest, ProtocolError>) {
    match parsed {
        Ok(r) => {
            for input in &r.inputs {
                let product = weir_engine::tensor::element_count(&input.shape);
                assert_eq!(product, Some(input.data.len()));
                assert!(input.data.len() <= body.len());
                assert!(input.shape.iter().all(|&d| d <= body.len()));
            }
        }
        Err(e) => assert!(e.to_string().len() < ERROR_MAX_BYTES + 1024),
    }
}

fn dim() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..5).prop_map(|d| d.to_string()),
        prop::sample::select(vec![
            "64",
            "-1",
            "4294967296",
            "1099511627776",
            "288230376151711745",
            "4611686018427387904",
            "9223372036854775807",
            "18446744073709551615",
            "18446744073709551616",
            "1e3",
            "2.0",
            "\"3\"",
            "null",
        ])
        .prop_map(str::to_string),
    ]
}

/// Nested or flat data of a few numbers (and the odd non-number).
fn data() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i32>().prop_map(|v| v.to_string()),
        any::<f32>()
            .prop_filter("finite", |v| v.is_finite())
            .prop_map(|v| v.to_string()),
        prop::sample::select(vec![
            "true",
            "null",
            "\"a\"",
            "\"NaN\"",
            "{}",
            "1e400",
            "-0",
            "65520",
            "256",
            "-1",
            "18446744073709551615",
            "-9223372036854775808",
        ])
        .prop_map(str::to_string),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        proptest::collection::vec(inner, 0..8).prop_map(|v| format!("[{}]", v.join(",")))
    })
}

fn input() -> impl Strategy<Value = (String, usize)> {
    (
        proptest::collection::vec(dim(), 0..4),
        prop::sample::select(vec![
            "BOOL", "UINT8", "UINT64", "INT8", "INT32", "INT64", "FP16", "FP32", "FP64", "BF16",
            "BYTES", "FP8", "",
        ]),
        prop_oneof![
            data().prop_map(|d| (format!(r#","data":{d}"#), 0)),
            (0usize..80).prop_map(|n| (format!(r#","parameters":{{"binary_data_size":{n}}}"#), n)),
            Just((
                r#","parameters":{"binary_data_size":18446744073709551615}"#.to_string(),
                0
            )),
        ],
    )
        .prop_map(|(shape, dtype, (data, binary))| {
            (
                format!(
                    r#"{{"name":"x","shape":[{}],"datatype":"{dtype}"{data}}}"#,
                    shape.join(",")
                ),
                binary,
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes, with or without an arbitrary header length, never panic.
    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300), header in proptest::option::of(0usize..400)) {
        let parsed = parse_infer_request(&body, header);
        assert_bounded(&body, &parsed);
    }

    /// Structured requests with hostile shapes, datatypes, data and binary sizes never panic,
    /// and whatever is accepted holds exactly its shape's elements.
    #[test]
    fn structured_requests_stay_bounded(
        inputs in proptest::collection::vec(input(), 1..3),
        extra in 0usize..16,
        header_shift in -4i64..4,
        fill in any::<u8>(),
    ) {
        let binary: usize = inputs.iter().map(|(_, n)| n).sum::<usize>() + extra;
        let json = format!(
            r#"{{"inputs":[{}]}}"#,
            inputs.iter().map(|(i, _)| i.as_str()).collect::<Vec<_>>().join(",")
        );
        let mut body = json.clone().into_bytes();
        body.extend(std::iter::repeat_n(fill, binary));
        let header = usize::try_from(json.len() as i64 + header_shift).ok();
        let parsed = parse_infer_request(&body, header.filter(|_| binary > 0));
        assert_bounded(&body, &parsed);
    }

    /// Valid nested JSON requests parse back to their values.
    #[test]
    fn nested_requests_round_trip(rows in 1usize..6, cols in 1usize..6, seed in any::<i64>()) {
        let values: Vec<i64> = (0..rows * cols).map(|v| seed.wrapping_add(v as i64)).collect();
        let nested: Vec<String> = values
            .chunks(cols)
            .map(|r| format!("[{}]", r.iter().map(i64::to_string).collect::<Vec<_>>().join(",")))
            .collect();
        let body = format!(
            r#"{{"inputs":[{{"name":"x","shape":[{rows},{cols}],"datatype":"INT64","data":[{}]}}]}}"#,
            nested.join(",")
        );
        let parsed = parse_infer_request(body.as_bytes(), None).unwrap();
        prop_assert_eq!(&parsed.inputs[0].shape, &vec![rows, cols]);
        prop_assert_eq!(&parsed.inputs[0].data, &TensorData::I64(values));
    }
}
