//! A HAMS primary partitioned while its process keeps running (HAMS §IV-E): each member in a
//! network namespace of its own on one bridge ([`Lan`]), the graph in the test process, eight
//! clients with request ids. The primary's link is cut until the backup is promoted at a new
//! epoch; once healed, the old primary, alive all along with its old epoch's state, must be
//! fenced (none of its outputs released), brought to the new primary's state and made the backup
//! again, so that cutting the new primary next is survived too. Every request is answered once,
//! none fails, and the journals of every member show no contradicted output, by the operator's
//! own `weir hams check`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir::hams::journal::Divergence;
use weir::RunningGraph;

use weir_faults::load::{Load, Stateful};
use weir_faults::netns::{Lan, Netns};

use crate::common::temp_dir;
use crate::hams::{journal, start_graph, track_graph, wait_for, Member, TRACK};

/// The zenoh port each member listens on inside its namespace (a namespace of its own: free).
const PORT: u16 = 7447;

/// Member `name` serving `track` in `host`, connecting to `peers`, journaling into `journal`.
fn member_in(host: &Netns, name: &str, peers: &[&str], journal: &std::path::Path) -> Member {
    let endpoint = format!("tcp/{}:{PORT}", host.ip());
    let base = host.command(env!("CARGO_BIN_EXE_weir"));
    Member::start_from(base, name, &endpoint, peers, &TRACK, journal)
}

/// The `track` node's (epoch, primary, backup) now.
fn roles(graph: &RunningGraph) -> (u64, Option<String>, Option<String>) {
    let roles = graph.hams().expect("a HAMS manager").roles();
    let (_, epoch, primary, backup) = roles.into_iter().next().expect("the track node's roles");
    (epoch, primary, backup)
}

/// Waits (generously: a loaded machine is slow, and nothing here is timed) until `done` holds
/// of the roles, panicking with `what` and the roles otherwise.
fn wait_for_roles(
    graph: &RunningGraph,
    what: &str,
    done: impl Fn(&(u64, Option<String>, Option<String>)) -> bool,
) {
    let ok = wait_for(Duration::from_secs(60), || done(&roles(graph)));
    assert!(ok, "{what}: roles now {:?}", roles(graph));
}

/// Waits until `n` more requests than `before` were answered.
fn wait_for_answers(load: &Load, before: u64, n: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while load.answered() < before + n {
        assert!(
            Instant::now() < deadline,
            "{what}: only {} answers",
            load.answered() - before
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Cuts `host`'s link until `was` is no longer the primary (a new epoch, the backup promoted),
/// serves `n` answers without it, and heals the link.
fn partition_primary(graph: &RunningGraph, load: &Load, host: &Netns, was: &str, what: &str) {
    let epoch = roles(graph).0;
    host.cut();
    wait_for_roles(graph, &format!("{what}: the backup promoted"), |r| {
        r.0 > epoch && r.1.as_deref() != Some(was)
    });
    wait_for_answers(
        load,
        load.answered(),
        50,
        &format!("{what}: served while cut"),
    );
    host.heal();
}

#[test]
fn a_partitioned_primary_is_fenced_readmitted_as_backup_and_a_second_partition_is_survived() {
    let dir = temp_dir("faults-hams");
    let lan = Lan::create(2);
    let a = member_in(&lan.hosts[0], "hams-part-a", &[], &dir.0);
    let b = member_in(&lan.hosts[1], "hams-part-b", &[&a.endpoint], &dir.0);
    let (pa, pb) = (
        format!("weir/executor/{}", a.name),
        format!("weir/executor/{}", b.name),
    );
    let graph = Arc::new(start_graph(&track_graph(
        &dir.0,
        "track-partition",
        &[&a, &b],
        "nspb",
    )));
    graph.hams().expect("a HAMS manager").journal_to(&dir.0);
    assert_eq!(roles(&graph), (1, Some(pa.clone()), Some(pb.clone())));
    let load = Load::start(&graph, &Arc::new(Stateful { features: 8 }), 8);
    wait_for_answers(&load, 0, 50, "before the cut");

    partition_primary(&graph, &load, &lan.hosts[0], &pa, "first partition");
    wait_for_roles(
        &graph,
        "the healed old primary re-admitted as the backup",
        |r| r.1.as_deref() == Some(pb.as_str()) && r.2.as_deref() == Some(pa.as_str()),
    );
    wait_for_answers(&load, load.answered(), 50, "after the first heal");

    partition_primary(&graph, &load, &lan.hosts[1], &pb, "second partition");
    wait_for_roles(&graph, "the second healed primary re-admitted", |r| {
        r.1.as_deref() == Some(pa.as_str()) && r.2.as_deref() == Some(pb.as_str())
    });
    wait_for_answers(&load, load.answered(), 50, "after the second heal");

    let outcome = load.finish();
    let recoveries = graph.hams().expect("manager").recoveries();
    eprintln!(
        "HAMS partitions: {outcome:?}, roles {:?}, recoveries {recoveries:?}",
        roles(&graph)
    );
    super::assert_clean(&outcome, "HAMS partitions");
    assert!(
        recoveries.len() >= 2,
        "both partitions failed over: {recoveries:?}"
    );
    let graph = Arc::try_unwrap(graph).unwrap_or_else(|_| panic!("the clients let go"));
    graph.shutdown();
    drop((a, b));
    let report = journal(&dir);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(
        report.released as u64, outcome.sent,
        "every reply released once"
    );
    assert_eq!(report.divergence, Divergence::default(), "{report:?}");
    let folder = dir.0.to_string_lossy().into_owned();
    let checked = crate::cli::weir_ok(&["hams", "check", &folder]);
    assert!(
        checked.contains("consistent: no contradiction"),
        "{checked}"
    );
}
