//! The registry against real shared memory objects under `/dev/shm`.

use std::fs;
use std::net::SocketAddr;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use weir_engine::tensor::{Tensor, TensorData};

use super::*;
use crate::oip::parse_infer_request;

/// A shared memory object of this test process, removed when dropped.
struct Object {
    key: String,
    path: PathBuf,
}

impl Object {
    fn new(bytes: &[u8]) -> Object {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "weir-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = PathBuf::from(SHM_DIR).join(&name);
        fs::write(&path, bytes).unwrap();
        Object {
            key: format!("/{name}"),
            path,
        }
    }
}

impl Drop for Object {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        let _ = fs::remove_dir(&self.path);
    }
}

fn local() -> Option<SocketAddr> {
    Some("127.0.0.1:5000".parse().unwrap())
}

fn floats(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn regions_register_report_and_unregister() {
    let shm = SharedMemory::system();
    let a = Object::new(&[0; 64]);
    let b = Object::new(&[0; 64]);
    shm.register("a", &a.key, 0, 64, local()).unwrap();
    shm.register("b", &b.key, 16, 32, Some("[::1]:1".parse().unwrap()))
        .unwrap();
    let all = shm.status(None).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(
        shm.status(Some("b")).unwrap(),
        vec![RegionStatus {
            name: "b".into(),
            key: b.key.clone(),
            offset: 16,
            byte_size: 32
        }]
    );
    assert_eq!(
        shm.register("a", &b.key, 0, 8, local()),
        Err(SharedMemoryError::Exists("a".into()))
    );
    shm.unregister(Some("a"));
    shm.unregister(Some("never registered"));
    assert_eq!(
        shm.status(Some("a")),
        Err(SharedMemoryError::Unknown("a".into()))
    );
    shm.unregister(None);
    assert!(shm.status(None).unwrap().is_empty());
}

#[test]
fn nothing_is_registered_while_off_or_from_another_host() {
    let o = Object::new(&[0; 8]);
    let off = SharedMemory::off();
    assert_eq!(
        off.register("a", &o.key, 0, 8, local()),
        Err(SharedMemoryError::Off)
    );
    let shm = SharedMemory::system();
    for peer in [Some("10.1.2.3:4000".parse().unwrap()), None] {
        assert!(matches!(
            shm.register("a", &o.key, 0, 8, peer),
            Err(SharedMemoryError::NotLocal { .. })
        ));
    }
    assert!(shm.status(None).unwrap().is_empty());
}

#[test]
fn a_range_must_lie_in_its_object_and_a_key_must_be_one() {
    let shm = SharedMemory::system();
    let o = Object::new(&[0; 64]);
    for (offset, size) in [(0, 65), (60, 8), (u64::MAX, 2), (1, u64::MAX)] {
        assert!(
            matches!(
                shm.register("r", &o.key, offset, size, local()),
                Err(SharedMemoryError::Range { .. })
            ),
            "{offset} + {size}"
        );
    }
    let missing = shm.register("r", "/weir-test-no-such-object", 0, 1, local());
    assert!(
        matches!(&missing, Err(SharedMemoryError::Open { why, .. }) if why.contains("no such")),
        "{missing:?}"
    );
    // A link under /dev/shm to another file is not followed.
    let link = PathBuf::from(SHM_DIR).join(format!("weir-test-link-{}", std::process::id()));
    let _ = fs::remove_file(&link);
    symlink(&o.path, &link).unwrap();
    let linked = shm.register(
        "r",
        &format!("/{}", link.file_name().unwrap().to_str().unwrap()),
        0,
        1,
        local(),
    );
    fs::remove_file(&link).unwrap();
    assert!(
        matches!(&linked, Err(SharedMemoryError::Open { why, .. }) if why.contains("symbolic link")),
        "{linked:?}"
    );
    // A directory is not an object.
    let dir = Object::new(&[]);
    fs::remove_file(&dir.path).unwrap();
    fs::create_dir(&dir.path).unwrap();
    assert!(matches!(
        shm.register("r", &dir.key, 0, 0, local()),
        Err(SharedMemoryError::Open { .. })
    ));
    for key in ["no-slash", "/a/b", "/.."] {
        assert!(matches!(
            shm.register("r", key, 0, 0, local()),
            Err(SharedMemoryError::Key { .. })
        ));
    }
    assert_eq!(
        shm.register("", &o.key, 0, 1, local()),
        Err(SharedMemoryError::Name)
    );
    assert!(shm.status(None).unwrap().is_empty());
}

#[test]
fn the_registry_holds_at_most_its_limit() {
    let shm = SharedMemory::system();
    let o = Object::new(&[0; 8]);
    for i in 0..MAX_REGIONS {
        shm.register(&format!("r{i}"), &o.key, 0, 8, local())
            .unwrap();
    }
    assert_eq!(
        shm.register("one more", &o.key, 0, 8, local()),
        Err(SharedMemoryError::TooMany)
    );
    shm.unregister(Some("r0"));
    shm.register("one more", &o.key, 0, 8, local()).unwrap();
}

fn shm_request(byte_size: usize, offset: u64) -> InferRequest {
    let body = serde_json::json!({
        "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32",
            "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": byte_size,
                "shared_memory_offset": offset}}],
        "outputs": [{"name": "y", "parameters": {"shared_memory_region": "out",
            "shared_memory_byte_size": 8}}]
    });
    parse_infer_request(body.to_string().as_bytes(), None).unwrap()
}

