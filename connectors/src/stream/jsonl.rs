//! JSON lines: one request document per line in (a file, or stdin), one reply document per line
//! out (a file, or stdout). Blank lines are skipped. The input ending (EOF) ends the connector once
//! every request read is answered.
//!
//! Lines are read as raw bytes up to `\n`, never as text: a line that is not UTF-8 or not JSON is
//! a bad request like any other and gets its error document, and the stream goes on. A line is
//! held only up to [`StreamOptions::max_line_bytes`]; the rest of a longer one is discarded as it
//! arrives, so a multi-gigabyte line without a newline costs one buffer, not its size. Every
//! non-blank line read gets exactly one reply document, named `line-<n>` when it has no `id`.
//!
//! The same loop runs offline jobs ([`crate::offline`]): a [`Pace`] then holds each read at the
//! job's throttle, counts its progress and adds the job's parameters to every request.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::pacing::{Progress, Throttle};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use weir_engine::paths::{open_input, open_output, FileRules, OutputMode};
use weir_engine::stream::StreamEnd;

use super::{
    answer_document, error_document, DocumentError, StreamError, StreamOptions, StreamReport,
};

/// Bytes read from the input at a time.
const READ_BUFFER_BYTES: usize = 64 << 10;

fn io(what: String) -> impl FnOnce(std::io::Error) -> StreamError {
    move |source| StreamError::Io { what, source }
}

/// Where a JSON-lines connector reads and writes.
#[derive(Debug, Clone, Copy)]
pub struct Ends<'a> {
    /// Requests from.
    pub input: &'a StreamEnd,
    /// Replies to.
    pub output: &'a StreamEnd,
    /// What to do when the output file exists.
    pub output_mode: OutputMode,
    /// Where the files may be (a graph's paths were confined at validation; an offline job's are
    /// confined to its folder).
    pub rules: &'a FileRules,
}

/// How a run is paced and followed: nothing for a graph's own stream; for an offline job, its
/// throttle (and where to say why it waits), its counts, and parameters every request gets
/// unless it sets them itself.
#[derive(Default)]
pub struct Pace<'a> {
    /// Each line is read only once the throttle is open.
    pub throttle: Option<(Arc<Throttle>, &'a Mutex<Option<String>>)>,
    /// Requests read, answered and failed.
    pub progress: Option<Arc<Progress>>,
    /// Default request parameters.
    pub parameters: Option<Arc<Map<String, Value>>>,
}

/// `document` with each of `defaults` added to its `parameters` where it has no such key. The
/// document's other members are kept as raw text (no tree is built of them); a document that is
/// not a JSON object, or whose `parameters` is not one, is left for the request parser to refuse.
fn with_parameters(document: Vec<u8>, defaults: &Map<String, Value>) -> Vec<u8> {
    let Ok(mut members) = serde_json::from_slice::<BTreeMap<String, Box<RawValue>>>(&document)
    else {
        return document;
    };
    let mut parameters = match members.get("parameters") {
        Some(raw) => match serde_json::from_str::<Map<String, Value>>(raw.get()) {
            Ok(p) => p,
            Err(_) => return document,
        },
        None => Map::new(),
    };
    for (key, value) in defaults {
        parameters
            .entry(key.clone())
            .or_insert_with(|| value.clone());
    }
    let Ok(raw) = serde_json::value::to_raw_value(&parameters) else {
        return document;
    };
    members.insert("parameters".to_string(), raw);
    serde_json::to_vec(&members).unwrap_or(document)
}

/// What one read of a line found.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// The input ended before any byte.
    End,
    /// A line is in the buffer (without its `\n`).
    Read,
    /// A line longer than the cap was skipped; the buffer is empty.
    TooLong,
}

