//! The checker's rules on hand-written journals.

use super::*;

fn applied(node: NodeId, seq: Seq, ids: Vec<u64>, hashes: Vec<u64>) -> Event {
    Event::Applied {
        node,
        epoch: 1,
        seq,
        deps: vec![],
        durable_then: vec![],
        request_ids: ids,
        row_hashes: hashes,
        full: false,
        state_hash: 0,
        member: "b".into(),
        received_at_us: 0,
    }
}

#[test]
fn a_consistent_history_passes() {
    let events = vec![
        applied(1, 1, vec![10, 11], vec![100, 110]),
        Event::Released {
            request_id: 10,
            passed: vec![(1, 1, 100)],
        },
    ];
    let r = check(&events);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!((r.released, r.applied), (1, 1));
}

#[test]
fn conflicts_double_releases_and_early_applies_are_reported() {
    let events = vec![
        applied(1, 1, vec![10], vec![100]),
        applied(1, 1, vec![10], vec![101]),
        Event::Released {
            request_id: 10,
            passed: vec![(1, 1, 999)],
        },
        Event::Released {
            request_id: 10,
            passed: vec![],
        },
        Event::Released {
            request_id: 12,
            passed: vec![(1, 2, 1)],
        },
        Event::Applied {
            node: 2,
            epoch: 1,
            seq: 1,
            deps: vec![(1, 4)],
            durable_then: vec![(1, 3)],
            request_ids: vec![],
            row_hashes: vec![],
            full: false,
            state_hash: 0,
            member: "b".into(),
            received_at_us: 0,
        },
    ];
    let v = check(&events).violations;
    assert!(v.iter().any(|m| m.contains("made durable twice")), "{v:?}");
    assert!(
        v.iter().any(|m| m.contains("differs from the durable")),
        "{v:?}"
    );
    assert!(v.iter().any(|m| m.contains("released 2 times")), "{v:?}");
    assert!(
        v.iter().any(|m| m.contains("which no backup applied")),
        "{v:?}"
    );
    assert!(
        v.iter().any(|m| m.starts_with("apply after dependencies")),
        "{v:?}"
    );
}

#[test]
fn a_whole_state_makes_the_versions_its_epoch_made_before_it_durable() {
    // Version 2's tuple was lost; the primary shipped version 3 whole, which holds it.
    let whole = |seq| Event::Applied {
        node: 1,
        epoch: 2,
        seq,
        deps: vec![],
        durable_then: vec![],
        request_ids: vec![],
        row_hashes: vec![],
        full: true,
        state_hash: 0,
        member: "b".into(),
        received_at_us: 0,
    };
    let released = |request_id, seq, hash| Event::Released {
        request_id,
        passed: vec![(1, seq, hash)],
    };
    let events = vec![
        run(2, 2, vec![20], vec![(200, 0, 0)]),
        run(2, 3, vec![30], vec![(300, 0, 0)]),
        run(2, 4, vec![40], vec![(400, 0, 0)]),
        whole(3),
        released(20, 2, 200),
        released(30, 3, 300),
    ];
    let r = check(&events);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    // Version 4 came after the whole state: a reply on it is not covered.
    let mut late = events.clone();
    late.push(released(40, 4, 400));
    let v = check(&late).violations;
    assert!(
        v.iter()
            .any(|m| m.contains("version 4, which no backup applied")),
        "{v:?}"
    );
    // A reply that differs from what the primary made is a conflict.
    let mut differs = events;
    differs.push(released(21, 2, 201));
    let v = check(&differs).violations;
    assert!(v.iter().any(|m| m.contains("request 21")), "{v:?}");
}

fn run(epoch: Epoch, seq: Seq, ids: Vec<u64>, rows: Vec<(u64, u32, u64)>) -> Event {
    Event::Produced {
        node: 1,
        epoch,
        seq,
        request_ids: ids,
        row_hashes: rows.iter().map(|r| r.0).collect(),
        row_labels: rows.iter().map(|r| r.1).collect(),
        row_coarse: rows.iter().map(|r| r.2).collect(),
        choice: None,
        state_hash: 0,
        replied_at_us: 0,
    }
}

#[test]
fn divergence_compares_what_was_released_with_the_last_rerun() {
    // Checkpoint-like: replies carry no hash, so the first run is what left; version 2 ran
    // again with a last-bit change on request 20 and a flipped label on request 21.
    let events = vec![
        run(1, 1, vec![10], vec![(1, 3, 5)]),
        run(1, 2, vec![20, 21], vec![(2, 3, 6), (3, 4, 7)]),
        run(2, 2, vec![20, 21], vec![(9, 3, 6), (8, 5, 8)]),
        Event::Released {
            request_id: 10,
            passed: vec![],
        },
        Event::Released {
            request_id: 20,
            passed: vec![],
        },
        Event::Released {
            request_id: 21,
            passed: vec![],
        },
    ];
    let d = check(&events).divergence;
    assert_eq!(
        d,
        Divergence {
            rows: 2,
            differ: 2,
            differ_8bit: 1,
            label_flips: 1
        }
    );
    // NSPB-like: the reply names the durable run (epoch 2's version 3); the rolled-back
    // epoch-1 run of version 2 was never released, so nothing counts.
    let events = vec![
        run(1, 2, vec![30], vec![(4, 1, 1)]),
        run(2, 3, vec![30], vec![(5, 2, 2)]),
        Event::Released {
            request_id: 30,
            passed: vec![(1, 3, 5)],
        },
    ];
    assert_eq!(check(&events).divergence, Divergence::default());
}

#[test]
fn a_torn_or_repeated_apply_is_reported() {
    let produced = Event::Produced {
        node: 1,
        epoch: 1,
        seq: 1,
        request_ids: vec![10],
        row_hashes: vec![100],
        row_labels: vec![0],
        row_coarse: vec![0],
        choice: None,
        state_hash: 7,
        replied_at_us: 0,
    };
    let mut torn = applied(1, 1, vec![10], vec![100]);
    if let Event::Applied { state_hash, .. } = &mut torn {
        *state_hash = 8;
    }
    let v = check(&[produced.clone(), torn]).violations;
    assert!(
        v.iter()
            .any(|m| m.starts_with("the shipped state is the state made")),
        "{v:?}"
    );
    let mut good = applied(1, 1, vec![10], vec![100]);
    if let Event::Applied { state_hash, .. } = &mut good {
        *state_hash = 7;
    }
    assert!(check(&[produced.clone(), good.clone()])
        .violations
        .is_empty());
    let v = check(&[produced, good.clone(), good]).violations;
    assert!(v.iter().any(|m| m.starts_with("at most once")), "{v:?}");
}
