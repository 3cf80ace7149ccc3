//! Uncertainties of fits to weighted events, the three estimates a physicist compares, each
//! from the covariance it names (over the free parameters, at the fit's minimum θ̂):
//!
//! - `naive`: H⁻¹, the inverse Hessian of −ln L with the weights as given — right only for
//!   unweighted events;
//! - `sumw2`: H⁻¹ H₂ H⁻¹, H₂ the Hessian with each weight squared (RooFit's `SumW2Error`);
//! - `sandwich`: H⁻¹ D H⁻¹, D = Σ_i w_i² s_i s_iᵀ + H_c with s_i = ∂ ln(ν f(x_i))/∂θ each
//!   event's score (ln f(x_i) where not extended): the asymptotically correct estimate
//!   (Langenbruch, EPJC 82 (2022) 393; RooFit's `AsymptoticError`). D is the variance of the
//!   score of −ln L: the events' part is Σ w² s sᵀ (a Poisson process's, for the extended
//!   likelihood), and the auxiliary measurements — unweighted, drawn anew with every
//!   experiment, as histfit's toys draw them — add their own information H_c, the Hessian of
//!   the constraint terms. (Left out of D, as RooFit's `AsymptoticError` leaves it, a
//!   parameter the constraint measures would get too small an error: on one parameter with
//!   data information I and a constraint of width σ_c, I / (I + 1/σ_c²)² in place of
//!   1 / (I + 1/σ_c²).)
//!
//! For unweighted events all three agree asymptotically (D → H at the minimum).

use crate::model::UnbinnedModel;
use histfit_seam::{hessian, ComputeError, Dataset, EventTable, Events};
use std::sync::Arc;

/// The three covariances' standard deviations, per free parameter.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WeightedUncertainties {
    /// The free parameters' indices.
    pub free: Vec<usize>,
    pub naive: Vec<f64>,
    pub sumw2: Vec<f64>,
    pub sandwich: Vec<f64>,
    /// The sandwich covariance (free × free, row-major).
    pub sandwich_covariance: Vec<f64>,
}

fn invert(h: &[f64], k: usize) -> histfit_seam::Result<Vec<f64>> {
    histfit_optim::linalg::invert_symmetric(h, k)
        .filter(|(_, pd)| *pd)
        .map(|(inv, _)| inv)
        .ok_or_else(|| ComputeError::InvalidData {
            place: "Hessian at the minimum".into(),
            rule: "not positive definite: no uncertainties".into(),
        })
}

/// A · B for k × k matrices.
fn product(a: &[f64], b: &[f64], k: usize) -> Vec<f64> {
    let mut out = vec![0.0; k * k];
    for i in 0..k {
        for l in 0..k {
            let x = a[i * k + l];
            for j in 0..k {
                out[i * k + j] += x * b[l * k + j];
            }
        }
    }
    out
}

/// A · B · A for k × k matrices.
fn sandwich(a: &[f64], b: &[f64], k: usize) -> Vec<f64> {
    product(&product(a, b, k), a, k)
}

fn diagonal_sd(c: &[f64], k: usize) -> Vec<f64> {
    (0..k).map(|i| c[i * k + i].sqrt()).collect()
}

/// The three estimates at `at` (the fit's minimum on `data`), over the free parameters `free`.
pub fn weighted_uncertainties(
    model: &mut UnbinnedModel,
    data: &Dataset,
    at: &[f64],
    free: &[usize],
) -> histfit_seam::Result<WeightedUncertainties> {
    let h = hessian(model, at, data, free)?;
    let h2 = hessian(model, at, &squared_weights(data)?, free)?;
    let d = score_variance(model, data, at, free)?;
    from_matrices(free, &h, &h2, &d)
}

/// `data` with every event's weight squared (what H₂ is the Hessian on).
pub fn squared_weights(data: &Dataset) -> histfit_seam::Result<Dataset> {
    let events = data.events.as_deref().ok_or(ComputeError::InvalidData {
        place: "dataset".into(),
        rule: "weighted-fit uncertainties need events".into(),
    })?;
    let squared = Events {
        channels: events
            .channels
            .iter()
            .map(|t| EventTable {
                weights: t
                    .weights
                    .as_ref()
                    .map(|w| w.iter().map(|x| x * x).collect()),
                ..t.clone()
            })
            .collect(),
    };
    let mut out = data.clone();
    out.events = Some(Arc::new(squared));
    Ok(out)
}

/// D of an event-level likelihood over the parameters `free` at `at`: Σ w² s sᵀ over every
/// channel's events plus the constraints' information (see the module's note).
pub fn score_variance(
    model: &UnbinnedModel,
    data: &Dataset,
    at: &[f64],
    free: &[usize],
) -> histfit_seam::Result<Vec<f64>> {
    let k = free.len();
    let events = data.events.as_deref().ok_or(ComputeError::InvalidData {
        place: "dataset".into(),
        rule: "weighted-fit uncertainties need events".into(),
    })?;
    let mut d = model.constraint_hessian(at, data, free)?;
    for (c, table) in events.channels.iter().enumerate() {
        let jac = model.event_scores(c, at, table, free);
        for i in 0..table.len() {
            let w2 = table.weights.as_ref().map_or(1.0, |w| w[i] * w[i]);
            for a in 0..k {
                let sa = jac[a][i] * w2;
                for b in 0..k {
                    d[a * k + b] += sa * jac[b][i];
                }
            }
        }
    }
    Ok(d)
}

/// The three estimates over the parameters `free` from H, H₂ and D (each `free.len()²`,
/// row-major).
pub fn from_matrices(
    free: &[usize],
    h: &[f64],
    h2: &[f64],
    d: &[f64],
) -> histfit_seam::Result<WeightedUncertainties> {
    let k = free.len();
    let h_inv = invert(h, k)?;
    let c_sumw2 = sandwich(&h_inv, h2, k);
    let c_sandwich = sandwich(&h_inv, d, k);
    Ok(WeightedUncertainties {
        free: free.to_vec(),
        naive: diagonal_sd(&h_inv, k),
        sumw2: diagonal_sd(&c_sumw2, k),
        sandwich: diagonal_sd(&c_sandwich, k),
        sandwich_covariance: c_sandwich,
    })
}
