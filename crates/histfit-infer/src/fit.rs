//! Maximum likelihood fits: free, conditional (any parameter fixed at a value) and warm-started,
//! with uncertainties and correlations from the Hessian at the minimum.
//!
//! The optimizer works in scaled coordinates z = θ/s, with s the prior width of each constrained
//! parameter (σ for Gaussian, 1/√τ for Poisson constraints): a lumi with σ = 2 % and a free
//! normalisation then have similar curvature, which is what L-BFGS-B's single scalar θ assumes.

use crate::{InferError, Result};
use histfit_compute::{block_on, hessian_async, AsyncEvaluator, Blocking, Dataset, Evaluator};
use histfit_model::{Constraint, Model};
use histfit_optim::{linalg, Ask, Lbfgsb, Options};
use serde::Serialize;

/// What to fit and how.
#[derive(Debug, Clone, Default)]
pub struct FitOptions {
    /// Starting point (default: the model's suggested init).
    pub init: Option<Vec<f64>>,
    /// Parameters held at a value, on top of those the model fixes (index, value).
    pub fix: Vec<(usize, f64)>,
    /// Compute the Hessian, uncertainties and correlations at the minimum.
    pub uncertainties: bool,
    /// Optimizer settings (default when `None`).
    pub optimizer: Option<Options>,
    /// Replacement bounds for every parameter (default: the model's suggested bounds).
    pub bounds: Option<Vec<(f64, f64)>>,
}

/// The outcome of a fit. Uncertainties of fixed parameters are 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitResult {
    pub par_names: Vec<String>,
    pub bestfit: Vec<f64>,
    pub uncertainties: Option<Vec<f64>>,
    /// Row-major n×n over all parameters (zero rows/columns for fixed ones).
    pub covariance: Option<Vec<f64>>,
    pub correlation: Option<Vec<f64>>,
    pub twice_nll: f64,
    pub converged: bool,
    pub reason: String,
    pub iterations: usize,
    pub evaluations: usize,
    pub projected_gradient_norm: f64,
    /// Whether the Hessian at the minimum was positive definite (uncertainties are meaningful).
    pub hessian_positive_definite: Option<bool>,
    pub fixed: Vec<bool>,
}

/// Fits `data` by minimising −ln L with L-BFGS-B.
pub fn fit<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    opts: &FitOptions,
) -> Result<FitResult> {
    block_on(fit_async(&mut Blocking(eval), data, opts))
}

/// One L-BFGS-B minimisation in the fit's scaled coordinates (z = θ/s over the free parameters).
struct Minimiser<'a> {
    free: &'a [usize],
    scale: &'a [f64],
    kinks: &'a [bool],
    options: histfit_optim::Options,
}

impl Minimiser<'_> {
    async fn run<E: AsyncEvaluator + ?Sized>(
        &self,
        eval: &mut E,
        data: &Dataset,
        z_start: &[f64],
        bounds: (&[f64], &[f64]),
        x: &mut [f64],
    ) -> Result<Lbfgsb> {
        let mut grad = vec![0.0; x.len()];
        let mut gz = vec![0.0; self.free.len()];
        let mut opt = Lbfgsb::new(z_start, bounds.0, bounds.1, self.options).with_kinks(self.kinks);
        while let Ask::Evaluate(z) = opt.ask() {
            for (k, &i) in self.free.iter().enumerate() {
                x[i] = z[k] * self.scale[k];
            }
            let f = eval.nll_grad(x, data, &mut grad).await?;
            for (k, &i) in self.free.iter().enumerate() {
                gz[k] = grad[i] * self.scale[k];
            }
            opt.tell(f, &gz);
        }
        Ok(opt)
    }
}

