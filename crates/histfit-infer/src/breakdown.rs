//! The POI's uncertainty broken down: its statistical part and the part each group of nuisance
//! parameters contributes, by refits with parameters held at their best-fit values.
//!
//! With σ the POI's Hesse error of the free fit and σ_S its error with the parameters of S held
//! at the best fit, a group's impact is √(σ² − σ_S²) (0 where rounding makes σ_S the larger);
//! the statistical part is σ_stat = σ_C with C every constrained parameter (those with a
//! constraint term: the systematic uncertainties), so free normalisations measured in the data
//! stay free in it, and the systematic part is √(σ² − σ_stat²). Groups overlap freely and their
//! impacts do not add up in quadrature to the total where their parameters are correlated.

use crate::fit::{fit, FitOptions, FitResult, Starts};
use crate::{InferError, Result};
use histfit_seam::{Dataset, Evaluator};
use serde::Serialize;

/// A named set of parameters (indices into the parameter vector).
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub name: String,
    pub parameters: Vec<usize>,
}

/// One group's share of the POI's uncertainty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupImpact {
    pub group: String,
    /// The group's free parameters, by name (those held anyway are left out).
    pub parameters: Vec<String>,
    /// √(σ² − σ_S²).
    pub impact: f64,
    /// σ_S: the POI's error with the group held.
    pub poi_uncertainty_held: f64,
    pub converged: bool,
}

/// The POI's uncertainty and its parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Breakdown {
    pub poi: String,
    pub total: f64,
    /// The POI's error with every constrained parameter held.
    pub stat: f64,
    /// √(total² − stat²).
    pub syst: f64,
    pub groups: Vec<GroupImpact>,
    /// Whether every refit converged.
    pub converged: bool,
}

/// The breakdown of the POI's uncertainty at the free fit `free` (made with `base` and with
/// uncertainties) for `groups`.
pub fn uncertainty_breakdown<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    base: &FitOptions,
    free: &FitResult,
    groups: &[Group],
) -> Result<Breakdown> {
    let space = eval.space().clone();
    let poi = space.poi()?;
    let total = free.uncertainties.as_ref().map_or(f64::NAN, |u| u[poi]);
    if !(total.is_finite() && total > 0.0) {
        return Err(InferError::Request(format!(
            "the POI's uncertainty at the fit is {total}: there is nothing to break down"
        )));
    }
    // Parameters free in the fit: neither held by the model nor by the request.
    let free_in_fit =
        |i: usize| !space.fixed[i] && !base.fix.iter().any(|&(j, _)| j == i) && i != poi;
    let mut held_error = |set: &[usize]| -> Result<(f64, bool)> {
        let mut o = base.clone();
        o.uncertainties = true;
        o.starts = Starts::Count(0);
        o.init = Some(free.bestfit.clone());
        o.fix.extend(set.iter().map(|&i| (i, free.bestfit[i])));
        let r = fit(eval, data, &o)?;
        let e = r.uncertainties.as_ref().map_or(f64::NAN, |u| u[poi]);
        Ok((e, r.converged))
    };
    let impact = |held: f64| (total * total - held * held).max(0.0).sqrt();
    let constrained: Vec<usize> = (0..space.len())
        .filter(|&i| free_in_fit(i) && space.priors[i].centre_width().is_some())
        .collect();
    let (stat, stat_converged) = if constrained.is_empty() {
        (total, true)
    } else {
        held_error(&constrained)?
    };
    let mut out = Vec::with_capacity(groups.len());
    for g in groups {
        let set: Vec<usize> = g
            .parameters
            .iter()
            .copied()
            .filter(|&i| free_in_fit(i))
            .collect();
        let (held, converged) = if set.is_empty() {
            (total, true)
        } else {
            held_error(&set)?
        };
        out.push(GroupImpact {
            group: g.name.clone(),
            parameters: set.iter().map(|&i| space.names[i].clone()).collect(),
            impact: impact(held),
            poi_uncertainty_held: held,
            converged,
        });
    }
    Ok(Breakdown {
        poi: space.names[poi].clone(),
        total,
        stat,
        syst: impact(stat),
        converged: stat_converged && out.iter().all(|g| g.converged),
        groups: out,
    })
}
