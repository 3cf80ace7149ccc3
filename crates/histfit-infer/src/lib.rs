//! `histfit-infer`: statistics on a compiled model, written once against
//! [`histfit_compute::Evaluator`] so every device runs the same code. This release holds maximum
//! likelihood fits ([`fit`]), test statistics and asymptotic CLs ([`asymptotic`]), and what builds
//! on them.

pub mod asymptotic;
pub mod batch;
pub mod differentiable;
pub mod fit;
pub mod limits;
pub mod ranking;
pub mod scan;
pub mod toys;

pub use asymptotic::{significance, AsymptoticCalculator, HypotestResult, Significance, TestStat};
pub use fit::{fit, FitOptions, FitResult, KinkState, Starts};
pub use limits::{upper_limit, upper_limit_scan, UpperLimit};
pub use ranking::{ranking, Ranking, RankingEntry};
pub use scan::{linspace, profile_scan, ScanResult};
pub use toys::{
    fit_toys, generate_toy, generation_point, hypotest_toys, merge_hypotest_toys,
    merge_toy_ensembles, shard_range, EnsembleSummary, GenPoint, ToyEnsemble, ToyFit, ToyHypotest,
};

/// Refuses to hold parameter `i` of `model` at `v` outside its bounds or at a non-finite value:
/// the one message of every front end (the CLI's `--fix`, Python's `fixed=`).
pub fn check_fixed_value(model: &histfit_model::Model, i: usize, v: f64) -> Result<()> {
    let p = &model.parameters[i];
    if !v.is_finite() || v < p.lower || v > p.upper {
        return Err(InferError::Request(format!(
            "cannot fix \"{}\" at {v}: outside its bounds [{}, {}]",
            p.name, p.lower, p.upper
        )));
    }
    Ok(())
}

/// Errors from inference: bad requests (unknown parameter, value outside bounds) or evaluator
/// failures.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InferError {
    #[error("{0}")]
    Request(String),
    #[error(transparent)]
    Compute(#[from] histfit_compute::ComputeError),
}

pub type Result<T> = std::result::Result<T, InferError>;
