//! Every datatype through both encodings and back: what a reply writes, a request reads back as
//! the same tensor (the protocol's JSON and binary forms are the same both ways). Floats compare
//! bit for bit, except that any NaN equals any NaN (JSON has one `"NaN"`, not payloads). Scalars
//! (shape `[]`) and empty tensors are among the shapes drawn. The refusals a decoder owes hostile
//! or wrong data are in `fuzz.rs`.

use half::{bf16, f16};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use weir_engine::tensor::{DType, Tensor, TensorData};

use super::{encode_infer_reply, parse_infer_request, ReplyTensor};

/// Whether two element vectors hold the same values, floats by their bits with all NaNs alike.
fn same(a: &TensorData, b: &TensorData) -> bool {
    fn by_bits<T: Copy>(x: &[T], y: &[T], key: impl Fn(T) -> Option<u64>) -> bool {
        x.len() == y.len() && x.iter().zip(y).all(|(&p, &q)| key(p) == key(q))
    }
    match (a, b) {
        (TensorData::F16(x), TensorData::F16(y)) => {
            by_bits(x, y, |v| (!v.is_nan()).then(|| u64::from(v.to_bits())))
        }
        (TensorData::Bf16(x), TensorData::Bf16(y)) => {
            by_bits(x, y, |v| (!v.is_nan()).then(|| u64::from(v.to_bits())))
        }
        (TensorData::F32(x), TensorData::F32(y)) => {
            by_bits(x, y, |v| (!v.is_nan()).then(|| u64::from(v.to_bits())))
        }
        (TensorData::F64(x), TensorData::F64(y)) => {
            by_bits(x, y, |v| (!v.is_nan()).then(|| v.to_bits()))
        }
        _ => a == b,
    }
}

/// `n` arbitrary elements of `dtype`; BYTES elements are UTF-8 text when `text`, else any bytes.
fn elements(dtype: DType, n: usize, text: bool) -> BoxedStrategy<TensorData> {
    use proptest::collection::vec;
    match dtype {
        DType::Bool => vec(any::<bool>(), n).prop_map(TensorData::Bool).boxed(),
        DType::U8 => vec(any::<u8>(), n).prop_map(TensorData::U8).boxed(),
        DType::U16 => vec(any::<u16>(), n).prop_map(TensorData::U16).boxed(),
        DType::U32 => vec(any::<u32>(), n).prop_map(TensorData::U32).boxed(),
        DType::U64 => vec(any::<u64>(), n).prop_map(TensorData::U64).boxed(),
        DType::I8 => vec(any::<i8>(), n).prop_map(TensorData::I8).boxed(),
        DType::I16 => vec(any::<i16>(), n).prop_map(TensorData::I16).boxed(),
        DType::I32 => vec(any::<i32>(), n).prop_map(TensorData::I32).boxed(),
        DType::I64 => vec(any::<i64>(), n).prop_map(TensorData::I64).boxed(),
        DType::F16 => vec(any::<u16>(), n)
            .prop_map(|v| TensorData::F16(v.into_iter().map(f16::from_bits).collect()))
            .boxed(),
        DType::Bf16 => vec(any::<u16>(), n)
            .prop_map(|v| TensorData::Bf16(v.into_iter().map(bf16::from_bits).collect()))
            .boxed(),
        DType::F32 => vec(any::<u32>(), n)
            .prop_map(|v| TensorData::F32(v.into_iter().map(f32::from_bits).collect()))
            .boxed(),
        DType::F64 => vec(any::<u64>(), n)
            .prop_map(|v| TensorData::F64(v.into_iter().map(f64::from_bits).collect()))
            .boxed(),
        DType::Bytes if text => vec(".{0,6}", n)
            .prop_map(|v| TensorData::Bytes(v.into_iter().map(String::into_bytes).collect()))
            .boxed(),
        DType::Bytes => vec(vec(any::<u8>(), 0..6), n)
            .prop_map(TensorData::Bytes)
            .boxed(),
    }
}

/// A tensor of any datatype and a small shape of rank 0 to 3 (zeros among the dimensions).
fn tensor(text: bool) -> impl Strategy<Value = Tensor> {
    (
        prop::sample::select(DType::ALL.to_vec()),
        proptest::collection::vec(0usize..4, 0..4),
    )
        .prop_flat_map(move |(dtype, shape)| {
            let n = shape.iter().product();
            elements(dtype, n, text).prop_map(move |data| Tensor {
                shape: shape.clone(),
                data,
            })
        })
}

