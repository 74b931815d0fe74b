//! The cost of HAMS's lineage per batch against the length of the path it records.

use std::time::Instant;

use super::load::median;

/// The cost of HAMS's lineage per batch of `rows` rows against the path length: one
/// hop appended (HAMS, Algorithm 1) plus the dependency scan a stateful node makes before sending a
/// batch (per replicated node on the path, the highest version). Returns (hops, µs per batch),
/// medians over `iterations`.
pub fn lineage_cost(rows: usize, hops: &[usize], iterations: usize) -> Vec<(usize, f64)> {
    use weir_engine::lineage::{append_hop, LineageBuilder, LineageEntry, LineageView};
    hops.iter()
        .map(|&n| {
            let mut b = LineageBuilder::with_capacity(rows, n);
            for r in 0..rows {
                for h in 0..n as u32 {
                    b.push_entry(LineageEntry {
                        pred_node: h,
                        pred_seq: r as u64,
                        node: h + 1,
                        seq: 1000 + r as u64,
                    });
                }
                b.finish_row();
            }
            let list = b.finish();
            let mut times = Vec::with_capacity(iterations);
            for i in 0..iterations {
                let started = Instant::now();
                let next = append_hop(&list, &[n as u32], n as u32 + 1, i as u64);
                let view = LineageView::new(&next);
                let mut deps: Vec<(u32, u64)> = Vec::new();
                for r in 0..rows {
                    for e in view.row(r) {
                        match deps.iter_mut().find(|(node, _)| *node == e.node) {
                            Some(d) => d.1 = d.1.max(e.seq),
                            None => deps.push((e.node, e.seq)),
                        }
                    }
                }
                std::hint::black_box(&deps);
                times.push(started.elapsed().as_secs_f64() * 1e6);
            }
            (n, median(times))
        })
        .collect()
}
