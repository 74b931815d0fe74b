//! A client on the server's host that hands its tensors over in POSIX shared memory (Triton's
//! system shared memory extension), as `tritonclient.utils.shared_memory` and `perf_analyzer
//! --shared-memory system` do: it registers an input and an output region once, then each call
//! writes the input into its region, posts a JSON request that names both regions, and reads
//! the output back from its region. The tensors cross no socket; what is left is the request's
//! head, the reply's JSON and the server's own path.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::client::{Client, Prepared};

/// Bytes the output region holds: more than any output the benchmarks' models give.
const OUTPUT_BYTES: usize = 1 << 20;

/// An open connection with its two registered regions, removed when dropped.
pub(crate) struct ShmClient {
    client: Client,
    request: Prepared,
    input: File,
    output: File,
    data: Vec<u8>,
    output_len: usize,
    paths: [PathBuf; 2],
    addr: String,
}

/// The two regions' names on the server.
const REGIONS: [&str; 2] = ["bench_in", "bench_out"];

/// Creates the shared memory object `/dev/shm/<name>` of `len` bytes.
fn object(name: &str, len: usize) -> Result<(File, PathBuf)> {
    let path = PathBuf::from("/dev/shm").join(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.set_len(len as u64)?;
    Ok((file, path))
}

impl ShmClient {
    /// Registers regions on the server at `addr` (started with shared memory on) for requests
    /// of one row of `shape` with elements `data` to input `x` of `model`, output `y`.
    pub(crate) fn register(
        addr: &str,
        model: &str,
        shape: &[usize],
        data: &[f32],
    ) -> Result<ShmClient> {
        let tag = format!("weir_bench_{}", std::process::id());
        let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        let (input, in_path) = object(&format!("{tag}_in"), bytes.len())?;
        let (output, out_path) = object(&format!("{tag}_out"), OUTPUT_BYTES)?;
        let mut client = Client::connect(addr)?;
        for (region, path, len) in [
            (REGIONS[0], &in_path, bytes.len()),
            (REGIONS[1], &out_path, OUTPUT_BYTES),
        ] {
            let key = format!(
                "/{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            );
            let body = format!(r#"{{"key":"{key}","offset":0,"byte_size":{len}}}"#);
            let head = format!(
                "POST /v2/systemsharedmemory/region/{region}/register HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let (status, reply) = client.exchange(head.as_bytes(), body.as_bytes())?;
            if status != 200 {
                bail!(
                    "registering {region}: HTTP {status} {}",
                    String::from_utf8_lossy(&reply)
                );
            }
        }
        let dims: Vec<String> = std::iter::once(1)
            .chain(shape.iter().copied())
            .map(|d| d.to_string())
            .collect();
        let header = format!(
            r#"{{"inputs":[{{"name":"x","shape":[{}],"datatype":"FP32","parameters":{{"shared_memory_region":"bench_in","shared_memory_byte_size":{}}}}}],"outputs":[{{"name":"y","parameters":{{"shared_memory_region":"bench_out","shared_memory_byte_size":{OUTPUT_BYTES}}}}}]}}"#,
            dims.join(","),
            bytes.len()
        );
        let mut shm = ShmClient {
            client,
            request: Prepared::infer(addr, model, &header, &[]),
            input,
            output,
            data: bytes,
            output_len: 0,
            paths: [in_path, out_path],
            addr: addr.to_string(),
        };
        shm.output_len = shm.output_bytes()?;
        Ok(shm)
    }

    /// Bytes of the output, from the shape one reply states.
    fn output_bytes(&mut self) -> Result<usize> {
        self.input.write_all_at(&self.data, 0)?;
        let (status, reply) = self
            .client
            .exchange(&self.request.head, &self.request.body)?;
        if status != 200 {
            bail!("HTTP {status}: {}", String::from_utf8_lossy(&reply));
        }
        let reply: serde_json::Value = serde_json::from_slice(&reply)?;
        let shape = reply["outputs"][0]["shape"]
            .as_array()
            .context("the reply's output shape")?;
        Ok(shape
            .iter()
            .filter_map(serde_json::Value::as_u64)
            .product::<u64>() as usize
            * 4)
    }

    /// One timed call: the input written to its region, the request, the output read back.
    pub(crate) fn call(&mut self) -> Result<Duration> {
        let t = Instant::now();
        self.input.write_all_at(&self.data, 0)?;
        let (status, _) = self
            .client
            .exchange(&self.request.head, &self.request.body)?;
        if status != 200 {
            bail!("HTTP {status} to the shared memory request");
        }
        let mut out = vec![0u8; self.output_len];
        self.output.read_exact_at(&mut out, 0)?;
        Ok(t.elapsed())
    }
}

impl Drop for ShmClient {
    /// Unregisters the regions (so the next client may register its own under the same names)
    /// and removes the objects.
    fn drop(&mut self) {
        for region in REGIONS {
            let head = format!(
                "POST /v2/systemsharedmemory/region/{region}/unregister HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n\r\n",
                self.addr
            );
            let _ = self.client.exchange(head.as_bytes(), b"");
        }
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
    }
}