/// The reply of one output `t`, JSON or binary: its JSON part and binary bytes.
fn reply(t: &Tensor, binary: bool) -> (Value, Vec<u8>) {
    let out = ReplyTensor {
        name: "t".into(),
        tensor: t.clone(),
        binary,
        region: None,
    };
    let (body, header) = encode_infer_reply("g", None, Map::new(), &[out]).unwrap();
    let header = header.unwrap_or(body.len());
    (
        serde_json::from_slice(&body[..header]).unwrap(),
        body[header..].to_vec(),
    )
}

/// The request that sends back the reply's output as an input.
fn echo_request(reply: &Value, binary: &[u8]) -> (Vec<u8>, Option<usize>) {
    let mut input = reply["outputs"][0].clone();
    if binary.is_empty() && input.get("data").is_some() {
        let body = json!({ "inputs": [input] }).to_string().into_bytes();
        return (body, None);
    }
    input["parameters"] = json!({ "binary_data_size": binary.len() });
    let mut body = json!({ "inputs": [input] }).to_string().into_bytes();
    let header = body.len();
    body.extend_from_slice(binary);
    (body, Some(header))
}

fn round_trip(t: &Tensor, binary: bool) -> Result<(), TestCaseError> {
    let (json, bytes) = reply(t, binary);
    let output = &json["outputs"][0];
    prop_assert_eq!(&output["datatype"], t.dtype().oip_name());
    prop_assert_eq!(&output["shape"], &json!(t.shape));
    let (body, header) = echo_request(&json, &bytes);
    let parsed = parse_infer_request(&body, header).unwrap();
    let input = &parsed.inputs[0];
    prop_assert_eq!(&input.shape, &t.shape);
    prop_assert!(
        same(&input.data, &t.data),
        "sent {:?}, read back {:?}",
        t.data,
        input.data
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Every datatype's elements, NaNs, infinities, signed zeros and subnormals included,
    /// survive JSON: written exactly, read back to the same bits.
    #[test]
    fn json_round_trips_every_datatype(t in tensor(true)) {
        round_trip(&t, false)?;
    }

    /// Every datatype's elements, any bytes for BYTES, survive the binary extension.
    #[test]
    fn binary_round_trips_every_datatype(t in tensor(false)) {
        round_trip(&t, true)?;
    }

    /// A JSON number rounds into a float type as the double it reads as, rounded once to
    /// nearest-even; one that rounds past the largest finite value is refused.
    #[test]
    fn json_floats_round_once_from_the_double(
        x in prop_oneof![
            any::<f64>().prop_filter("finite", |x| x.is_finite()),
            (-70000.0f64..70000.0),
            (-1e-4f64..1e-4),
        ]
    ) {
        let body = |datatype: &str| format!(
            r#"{{"inputs":[{{"name":"x","shape":[],"datatype":"{datatype}","data":{}}}]}}"#,
            serde_json::to_string(&x).unwrap()
        );
        let read = |datatype: &str| {
            parse_infer_request(body(datatype).as_bytes(), None).map(|r| r.inputs[0].data.clone())
        };
        prop_assert!(same(&read("FP64").unwrap(), &TensorData::F64(vec![x])));
        match read("FP32") {
            Ok(d) => prop_assert!(same(&d, &TensorData::F32(vec![x as f32]))),
            Err(e) => prop_assert!((x as f32).is_infinite(), "{e}"),
        }
        match read("FP16") {
            Ok(TensorData::F16(v)) => prop_assert!(
                nearest_even(x, v[0].to_bits(), 0x7bff, |b| f64::from(f16::from_bits(b))),
                "{x} read as FP16 {}", v[0]
            ),
            other => prop_assert!(x.abs() >= 65520.0, "{x}: {other:?}"),
        }
        match read("BF16") {
            Ok(TensorData::Bf16(v)) => prop_assert!(
                nearest_even(x, v[0].to_bits(), 0x7f7f, |b| f64::from(bf16::from_bits(b))),
                "{x} read as BF16 {}", v[0]
            ),
            other => prop_assert!(
                x.abs() >= f64::from(bf16::MAX) + 2f64.powi(119),
                "{x}: {other:?}"
            ),
        }
    }
}

/// Whether the 16-bit float of `bits` is `x` rounded to nearest with ties to even: `x` lies
/// between the midpoints to its neighbours (exact in `f64`), on a midpoint only when `bits` is
/// even, and the sign is `x`'s. `max` is the bits of the largest finite value.
fn nearest_even(x: f64, bits: u16, max: u16, value: impl Fn(u16) -> f64) -> bool {
    let (magnitude, negative) = (bits & 0x7fff, bits & 0x8000 != 0);
    let (a, b) = (x.abs(), value(magnitude));
    let below = if magnitude == 0 {
        0.0
    } else {
        (value(magnitude - 1) + b) / 2.0
    };
    let above = if magnitude == max {
        b + (b - value(magnitude - 1)) / 2.0
    } else {
        (b + value(magnitude + 1)) / 2.0
    };
    let tie = (a == below && magnitude != 0) || a == above;
    negative == x.is_sign_negative() && below <= a && a <= above && (!tie || magnitude % 2 == 0)
}

#[test]
fn scalars_take_a_bare_value_or_an_array_of_one() {
    for data in ["5", "[5]"] {
        let body = format!(
            r#"{{"inputs":[{{"name":"sr","shape":[],"datatype":"INT64","data":{data}}}]}}"#
        );
        let r = parse_infer_request(body.as_bytes(), None).unwrap();
        assert_eq!(r.inputs[0].shape, Vec::<usize>::new());
        assert_eq!(r.inputs[0].data, TensorData::I64(vec![5]));
    }
    let header = r#"{"inputs":[{"name":"s","shape":[],"datatype":"BYTES","parameters":{"binary_data_size":6}}]}"#;
    let mut body = header.as_bytes().to_vec();
    body.extend_from_slice(&[2, 0, 0, 0, b'h', b'i']);
    let r = parse_infer_request(&body, Some(header.len())).unwrap();
    assert_eq!(r.inputs[0].data, TensorData::Bytes(vec![b"hi".to_vec()]));
}

#[test]
fn replies_write_each_datatype_as_its_json_kind() {
    let t = |data: TensorData| Tensor {
        shape: vec![data.len()],
        data,
    };
    let cases = [
        (t(TensorData::Bool(vec![true, false])), json!([true, false])),
        (t(TensorData::U64(vec![u64::MAX])), json!([u64::MAX])),
        (t(TensorData::I64(vec![i64::MIN])), json!([i64::MIN])),
        (
            t(TensorData::F32(vec![0.1, f32::NAN, f32::NEG_INFINITY])),
            json!([f64::from(0.1f32), "NaN", "-Infinity"]),
        ),
        (
            t(TensorData::F16(vec![f16::from_f32(0.1)])),
            json!([f64::from(f16::from_f32(0.1))]),
        ),
        (
            t(TensorData::Bytes(vec![b"caf\xc3\xa9".to_vec()])),
            json!(["café"]),
        ),
    ];
    for (tensor, want) in cases {
        let (json, _) = reply(&tensor, false);
        assert_eq!(json["outputs"][0]["data"], want, "{tensor:?}");
    }
}

#[test]
fn non_utf8_bytes_have_no_json_form_but_go_as_binary() {
    let tensor = Tensor::bytes(vec![2], vec![b"ok".to_vec(), vec![0xff, 0x00]]);
    let out = |binary| ReplyTensor {
        name: "y".into(),
        tensor: tensor.clone(),
        binary,
        region: None,
    };
    let err = encode_infer_reply("g", None, Map::new(), &[out(false)]).unwrap_err();
    assert!(
        err.to_string().contains("element 1 of `y` is not UTF-8")
            && err.to_string().contains("binary_data"),
        "{err}"
    );
    let (body, header) = encode_infer_reply("g", None, Map::new(), &[out(true)]).unwrap();
    assert_eq!(&body[header.unwrap()..], b"\x02\0\0\0ok\x02\0\0\0\xff\0");
}

#[test]
fn a_binary_output_of_no_bytes_still_has_a_header_length() {
    let out = ReplyTensor {
        name: "y".into(),
        tensor: Tensor::f32(vec![0], vec![]),
        binary: true,
        region: None,
    };
    let (body, header) = encode_infer_reply("g", None, Map::new(), &[out]).unwrap();
    assert_eq!(header, Some(body.len()));
}
