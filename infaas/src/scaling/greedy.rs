//! The Model-Autoscaler's greedy heuristic (INFaaS §4.2.2), one tick at a time.
//!
//! Scale up when headroom (capacity of the running instances over the served load) falls below
//! the slack threshold (1.05), or the capacity below the load plus the additive slack held for
//! spikes (0 by default): aim for the larger of `threshold × load` and `load + slack`, and price
//! two ways to get there —
//! *replicate* the running variant (the one giving the most capacity now) by as many instances as
//! the gap needs, or *upgrade* it to a faster variant of the same architecture within the SLO (its
//! instances unloaded, the new one's loaded to cover the gap) — and take the cheaper by the
//! paper's cost. A plan that does not fit the worker's resources is not taken; when none fits, the
//! decision is passed up to whoever can add workers. With nothing running, the cheapest variant
//! within the SLO is loaded.
//!
//! Scale down when the load is covered with headroom to spare: *remove one* instance, or
//! *downgrade* a variant to a cheaper one of the same architecture, whichever saves more, but only
//! once the same action has been the choice for `T_v` consecutive ticks, `T_v` being the load time
//! of the variant it shrinks (a variant that is slow to bring back is kept longer); any tick where
//! it is not the choice starts the count again.

use super::{Infeasible, Problem};

/// One scaling action, by candidate index.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Load `count` more instances of a variant (with none running: its first ones).
    Replicate {
        /// The variant.
        variant: usize,
        /// Instances added.
        count: u32,
    },
    /// Replace every instance of `from` with `count` of the faster `to`.
    Upgrade {
        /// The variant unloaded.
        from: usize,
        /// The variant loaded.
        to: usize,
        /// Instances of `to`.
        count: u32,
    },
    /// Unload one instance of a variant.
    RemoveOne {
        /// The variant.
        variant: usize,
    },
    /// Replace every instance of `from` with `count` of the cheaper `to`.
    Downgrade {
        /// The variant unloaded.
        from: usize,
        /// The variant loaded.
        to: usize,
        /// Instances of `to`.
        count: u32,
    },
}

/// An action with its changes (one per candidate) and cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What to do.
    pub action: Action,
    /// The change per candidate.
    pub deltas: Vec<i64>,
    /// Its cost (§4.2.1).
    pub cost: f64,
}

/// What one tick decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Headroom is within bounds; nothing to do.
    Hold,
    /// Scale up now.
    Up(Step),
    /// Scale up is needed but no plan fits this worker: ask for one elsewhere.
    PassUp(String),
    /// A scale-down has been the choice for `held` of the `needed` ticks.
    DownPending {
        /// The action waited on.
        step: Step,
        /// Consecutive ticks so far.
        held: u32,
        /// Ticks it must hold.
        needed: u32,
    },
    /// Scale down now.
    Down(Step),
}

fn step(p: &Problem, action: Action, changes: &[(usize, i64)]) -> Result<Step, Infeasible> {
    let mut deltas = vec![0i64; p.candidates.len()];
    for (i, d) in changes {
        deltas[*i] += d;
    }
    p.check(&deltas)?;
    Ok(Step {
        cost: p.cost(&deltas),
        action,
        deltas,
    })
}

/// Instances of saturation `qps` that cover `gap` requests per second.
fn instances_for(gap: f64, qps: f64) -> Option<u32> {
    if gap <= 0.0 {
        return Some(0);
    }
    if qps <= 0.0 {
        return None;
    }
    let n = (gap / qps).ceil();
    (n.is_finite() && n <= f64::from(u32::MAX)).then_some(n as u32)
}

/// The capacity a plan must reach: `threshold × load`, and at least load + slack.
fn target(p: &Problem, threshold: f64) -> f64 {
    (threshold * p.load_qps).max(p.load_qps + p.slack_qps)
}

/// The running variant scaling acts on: the one giving the most capacity now.
fn main_variant(p: &Problem) -> Option<usize> {
    p.candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.running > 0)
        .max_by(|(_, a), (_, b)| {
            (a.saturation_qps * f64::from(a.running))
                .total_cmp(&(b.saturation_qps * f64::from(b.running)))
        })
        .map(|(i, _)| i)
}

fn cheapest(options: impl Iterator<Item = Step>) -> Option<Step> {
    options.min_by(|a, b| a.cost.total_cmp(&b.cost))
}

