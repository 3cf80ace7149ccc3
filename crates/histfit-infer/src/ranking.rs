//! Nuisance-parameter ranking (impacts on the POI): a nominal fit with the Hessian gives each
//! constrained nuisance parameter's pull and constraint; then each is held at θ̂ ± σ̂ (post-fit)
//! and θ̂ ± σ₀ (pre-fit width) and the rest refitted, warm-started from the nominal minimum. The
//! refits are independent, so they run in parallel, each worker with its own evaluator clone;
//! results do not depend on the number of threads.

use crate::fit::{fit, FitOptions, FitResult};
use crate::{InferError, Result};
use histfit_seam::{Dataset, Evaluator, ParameterSpace};
use rayon::prelude::*;
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One nuisance parameter's entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankingEntry {
    pub name: String,
    pub index: usize,
    pub value: f64,
    pub uncertainty: f64,
    /// (θ̂ − θ₀)/σ₀ and σ̂/σ₀.
    pub pull: f64,
    pub constraint: f64,
    /// Δμ̂ with the parameter held at θ̂ + σ̂ and θ̂ − σ̂.
    pub impact_postfit_up: f64,
    pub impact_postfit_down: f64,
    /// Δμ̂ with the parameter held at θ̂ + σ₀ and θ̂ − σ₀.
    pub impact_prefit_up: f64,
    pub impact_prefit_down: f64,
    /// All four refits converged.
    pub converged: bool,
}

/// A ranking, entries sorted by the larger post-fit impact, largest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranking {
    pub poi: String,
    pub mu_hat: f64,
    pub mu_uncertainty: f64,
    pub entries: Vec<RankingEntry>,
    /// Refits that did not converge (their entries say which).
    pub failed_fits: usize,
}

/// The parameters a ranking ranks — constrained, not the POI, not `fixed` — each with its
/// constraint's centre and width: `(index, centre, width)`. (Four refits each.)
pub fn ranked_parameters(space: &ParameterSpace, fixed: &[bool]) -> Vec<(usize, f64, f64)> {
    space
        .priors
        .iter()
        .enumerate()
        .filter(|&(i, _)| Some(i) != space.poi && !fixed[i])
        .filter_map(|(i, prior)| {
            prior
                .centre_width()
                .map(|(centre, width)| (i, centre, width))
        })
        .collect()
}

/// Ranks every constrained, free nuisance parameter. `progress(done, total)` may be called from
/// several threads.
pub fn ranking<E: Evaluator + Clone + Send + Sync>(
    eval: &E,
    data: &Dataset,
    base: &FitOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Ranking> {
    let poi = eval.space().poi()?;
    crate::check_poi_not_fixed(eval.space(), base, poi)?;
    // The nominal fit's covariance is n×n over every parameter.
    crate::check_dense(
        eval.space().len(),
        base.dense_limit(),
        "the ranking (post-fit impacts)",
    )?;
    let mut nominal_eval = eval.clone();
    let nominal = fit(
        &mut nominal_eval,
        data,
        &FitOptions {
            uncertainties: true,
            ..base.clone()
        },
    )?;
    if !nominal.converged {
        return Err(InferError::Request(format!(
            "the nominal fit did not converge: {}",
            nominal.reason
        )));
    }
    let space = eval.space();
    if nominal.hessian_positive_definite != Some(true) {
        return Err(InferError::Request(
            "the Hessian at the nominal minimum is not positive definite: post-fit uncertainties, and so impacts, are undefined".into(),
        ));
    }
    let unc = nominal
        .uncertainties
        .clone()
        .ok_or_else(|| InferError::Request("the nominal fit has no uncertainties".into()))?;
    let params = ranked_parameters(space, &nominal.fixed);
    // Four refits per parameter: post-fit up/down, pre-fit up/down.
    let tasks: Vec<(usize, usize, f64)> = params
        .iter()
        .enumerate()
        .flat_map(|(k, &(i, _, width))| {
            let (v, s) = (nominal.bestfit[i], unc[i]);
            let (lo, hi) = space.bounds[i];
            [v + s, v - s, v + width, v - width]
                .into_iter()
                .map(move |t| (k, i, t.clamp(lo, hi)))
        })
        .collect();
    let total = tasks.len();
    let done = AtomicUsize::new(0);
    let refits: Vec<Result<FitResult>> = tasks
        .par_iter()
        .map_init(
            || eval.clone(),
            |ev, &(_, i, value)| {
                // Start where the nominal covariance predicts the conditional minimum:
                // θ_j + C_ji/C_ii · (t − θ̂_i); the refit then needs only a few iterations.
                let n = nominal.bestfit.len();
                let shift = value - nominal.bestfit[i];
                let mut init = nominal.bestfit.clone();
                if let Some(c) = &nominal.covariance {
                    let cii = c[i * n + i];
                    if cii > 0.0 {
                        for (j, x) in init.iter_mut().enumerate() {
                            let (lo, hi) = space.bounds[j];
                            *x = (*x + c[j * n + i] / cii * shift).clamp(lo, hi);
                        }
                    }
                }
                init[i] = value;
                let mut o = base.clone();
                o.uncertainties = false;
                o.init = Some(init);
                o.fix.push((i, value));
                let r = fit(ev, data, &o);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                r
            },
        )
        .collect();
    let refits = refits.into_iter().collect::<Result<Vec<_>>>()?;
    let mu_hat = nominal.bestfit[poi];
    let mut entries: Vec<RankingEntry> = params
        .iter()
        .enumerate()
        .map(|(k, &(i, centre, width))| {
            let r = &refits[4 * k..4 * k + 4];
            RankingEntry {
                name: space.names[i].clone(),
                index: i,
                value: nominal.bestfit[i],
                uncertainty: unc[i],
                pull: (nominal.bestfit[i] - centre) / width,
                constraint: unc[i] / width,
                impact_postfit_up: r[0].bestfit[poi] - mu_hat,
                impact_postfit_down: r[1].bestfit[poi] - mu_hat,
                impact_prefit_up: r[2].bestfit[poi] - mu_hat,
                impact_prefit_down: r[3].bestfit[poi] - mu_hat,
                converged: r.iter().all(|f| f.converged),
            }
        })
        .collect();
    let key = |e: &RankingEntry| e.impact_postfit_up.abs().max(e.impact_postfit_down.abs());
    entries.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.index.cmp(&b.index)));
    Ok(Ranking {
        poi: space.names[poi].clone(),
        mu_hat,
        mu_uncertainty: unc[poi],
        failed_fits: refits.iter().filter(|r| !r.converged).count(),
        entries,
    })
}
