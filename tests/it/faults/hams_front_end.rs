//! The front end (the graph's process, with its HAMS manager) cut off from a live primary, while
//! the primary and its backup still reach each other and the backup still reaches the front end
//! ([`Netns::cut_from_here`](weir_faults::netns::Netns::cut_from_here)). The primary keeps
//! running, keeps its backup and may keep shipping it states of its epoch; the front end only
//! sees its batches go unanswered. The manager promotes the backup at a new epoch after
//! `detect_ms`; the old primary, fenced by that epoch, must have nothing of its old epoch applied
//! by the new primary or released by the front end, and after the heal it is made the backup
//! again. Checked like every HAMS fault ([`super::hams_partition::Pair::finish`]): every request
//! answered once, none failed, zero contradicted outputs by `weir hams check`.

use super::hams_partition::{roles, wait_for_answers, wait_for_roles, Pair};

#[test]
fn a_front_end_cut_off_from_a_live_primary_fails_over_and_readmits_it_after_the_heal() {
    let p = Pair::start("hams-front");
    let (pa, pb) = (p.pa.clone(), p.pb.clone());
    let host = &p.lan.hosts[0];
    let epoch = roles(&p.graph).0;
    host.cut_from_here();
    wait_for_roles(&p.graph, "the backup promoted", |r| {
        r.0 > epoch && r.1.as_deref() == Some(pb.as_str())
    });
    wait_for_answers(&p.load, p.load.answered(), 50, "served while cut off");
    host.heal_from_here();
    wait_for_roles(&p.graph, "the old primary re-admitted as the backup", |r| {
        r.1.as_deref() == Some(pb.as_str()) && r.2.as_deref() == Some(pa.as_str())
    });
    wait_for_answers(&p.load, p.load.answered(), 50, "after the heal");
    p.finish(1, "HAMS front end cut off from a live primary");
}