/// The scale-up plan for `p`, when its headroom is below `threshold`.
///
/// # Errors
/// A reason when no plan fits the worker.
pub fn scale_up(p: &Problem, threshold: f64) -> Result<Step, String> {
    let goal = target(p, threshold);
    let cap = p.running_capacity();
    let gap = goal - cap;
    let within_slo = |i: &usize| p.candidates[*i].inference_ms <= p.slo_ms;
    let Some(v0) = main_variant(p) else {
        let options = (0..p.candidates.len()).filter(within_slo).filter_map(|i| {
            let n = instances_for(gap, p.candidates[i].saturation_qps)?;
            step(
                p,
                Action::Replicate {
                    variant: i,
                    count: n,
                },
                &[(i, i64::from(n))],
            )
            .ok()
        });
        return cheapest(options).ok_or_else(|| {
            format!("no variant within the SLO fits the worker for {goal:.1} req/s")
        });
    };
    let base = &p.candidates[v0];
    let replicate = within_slo(&v0)
        .then(|| instances_for(gap, base.saturation_qps))
        .flatten()
        .and_then(|k| {
            step(
                p,
                Action::Replicate {
                    variant: v0,
                    count: k,
                },
                &[(v0, i64::from(k))],
            )
            .ok()
        });
    let rest = cap - base.saturation_qps * f64::from(base.running);
    let upgrades = (0..p.candidates.len())
        .filter(|u| *u != v0)
        .filter(within_slo)
        .filter(|u| {
            let c = &p.candidates[*u];
            c.architecture == base.architecture && c.saturation_qps > base.saturation_qps
        })
        .filter_map(|u| {
            let c = &p.candidates[u];
            let m = instances_for(
                goal - rest - c.saturation_qps * f64::from(c.running),
                c.saturation_qps,
            )?;
            let action = Action::Upgrade {
                from: v0,
                to: u,
                count: m,
            };
            step(
                p,
                action,
                &[(u, i64::from(m)), (v0, -i64::from(base.running))],
            )
            .ok()
        });
    cheapest(replicate.into_iter().chain(upgrades)).ok_or_else(|| {
        format!(
            "neither replicating `{}` nor upgrading it fits the worker for {goal:.1} req/s",
            base.name
        )
    })
}

/// The best scale-down for `p` (the largest saving), if one keeps the headroom at `threshold`.
pub fn scale_down(p: &Problem, threshold: f64) -> Option<Step> {
    let goal = target(p, threshold);
    let cap = p.running_capacity();
    let removals = (0..p.candidates.len())
        .filter(|v| p.candidates[*v].running > 0)
        .filter(|v| cap - p.candidates[*v].saturation_qps >= goal)
        .filter_map(|v| step(p, Action::RemoveOne { variant: v }, &[(v, -1)]).ok());
    let downgrades = (0..p.candidates.len())
        .filter(|v| p.candidates[*v].running > 0)
        .flat_map(|v| (0..p.candidates.len()).map(move |d| (v, d)))
        .filter(|(v, d)| {
            let (a, b) = (&p.candidates[*v], &p.candidates[*d]);
            v != d && a.architecture == b.architecture && b.price_per_s < a.price_per_s
        })
        .filter_map(|(v, d)| {
            let (a, b) = (&p.candidates[v], &p.candidates[d]);
            let rest = cap
                - a.saturation_qps * f64::from(a.running)
                - b.saturation_qps * f64::from(b.running);
            let m = instances_for(goal - rest, b.saturation_qps)?;
            let action = Action::Downgrade {
                from: v,
                to: d,
                count: m,
            };
            step(p, action, &[(d, i64::from(m)), (v, -i64::from(a.running))]).ok()
        });
    removals
        .chain(downgrades)
        .filter(|s| s.cost < 0.0)
        .min_by(|a, b| a.cost.total_cmp(&b.cost))
}

/// The candidate a scale-down shrinks (whose load time it waits for).
fn shrunk(action: &Action) -> usize {
    match action {
        Action::RemoveOne { variant } | Action::Replicate { variant, .. } => *variant,
        Action::Downgrade { from, .. } | Action::Upgrade { from, .. } => *from,
    }
}

/// One application's autoscaler on one worker: ticks, and the scale-down it is waiting on.
#[derive(Debug, Clone)]
pub struct ModelAutoscaler {
    threshold: f64,
    tick_s: f64,
    pending: Option<(Action, u32)>,
}

