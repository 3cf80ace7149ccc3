//! A large event-level fit's warm start. The fit of every [`THIN`]-th event, each weighted
//! [`THIN`] times, ends within a few uncertainties of the whole dataset's minimum, and its
//! Hessian is the whole dataset's to a few per cent; Newton steps on the whole dataset with that
//! Hessian (corrected by BFGS updates from the whole dataset's gradients along the steps) then
//! converge in 5–6 gradients, where L-BFGS-B from the model's start
//! takes 13–14 of them building its curvature as it goes (1M events: BENCHMARKS.md, issue 53).
//!
//! Taken only for a single start (the event-level default) on a model without kinks and data
//! without empty bins, from [`THIN_FROM`] events. Anything unexpected — the subsample's fit not
//! converged, its Hessian not positive definite, a step that leaves the bounds or raises −ln L,
//! no convergence within [`MAX_STEPS`] — hands the fit back to the usual search from its
//! start. Its end point is certified as any fit's ([`Search::finish`]); on a likelihood of
//! several minima it may be another local minimum than the one the usual search from the start
//! would reach (the subsample's path is another path). The result's evaluations count the
//! subsample's too.

use super::problem::Problem;
use super::search::{Local, Search};
use super::{Starts, CERTIFY_PG};
use crate::Result;
use histfit_seam::{AsyncEvaluator, Dataset};

/// Events from which a fit takes the warm start (its subsample then holds 4 096).
pub(crate) const THIN_FROM: usize = 1 << 16;

/// One event of every `THIN` in the subsample.
const THIN: usize = 16;

/// A channel's fewest events thinned (smaller ones stay whole, at their weights: a few events
/// weighted 16 would give their parameters a poor Hessian).
const THIN_CHANNEL_FROM: usize = 4096;

/// The most Newton steps on the whole dataset before the usual search takes over.
const MAX_STEPS: usize = 8;

/// The most free parameters a fit takes the warm start with: the subsample's Hessian costs a
/// gradient of it per parameter (1/16 of the whole dataset's each).
const MOST_FREE: usize = 32;

/// The Newton decrement gᵀH⁻¹g (in the optimizer's units; twice the predicted distance to the
/// minimum in −ln L) below which the point is the minimum: 5e-9 in −ln L.
const DONE: f64 = 1e-8;

/// The step, in the optimizer's units (the likelihood's curvature widths for event-level
/// models), of the subsample's Hessian's differences of gradients.
const STEP: f64 = 1e-5;

/// The subsample's minimum and Hessian there, in the optimizer's units.
pub(crate) struct Warm {
    z: Vec<f64>,
    h: Vec<f64>,
    /// Gradients of the subsample the warm start took.
    pub evaluations: usize,
}

/// The subsample's fit and Hessian, where the fit is one that takes the warm start and the
/// subsample's fit converges to a point of positive-definite curvature; and the evaluations of
/// the subsample it took either way.
pub(crate) async fn warm_start<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    p: &Problem,
    starts: Starts,
) -> Result<(Option<Warm>, usize)> {
    if starts != Starts::Count(0)
        || p.has_kinks()
        || p.free.is_empty()
        || p.free.len() > MOST_FREE
        || data.event_count() < THIN_FROM
        || data.has_empty_main_bin()
    {
        return Ok((None, 0));
    }
    // Channels below THIN_CHANNEL_FROM stay whole: many small ones leave a "subsample" that
    // would cost as much as the data itself.
    let Some(sub) = data
        .thinned(THIN, THIN_CHANNEL_FROM)
        .filter(|sub| sub.event_count() <= data.event_count() / 2)
    else {
        return Ok((None, 0));
    };
    let mut s = Search::new(eval, &sub, p);
    let z0 = p.z_of(&p.start);
    if !s.nll(&z0).await?.is_finite() {
        return Ok((None, s.evaluations));
    }
    let best = s.local_minimum(&z0).await?;
    if !best.converged || !best.f.is_finite() {
        return Ok((None, s.evaluations));
    }
    let Some(h) = hessian(&mut s, &best.z).await? else {
        return Ok((None, s.evaluations));
    };
    if histfit_optim::linalg::cholesky(&h, p.free.len()).is_none() {
        return Ok((None, s.evaluations));
    }
    let evaluations = s.evaluations;
    Ok((
        Some(Warm {
            z: best.z,
            h,
            evaluations,
        }),
        evaluations,
    ))
}

/// The Hessian at `z` by forward differences of the gradient (backward where a step would leave
/// the bounds), symmetrised; `None` where a parameter's range is too narrow for either step.
async fn hessian<E: AsyncEvaluator + ?Sized>(
    s: &mut Search<'_, E>,
    z: &[f64],
) -> Result<Option<Vec<f64>>> {
    let n = z.len();
    let (mut g0, mut g) = (vec![0.0; n], vec![0.0; n]);
    s.nll_grad(z, &mut g0).await?;
    let mut h = vec![0.0; n * n];
    let mut at = z.to_vec();
    for j in 0..n {
        at[j] = if z[j] + STEP <= s.p.upper[j] {
            z[j] + STEP
        } else if z[j] - STEP >= s.p.lower[j] {
            z[j] - STEP
        } else {
            return Ok(None);
        };
        let taken = at[j] - z[j];
        s.nll_grad(&at, &mut g).await?;
        at[j] = z[j];
        for i in 0..n {
            h[i * n + j] = (g[i] - g0[i]) / taken;
        }
    }
    for i in 0..n {
        for j in 0..i {
            let m = 0.5 * (h[i * n + j] + h[j * n + i]);
            h[i * n + j] = m;
            h[j * n + i] = m;
        }
    }
    Ok(Some(h))
}

