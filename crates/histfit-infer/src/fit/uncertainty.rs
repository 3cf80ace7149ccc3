//! Uncertainties at a fit's minimum. Up to a limit of free parameters, the dense Hessian (one
//! gradient per column, one-bin parameters of different bins stepped together), its inverse by Cholesky, the covariance and the correlations. Beyond
//! it the n×n matrices would not fit in memory or time (n = 10⁵ γ parameters of a large
//! staterror model: 80 GB and O(n³)), so only the POI's uncertainty is computed, without any
//! matrix: σ² = (H⁻¹)ₚₚ from H z = eₚ by conjugate gradients, each product H·v a forward
//! difference of the analytic gradient along v — one gradient per iteration and O(n) memory.
//! The other uncertainties are then not computed (NaN, `null` in JSON) and the result says so.

use super::index_mask;
use super::problem::Problem;
use super::FitResult;
use crate::{InferError, Result};
use histfit_optim::linalg;
use histfit_seam::{hessian_within, AsyncEvaluator, Dataset};

/// Free parameters above which no dense Hessian is built by default: 4096² doubles are 128 MiB
/// per matrix (the Hessian, its factor, its inverse, the covariance and the correlations make
/// five) and the inversion some ten seconds on one core.
pub const DENSE_HESSIAN_LIMIT: usize = 4096;

/// Refuses, with one message, what needs the dense n×n Hessian (or covariance) of `k`
/// parameters above `limit`: `what` names the need ("the ranking", "the yields' band").
pub fn check_dense(k: usize, limit: usize, what: &str) -> Result<()> {
    if k <= limit {
        return Ok(());
    }
    Err(InferError::Request(format!(
        "{what} needs the dense {k}×{k} Hessian or covariance ({:.0} MiB a matrix, O(n³) to \
         invert), above the limit of {limit} parameters; raise it with --max-hessian-parameters \
         (FitOptions::max_dense_parameters) if the machine has the memory and time",
        mib(k)
    )))
}

fn mib(k: usize) -> f64 {
    (k as f64).powi(2) * 8.0 / (1024.0 * 1024.0)
}

/// Covariance, uncertainties and correlations at the best fit (the dense path), or the POI's
/// uncertainty alone above `limit` free parameters.
pub(super) async fn add_uncertainties<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    p: &Problem,
    at_kink: &[usize],
    limit: usize,
    result: &mut FitResult,
) -> Result<()> {
    let n = p.n();
    // A parameter at its kink has no curvature to speak of: reported as 0, as a fixed one.
    let kinked = index_mask(n, at_kink);
    let free: Vec<usize> = p.free.iter().copied().filter(|&i| !kinked[i]).collect();
    if free.is_empty() {
        result.uncertainties = Some(vec![0.0; n]);
        result.covariance = (n <= limit).then(|| vec![0.0; n * n]);
        return Ok(());
    }
    // The covariance and correlations are n×n over every parameter, fixed ones included.
    if free.len() > limit || n > limit {
        return poi_only(eval, data, &free, &p.x_bounds(), limit, result).await;
    }
    let bounds = p.x_bounds();
    let h = hessian_within(eval, &result.bestfit, data, &free, &bounds).await?;
    let k = free.len();
    let Some((inv, posdef)) = linalg::invert_symmetric(&h, k) else {
        result.hessian_positive_definite = Some(false);
        return Ok(());
    };
    drop(h);
    let mut cov = vec![0.0; n * n];
    for a in 0..k {
        for b in 0..k {
            cov[free[a] * n + free[b]] = inv[a * k + b];
        }
    }
    drop(inv);
    // A free parameter's variance that is negative (the Hessian is then not positive definite,
    // reported beside) or not a number is no uncertainty: NaN (null in JSON), never a silent 0,
    // and so are its correlations. Fixed and kinked parameters keep 0 and no correlation.
    let unc: Vec<f64> = (0..n)
        .map(|i| {
            let v = cov[i * n + i];
            if v >= 0.0 {
                v.sqrt()
            } else {
                f64::NAN
            }
        })
        .collect();
    let corr: Vec<f64> = (0..n * n)
        .map(|ij| {
            let (i, j) = (ij / n, ij % n);
            if unc[i].is_nan() || unc[j].is_nan() {
                f64::NAN
            } else if i == j {
                1.0
            } else if unc[i] > 0.0 && unc[j] > 0.0 {
                cov[ij] / (unc[i] * unc[j])
            } else {
                0.0
            }
        })
        .collect();
    result.uncertainties = Some(unc);
    result.covariance = Some(cov);
    result.correlation = Some(corr);
    result.hessian_positive_definite = Some(posdef);
    Ok(())
}

