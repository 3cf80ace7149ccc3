//! Profiled test statistics as differentiable functions of the likelihood's input yields (the
//! analysis-as-a-loss use: a network produces a histogram, the loss is the expected
//! significance). Which yields can be inputs is the likelihood's business
//! ([`YieldEvaluator`]); here an input is an index, its yields a vector.
//!
//! q0 = 2[NLL(μ=0, θ̂̂) − NLL(μ̂, θ̂)] (0 when μ̂ < 0) and the one-sided
//! qμ = 2[NLL(μ, θ̂̂) − NLL(μ̂, θ̂)] (0 when μ̂ > μ) depend on the yields y directly and through
//! the fitted parameters; at a minimum ∂NLL/∂θ = 0, so the envelope theorem gives
//! dq/dy = 2[∂NLL/∂y (conditional fit) − ∂NLL/∂y (free fit)], with no derivative of the fits.
//! Fits start from the previous call's minima when given (warm starts: a training step moves
//! the yields a little). A fit that did not converge is reported (`converged`), not hidden; a
//! likelihood that is not finite is an error.

use crate::batch::fit_together;
use crate::fit::{fit, polish_minimum, FitOptions};
use crate::{InferError, Result};
use histfit_seam::{AsimovTerm, Dataset, Evaluator, YieldEvaluator, YieldGradTerms, YieldGradient};
use serde::Serialize;

/// A profiled statistic, its gradient with respect to the yields (inputs in the order given,
/// their values concatenated) and the fits behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfiledStatistic {
    pub q: f64,
    /// `None` when the evaluator wrote the gradient to its device output (yields in GPU memory).
    pub grad: Option<Vec<f64>>,
    pub mu_hat: f64,
    pub free_bestfit: Vec<f64>,
    pub cond_bestfit: Vec<f64>,
    pub converged: bool,
}

/// Sets the yields of `inputs` (each `(input index, yields)`) on the host; every other input
/// keeps the likelihood's own. An input may appear once. Returns the input indices, in order,
/// for [`profiled_statistic`] and [`expected_q0`].
pub fn set_yields<E: YieldEvaluator>(
    eval: &mut E,
    inputs: &[(usize, Vec<f64>)],
) -> Result<Vec<usize>> {
    eval.reset_yields();
    let idx: Vec<usize> = inputs.iter().map(|s| s.0).collect();
    eval.check_inputs(&idx)?;
    for (s, y) in inputs {
        eval.set_yields(*s, y)?;
    }
    Ok(idx)
}

/// −2 ln L at `params` with the yields of `inputs` already set, its gradient with
/// respect to the parameters, and with respect to the yields (`None` when the evaluator wrote it
/// to its device output). Where −2 ln L is not finite neither gradient exists: both are NaN.
pub fn twice_nll_yields<E: YieldGradient>(
    eval: &mut E,
    params: &[f64],
    data: &Dataset,
    inputs: &[usize],
) -> Result<(f64, Vec<f64>, Option<Vec<f64>>)> {
    let mut g = vec![0.0; params.len()];
    let v = eval.nll_grad(params, data, &mut g)?;
    // A NaN weight gives NaN yield gradients on every device.
    let c = if v.is_finite() { 2.0 } else { f64::NAN };
    let gy = eval.yield_grad_sum(
        inputs,
        &YieldGradTerms {
            data,
            terms: &[(c, params)],
            asimov: None,
        },
    )?;
    Ok((2.0 * v, g.iter().map(|x| 2.0 * x).collect(), gy))
}

/// qμ (one-sided, `mu` > the fitted value gives 0) or q0 (`mu` = 0 with `discovery`) with the
/// yields of `inputs` already set, and its gradient with respect to them. `warm`:
/// starting points (free, conditional) from a previous call; `edm`: the fits' convergence
/// threshold (default 1e-11; smaller for gradients checked against finite differences, whose
/// noise is the fits' residual error divided by the step).
pub fn profiled_statistic<E: YieldGradient>(
    eval: &mut E,
    data: &Dataset,
    inputs: &[usize],
    mu: f64,
    discovery: bool,
    warm: Option<(&[f64], &[f64])>,
    edm: Option<f64>,
) -> Result<ProfiledStatistic> {
    let p = profile(eval, data, mu, discovery, warm, edm)?;
    let grad = eval.yield_grad_sum(
        inputs,
        &YieldGradTerms {
            data,
            terms: &envelope_terms(&p),
            asimov: None,
        },
    )?;
    Ok(ProfiledStatistic { grad, ..p })
}

