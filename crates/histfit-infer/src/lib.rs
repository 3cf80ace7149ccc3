//! `histfit-infer`: statistics on a compiled model, written once against
//! [`histfit_compute::Evaluator`] so every device runs the same code. This release holds maximum
//! likelihood fits ([`fit`]); scans, test statistics, limits, toys and ranking build on it.

pub mod fit;

pub use fit::{fit, FitOptions, FitResult};

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
