//! Profile likelihood scans over the POI: one conditional fit per value, each warm-started from
//! its neighbour's best fit, reporting 2ΔNLL against the global minimum.

use crate::fit::{fit, FitOptions, FitResult};
use crate::Result;
use histfit_seam::{Dataset, Evaluator};
use serde::Serialize;

/// One scan point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScanPoint {
    pub mu: f64,
    /// twice_nll of the conditional fit at `mu`.
    pub twice_nll: f64,
    /// 2ΔNLL = twice_nll − the minimum (the free fit, or a lower scan point if one is found).
    pub delta_twice_nll: f64,
    pub converged: bool,
    pub reason: String,
    /// Conditional best-fit values of every parameter.
    pub bestfit: Vec<f64>,
}

/// A profile likelihood scan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScanResult {
    pub poi: String,
    pub mu_hat: f64,
    pub twice_nll_min: f64,
    pub free_fit_converged: bool,
    pub points: Vec<ScanPoint>,
    pub par_names: Vec<String>,
}

impl ScanResult {
    /// Number of fits that did not converge (free fit included).
    pub fn failed_fits(&self) -> usize {
        self.points.iter().filter(|p| !p.converged).count() + usize::from(!self.free_fit_converged)
    }
}

/// The POI range a scan covers when none is given: μ̂ ± `k` σ̂ (σ̂ the Hesse error of a free fit),
/// cut to the POI's bounds. A fixed range such as 0:3 misses the minimum of a model whose μ̂ is
/// −0.03 ± 0.15; this one always holds it and reaches 2ΔNLL ≈ k² on both sides.
pub fn range_around_best_fit<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    base: &FitOptions,
    k: f64,
) -> Result<(f64, f64)> {
    let poi = eval.space().poi()?;
    crate::check_poi_not_fixed(eval.space(), base, poi)?;
    let (lo, hi) = poi_bounds(eval.space(), base, poi);
    let mut opts = base.clone();
    opts.uncertainties = true;
    let free = fit(eval, data, &opts)?;
    if !free.converged {
        return Err(crate::InferError::Request(format!(
            "the free fit did not converge ({}): give the scan's range (LO:HI)",
            free.reason
        )));
    }
    let mu = free.bestfit[poi];
    let sigma = free.uncertainties.as_ref().map_or(f64::NAN, |u| u[poi]);
    if !(sigma.is_finite() && sigma > 0.0) {
        return Err(crate::InferError::Request(format!(
            "the POI's error at the best fit ({mu}) is {sigma}: give the scan's range (LO:HI)"
        )));
    }
    Ok(((mu - k * sigma).max(lo), (mu + k * sigma).min(hi)))
}

/// The POI's bounds in a request: the request's own, else the model's.
fn poi_bounds(space: &histfit_seam::ParameterSpace, base: &FitOptions, poi: usize) -> (f64, f64) {
    base.bounds
        .as_ref()
        .map(|b| b[poi])
        .unwrap_or_else(|| space.bounds[poi])
}

/// Evenly spaced values from `lo` to `hi` inclusive.
pub fn linspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    match n {
        0 => vec![],
        1 => vec![lo],
        _ => (0..n)
            .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
            .collect(),
    }
}

/// Scans the POI over `values`. `progress(done, total)` is called after each fit.
pub fn profile_scan<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    values: &[f64],
    base: &FitOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ScanResult> {
    if values.is_empty() {
        return Err(crate::InferError::Request(
            "a scan needs at least one value of the POI".into(),
        ));
    }
    let poi = eval.space().poi()?;
    crate::check_poi_not_fixed(eval.space(), base, poi)?;
    let (lo, hi) = poi_bounds(eval.space(), base, poi);
    if let Some(v) = values.iter().find(|v| !(lo..=hi).contains(*v)) {
        return Err(crate::InferError::Request(format!(
            "scan value {v} lies outside the POI's bounds [{lo}, {hi}]"
        )));
    }
    let total = values.len() + 1;
    let mut opts = base.clone();
    opts.uncertainties = false;
    let free = fit(eval, data, &opts)?;
    progress(1, total);
    // Visit the values outward from μ̂ so each fit starts next to a solved neighbour.
    let mut order: Vec<usize> = (0..values.len()).collect();
    let mu_hat = free.bestfit[poi];
    let start = order
        .iter()
        .copied()
        .min_by(|&a, &b| {
            (values[a] - mu_hat)
                .abs()
                .total_cmp(&(values[b] - mu_hat).abs())
        })
        .unwrap_or(0);
    order.sort_by_key(|&i| (i < start, start.abs_diff(i)));
    let mut results: Vec<Option<FitResult>> = vec![None; values.len()];
    for (done, &i) in order.iter().enumerate() {
        let neighbour = if i < start {
            results.get(i + 1)
        } else {
            i.checked_sub(1).and_then(|j| results.get(j))
        };
        let mut init = neighbour
            .and_then(|r| r.as_ref())
            .map(|r| r.bestfit.clone())
            .unwrap_or_else(|| free.bestfit.clone());
        init[poi] = values[i];
        let mut o = opts.clone();
        o.init = Some(init);
        o.fix.push((poi, values[i]));
        results[i] = Some(fit(eval, data, &o)?);
        progress(done + 2, total);
    }
    let results: Vec<FitResult> = results
        .into_iter()
        .map(|r| r.expect("every value fitted"))
        .collect();
    let min = results
        .iter()
        .map(|r| r.twice_nll)
        .fold(free.twice_nll, f64::min);
    let points = values
        .iter()
        .zip(results)
        .map(|(&mu, r)| ScanPoint {
            mu,
            twice_nll: r.twice_nll,
            delta_twice_nll: r.twice_nll - min,
            converged: r.converged,
            reason: r.reason,
            bestfit: r.bestfit,
        })
        .collect();
    Ok(ScanResult {
        poi: eval.space().names[poi].clone(),
        mu_hat,
        twice_nll_min: min,
        free_fit_converged: free.converged,
        points,
        par_names: free.par_names,
    })
}