#[test]
fn inputs_are_read_from_and_outputs_written_to_their_regions() {
    let shm = SharedMemory::system();
    let mut input = vec![0u8; 4];
    input.extend(floats(&[1.0, 2.0, 3.0, 4.0]));
    let i = Object::new(&input);
    let o = Object::new(&[0xAA; 12]);
    shm.register("in", &i.key, 0, input.len() as u64, local())
        .unwrap();
    shm.register("out", &o.key, 4, 8, local()).unwrap();
    let mut request = shm_request(16, 4);
    let placement = std::mem::take(&mut request.placement);
    assert_eq!(placement.input_bytes(), 16);
    shm.read_inputs(&placement, &mut request, 1 << 20).unwrap();
    assert_eq!(
        request.inputs[0].data,
        TensorData::F32(vec![1.0, 2.0, 3.0, 4.0])
    );
    let mut outputs = vec![ReplyTensor {
        name: "y".into(),
        tensor: Tensor::new(vec![1, 2], TensorData::F32(vec![5.0, 6.0])),
        binary: false,
        region: None,
    }];
    shm.write_outputs(&placement, &mut outputs).unwrap();
    let written = fs::read(&o.path).unwrap();
    assert_eq!(&written[..4], &[0xAA; 4]);
    assert_eq!(&written[4..], floats(&[5.0, 6.0]).as_slice());
    assert_eq!(outputs[0].region.as_ref().map(|r| r.byte_size), Some(8));
    // The reply carries the output's datatype and shape, no data and no parameters (as
    // Triton's: its clients read `binary_data_size` from any output that has parameters).
    let (body, header) =
        crate::oip::encode_infer_reply("m", None, Default::default(), &outputs).unwrap();
    assert_eq!(header, None);
    let reply: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply["outputs"][0]["datatype"], "FP32");
    assert_eq!(reply["outputs"][0]["shape"], serde_json::json!([1, 2]));
    assert!(reply["outputs"][0].get("parameters").is_none());
    assert!(reply["outputs"][0].get("data").is_none());
}

