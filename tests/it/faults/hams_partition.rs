//! A HAMS primary partitioned while its process keeps running (HAMS §IV-E): each member in a
//! network namespace of its own on one bridge ([`Lan`]), the graph in the test process, eight
//! clients with request ids. The primary's link is cut until the backup is promoted at a new
//! epoch; once healed, the old primary, alive all along with its old epoch's state, must be
//! fenced (none of its outputs released), brought to the new primary's state and made the backup
//! again, so that cutting the new primary next is survived too. Every request is answered once,
//! none fails, and the journals of every member show no contradicted output, by the operator's
//! own `weir hams check`. A second test heals the link the moment the backup is promoted, while
//! a batch is still in flight at the old primary; a third heals it one way first, so that the
//! re-admissions its heartbeats trigger time out before one goes through.
//!
//! [`Pair`] is the setup and the checker every HAMS fault test here shares.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir::hams::journal::Divergence;
use weir::RunningGraph;

use weir_faults::load::{Load, Stateful};
use weir_faults::netns::{Lan, Netns};

use crate::common::{temp_dir, TempDir};
use crate::hams::{journal, start_graph, track_graph, wait_for, Member, TRACK};

/// The zenoh port each member listens on inside its namespace (a namespace of its own: free).
const PORT: u16 = 7447;

/// Member `name` serving `track` in `host`, connecting to `peers`, journaling into `journal`.
pub(super) fn member_in(
    host: &Netns,
    name: &str,
    peers: &[&str],
    journal: &std::path::Path,
) -> Member {
    let endpoint = format!("tcp/{}:{PORT}", host.ip());
    let base = host.command(env!("CARGO_BIN_EXE_weir"));
    Member::start_from(base, name, &endpoint, peers, &TRACK, journal)
}

/// The `track` node's (epoch, primary, backup) now.
pub(super) fn roles(graph: &RunningGraph) -> (u64, Option<String>, Option<String>) {
    let roles = graph.hams().expect("a HAMS manager").roles();
    let (_, epoch, primary, backup) = roles.into_iter().next().expect("the track node's roles");
    (epoch, primary, backup)
}

/// Waits (generously: a loaded machine is slow, and nothing here is timed) until `done` holds
/// of the roles, panicking with `what` and the roles otherwise.
pub(super) fn wait_for_roles(
    graph: &RunningGraph,
    what: &str,
    done: impl Fn(&(u64, Option<String>, Option<String>)) -> bool,
) {
    let ok = wait_for(Duration::from_secs(60), || done(&roles(graph)));
    assert!(ok, "{what}: roles now {:?}", roles(graph));
}

