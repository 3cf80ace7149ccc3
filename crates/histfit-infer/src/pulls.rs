//! Pull studies: toys drawn at a point and fitted with uncertainties, each free parameter's pull
//! (θ̂ − θ_gen)/σ̂ summarised by its mean and width with their standard errors — the check that a
//! model's fits are unbiased and its Hesse errors cover (mean 0, width 1).
//!
//! Toy `i` is the ensemble's toy `i` ([`crate::toys`]: the same data on every device and in
//! every shard), fitted from the generating point with the fit options given — one fit a toy on
//! the host's side of the runner, not the `toys` ensemble's basin probe or resident device fits
//! (a study wants each toy's uncertainties, which those do not make). A toy whose fit fails or
//! does not converge, or whose Hessian is not positive definite, is kept in the document with
//! its reason and left out of the summary, counted; a parameter with fewer than two pulls has
//! mean and width NaN (`null`).

use crate::fit::{fit_async, FitOptions};
use crate::toys::ToyRunner;
use crate::Result;
use serde::{Deserialize, Serialize};

/// One toy's fit: every parameter's value and uncertainty (0 for fixed ones).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToyPulls {
    pub index: u64,
    /// Whether the fit converged with a positive-definite Hessian (the toy counts).
    pub used: bool,
    pub twice_nll: f64,
    pub bestfit: Vec<f64>,
    pub uncertainties: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One parameter's pulls over the toys used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParameterPulls {
    pub name: String,
    /// The value the toys were drawn at.
    pub generated: f64,
    /// Toys whose pull counts: used, with a finite pull (a parameter fitted at its kink, or on a
    /// bound, has no uncertainty, hence no pull).
    pub n: usize,
    /// Mean of (θ̂ − θ_gen)/σ̂, and its standard error (width/√n).
    pub mean: f64,
    pub mean_error: f64,
    /// Standard deviation of the pulls, and its standard error (width/√(2(n − 1))).
    pub width: f64,
    pub width_error: f64,
    /// How many standard errors the mean is from 0 and the width from 1.
    pub mean_deviation: f64,
    pub width_deviation: f64,
}

/// A pull study's document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PullStudy {
    pub seed: u64,
    pub n_toys: u64,
    pub par_names: Vec<String>,
    pub gen_params: Vec<f64>,
    /// The further starts asked of every toy's fit (absent: the fit's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts: Option<usize>,
    /// Toys that count (converged, positive-definite Hessian), and those left out.
    pub used: usize,
    pub left_out: usize,
    pub parameters: Vec<ParameterPulls>,
    pub toys: Vec<ToyPulls>,
}

/// Draws toys `indices` of `seed` at `gen` and fits each from `gen` with uncertainties
/// (`base`'s other options) on `runner`.
pub fn pull_study<R: ToyRunner>(
    runner: &R,
    gen: &[f64],
    seed: u64,
    indices: std::ops::Range<u64>,
    base: &FitOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<PullStudy> {
    let opts = FitOptions {
        init: Some(gen.to_vec()),
        uncertainties: true,
        ..base.clone()
    };
    let list: Vec<u64> = indices.clone().collect();
    let total = list.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let (opts, done) = (&opts, &done);
    let toys = runner.run_toys(gen, seed, &list, &move |mut ev, i, toy| {
        Box::pin(async move {
            let r = fit_async(&mut *ev, &toy, opts).await;
            progress(
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
                total,
            );
            Ok(toy_pulls(i, r))
        })
    })?;
    let space = runner.space();
    let parameters = summarise(&space.names, &space.fixed, &base.fix, gen, &toys);
    let used = toys.iter().filter(|t| t.used).count();
    Ok(PullStudy {
        seed,
        n_toys: indices.end - indices.start,
        par_names: space.names.clone(),
        gen_params: gen.to_vec(),
        starts: crate::toys::asked_starts(base.starts),
        used,
        left_out: toys.len() - used,
        parameters,
        toys,
    })
}

/// A toy's record from its fit (an error is a toy left out, with its reason).
fn toy_pulls(index: u64, r: Result<crate::FitResult>) -> ToyPulls {
    match r {
        Ok(f) => {
            let pd = f.hessian_positive_definite.unwrap_or(false);
            let reason = match (f.converged, pd) {
                (true, true) => None,
                (false, _) => Some(format!("did not converge: {}", f.reason)),
                (true, false) => Some("the Hessian at the minimum is not positive definite".into()),
            };
            ToyPulls {
                index,
                used: reason.is_none(),
                twice_nll: f.twice_nll,
                uncertainties: f
                    .uncertainties
                    .unwrap_or_else(|| vec![f64::NAN; f.bestfit.len()]),
                bestfit: f.bestfit,
                reason,
            }
        }
        Err(e) => ToyPulls {
            index,
            used: false,
            twice_nll: f64::NAN,
            bestfit: Vec::new(),
            uncertainties: Vec::new(),
            reason: Some(format!("the fit failed: {e}")),
        },
    }
}

/// Each parameter free in the fits: its pulls' mean and width over the toys used.
fn summarise(
    names: &[String],
    fixed: &[bool],
    fix: &[(usize, f64)],
    gen: &[f64],
    toys: &[ToyPulls],
) -> Vec<ParameterPulls> {
    (0..names.len())
        .filter(|&k| !fixed[k] && !fix.iter().any(|f| f.0 == k))
        .map(|k| {
            let pulls: Vec<f64> = toys
                .iter()
                .filter(|t| t.used)
                .map(|t| (t.bestfit[k] - gen[k]) / t.uncertainties[k])
                .filter(|p| p.is_finite())
                .collect();
            let n = pulls.len() as f64;
            let mean = pulls.iter().sum::<f64>() / n;
            let var = pulls.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / (n - 1.0);
            let width = var.sqrt();
            let (mean_error, width_error) = (width / n.sqrt(), width / (2.0 * (n - 1.0)).sqrt());
            ParameterPulls {
                name: names[k].clone(),
                generated: gen[k],
                n: pulls.len(),
                mean,
                mean_error,
                width,
                width_error,
                mean_deviation: mean / mean_error,
                width_deviation: (width - 1.0) / width_error,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy(index: u64, used: bool, value: f64, error: f64) -> ToyPulls {
        ToyPulls {
            index,
            used,
            twice_nll: 0.0,
            bestfit: vec![value, 3.0],
            uncertainties: vec![error, 0.0],
            reason: None,
        }
    }

    /// Pulls of ±1 about the generated value: mean 0, width √(n/(n − 1)); a toy left out and a
    /// fixed parameter do not count.
    #[test]
    fn pulls_are_summarised_over_the_toys_used() {
        let names = vec!["a".to_string(), "b".to_string()];
        let toys = vec![
            toy(0, true, 1.5, 0.5),
            toy(1, true, 0.5, 0.5),
            toy(2, true, 1.25, 0.25),
            toy(3, true, 0.75, 0.25),
            toy(4, false, 9.0, 0.1),
        ];
        let s = summarise(&names, &[false, true], &[], &[1.0, 3.0], &toys);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].mean, 0.0);
        assert!((s[0].width - (4.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert!((s[0].mean_error - s[0].width / 2.0).abs() < 1e-15);
    }
}
