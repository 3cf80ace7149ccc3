//! A HistFactory model's toys, drawn from the seam's counter-based streams
//! ([`histfit_seam::rng`], re-exported here).

pub use histfit_seam::rng::*;

use crate::HistFactoryData;
use histfit_model::{Constraint, Model};
use histfit_seam::{Dataset, Result};

/// Toy `index` of `seed` generated at `params`, whose expected main counts are `expected_main`:
/// main bins Poisson(λ_b) from stream 0; auxiliary data from stream 1 (Gaussian constraints
/// N(θ, σ), Poisson constraints Poisson(θ·τ)).
pub fn generate_toy(
    model: &Model,
    expected_main: &[f64],
    params: &[f64],
    seed: u64,
    index: u64,
) -> Result<Dataset> {
    check_generation_params(params)?;
    let mut s = ToyStream::new(seed, index, STREAM_MAIN);
    let main: Vec<f64> = expected_main
        .iter()
        .map(|&l| s.poisson(l.max(0.0)))
        .collect();
    let mut s = ToyStream::new(seed, index, STREAM_AUX);
    let aux: Vec<f64> = model
        .aux_params
        .iter()
        .map(|&p| match model.parameters[p].constraint {
            Constraint::Gauss { sigma } => params[p] + sigma * s.normal(),
            Constraint::Poisson { tau } => s.poisson(params[p] * tau),
            Constraint::None => unreachable!("aux data belong to constrained parameters"),
        })
        .collect();
    Dataset::from_parts(model, main, aux)
}
