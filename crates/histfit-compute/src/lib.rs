//! `histfit-compute`: what it means to *evaluate* a compiled [`Model`], and the CPU f64 evaluator.
//!
//! The [`Evaluator`] trait is the one seam between statistics and devices: given parameters and a
//! [`Dataset`], return the negative log-likelihood, its gradient, and the expected data. Inference
//! code (`histfit-infer`) is written against it only; the CUDA backend adds an implementation.
//! Helpers built purely on the trait (Hessian, expected data with aux) live here too.

pub mod cpu;
pub mod dataset;
pub mod rng;

pub use cpu::CpuEvaluator;
pub use dataset::Dataset;
use histfit_model::Model;

/// An error from an evaluator (bad input sizes, a device failure).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ComputeError {
    #[error("{what}: expected {expected} values, got {got}")]
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{place}: {rule}")]
    InvalidData { place: String, rule: String },
    #[error("device error: {0}")]
    Device(String),
}

pub type Result<T> = std::result::Result<T, ComputeError>;

/// Evaluates the likelihood of one compiled model. Values are `-ln L` (pyhf's `-logpdf`); where the
/// model predicts a non-positive rate for observed events, the value is `+inf` (never a panic).
pub trait Evaluator {
    fn model(&self) -> &Model;
    /// −ln L(params | data).
    fn nll(&mut self, params: &[f64], data: &Dataset) -> Result<f64>;
    /// −ln L and its gradient with respect to every parameter (fixed ones included).
    fn nll_grad(&mut self, params: &[f64], data: &Dataset, grad: &mut [f64]) -> Result<f64>;
    /// Expected main-bin counts (channel order).
    fn expected_main(&mut self, params: &[f64], out: &mut [f64]) -> Result<()>;
}

/// Expected data in pyhf's layout: main bins, then the auxiliary data each constraint expects
/// (θ for Gaussian, θ·τ for Poisson constraints).
pub fn expected_data<E: Evaluator + ?Sized>(eval: &mut E, params: &[f64]) -> Result<Vec<f64>> {
    let model = eval.model();
    let n_main = model.n_main;
    let aux: Vec<f64> = model
        .aux_params
        .iter()
        .map(|&p| match model.parameters[p].constraint {
            histfit_model::Constraint::Poisson { tau } => params[p] * tau,
            _ => params[p],
        })
        .collect();
    let mut out = vec![0.0; n_main];
    eval.expected_main(params, &mut out)?;
    out.extend(aux);
    Ok(out)
}

/// Hessian of −ln L by forward differences of the analytic gradient, symmetrised, over the
/// parameters in `which` (row-major `which.len()²`): one gradient per column. The step (1e-6 of
/// the parameter's size) keeps truncation and rounding both near 1e-6 relative, far below what an
/// uncertainty needs, at half the cost of central differences.
pub fn hessian<E: Evaluator + ?Sized>(
    eval: &mut E,
    params: &[f64],
    data: &Dataset,
    which: &[usize],
) -> Result<Vec<f64>> {
    let n = params.len();
    let k = which.len();
    let mut h = vec![0.0; k * k];
    let mut x = params.to_vec();
    let (mut g0, mut gp) = (vec![0.0; n], vec![0.0; n]);
    eval.nll_grad(params, data, &mut g0)?;
    for (col, &j) in which.iter().enumerate() {
        let step = 1e-6 * params[j].abs().max(1.0);
        x[j] = params[j] + step;
        eval.nll_grad(&x, data, &mut gp)?;
        x[j] = params[j];
        let step = (params[j] + step) - params[j]; // the step actually taken in floating point
        for (row, &i) in which.iter().enumerate() {
            h[row * k + col] = (gp[i] - g0[i]) / step;
        }
    }
    for r in 0..k {
        for c in r + 1..k {
            let m = 0.5 * (h[r * k + c] + h[c * k + r]);
            h[r * k + c] = m;
            h[c * k + r] = m;
        }
    }
    Ok(h)
}
