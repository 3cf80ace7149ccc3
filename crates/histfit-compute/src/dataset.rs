//! A HistFactory model's datasets: pyhf's flat layout (main bins, then one auxiliary datum per
//! constrained parameter) checked against the model, with the constant of −ln L its constraint
//! terms give ([`histfit_seam::Dataset::from_counts`]).

pub use histfit_seam::dataset::*;

use histfit_model::{Constraint, Model};
use histfit_seam::{ComputeError, Result};

/// The auxiliary data's terms of `model`: one per constrained parameter, in aux order.
pub fn aux_terms(model: &Model) -> Vec<AuxTerm> {
    model
        .aux_params
        .iter()
        .map(|&p| match model.parameters[p].constraint {
            Constraint::Gauss { sigma } => AuxTerm::Gauss { sigma },
            Constraint::Poisson { .. } => AuxTerm::Poisson,
            Constraint::None => unreachable!("aux data belong to constrained parameters"),
        })
        .collect()
}

/// Datasets of a HistFactory model (`Dataset::observed(&model)` with this trait in scope).
pub trait HistFactoryData: Sized {
    /// From pyhf's flat layout: main bins followed by auxiliary data.
    fn new(model: &Model, data: &[f64]) -> Result<Self>;
    /// The workspace's observed data.
    fn observed(model: &Model) -> Self;
    /// Main counts and auxiliary data, each of the model's length.
    fn from_parts(model: &Model, main: Vec<f64>, aux: Vec<f64>) -> Result<Self>;
    /// A dataset whose main counts a device evaluator keeps in its own memory under `key`
    /// ([`Dataset::on_device`]).
    fn resident(
        model: &Model,
        aux: Vec<f64>,
        main_constant: f64,
        has_empty: bool,
        key: u64,
    ) -> Result<Self>;
}

impl HistFactoryData for Dataset {
    fn new(model: &Model, data: &[f64]) -> Result<Dataset> {
        let expected = model.n_main + model.n_aux();
        if data.len() != expected {
            return Err(ComputeError::Length {
                what: "data (main bins + aux)",
                expected,
                got: data.len(),
            });
        }
        Dataset::from_parts(
            model,
            data[..model.n_main].to_vec(),
            data[model.n_main..].to_vec(),
        )
    }

    fn observed(model: &Model) -> Dataset {
        <Dataset as HistFactoryData>::new(model, &model.observed)
            .expect("observed data has the model's layout")
    }

    fn from_parts(model: &Model, main: Vec<f64>, aux: Vec<f64>) -> Result<Dataset> {
        if main.len() != model.n_main {
            return Err(ComputeError::Length {
                what: "main data",
                expected: model.n_main,
                got: main.len(),
            });
        }
        Dataset::from_counts(main, aux, &aux_terms(model))
    }

    fn resident(
        model: &Model,
        aux: Vec<f64>,
        main_constant: f64,
        has_empty: bool,
        key: u64,
    ) -> Result<Dataset> {
        Dataset::on_device(
            model.n_main,
            aux,
            &aux_terms(model),
            main_constant,
            has_empty,
            key,
        )
    }
}
