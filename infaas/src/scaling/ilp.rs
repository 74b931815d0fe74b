//! The exact scaling plan: INFaaS's integer program (§4.2.1) solved with `good_lp` over the
//! pure-Rust `microlp` branch-and-bound solver.
//!
//! Variables: an integer change `δ` per variant and a continuous `p ≥ max(δ, 0)` standing for its
//! loaded part, so the objective Σ `C·δ + C·λ·T_load·p` stays linear (with `C·λ·T_load ≥ 0`, the
//! minimum puts `p` exactly at `max(δ, 0)`). Constraint (2) is a bound: a variant above the SLO
//! gets `δ ≤ 0`; (4) is `δ ≥ −N`; each `δ` is also bounded above by what the worker could hold
//! and by what the load alone could use, which keeps branch-and-bound finite. The paper found this
//! too slow online (Gurobi, 23 s for 50 architectures); it is here to check the greedy heuristic
//! against (a property test checks that its cost is never higher) and for small or offline plans.

use good_lp::{
    constraint, default_solver, variable, Expression, ProblemVariables, ResolutionError, Solution,
    SolverModel, Variable,
};

use super::Problem;

/// Why no exact plan came back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IlpError {
    /// No plan meets the constraints.
    #[error("no plan meets the load within the SLO and the worker's resources")]
    NoPlan,
    /// The solver failed.
    #[error("solver: {0}")]
    Solver(String),
    /// An input is not a finite non-negative number.
    #[error("variant `{0}`: a figure is negative or not finite")]
    BadInput(String),
}

/// Most instances of one variant the plan may add: what the worker could hold and what the load
/// alone could use, whichever is less.
fn upper_bound(p: &Problem, i: usize) -> f64 {
    let c = &p.candidates[i];
    if c.inference_ms > p.slo_ms {
        return 0.0;
    }
    let fits = |need: f64, has: f64| {
        if need > 0.0 {
            (has / need).floor()
        } else {
            f64::INFINITY
        }
    };
    let hold = fits(c.needs.cores, p.capacity.cores)
        .min(fits(c.needs.memory_bytes, p.capacity.memory_bytes));
    let useful = if c.saturation_qps > 0.0 {
        ((p.load_qps + p.slack_qps) / c.saturation_qps).ceil()
    } else {
        0.0
    };
    let placed = c
        .max_instances
        .map_or(f64::INFINITY, |m| f64::from(m) - f64::from(c.running));
    (hold - f64::from(c.running))
        .min(useful)
        .min(placed)
        .max(0.0)
}

/// The cheapest plan: one change per candidate, in order.
///
/// # Errors
/// [`IlpError::NoPlan`] when nothing meets the constraints, [`IlpError::BadInput`] for a negative
/// or non-finite figure.
pub fn solve(p: &Problem) -> Result<Vec<i64>, IlpError> {
    for c in &p.candidates {
        let figures = [
            c.saturation_qps,
            c.inference_ms,
            c.load_s,
            c.price_per_s,
            c.needs.cores,
            c.needs.memory_bytes,
        ];
        if figures.iter().any(|x| !x.is_finite() || *x < 0.0) {
            return Err(IlpError::BadInput(c.name.clone()));
        }
    }
    if p.candidates.is_empty() {
        return if p.load_qps + p.slack_qps <= 0.0 {
            Ok(Vec::new())
        } else {
            Err(IlpError::NoPlan)
        };
    }
    let mut vars = ProblemVariables::new();
    let mut deltas: Vec<Variable> = Vec::with_capacity(p.candidates.len());
    let mut loaded: Vec<Variable> = Vec::with_capacity(p.candidates.len());
    for (i, c) in p.candidates.iter().enumerate() {
        deltas.push(
            vars.add(
                variable()
                    .integer()
                    .min(-f64::from(c.running))
                    .max(upper_bound(p, i)),
            ),
        );
        loaded.push(vars.add(variable().min(0.0)));
    }
    let mut objective = Expression::from(0.0);
    let mut capacity = Expression::from(0.0);
    let mut cores = Expression::from(0.0);
    let mut memory = Expression::from(0.0);
    for (i, c) in p.candidates.iter().enumerate() {
        let n = f64::from(c.running);
        objective +=
            c.price_per_s * deltas[i] + c.price_per_s * p.lambda_per_s * c.load_s * loaded[i];
        capacity += c.saturation_qps * deltas[i] + c.saturation_qps * n;
        cores += c.needs.cores * deltas[i] + c.needs.cores * n;
        memory += c.needs.memory_bytes * deltas[i] + c.needs.memory_bytes * n;
    }
    let mut model = vars
        .minimise(objective)
        .using(default_solver)
        .with(constraint!(capacity >= p.load_qps + p.slack_qps))
        .with(constraint!(cores <= p.capacity.cores))
        .with(constraint!(memory <= p.capacity.memory_bytes));
    for (d, l) in deltas.iter().zip(&loaded) {
        model = model.with(constraint!(*l - *d >= 0.0));
    }
    let solution = model.solve().map_err(|e| match e {
        ResolutionError::Infeasible => IlpError::NoPlan,
        other => IlpError::Solver(other.to_string()),
    })?;
    Ok(deltas
        .iter()
        .map(|d| solution.value(*d).round() as i64)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::tests::table2;
    use super::*;

    /// Table 3 (INFaaS §2.2): the cheapest instance counts of Table 2's variants.
    #[test]
    fn table_three_is_reproduced() {
        for (qps, slo, counts, cost) in [
            (10.0, 300.0, [2, 0, 0], 2.0),
            (10.0, 50.0, [0, 1, 0], 3.0),
            (1000.0, 300.0, [0, 2, 1], 22.0),
        ] {
            let p = table2(qps, slo);
            let plan = solve(&p).unwrap();
            assert_eq!(plan, counts.to_vec(), "{qps} QPS, {slo} ms");
            assert_eq!(p.cost(&plan), cost);
            assert!(p.check(&plan).is_ok());
        }
    }

    #[test]
    fn unloading_is_rewarded_and_loading_time_weighs_with_lambda() {
        // Two B instances run for a load one A covers: unload both, load one A... unless A is
        // slow to load and λ is large.
        let mut p = table2(4.0, 300.0);
        p.candidates[1].running = 2;
        assert_eq!(solve(&p).unwrap(), vec![1, -2, 0]);
        p.candidates[0].load_s = 10.0;
        p.lambda_per_s = 1.0;
        // A now costs 1 + 10 to load: keeping one B (refunding one) is cheaper.
        assert_eq!(solve(&p).unwrap(), vec![0, -1, 0]);
    }

    #[test]
    fn no_plan_when_nothing_fits() {
        let mut p = table2(1000.0, 10.0);
        assert_eq!(solve(&p), Err(IlpError::NoPlan));
        p.slo_ms = 300.0;
        p.capacity.cores = 1.0;
        assert_eq!(solve(&p), Err(IlpError::NoPlan));
        p.candidates[0].price_per_s = f64::NAN;
        assert!(matches!(solve(&p), Err(IlpError::BadInput(_))));
    }
}