/// dq/dy at fixed data, by the envelope theorem: 2[∂NLL/∂y (conditional fit) − ∂NLL/∂y (free
/// fit)], or nothing where q = 0.
fn envelope_terms(p: &ProfiledStatistic) -> Vec<(f64, &[f64])> {
    if p.q > 0.0 {
        vec![(2.0, &p.cond_bestfit), (-2.0, &p.free_bestfit)]
    } else {
        Vec::new()
    }
}

/// The two fits and q, without the gradient.
fn profile<E: YieldGradient>(
    eval: &mut E,
    data: &Dataset,
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
    let poi = Evaluator::space(eval).poi()?;
    let n = Evaluator::space(eval).len();
    if let Some((a, b)) = warm {
        if a.len() != n || b.len() != n {
            return Err(InferError::Request(format!(
                "warm starts need {n} values each, got {} and {}",
                a.len(),
                b.len()
            )));
        }
    }
    let free_opts = FitOptions {
        init: warm.map(|w| w.0.to_vec()),
        optimizer,
        ..Default::default()
    };
    let cond_opts = |init: &[f64]| {
        let mut init = init.to_vec();
        init[poi] = mu;
        FitOptions {
            init: Some(init),
            fix: vec![(poi, mu)],
            optimizer,
            ..Default::default()
        }
    };
    let (free, cond) = match warm {
        // Warm-started, the two fits are independent: run together, one batch of two per step.
        Some((_, wc)) => {
            let mut r = fit_together(eval, data, &[free_opts, cond_opts(wc)])?;
            let cond = r.pop().expect("two fits");
            (r.pop().expect("two fits"), cond)
        }
        // Cold, the conditional fit starts from the free one's minimum.
        None => {
            let free = fit(eval, data, &free_opts)?;
            let cond = fit(eval, data, &cond_opts(&free.bestfit))?;
            (free, cond)
        }
    };
    let (mut free, mut cond) = (free, cond);
    // Asked for minima beyond f's own resolution (EDM ≤ 1e-13): the envelope gradient's error
    // is first order in the distance to the minimum, so polish both with Newton steps, which
    // need only the gradient.
    if edm.is_some_and(|e| e <= 1e-13) && free.twice_nll.is_finite() && cond.twice_nll.is_finite() {
        polish_minimum(eval, data, &mut free.bestfit, &[])?;
        polish_minimum(eval, data, &mut cond.bestfit, &[poi])?;
        free.twice_nll = 2.0 * eval.nll(&free.bestfit, data)?;
        cond.twice_nll = 2.0 * eval.nll(&cond.bestfit, data)?;
    }
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
    Ok(ProfiledStatistic {
        q: if active && t > 0.0 { t } else { 0.0 },
        grad: None,
        mu_hat,
        converged: free.converged && cond.converged,
        free_bestfit: free.bestfit,
        cond_bestfit: cond.bestfit,
    })
}

/// The expected discovery significance: q0 on the Asimov dataset of μ = 1 at the likelihood's
/// initial nuisance parameters, built from the given yields — the usual figure of merit for
/// optimising an analysis before looking at data. The dataset depends on the yields too, so
/// dq0/dy = (envelope term at fixed data) + Σ_b ∂q0/∂n_b · ∂n_b/∂y, with
/// ∂q0/∂n_b = 2 ln(λ_b(free fit) / λ_b(conditional fit)) (the data's other terms cancel in the
/// difference of the two fits) and ∂n_b/∂y = ∂λ_b/∂y at the Asimov point.
pub fn expected_q0<E: YieldGradient>(
    eval: &mut E,
    inputs: &[usize],
    warm: Option<(&[f64], &[f64])>,
    edm: Option<f64>,
) -> Result<ProfiledStatistic> {
    let space = Evaluator::space(eval);
    let mut at = space.init.clone();
    at[space.poi()?] = 1.0;
    let asimov = eval.inputs_asimov(&at)?;
    let p = profile(eval, &asimov, 0.0, true, warm, edm)?;
    let grad = eval.yield_grad_sum(
        inputs,
        &YieldGradTerms {
            data: &asimov,
            terms: &envelope_terms(&p),
            asimov: (p.q > 0.0).then_some(AsimovTerm {
                coef: 2.0,
                free: &p.free_bestfit,
                cond: &p.cond_bestfit,
                at: &at,
            }),
        },
    )?;
    Ok(ProfiledStatistic { grad, ..p })
}