/// Above the dense limit: the POI's uncertainty by conjugate gradients, the others NaN, and a
/// warning that says which were computed and why.
async fn poi_only<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    free: &[usize],
    bounds: &[(f64, f64)],
    limit: usize,
    result: &mut FitResult,
) -> Result<()> {
    let n = result.bestfit.len();
    let k = free.len();
    let why = format!(
        "{k} free of {n} parameters exceed the dense-Hessian limit of {limit} (an n×n matrix \
         would take {:.0} MiB and O(n³) time; raise it with --max-hessian-parameters, in \
         Python max_hessian_parameters=)",
        mib(n)
    );
    let poi = eval
        .space()
        .poi
        .and_then(|i| free.iter().position(|&f| f == i));
    let Some(t) = poi else {
        result.warnings.push(format!(
            "no uncertainties: {why}, and the model has no free POI to compute one for"
        ));
        return Ok(());
    };
    let mut unc = vec![0.0; n];
    for &i in free {
        unc[i] = f64::NAN;
    }
    match cg_inverse_diagonal(eval, data, &result.bestfit, free, bounds, t).await? {
        Cg::Converged { value, iterations } if value > 0.0 => {
            unc[free[t]] = value.sqrt();
            result.warnings.push(format!(
                "uncertainty of the POI only ({iterations} conjugate-gradient steps on the \
                 Hessian, no matrix built); the others are not computed (null): {why}"
            ));
        }
        // Every d·Hd was positive, yet the variance is not: rounding in the differenced products
        // of a nearly flat direction. No uncertainty (null) with a word, never a silent 0; the
        // Hessian is not known to be indefinite.
        Cg::Converged { value, iterations } => {
            result.warnings.push(format!(
                "no uncertainty of the POI: conjugate gradients gave a variance of {value:.3e} \
                 after {iterations} steps (rounding in a nearly flat direction); {why}"
            ));
        }
        Cg::NotPositive => {
            result.hessian_positive_definite = Some(false);
            result.warnings.push(format!(
                "no uncertainties: the Hessian at the minimum is not positive definite along a \
                 direction the POI's conjugate gradients took; {why}"
            ));
            return Ok(());
        }
        Cg::NotConverged {
            iterations,
            residual,
        } => {
            result.warnings.push(format!(
                "no uncertainty of the POI: conjugate gradients on the Hessian did not converge \
                 in {iterations} steps (relative residual {residual:.1e}); {why}"
            ));
        }
        Cg::OutOfBounds => {
            result.warnings.push(format!(
                "no uncertainty of the POI: a conjugate-gradient step cannot be differenced \
                 inside the parameters' bounds (the minimum lies on bounds in both directions); \
                 {why}"
            ));
        }
    }
    result.uncertainties = Some(unc);
    Ok(())
}

enum Cg {
    Converged {
        value: f64,
        iterations: usize,
    },
    NotPositive,
    NotConverged {
        iterations: usize,
        residual: f64,
    },
    /// Neither the step along d nor the one against it stays inside the bounds.
    OutOfBounds,
}

/// Relative residual at which the conjugate gradients stop. The products H·v are forward
/// differences (relative error ≈ 1e-6), so a tighter target would chase rounding; the
/// uncertainty it gives is good to far better than its own statistical meaning.
const CG_TOLERANCE: f64 = 1e-6;

/// Most conjugate-gradient steps (each one gradient).
const CG_MAX_STEPS: usize = 2000;

/// (H⁻¹)ₜₜ over the free parameters `free` at `x`: H z = eₜ by conjugate gradients, z·eₜ; the
/// difference steps stay inside `bounds` (the fit's, per parameter).
async fn cg_inverse_diagonal<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    x: &[f64],
    free: &[usize],
    bounds: &[(f64, f64)],
    t: usize,
) -> Result<Cg> {
    let k = free.len();
    let mut g0 = vec![0.0; x.len()];
    eval.nll_grad(x, data, &mut g0).await?;
    let scale = free.iter().fold(1.0f64, |m, &i| m.max(x[i].abs()));
    let (mut xs, mut gs) = (x.to_vec(), vec![0.0; x.len()]);
    let mut z = vec![0.0; k];
    let mut r = vec![0.0f64; k];
    r[t] = 1.0;
    let mut d = r.clone();
    let mut rr = 1.0;
    let mut hd = vec![0.0; k];
    let inside = |h: f64, d: &[f64]| {
        free.iter().enumerate().all(|(a, &i)| {
            let v = x[i] + h * d[a];
            v >= bounds[i].0 && v <= bounds[i].1
        })
    };
    let mut steps = 0;
    for step in 1..=CG_MAX_STEPS.min(k.max(1) * 4) {
        steps = step;
        // H·d by a forward difference along d (normalised so the step is 1e-6 of the scale),
        // or a backward one where the forward step leaves the bounds (a minimum on a bound).
        let dmax = d.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if dmax == 0.0 {
            break;
        }
        let mut h = 1e-6 * scale / dmax;
        if !inside(h, &d) {
            if !inside(-h, &d) {
                return Ok(Cg::OutOfBounds);
            }
            h = -h;
        }
        for (a, &i) in free.iter().enumerate() {
            xs[i] = x[i] + h * d[a];
        }
        eval.nll_grad(&xs, data, &mut gs).await?;
        for (a, &i) in free.iter().enumerate() {
            hd[a] = (gs[i] - g0[i]) / h;
            xs[i] = x[i];
        }
        let dhd: f64 = d.iter().zip(&hd).map(|(a, b)| a * b).sum();
        // NaN included: a product that is not a number is no curvature.
        if dhd.is_nan() || dhd <= 0.0 {
            return Ok(Cg::NotPositive);
        }
        let alpha = rr / dhd;
        for a in 0..k {
            z[a] += alpha * d[a];
            r[a] -= alpha * hd[a];
        }
        let rr_next: f64 = r.iter().map(|v| v * v).sum();
        if rr_next.sqrt() <= CG_TOLERANCE {
            return Ok(Cg::Converged {
                value: z[t],
                iterations: step,
            });
        }
        let beta = rr_next / rr;
        rr = rr_next;
        for a in 0..k {
            d[a] = r[a] + beta * d[a];
        }
    }
    Ok(Cg::NotConverged {
        iterations: steps,
        residual: rr.sqrt(),
    })
}