/// Waits until `n` more requests than `before` were answered.
pub(super) fn wait_for_answers(load: &Load, before: u64, n: u64, what: &str) {
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

/// Two members on one bridge (`a` the primary, `b` the backup at epoch 1), the `track` graph
/// in this process journaling into the members' folder, and eight clients with request ids.
pub(super) struct Pair {
    pub(super) dir: TempDir,
    pub(super) lan: Lan,
    pub(super) a: Member,
    pub(super) b: Member,
    /// `a`'s and `b`'s key prefixes.
    pub(super) pa: String,
    pub(super) pb: String,
    pub(super) graph: Arc<RunningGraph>,
    pub(super) load: Load,
}

impl Pair {
    /// Starts the pair, the graph and the load (`tag` names the members and the graph), and
    /// waits for 50 answers.
    pub(super) fn start(tag: &str) -> Pair {
        let dir = temp_dir(&format!("faults-{tag}"));
        let lan = Lan::create(2);
        let a = member_in(&lan.hosts[0], &format!("{tag}-a"), &[], &dir.0);
        let b = member_in(&lan.hosts[1], &format!("{tag}-b"), &[&a.endpoint], &dir.0);
        let (pa, pb) = (
            format!("weir/executor/{}", a.name),
            format!("weir/executor/{}", b.name),
        );
        let graph = Arc::new(start_graph(&track_graph(&dir.0, tag, &[&a, &b], "nspb")));
        graph.hams().expect("a HAMS manager").journal_to(&dir.0);
        assert_eq!(roles(&graph), (1, Some(pa.clone()), Some(pb.clone())));
        let load = Load::start(&graph, &Arc::new(Stateful { features: 8 }), 8);
        wait_for_answers(&load, 0, 50, "before the cut");
        Pair {
            dir,
            lan,
            a,
            b,
            pa,
            pb,
            graph,
            load,
        }
    }

    /// Stops the load, the graph and the members, and checks: every request answered once,
    /// right, none failed; at least `failovers` failovers; the journals of every member show
    /// every reply released once and no contradicted output, by `weir hams check`.
    pub(super) fn finish(self, failovers: usize, what: &str) {
        let Pair {
            dir,
            lan,
            a,
            b,
            graph,
            load,
            ..
        } = self;
        let outcome = load.finish();
        let recoveries = graph.hams().expect("manager").recoveries();
        eprintln!(
            "{what}: {outcome:?}, roles {:?}, recoveries {recoveries:?}",
            roles(&graph)
        );
        super::assert_clean(&outcome, what);
        assert!(
            recoveries.len() >= failovers,
            "{what}: {failovers} failovers expected: {recoveries:?}"
        );
        let graph = Arc::try_unwrap(graph).unwrap_or_else(|_| panic!("the clients let go"));
        graph.shutdown();
        drop((a, b, lan));
        let report = journal(&dir);
        assert!(
            report.violations.is_empty(),
            "{what}: {:?}",
            report.violations
        );
        assert_eq!(
            report.released as u64, outcome.sent,
            "{what}: every reply released once"
        );
        assert_eq!(
            report.divergence,
            Divergence::default(),
            "{what}: {report:?}"
        );
        let folder = dir.0.to_string_lossy().into_owned();
        let checked = crate::cli::weir_ok(&["hams", "check", &folder]);
        assert!(
            checked.contains("consistent: no contradiction"),
            "{what}: {checked}"
        );
    }
}

#[test]
fn a_partitioned_primary_is_fenced_readmitted_as_backup_and_a_second_partition_is_survived() {
    let p = Pair::start("hams-part");
    let (pa, pb) = (p.pa.clone(), p.pb.clone());
    partition_primary(&p.graph, &p.load, &p.lan.hosts[0], &pa, "first partition");
    wait_for_roles(
        &p.graph,
        "the healed old primary re-admitted as the backup",
        |r| r.1.as_deref() == Some(pb.as_str()) && r.2.as_deref() == Some(pa.as_str()),
    );
    wait_for_answers(&p.load, p.load.answered(), 50, "after the first heal");

    partition_primary(&p.graph, &p.load, &p.lan.hosts[1], &pb, "second partition");
    wait_for_roles(&p.graph, "the second healed primary re-admitted", |r| {
        r.1.as_deref() == Some(pa.as_str()) && r.2.as_deref() == Some(pb.as_str())
    });
    wait_for_answers(&p.load, p.load.answered(), 50, "after the second heal");
    p.finish(2, "HAMS partitions");
}

/// The primary's link healed the moment its backup is promoted: with eight clients a batch is
/// always in flight at the old primary, and what it computed for it (its reply, the state it
/// ships) is still in its sockets' buffers and arrives after the heal, at its old epoch. None of
/// it may be released or applied; the old primary is then re-admitted as the backup.
#[test]
fn a_primary_healed_in_the_middle_of_a_batch_releases_nothing_of_its_old_epoch() {
    let p = Pair::start("hams-midbatch");
    let (pa, pb) = (p.pa.clone(), p.pb.clone());
    let host = &p.lan.hosts[0];
    let epoch = roles(&p.graph).0;
    host.cut();
    wait_for_roles(&p.graph, "the backup promoted", |r| {
        r.0 > epoch && r.1.as_deref() != Some(pa.as_str())
    });
    host.heal();
    wait_for_roles(
        &p.graph,
        "the healed old primary re-admitted as the backup",
        |r| r.1.as_deref() == Some(pb.as_str()) && r.2.as_deref() == Some(pa.as_str()),
    );
    wait_for_answers(&p.load, p.load.answered(), 50, "after the heal");
    p.finish(1, "HAMS primary healed mid-batch");
}

/// The replaced primary's link heals one way first: its frames (its heartbeats) arrive, nothing
/// reaches it, so each re-admission it triggers waits out its assignment's timeout, on a thread
/// of its own while the node goes on answering. Once the link carries both ways, a later
/// heartbeat brings it back as the backup.
#[test]
fn a_replaced_primary_reachable_one_way_only_is_readmitted_once_its_link_carries_both_ways() {
    let p = Pair::start("hams-oneway");
    let (pa, pb) = (p.pa.clone(), p.pb.clone());
    let host = &p.lan.hosts[0];
    let epoch = roles(&p.graph).0;
    host.cut();
    wait_for_roles(&p.graph, "the backup promoted", |r| {
        r.0 > epoch && r.1.as_deref() != Some(pa.as_str())
    });
    host.cut_towards();
    host.heal();
    // Heartbeats arrive for a few seconds; re-admissions go out and time out meanwhile.
    std::thread::sleep(Duration::from_secs(4));
    wait_for_answers(&p.load, p.load.answered(), 50, "served, one way healed");
    host.heal_towards();
    wait_for_roles(
        &p.graph,
        "the old primary re-admitted once its link carries both ways",
        |r| r.1.as_deref() == Some(pb.as_str()) && r.2.as_deref() == Some(pa.as_str()),
    );
    wait_for_answers(&p.load, p.load.answered(), 50, "after the heal");
    p.finish(1, "HAMS primary healed one way first");
}