/// [`fit`] for an [`AsyncEvaluator`]: the same fit, whose evaluations may wait for a device
/// batch (many fits then run in lockstep on a few threads).
pub async fn fit_async<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    opts: &FitOptions,
) -> Result<FitResult> {
    // Minimise −ln L without the dataset's constant and add it back to the result. The
    // constant (≈ 166 for tHu, next to a varying part of ≈ 14) would cost f four bits of
    // resolution, and the line search with them the last digits of the minimum, which the
    // envelope-theorem gradients of profiled statistics depend on.
    let varying = Dataset {
        constant: 0.0,
        ..data.clone()
    };
    let mut r = minimise_async(eval, &varying, opts).await?;
    r.twice_nll += 2.0 * data.constant;
    Ok(r)
}

/// [`fit_async`] on a dataset whose constant is zero (twice_nll without it): for drivers that
/// evaluate the batch themselves and so must hand the evaluator that same dataset.
pub(crate) async fn minimise_async<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    opts: &FitOptions,
) -> Result<FitResult> {
    let mut model = eval.model().clone_layout();
    let n = model.names.len();
    let mut x = match &opts.init {
        Some(v) if v.len() != n => {
            return Err(InferError::Request(format!(
                "init has {} values, the model has {n} parameters",
                v.len()
            )))
        }
        Some(v) => v.clone(),
        None => model.init.clone(),
    };
    if let Some(b) = &opts.bounds {
        if b.len() != n {
            return Err(InferError::Request(format!(
                "bounds have {} entries, the model has {n} parameters",
                b.len()
            )));
        }
        model.bounds = b.clone();
    }
    let mut fixed = model.fixed.clone();
    for &(i, v) in &opts.fix {
        if i >= n {
            return Err(InferError::Request(format!(
                "parameter index {i} out of range"
            )));
        }
        x[i] = v;
        fixed[i] = true;
    }
    let free: Vec<usize> = (0..n).filter(|&i| !fixed[i]).collect();
    let scale: Vec<f64> = free.iter().map(|&i| model.scale[i]).collect();
    let z0: Vec<f64> = free.iter().zip(&scale).map(|(&i, s)| x[i] / s).collect();
    let lower: Vec<f64> = free
        .iter()
        .zip(&scale)
        .map(|(&i, s)| model.bounds[i].0 / s)
        .collect();
    let upper: Vec<f64> = free
        .iter()
        .zip(&scale)
        .map(|(&i, s)| model.bounds[i].1 / s)
        .collect();
    let free_kinks: Vec<bool> = free.iter().map(|&i| model.kinked[i]).collect();
    let minimiser = Minimiser {
        free: &free,
        scale: &scale,
        kinks: &free_kinks,
        options: opts.optimizer.unwrap_or_default(),
    };
    if free.is_empty() {
        // Nothing to fit: the result is the likelihood at the given point.
        let f = eval.nll(&x, data).await?;
        return Ok(FitResult {
            par_names: model.names.clone(),
            bestfit: x,
            uncertainties: opts.uncertainties.then(|| vec![0.0; n]),
            covariance: opts.uncertainties.then(|| vec![0.0; n * n]),
            correlation: None,
            twice_nll: 2.0 * f,
            converged: true,
            reason: "no free parameters".into(),
            iterations: 0,
            evaluations: 1,
            projected_gradient_norm: 0.0,
            hessian_positive_definite: None,
            fixed,
        });
    }
    let mut opt = minimiser
        .run(eval, data, &z0, (&lower, &upper), &mut x)
        .await?;
    let (mut iterations, mut evaluations) = (opt.iterations, opt.evaluations);
    let kinked = model.kinked.iter().any(|&k| k);
    // Restart from the minimum with fresh curvature memory until a pass gains nothing: at the
    // kinks of codes 0 and 1 a stale quasi-Newton model can stall a little early. Smooth models
    // do not need it.
    let passes = if kinked { 4 } else { 0 };
    for _ in 0..passes {
        if !opt.status().converged() {
            break;
        }
        let again = minimiser
            .run(eval, data, opt.x(), (&lower, &upper), &mut x)
            .await?;
        iterations += again.iterations;
        evaluations += again.evaluations;
        let gain = opt.f() - again.f();
        if again.status().converged() && again.f() <= opt.f() {
            opt = again;
        }
        if gain <= 1e-10 * opt.f().abs().max(1.0) {
            break;
        }
    }
    // Codes 0 and 1 have a kink at α = 0 that can split one minimum into two, one on each side;
    // L-BFGS-B settles in whichever it meets first. Where f falls from the kink towards the
    // mirror image −α̂ (a second basin), re-minimise from there and keep the lower minimum.
    if kinked && opt.status().converged() {
        let mut z = opt.x().to_vec();
        let mut xs = x.clone();
        for (k, &i) in free.iter().enumerate() {
            xs[i] = z[k] * scale[k];
        }
        let f0 = opt.f();
        for (k, &i) in free.iter().enumerate() {
            if !(model.kinked[i] && xs[i] != 0.0) {
                continue;
            }
            // A second basin lies on the mirror side only if f rises from there towards the
            // kink; on a single smooth-ish basin the mirror point is uphill of α = 0.
            let here = xs[i];
            xs[i] = -here;
            let f_mirror = eval.nll(&xs, data).await?;
            xs[i] = 0.0;
            let f_kink = eval.nll(&xs, data).await?;
            xs[i] = here;
            if f_kink > f_mirror {
                let mut zf = z.clone();
                zf[k] = -zf[k];
                // Keep the re-minimisation on the mirror side: a first quasi-Newton step can
                // otherwise jump straight back across the kink.
                let (mut lo_k, mut hi_k) = (lower.clone(), upper.clone());
                if zf[k] < 0.0 {
                    hi_k[k] = hi_k[k].min(0.0);
                } else {
                    lo_k[k] = lo_k[k].max(0.0);
                }
                if lo_k[k] > hi_k[k] {
                    continue; // the mirror side lies outside the parameter's bounds
                }
                zf[k] = zf[k].clamp(lo_k[k], hi_k[k]);
                let again = minimiser
                    .run(eval, data, &zf, (&lo_k, &hi_k), &mut x)
                    .await?;
                iterations += again.iterations;
                evaluations += again.evaluations;
                if again.status().converged() && again.f() < opt.f() - 1e-10 * f0.abs().max(1.0) {
                    opt = again;
                    z = opt.x().to_vec();
                    for (kk, &ii) in free.iter().enumerate() {
                        xs[ii] = z[kk] * scale[kk];
                    }
                }
            }
        }
    }
    for (k, &i) in free.iter().enumerate() {
        x[i] = opt.x()[k] * scale[k];
    }
    // A convex kink (f rises on both sides of α = 0) is a minimum with no zero gradient: a
    // quasi-Newton method circles it until its line search gives up. Pin such parameters at 0,
    // where their minimum is, and fit the rest.
    if !opt.status().converged() {
        let mut pinned = Vec::new();
        let f_here = eval.nll(&x, data).await?;
        for &i in &free {
            if !model.kinked[i] || x[i].abs() > 5e-2 {
                continue;
            }
            let mut xs = x.clone();
            xs[i] = 0.0;
            let f0 = eval.nll(&xs, data).await?;
            let h = 1e-4;
            xs[i] = h;
            let fp = eval.nll(&xs, data).await?;
            xs[i] = -h;
            let fm = eval.nll(&xs, data).await?;
            if fp > f0 && fm > f0 && f0 <= f_here + 1e-3 {
                pinned.push(i);
            }
        }
        if !pinned.is_empty() {
            let mut o = opts.clone();
            let mut init = x.clone();
            for &i in &pinned {
                init[i] = 0.0;
                o.fix.push((i, 0.0));
            }
            o.init = Some(init);
            // Recursion in an async fn goes through a box.
            let mut r = Box::pin(minimise_async(eval, data, &o)).await?;
            // The failed fit's point is no minimum either (its line search gave up with a
            // decrease still predicted): take the pinned fit unless it is clearly worse, by
            // more than the 1e-6 in twice_nll that fits are compared to.
            if r.converged && r.twice_nll <= 2.0 * f_here + 1e-6 {
                for &i in &pinned {
                    r.fixed[i] = model.fixed[i];
                }
                r.reason = format!(
                    "{} ({} nuisance parameters at a kink minimum, alpha = 0)",
                    r.reason,
                    pinned.len()
                );
                r.iterations += iterations;
                r.evaluations += evaluations;
                return Ok(r);
            }
        }
    }
    let status = opt.status().clone();
    let mut result = FitResult {
        par_names: model.names.clone(),
        bestfit: x.clone(),
        uncertainties: None,
        covariance: None,
        correlation: None,
        twice_nll: 2.0 * opt.f(),
        converged: status.converged(),
        reason: status.reason().to_owned(),
        iterations,
        evaluations,
        projected_gradient_norm: opt.projected_gradient_norm(),
        hessian_positive_definite: None,
        fixed,
    };
    if opts.uncertainties && !free.is_empty() {
        let h = hessian_async(eval, &x, data, &free).await?;
        let k = free.len();
        if let Some((inv, posdef)) = linalg::invert_symmetric(&h, k) {
            let mut cov = vec![0.0; n * n];
            for a in 0..k {
                for b in 0..k {
                    cov[free[a] * n + free[b]] = inv[a * k + b];
                }
            }
            let unc: Vec<f64> = (0..n).map(|i| cov[i * n + i].max(0.0).sqrt()).collect();
            let corr: Vec<f64> = (0..n * n)
                .map(|ij| {
                    let (i, j) = (ij / n, ij % n);
                    if i == j {
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
        } else {
            result.hessian_positive_definite = Some(false);
        }
    }
    Ok(result)
}

/// The parts of the model a fit needs, copied out so the evaluator can be borrowed mutably.
struct Layout {
    names: Vec<String>,
    init: Vec<f64>,
    bounds: Vec<(f64, f64)>,
    fixed: Vec<bool>,
    scale: Vec<f64>,
    /// Parameters whose interpolation has a kink at 0 (normsys code1, histosys code0).
    kinked: Vec<bool>,
}

/// Each parameter's natural scale: its constraint's width (σ, or 1/√τ for a Poisson one), else
/// 1. Fits and polishing steps work in θ/scale.
pub(crate) fn parameter_scales(model: &Model) -> Vec<f64> {
    model
        .parameters
        .iter()
        .map(|p| match p.constraint {
            Constraint::Gauss { sigma } if sigma > 0.0 => sigma,
            Constraint::Poisson { tau } if tau > 0.0 => 1.0 / tau.sqrt(),
            _ => 1.0,
        })
        .collect()
}

/// The parameters whose interpolation has a kink at 0: those driving a modifier that uses code 0
/// or 1.
pub(crate) fn kinked_parameters(model: &Model) -> Vec<bool> {
    let kinked_code = |c: histfit_model::InterpCode| {
        matches!(
            c,
            histfit_model::InterpCode::Code0 | histfit_model::InterpCode::Code1
        )
    };
    let mut k = vec![false; model.parameters.len()];
    if kinked_code(model.settings.normsys) {
        for e in &model.normsys {
            k[e.par as usize] = true;
        }
    }
    if kinked_code(model.settings.histosys) {
        for e in &model.histosys {
            k[e.par as usize] = true;
        }
    }
    k
}

trait CloneLayout {
    fn clone_layout(&self) -> Layout;
}

impl CloneLayout for Model {
    fn clone_layout(&self) -> Layout {
        Layout {
            names: self.par_names(),
            init: self.init(),
            bounds: self.bounds(),
            fixed: self.fixed(),
            scale: parameter_scales(self),
            kinked: kinked_parameters(self),
        }
    }
}
