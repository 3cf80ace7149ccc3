//! Sample yields as inputs (the differentiable-analysis use: a network produces a signal
//! histogram): the evaluator traits that set and differentiate them,
//! and the one operation every profiled statistic's gradient reduces to — a weighted sum of
//! yield gradients at a few parameter points ([`YieldGradient`]), which a device evaluator can
//! form where the yields live (in GPU memory) and the CPU evaluator forms on the host.

use crate::{Dataset, Evaluator, Result};

/// An evaluator whose samples' nominal yields can be inputs given on the host (their gradients:
/// [`YieldGradient`]).
pub trait YieldEvaluator: Evaluator {
    /// Refuses input samples that cannot take yields, or that repeat.
    fn check_inputs(&self, samples: &[usize]) -> Result<()>;
    /// Replaces the nominal yields of `sample` (index into `Model::samples`).
    fn set_yields(&mut self, sample: usize, yields: &[f64]) -> Result<()>;
    /// Restores every sample's yields to the model's.
    fn reset_yields(&mut self);
}

/// The data term of a statistic evaluated on an Asimov dataset built from the yields:
/// `coef · Σ_b ln(λ_b(free) / λ_b(cond)) · ∂λ_b/∂y(at)` (a bin where either rate is not positive
/// contributes nothing).
#[derive(Debug, Clone, Copy)]
pub struct AsimovTerm<'a> {
    pub coef: f64,
    pub free: &'a [f64],
    pub cond: &'a [f64],
    pub at: &'a [f64],
}

/// `Σ_i c_i · ∂(−ln L)/∂y (params_i; data)` plus an optional [`AsimovTerm`]: the gradient of a
/// profiled statistic with respect to the input yields (envelope theorem).
#[derive(Debug, Clone, Copy)]
pub struct YieldGradTerms<'a> {
    pub data: &'a Dataset,
    pub terms: &'a [(f64, &'a [f64])],
    pub asimov: Option<AsimovTerm<'a>>,
}

/// What a profiled statistic needs of an evaluator whose input yields are already set (on the
/// host through [`YieldEvaluator::set_yields`], or in device memory by a device evaluator). Its
/// batch evaluation lets independent fits run together.
pub trait YieldGradient: Evaluator + crate::BatchEvaluator {
    /// The Asimov dataset at `at` built from the current input yields: expected main counts and
    /// expected auxiliary data. A device evaluator may keep its main counts in device memory
    /// ([`Dataset::on_device`]).
    fn inputs_asimov(&mut self, at: &[f64]) -> Result<Dataset>;
    /// The gradient `g` over the input samples `samples` (bins concatenated in that order):
    /// `Some` values on the host, or `None` when the evaluator wrote them to its device output.
    fn yield_grad_sum(&mut self, samples: &[usize], g: &YieldGradTerms)
        -> Result<Option<Vec<f64>>>;
}