/// x solving L Lᵀ x = b, L lower-triangular row-major.
fn solve(l: &[f64], b: &[f64]) -> Vec<f64> {
    let n = b.len();
    let mut y = b.to_vec();
    for i in 0..n {
        for k in 0..i {
            y[i] -= l[i * n + k] * y[k];
        }
        y[i] /= l[i * n + i];
    }
    for i in (0..n).rev() {
        for k in i + 1..n {
            y[i] -= l[k * n + i] * y[k];
        }
        y[i] /= l[i * n + i];
    }
    y
}

impl<E: AsyncEvaluator + ?Sized> Search<'_, E> {
    /// Newton steps on this search's dataset from the subsample's minimum with its Hessian
    /// (see the module's documentation); the minimum, or `None` where the steps do not get
    /// there.
    pub(crate) async fn newton_from(&mut self, warm: &Warm) -> Result<Option<Local>> {
        let p = self.p;
        let n = p.free.len();
        let mut z = warm.z.clone();
        let mut h = warm.h.clone();
        let mut g = vec![0.0; n];
        let mut last: Option<(f64, Vec<f64>, Vec<f64>)> = None;
        for step in 0..MAX_STEPS {
            let f = self.nll_grad(&z, &mut g).await?;
            if !f.is_finite() {
                return Ok(None);
            }
            if let Some((f_last, z_last, g_last)) = &last {
                // Each step must lower −ln L (within its rounding).
                if f > f_last + 1e-12 * f_last.abs().max(1.0) {
                    return Ok(None);
                }
                bfgs_update(&mut h, &z, z_last, &g, g_last);
            }
            let Some(chol) = histfit_optim::linalg::cholesky(&h, n) else {
                return Ok(None);
            };
            let d = solve(&chol, &g);
            let decrement: f64 = d.iter().zip(&g).map(|(d, g)| d * g).sum();
            if !decrement.is_finite() {
                return Ok(None);
            }
            // The decrement is the Hessian's word; the projected gradient must also pass the
            // certificate the end point will be held to, or a poor Hessian would stop short.
            let projected = (0..n).fold(0.0f64, |m, k| {
                m.max(((z[k] - g[k]).clamp(p.lower[k], p.upper[k]) - z[k]).abs())
            });
            if decrement < DONE && projected <= CERTIFY_PG {
                return Ok(Some(Local {
                    z,
                    f,
                    converged: true,
                    reason: format!(
                        "Newton decrement {decrement:.1e} below {DONE:.0e} after {step} Newton steps from the minimum of every {THIN}th event (its fit and Hessian: {} evaluations of the subsample)",
                        warm.evaluations
                    ),
                    pinned: Vec::new(),
                    compared: Vec::new(),
                    notes: Vec::new(),
                }));
            }
            self.iterations += 1;
            last = Some((f, z.clone(), g.clone()));
            for (k, zk) in z.iter_mut().enumerate() {
                *zk -= d[k];
                if !(*zk >= p.lower[k] && *zk <= p.upper[k]) {
                    return Ok(None);
                }
            }
        }
        Ok(None)
    }
}

/// The BFGS update of the Hessian `h` by the step from `z_last` to `z` and the gradients there:
/// the subsample's Hessian, taken at its own minimum, corrected by what the whole dataset's
/// gradients say along the steps (kept where the step's curvature sᵀy is positive), so that
/// the steps converge faster than the chord's fixed rate where that Hessian is a poor one.
fn bfgs_update(h: &mut [f64], z: &[f64], z_last: &[f64], g: &[f64], g_last: &[f64]) {
    let n = z.len();
    let s: Vec<f64> = z.iter().zip(z_last).map(|(a, b)| a - b).collect();
    let y: Vec<f64> = g.iter().zip(g_last).map(|(a, b)| a - b).collect();
    let sy: f64 = s.iter().zip(&y).map(|(a, b)| a * b).sum();
    let hs: Vec<f64> = (0..n)
        .map(|i| (0..n).map(|j| h[i * n + j] * s[j]).sum())
        .collect();
    let shs: f64 = s.iter().zip(&hs).map(|(a, b)| a * b).sum();
    if !(sy > 0.0 && shs > 0.0) {
        return;
    }
    for i in 0..n {
        for j in 0..n {
            h[i * n + j] += y[i] * y[j] / sy - hs[i] * hs[j] / shs;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::solve;

    #[test]
    fn solves_through_the_cholesky_factor() {
        let a = [4.0, 2.0, 0.6, 2.0, 5.0, 1.0, 0.6, 1.0, 3.0];
        let l = histfit_optim::linalg::cholesky(&a, 3).unwrap();
        let b = [1.0, -2.0, 0.5];
        let x = solve(&l, &b);
        for i in 0..3 {
            let ax: f64 = (0..3).map(|j| a[i * 3 + j] * x[j]).sum();
            assert!((ax - b[i]).abs() < 1e-14, "{ax} vs {}", b[i]);
        }
    }
}
