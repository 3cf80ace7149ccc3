//! `histfit-infer`: statistics on a likelihood, written once against the seam of
//! [`histfit_seam`] — a [`ParameterSpace`](histfit_seam::ParameterSpace) and an
//! [`Evaluator`](histfit_seam::Evaluator) that gives −ln L, its gradient and generated data —
//! so every likelihood kind and every device runs the same code. Nothing here knows how a
//! likelihood is built; a [`Dataset`](histfit_seam::Dataset) is opaque. It holds maximum
//! likelihood fits ([`fit`]), profile scans, test statistics and asymptotic CLs ([`asymptotic`]),
//! limits, toys and toy CLs with their summaries and shard merges, ranking and differentiable
//! statistics.

pub mod asymptotic;
pub mod batch;
pub mod breakdown;
pub mod differentiable;
pub mod estimate;
pub mod fit;
pub mod gof;
pub mod limits;
pub mod minos;
pub mod pulls;
pub mod ranking;
pub mod scan;
pub mod toys;

pub use asymptotic::{significance, AsymptoticCalculator, HypotestResult, Significance, TestStat};
pub use breakdown::{uncertainty_breakdown, Breakdown, Group};
pub use estimate::{parameter_estimate, ParameterEstimate};
pub use fit::{check_dense, fit, FitOptions, FitResult, KinkState, Starts, DENSE_HESSIAN_LIMIT};
pub use gof::{goodness_of_fit, GoodnessOfFit};
pub use limits::{upper_limit, upper_limit_scan, UpperLimit};
pub use minos::{minos, MinosInterval};
pub use pulls::{pull_study, PullStudy};
pub use ranking::{ranking, Ranking, RankingEntry};
pub use scan::{linspace, profile_scan, ScanResult};
pub use toys::{
    check_ensemble_size, fit_toys, generation_point, hypotest_toys, merge_hypotest_toys,
    merge_toy_ensembles, shard_range, EnsembleSummary, GenPoint, ToyEnsemble, ToyFit, ToyHypotest,
};

/// Refuses to hold parameter `i` of `space` at `v` outside its bounds or at a non-finite value:
/// the one message of every front end (the CLI's `--fix`, Python's `fixed=`).
pub fn check_fixed_value(space: &histfit_seam::ParameterSpace, i: usize, v: f64) -> Result<()> {
    let (lower, upper) = space.bounds[i];
    if !v.is_finite() || v < lower || v > upper {
        return Err(InferError::Request(format!(
            "cannot fix \"{}\" at {v}: outside its bounds [{lower}, {upper}]",
            space.names[i]
        )));
    }
    Ok(())
}

/// Refuses options that hold the parameter of interest: a test, scan, limit or ranking varies
/// the POI itself, so a fixed one would make its "free" fit a conditional one and every number
/// after it wrong.
pub fn check_poi_not_fixed(
    space: &histfit_seam::ParameterSpace,
    base: &FitOptions,
    poi: usize,
) -> Result<()> {
    if base.fix.iter().any(|&(i, _)| i == poi) {
        return Err(InferError::Request(format!(
            "\"{}\" is the parameter of interest, which this varies itself: it cannot be fixed",
            space.names[poi]
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
    /// The request was sound and ran, but has no answer in the range asked (a limit whose CLs
    /// does not cross α): not bad input.
    #[error("{0}")]
    NoResult(String),
    /// An upper limit above the POI's upper bound: CLs stays above α up to `bound` (for the
    /// observed limit or one of the expected ones), so the hypothesis is not excluded there.
    #[error(
        "CLs stays above α up to the POI's upper bound {bound}: raise the bound to find the limit"
    )]
    AboveBound { bound: f64 },
    #[error(transparent)]
    Compute(#[from] histfit_seam::ComputeError),
}

pub type Result<T> = std::result::Result<T, InferError>;
