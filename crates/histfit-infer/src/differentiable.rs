//! Profiled test statistics as differentiable functions of sample yields (the analysis-as-a-loss
//! use: a network produces a signal histogram, the loss is the expected significance).
//!
//! q0 = 2[NLL(μ=0, θ̂̂) − NLL(μ̂, θ̂)] (0 when μ̂ < 0) and the one-sided
//! qμ = 2[NLL(μ, θ̂̂) − NLL(μ̂, θ̂)] (0 when μ̂ > μ) depend on the yields y directly and through
//! the fitted parameters; at a minimum ∂NLL/∂θ = 0, so the envelope theorem gives
//! dq/dy = 2[∂NLL/∂y (conditional fit) − ∂NLL/∂y (free fit)], with no derivative of the fits.
//! Fits start from the previous call's minima when given (warm starts: a training step moves
//! the yields a little). A fit that did not converge is reported (`converged`), not hidden; a
//! likelihood that is not finite is an error.

use crate::fit::{fit, FitOptions};
use crate::{InferError, Result};
use histfit_compute::{Dataset, YieldEvaluator};
use serde::Serialize;

/// A profiled statistic, its gradient with respect to the yields (samples in the order asked,
/// bins concatenated) and the fits behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfiledStatistic {
    pub q: f64,
    pub grad: Vec<f64>,
    pub mu_hat: f64,
    pub free_bestfit: Vec<f64>,
    pub cond_bestfit: Vec<f64>,
    pub converged: bool,
}

/// Sets the yields of `samples` (each `(sample index, yields)`); every other sample keeps the
/// model's. A sample may appear once.
pub fn set_yields<E: YieldEvaluator>(eval: &mut E, samples: &[(usize, Vec<f64>)]) -> Result<()> {
    eval.reset_yields();
    let mut seen = std::collections::HashSet::new();
    for (s, _) in samples {
        if !seen.insert(*s) {
            return Err(InferError::Request(format!(
                "sample \"{}\" is given yields twice",
                eval.model().samples[*s].name
            )));
        }
    }
    for (s, y) in samples {
        eval.set_yields(*s, y)?;
    }
    Ok(())
}

fn yield_grad<E: YieldEvaluator>(
    eval: &mut E,
    params: &[f64],
    data: &Dataset,
    samples: &[(usize, Vec<f64>)],
) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for (s, y) in samples {
        let mut g = vec![0.0; y.len()];
        eval.nll_grad_yields(params, data, *s, &mut g)?;
        out.extend(g);
    }
    Ok(out)
}

/// qμ (one-sided, `mu` > the fitted value gives 0) or q0 (`mu` = 0 with `discovery`) at the given
/// yields, with its gradient. `warm`: starting points (free, conditional) from a previous call;
/// `edm`: the fits' convergence threshold (default 1e-11; smaller for gradients checked against
/// finite differences, whose noise is the fits' residual error divided by the step).
pub fn profiled_statistic<E: YieldEvaluator>(
    eval: &mut E,
    data: &Dataset,
    samples: &[(usize, Vec<f64>)],
    mu: f64,
    discovery: bool,
    warm: Option<(&[f64], &[f64])>,
    edm: Option<f64>,
) -> Result<ProfiledStatistic> {
    let optimizer = edm.map(|edm| histfit_optim::Options {
        edm,
        ..Default::default()
    });
    if !mu.is_finite() {
        return Err(InferError::Request(format!("mu = {mu}: expected a number")));
    }
    set_yields(eval, samples)?;
    let poi = eval.model().poi;
    let n = eval.model().n_params();
    if let Some((a, b)) = warm {
        if a.len() != n || b.len() != n {
            return Err(InferError::Request(format!(
                "warm starts need {n} values each, got {} and {}",
                a.len(),
                b.len()
            )));
        }
    }
    let free = fit(
        eval,
        data,
        &FitOptions {
            init: warm.map(|w| w.0.to_vec()),
            optimizer,
            ..Default::default()
        },
    )?;
    let mut init_c = warm
        .map(|w| w.1.to_vec())
        .unwrap_or_else(|| free.bestfit.clone());
    init_c[poi] = mu;
    let cond = fit(
        eval,
        data,
        &FitOptions {
            init: Some(init_c),
            fix: vec![(poi, mu)],
            optimizer,
            ..Default::default()
        },
    )?;
    if !free.twice_nll.is_finite() || !cond.twice_nll.is_finite() {
        return Err(InferError::Request(format!(
            "the likelihood is not finite at these yields (free fit: {}; conditional fit: {}): \
             a bin expects no events, or a negative number, where events are observed",
            free.reason, cond.reason
        )));
    }
    let mu_hat = free.bestfit[poi];
    let active = if discovery { mu_hat > mu } else { mu_hat < mu };
    let t = cond.twice_nll - free.twice_nll;
    let (q, grad) = if active && t > 0.0 {
        let gc = yield_grad(eval, &cond.bestfit, data, samples)?;
        let gf = yield_grad(eval, &free.bestfit, data, samples)?;
        (t, gc.iter().zip(&gf).map(|(c, f)| 2.0 * (c - f)).collect())
    } else {
        (0.0, vec![0.0; samples.iter().map(|s| s.1.len()).sum()])
    };
    Ok(ProfiledStatistic {
        q,
        grad,
        mu_hat,
        converged: free.converged && cond.converged,
        free_bestfit: free.bestfit,
        cond_bestfit: cond.bestfit,
    })
}

/// The expected discovery significance: q0 on the Asimov dataset of μ = 1 at the model's
/// initial nuisance parameters, built from the given yields — the usual figure of merit for
/// optimising an analysis before looking at data. The dataset depends on the yields too, so
/// dq0/dy = (envelope term at fixed data) + Σ_b ∂q0/∂n_b · ∂n_b/∂y, with
/// ∂q0/∂n_b = 2 ln(λ_b(free fit) / λ_b(conditional fit)) (the data's other terms cancel in the
/// difference of the two fits) and ∂n_b/∂y = ∂λ_b/∂y at the Asimov point.
pub fn expected_q0<E: YieldEvaluator>(
    eval: &mut E,
    samples: &[(usize, Vec<f64>)],
    warm: Option<(&[f64], &[f64])>,
    edm: Option<f64>,
) -> Result<ProfiledStatistic> {
    set_yields(eval, samples)?;
    let model = eval.model().clone();
    let mut at = model.init();
    at[model.poi] = 1.0;
    let full = histfit_compute::expected_data(eval, &at)?;
    let asimov = Dataset::new(&model, &full)?;
    let mut r = profiled_statistic(eval, &asimov, samples, 0.0, true, warm, edm)?;
    if r.q > 0.0 {
        let (mut lf, mut lc) = (vec![0.0; model.n_main], vec![0.0; model.n_main]);
        eval.expected_main(&r.free_bestfit, &mut lf)?;
        eval.expected_main(&r.cond_bestfit, &mut lc)?;
        let dq_dn: Vec<f64> = lf
            .iter()
            .zip(&lc)
            .map(|(&f, &c)| {
                if f > 0.0 && c > 0.0 {
                    2.0 * (f / c).ln()
                } else {
                    0.0
                }
            })
            .collect();
        let mut at_k = 0;
        for (s, y) in samples {
            let mut jac = vec![0.0; y.len()];
            eval.yield_jacobian(&at, *s, &mut jac)?;
            let b0 = model.samples[*s].bin_start;
            for (k, j) in jac.iter().enumerate() {
                r.grad[at_k + k] += dq_dn[b0 + k] * j;
            }
            at_k += y.len();
        }
    }
    Ok(r)
}