/// Reads one line into `line` (cleared first), keeping at most `cap` bytes; the bytes of a
/// longer line are consumed and dropped up to its `\n`. A last line without `\n` counts.
async fn read_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Line> {
    line.clear();
    let (mut any, mut over) = (false, false);
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(match (any, over) {
                (false, _) => Line::End,
                (true, true) => Line::TooLong,
                (true, false) => Line::Read,
            });
        }
        any = true;
        let newline = chunk.iter().position(|&b| b == b'\n');
        let body = newline.unwrap_or(chunk.len());
        if !over {
            if body > cap.saturating_sub(line.len()) {
                over = true;
                line.clear();
                line.shrink_to(0);
            } else {
                line.extend_from_slice(&chunk[..body]);
            }
        }
        reader.consume(newline.map_or(body, |i| i + 1));
        if newline.is_some() {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(if over { Line::TooLong } else { Line::Read });
        }
    }
}

/// Runs a JSON-lines connector from `ends.input` to `ends.output`.
///
/// # Errors
/// When a file cannot be opened (not a regular file, an existing output under `create`), read or
/// written.
pub async fn run_jsonl(
    answerer: super::Answerer,
    ends: Ends<'_>,
    options: StreamOptions,
    pace: Pace<'_>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<StreamReport, StreamError> {
    // These opens check the files themselves again (regular, not a symlink, not clobbered).
    let rules = ends.rules;
    let mut reader: Box<dyn AsyncBufRead + Unpin + Send> = match ends.input {
        StreamEnd::Stdio => Box::new(BufReader::with_capacity(
            READ_BUFFER_BYTES,
            tokio::io::stdin(),
        )),
        StreamEnd::File(p) => Box::new(BufReader::with_capacity(
            READ_BUFFER_BYTES,
            tokio::fs::File::from_std(open_input(p, rules)?),
        )),
    };
    let (writer, output_name): (Box<dyn AsyncWrite + Unpin + Send>, String) = match ends.output {
        StreamEnd::Stdio => (Box::new(tokio::io::stdout()), "stdout".into()),
        StreamEnd::File(p) => (
            Box::new(tokio::fs::File::from_std(open_output(
                p,
                ends.output_mode,
                rules,
            )?)),
            p.display().to_string(),
        ),
    };
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(options.max_in_flight.max(1));
    let write_all = tokio::spawn(async move {
        let mut writer = writer;
        while let Some(mut line) = rx.recv().await {
            line.push(b'\n');
            writer
                .write_all(&line)
                .await
                .map_err(io(format!("writing {output_name}")))?;
            if rx.is_empty() {
                writer
                    .flush()
                    .await
                    .map_err(io(format!("flushing {output_name}")))?;
            }
        }
        writer
            .flush()
            .await
            .map_err(io(format!("flushing {output_name}")))
    });
    let slots = Arc::new(Semaphore::new(options.max_in_flight.max(1)));
    let mut tasks = JoinSet::new();
    let mut report = StreamReport::default();
    let mut line = Vec::new();
    let mut number = 0u64;
    let read_result = loop {
        if let Some((throttle, paused)) = &pace.throttle {
            throttle.wait_open(paused, &mut shutdown).await;
            if *shutdown.borrow() {
                break Ok(());
            }
        }
        let read = tokio::select! {
            read = read_line(&mut reader, &mut line, options.max_line_bytes) => read,
            _ = shutdown.wait_for(|stop| *stop) => break Ok(()),
        };
        let read = match read {
            Ok(Line::End) => break Ok(()),
            Ok(read) => read,
            Err(e) => break Err(io("reading requests".into())(e)),
        };
        number = number.saturating_add(1);
        if read == Line::Read && line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        report.requests += 1;
        if let Some(p) = &pace.progress {
            p.read.fetch_add(1, Ordering::Relaxed);
        }
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            break Ok(());
        };
        let id = format!("line-{number}");
        if read == Line::TooLong {
            tracing::debug!(
                line = number,
                limit = options.max_line_bytes,
                "Rejected an over-long stream line."
            );
            report.errors += 1;
            let error = DocumentError::LineTooLong {
                line: number,
                limit: options.max_line_bytes,
            };
            let _ = tx.send(error_document(&id, &error)).await;
            if let Some(p) = &pace.progress {
                p.answered.fetch_add(1, Ordering::Relaxed);
                p.errors.fetch_add(1, Ordering::Relaxed);
            }
            drop(permit);
            continue;
        }
        let (answerer, tx, mut document) =
            (answerer.clone(), tx.clone(), std::mem::take(&mut line));
        if let Some(defaults) = &pace.parameters {
            document = with_parameters(document, defaults);
        }
        let progress = pace.progress.clone();
        tasks.spawn(async move {
            let (reply, failed) = answer_document(&answerer, &document, id, options).await;
            let _ = tx.send(reply).await;
            if let Some(p) = progress {
                p.answered.fetch_add(1, Ordering::Relaxed);
                if failed {
                    p.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            drop(permit);
            failed
        });
    };
    while let Some(done) = tasks.join_next().await {
        if matches!(done, Ok(true)) {
            report.errors += 1;
        }
    }
    drop(tx);
    let written = write_all
        .await
        .unwrap_or_else(|e| Err(io("the writer task".into())(std::io::Error::other(e))));
    read_result?;
    written?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    async fn lines(input: &[u8], cap: usize, chunk: usize) -> Vec<(Line, Vec<u8>)> {
        let mut reader = BufReader::with_capacity(chunk.max(1), input);
        let mut out = Vec::new();
        let mut line = Vec::new();
        loop {
            match read_line(&mut reader, &mut line, cap).await.unwrap() {
                Line::End => return out,
                read => out.push((read, line.clone())),
            }
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn job_parameters_are_added_where_a_request_has_none() {
        let defaults: Map<String, Value> =
            serde_json::from_str(r#"{"min_accuracy": 0.9, "latency_ms": 50}"#).unwrap();
        let merged = with_parameters(
            br#"{"id": "a", "inputs": [], "parameters": {"latency_ms": 10}}"#.to_vec(),
            &defaults,
        );
        let v: Value = serde_json::from_slice(&merged).unwrap();
        assert_eq!(v["parameters"]["latency_ms"], 10);
        assert_eq!(v["parameters"]["min_accuracy"], 0.9);
        assert_eq!(v["id"], "a");
        let added: Value =
            serde_json::from_slice(&with_parameters(br#"{"inputs": []}"#.to_vec(), &defaults))
                .unwrap();
        assert_eq!(added["parameters"]["latency_ms"], 50);
        for bad in [&b"[1]"[..], b"{\"parameters\": 3}", b"not json"] {
            assert_eq!(with_parameters(bad.to_vec(), &defaults), bad);
        }
    }

    #[test]
    fn a_long_line_is_skipped_and_the_next_is_read() {
        let mut input = b"ok\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 10_000));
        input.extend_from_slice(b"\n\xff\xfe\r\nlast");
        let got = block_on(lines(&input, 100, 64));
        assert_eq!(
            got,
            vec![
                (Line::Read, b"ok".to_vec()),
                (Line::TooLong, vec![]),
                (Line::Read, b"\xff\xfe".to_vec()),
                (Line::Read, b"last".to_vec()),
            ]
        );
    }

    proptest! {
        #[test]
        fn every_line_is_read_once_within_the_cap(
            raw in proptest::collection::vec(proptest::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..50), 1..20),
            cap in 0usize..40,
            chunk in 1usize..17,
        ) {
            let input = raw.iter().map(|l| l.as_slice()).collect::<Vec<_>>().join(&b'\n');
            let got = block_on(lines(&input, cap, chunk));
            // A trailing empty line without `\n` is EOF, not a line.
            let want = if raw.last().is_some_and(Vec::is_empty) { raw.len() - 1 } else { raw.len() };
            prop_assert_eq!(got.len(), want);
            for ((read, bytes), sent) in got.iter().zip(&raw) {
                prop_assert!(bytes.len() <= cap);
                if sent.len() > cap {
                    prop_assert_eq!(read, &Line::TooLong);
                } else {
                    let want = sent.strip_suffix(b"\r").unwrap_or(sent);
                    prop_assert_eq!(read, &Line::Read);
                    prop_assert_eq!(bytes.as_slice(), want);
                }
            }
        }
    }
}
