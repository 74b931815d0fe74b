//! JSON lines: one request document per line in (a file, or stdin), one reply document per line
//! out (a file, or stdout). Blank lines are skipped. The input ending (EOF) ends the connector once
//! every request read is answered.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use weir_engine::runtime::GraphRuntime;
use weir_engine::stream::StreamEnd;

use super::{answer_document, StreamError, StreamOptions, StreamReport};

fn io(what: String) -> impl FnOnce(std::io::Error) -> StreamError {
    move |source| StreamError::Io { what, source }
}

/// Runs a JSON-lines connector from `input` to `output`.
///
/// # Errors
/// When a file cannot be opened, read or written.
pub async fn run_jsonl(
    runtime: Arc<GraphRuntime>,
    input: &StreamEnd,
    output: &StreamEnd,
    options: StreamOptions,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<StreamReport, StreamError> {
    let reader: Box<dyn tokio::io::AsyncBufRead + Unpin + Send> = match input {
        StreamEnd::Stdio => Box::new(BufReader::new(tokio::io::stdin())),
        StreamEnd::File(p) => Box::new(BufReader::new(
            tokio::fs::File::open(p)
                .await
                .map_err(io(format!("opening {}", p.display())))?,
        )),
    };
    let (writer, output_name): (Box<dyn AsyncWrite + Unpin + Send>, String) = match output {
        StreamEnd::Stdio => (Box::new(tokio::io::stdout()), "stdout".into()),
        StreamEnd::File(p) => (
            Box::new(
                tokio::fs::File::create(p)
                    .await
                    .map_err(io(format!("creating {}", p.display())))?,
            ),
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
    let mut lines = reader.lines();
    let mut number = 0u64;
    let read_result = loop {
        let line = tokio::select! {
            line = lines.next_line() => line,
            _ = shutdown.wait_for(|stop| *stop) => break Ok(()),
        };
        let line = match line {
            Ok(Some(l)) => l,
            Ok(None) => break Ok(()),
            Err(e) => break Err(io("reading requests".into())(e)),
        };
        number += 1;
        if line.trim().is_empty() {
            continue;
        }
        report.requests += 1;
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            break Ok(());
        };
        let (runtime, tx) = (Arc::clone(&runtime), tx.clone());
        tasks.spawn(async move {
            let (reply, failed) =
                answer_document(&runtime, line.as_bytes(), format!("line-{number}"), options).await;
            let _ = tx.send(reply).await;
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
