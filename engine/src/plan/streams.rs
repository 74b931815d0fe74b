//! The graph's streaming connectors, with their files resolved against the graph's folder.

use std::path::Path;

use crate::spec::{GraphSpec, StreamSpec};
use crate::stream::{stream_end, StreamConnector};

/// The connectors `spec.streams` declares, in order.
pub(super) fn connectors(spec: &GraphSpec, base_dir: &Path) -> Vec<StreamConnector> {
    spec.streams
        .iter()
        .map(|s| match &s.value {
            StreamSpec::Jsonl(j) => StreamConnector::Jsonl {
                input: stream_end(&j.input, base_dir),
                output: stream_end(&j.output, base_dir),
                output_mode: j.output_mode.value,
            },
            StreamSpec::Zenoh(z) => StreamConnector::Zenoh {
                subscribe: z.subscribe.value.clone(),
                publish: z.publish.value.clone(),
                listen: z.listen.iter().map(|e| e.value.clone()).collect(),
                connect: z.connect.iter().map(|e| e.value.clone()).collect(),
            },
        })
        .collect()
}