impl ModelAutoscaler {
    /// An autoscaler with the slack threshold (the paper's 1.05) that ticks every `tick_s` seconds
    /// (the paper's 1 s).
    pub fn new(threshold: f64, tick_s: f64) -> Self {
        ModelAutoscaler {
            threshold,
            tick_s: tick_s.max(1e-3),
            pending: None,
        }
    }

    /// One tick over the current state `p`.
    pub fn tick(&mut self, p: &Problem) -> Decision {
        // Below the threshold's headroom, or below the load plus the slack held for spikes.
        if p.running_capacity() < target(p, self.threshold) {
            self.pending = None;
            return match scale_up(p, self.threshold) {
                Ok(s) => Decision::Up(s),
                Err(reason) => Decision::PassUp(reason),
            };
        }
        let Some(down) = scale_down(p, self.threshold) else {
            self.pending = None;
            return Decision::Hold;
        };
        let held = match &self.pending {
            Some((action, n)) if *action == down.action => n + 1,
            _ => 1,
        };
        let load_s = p.candidates[shrunk(&down.action)].load_s;
        let needed = ((load_s / self.tick_s).ceil() as u32).max(1);
        if held >= needed {
            self.pending = None;
            Decision::Down(down)
        } else {
            self.pending = Some((down.action.clone(), held));
            Decision::DownPending {
                step: down,
                held,
                needed,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::table2;
    use super::super::{ilp, Candidate, Resources};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn scale_up_fires_below_the_threshold_only() {
        let mut p = table2(95.0, 300.0);
        p.candidates[1].running = 1; // B: 100 req/s for 95: headroom 1.053
        let mut a = ModelAutoscaler::new(1.05, 1.0);
        assert!(matches!(a.tick(&p), Decision::Hold));
        p.load_qps = 96.0; // headroom 1.042
        assert!(matches!(a.tick(&p), Decision::Up(_)));
    }

    #[test]
    fn capacity_below_the_load_plus_slack_scales_up_at_any_headroom() {
        let mut p = table2(10.0, 300.0);
        p.candidates[1].running = 1; // B: 100 req/s for 10: headroom 10
        let mut a = ModelAutoscaler::new(1.05, 1.0);
        assert!(matches!(
            a.tick(&p),
            Decision::Hold | Decision::DownPending { .. }
        ));
        p.slack_qps = 150.0; // 160 req/s wanted
        match a.tick(&p) {
            // The plan meets constraint (1): capacity ≥ load + slack.
            Decision::Up(s) => assert_eq!(p.check(&s.deltas), Ok(()), "{s:?}"),
            other => panic!("expected a scale-up, got {other:?}"),
        }
    }

    #[test]
    fn the_cheaper_of_replicating_and_upgrading_is_taken() {
        // One B serving 150 req/s: a second B (cost 3) beats upgrading to C (16 − 3 = 13).
        let mut p = table2(150.0, 300.0);
        p.candidates[1].running = 1;
        let s = scale_up(&p, 1.05).unwrap();
        assert_eq!(
            s.action,
            Action::Replicate {
                variant: 1,
                count: 1
            }
        );
        assert_eq!(s.cost, 3.0);
        // At 1500 req/s: 15 more B (45) against 2 C for 1 B (32 − 3 = 29).
        p.load_qps = 1500.0;
        let s = scale_up(&p, 1.05).unwrap();
        assert_eq!(
            s.action,
            Action::Upgrade {
                from: 1,
                to: 2,
                count: 2
            }
        );
        assert_eq!(s.cost, 29.0);
        // Upgrades stay within the architecture.
        p.candidates[2].architecture = "vgg16".into();
        assert!(matches!(
            scale_up(&p, 1.05).unwrap().action,
            Action::Replicate { .. }
        ));
    }

    #[test]
    fn replicas_beyond_the_executors_of_a_type_give_way_to_an_upgrade() {
        // At 150 req/s a second B is cheapest, but B's type has executors for one instance.
        let mut p = table2(150.0, 300.0);
        p.candidates[1].running = 1;
        p.candidates[1].max_instances = Some(1);
        let s = scale_up(&p, 1.05).unwrap();
        assert_eq!(
            s.action,
            Action::Upgrade {
                from: 1,
                to: 2,
                count: 1
            }
        );
        assert!(matches!(
            p.check(&[0, 1, 0]),
            Err(Infeasible::Placement { most: 1, .. })
        ));
        // The exact plan obeys the same bound, at no more than the greedy's cost.
        let exact = crate::scaling::ilp::solve(&p).unwrap();
        assert!(exact[1] <= 0, "{exact:?}");
        assert!(p.cost(&exact) <= s.cost + 1e-9);
        // With no executor left for C either, nothing fits: the question is passed up.
        p.candidates[2].max_instances = Some(0);
        let mut a = ModelAutoscaler::new(1.05, 1.0);
        assert!(matches!(a.tick(&p), Decision::PassUp(_)));
    }

    #[test]
    fn a_plan_the_worker_cannot_hold_is_passed_up() {
        let mut p = table2(1500.0, 300.0);
        p.candidates[1].running = 1;
        p.capacity.cores = 1.0;
        let mut a = ModelAutoscaler::new(1.05, 1.0);
        assert!(matches!(a.tick(&p), Decision::PassUp(_)));
    }

    #[test]
    fn scale_down_waits_for_the_load_time_and_restarts_when_interrupted() {
        let mut p = table2(50.0, 300.0);
        p.candidates[1].running = 3; // 300 req/s for 50
        p.candidates[1].load_s = 2.5; // three 1 s ticks
        p.candidates[0].architecture = "other".into(); // no downgrade to A
        let mut a = ModelAutoscaler::new(1.05, 1.0);
        assert!(matches!(
            a.tick(&p),
            Decision::DownPending {
                held: 1,
                needed: 3,
                ..
            }
        ));
        assert!(matches!(a.tick(&p), Decision::DownPending { held: 2, .. }));
        p.load_qps = 260.0; // no longer removable: the count restarts
        assert!(matches!(a.tick(&p), Decision::Hold));
        p.load_qps = 50.0;
        assert!(matches!(a.tick(&p), Decision::DownPending { held: 1, .. }));
        assert!(matches!(a.tick(&p), Decision::DownPending { held: 2, .. }));
        match a.tick(&p) {
            Decision::Down(s) => assert_eq!(s.action, Action::RemoveOne { variant: 1 }),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_downgrade_is_chosen_when_it_saves_more() {
        // One C (16/s) serving 8 req/s: two A (2/s) cover it.
        let mut p = table2(8.0, 300.0);
        p.candidates[2].running = 1;
        let s = scale_down(&p, 1.05).unwrap();
        assert_eq!(
            s.action,
            Action::Downgrade {
                from: 2,
                to: 0,
                count: 2
            }
        );
        assert_eq!(s.cost, 2.0 - 16.0);
    }

    fn candidate() -> impl Strategy<Value = Candidate> {
        (
            1.0f64..500.0,
            1.0f64..400.0,
            0.0f64..5.0,
            0.1f64..20.0,
            0.5f64..2.0,
            0u32..3,
            0usize..2,
            proptest::option::of(0u32..5),
        )
            .prop_map(
                |(qps, ms, load_s, price, cores, running, arch, most)| Candidate {
                    name: String::new(),
                    architecture: format!("a{arch}"),
                    saturation_qps: qps,
                    inference_ms: ms,
                    load_s,
                    price_per_s: price,
                    needs: Resources {
                        cores,
                        memory_bytes: 1.0,
                    },
                    running,
                    max_instances: most,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// The exact plan never costs more than the greedy one, for the same capacity goal.
        #[test]
        fn the_exact_plan_never_costs_more_than_the_greedy_one(
            candidates in proptest::collection::vec(candidate(), 2..6),
            load in 1.0f64..2000.0,
            slo in 50.0f64..400.0,
            lambda in 0.0f64..2.0,
            cores in 4.0f64..40.0,
        ) {
            let mut p = Problem {
                candidates,
                load_qps: load,
                slo_ms: slo,
                slack_qps: 0.0,
                lambda_per_s: lambda,
                capacity: Resources { cores, memory_bytes: 1e9 },
            };
            p.slack_qps = 0.05 * load; // the greedy's goal, 1.05 × load
            let running: f64 = p.candidates.iter().map(|c| c.needs.cores * f64::from(c.running)).sum();
            prop_assume!(running <= cores);
            if let Ok(greedy) = scale_up(&p, 1.05) {
                prop_assert!(p.check(&greedy.deltas).is_ok());
                let exact = ilp::solve(&p).expect("a greedy plan exists, so an exact one does");
                prop_assert!(p.check(&exact).is_ok());
                prop_assert!(p.cost(&exact) <= greedy.cost + 1e-6,
                    "exact {} > greedy {}", p.cost(&exact), greedy.cost);
            }
        }
    }
}