#[test]
fn slices_past_their_region_or_a_shrunk_object_are_refused_naming_the_field() {
    let shm = SharedMemory::system();
    let i = Object::new(&floats(&[1.0; 8]));
    let o = Object::new(&[0; 4]);
    shm.register("in", &i.key, 0, 32, local()).unwrap();
    shm.register("out", &o.key, 0, 4, local()).unwrap();
    // 16 bytes at 20 pass the region's 32.
    let mut request = shm_request(16, 20);
    let placement = std::mem::take(&mut request.placement);
    let e = shm
        .read_inputs(&placement, &mut request, 1 << 20)
        .unwrap_err();
    assert_eq!(e.field, "inputs[0] (x).parameters.shared_memory_region");
    assert!(e.message.contains("pass the end of region `in`"), "{e}");
    // Over the request cap.
    let e = shm.read_inputs(&placement, &mut request, 8).unwrap_err();
    assert!(e.message.contains("more than the 8 bytes"), "{e}");
    // The client shrinks its object after registering it: the read comes up short.
    fs::write(&i.path, [0u8; 8]).unwrap();
    let mut request = shm_request(16, 0);
    let placement = std::mem::take(&mut request.placement);
    let e = shm
        .read_inputs(&placement, &mut request, 1 << 20)
        .unwrap_err();
    assert!(e.message.contains("no longer holds"), "{e}");
    // An output larger than its slice, and a write to a shrunk object, which is not grown.
    let mut outputs = vec![ReplyTensor {
        name: "y".into(),
        tensor: Tensor::new(vec![2], TensorData::F32(vec![5.0, 6.0])),
        binary: false,
        region: None,
    }];
    let e = shm.write_outputs(&placement, &mut outputs).unwrap_err();
    assert_eq!(e.field, "outputs[0] (y).parameters.shared_memory_region");
    assert!(e.message.contains("pass the end of region `out`"), "{e}");
    shm.unregister(Some("out"));
    let o2 = Object::new(&[0; 8]);
    shm.register("out", &o2.key, 0, 8, local()).unwrap();
    fs::write(&o2.path, [0u8; 2]).unwrap();
    let e = shm.write_outputs(&placement, &mut outputs).unwrap_err();
    assert!(e.message.contains("no longer holds"), "{e}");
    assert_eq!(fs::metadata(&o2.path).unwrap().len(), 2);
    // Off, or a region never registered.
    let e = SharedMemory::off()
        .read_inputs(&placement, &mut request, 1 << 20)
        .unwrap_err();
    assert!(e.message.contains("--shared-memory system"), "{e}");
    shm.unregister(None);
    let e = shm
        .read_inputs(&placement, &mut request, 1 << 20)
        .unwrap_err();
    assert!(
        e.message.contains("no system shared memory region `in`"),
        "{e}"
    );
}

#[test]
fn a_region_in_a_request_is_refused_naming_the_field_when_it_cannot_hold_the_tensor() {
    let parse = |input: serde_json::Value| {
        let body = serde_json::json!({"inputs": [input]});
        parse_infer_request(body.to_string().as_bytes(), None).unwrap_err()
    };
    let e = parse(
        serde_json::json!({"name": "x", "shape": [4], "datatype": "FP32",
        "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": 15}}),
    );
    assert_eq!(e.field, "inputs[0] (x).parameters.shared_memory_byte_size");
    assert!(e.message.contains("take 16"), "{e}");
    let e = parse(
        serde_json::json!({"name": "x", "shape": [1], "datatype": "FP32",
        "data": [1.0], "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": 4}}),
    );
    assert_eq!(e.field, "inputs[0] (x).parameters.shared_memory_region");
    let e = parse(
        serde_json::json!({"name": "x", "shape": [1], "datatype": "FP32",
        "parameters": {"shared_memory_byte_size": 4}}),
    );
    assert_eq!(e.field, "inputs[0] (x).parameters.shared_memory_region");
    let e = parse(
        serde_json::json!({"name": "x", "shape": [1], "datatype": "FP32",
        "parameters": {"shared_memory_region": "in"}}),
    );
    assert_eq!(e.field, "inputs[0] (x).parameters.shared_memory_byte_size");
    let e = parse(
        serde_json::json!({"name": "x", "shape": [1], "datatype": "FP32",
        "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": -4}}),
    );
    assert_eq!(e.field, "inputs[0] (x).parameters.shared_memory_byte_size");
    let e = parse(
        serde_json::json!({"name": "x", "shape": [1], "datatype": "FP32",
        "parameters": {"shared_memory_region": "r".repeat(300), "shared_memory_byte_size": 4}}),
    );
    assert_eq!(e.field, "inputs[0] (x).parameters.shared_memory_region");
}
