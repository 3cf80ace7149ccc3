//! What a fit minimises, in the optimizer's coordinates: the free parameters, their scales
//! (z = θ/s), bounds and kinks, and the starting point; the checks of a fit request.
//!
//! The scale s of a parameter is the prior width of its constraint (σ for Gaussian, 1/√τ for
//! Poisson constraints), else 1: a lumi with σ = 2 % and a free normalisation then have similar
//! curvature, which is what L-BFGS-B's single scalar θ assumes.

use super::FitOptions;
use crate::{InferError, Result};
use histfit_model::{Constraint, InterpCode, Model};
use histfit_optim::Options;

/// The parts of the model a fit needs, copied out so the evaluator can be borrowed mutably.
pub(crate) struct Layout {
    pub names: Vec<String>,
    pub init: Vec<f64>,
    pub bounds: Vec<(f64, f64)>,
    pub fixed: Vec<bool>,
    pub scale: Vec<f64>,
    /// Parameters whose interpolation has a kink at 0 (normsys code1, histosys code0).
    pub kinked: Vec<bool>,
}

impl Layout {
    pub fn of(model: &Model) -> Layout {
        Layout {
            names: model.par_names(),
            init: model.init(),
            bounds: model.bounds(),
            fixed: model.fixed(),
            scale: parameter_scales(model),
            kinked: kinked_parameters(model),
        }
    }
}

/// One fit request, checked and put into scaled coordinates.
pub(crate) struct Problem {
    pub names: Vec<String>,
    /// Fixed by the model or the request.
    pub fixed: Vec<bool>,
    /// Indices of the free parameters; the optimizer's coordinate k is parameter `free[k]`.
    pub free: Vec<usize>,
    pub scale: Vec<f64>,
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub kinks: Vec<bool>,
    /// The requested start (fixed parameters at their values).
    pub start: Vec<f64>,
    /// The model's initial point with the request's fixed values: the fallback start.
    pub model_start: Vec<f64>,
    pub options: Options,
}

impl Problem {
    pub fn new(layout: Layout, opts: &FitOptions) -> Result<Problem> {
        let n = layout.names.len();
        let mut start = match &opts.init {
            Some(v) if v.len() != n => {
                return Err(InferError::Request(format!(
                    "init has {} values, the model has {n} parameters",
                    v.len()
                )))
            }
            Some(v) => v.clone(),
            None => layout.init.clone(),
        };
        let mut bounds = layout.bounds;
        if let Some(b) = &opts.bounds {
            if b.len() != n {
                return Err(InferError::Request(format!(
                    "bounds have {} entries, the model has {n} parameters",
                    b.len()
                )));
            }
            bounds = b.clone();
        }
        let mut fixed = layout.fixed;
        let mut model_start = layout.init;
        for &(i, v) in &opts.fix {
            if i >= n {
                return Err(InferError::Request(format!(
                    "parameter index {i} out of range"
                )));
            }
            start[i] = v;
            model_start[i] = v;
            fixed[i] = true;
        }
        let free: Vec<usize> = (0..n).filter(|&i| !fixed[i]).collect();
        let scale: Vec<f64> = free.iter().map(|&i| layout.scale[i]).collect();
        let z = |f: &dyn Fn(&(f64, f64)) -> f64| -> Vec<f64> {
            free.iter()
                .zip(&scale)
                .map(|(&i, s)| f(&bounds[i]) / s)
                .collect()
        };
        let (lower, upper) = (z(&|b| b.0), z(&|b| b.1));
        let kinks = free.iter().map(|&i| layout.kinked[i]).collect();
        Ok(Problem {
            names: layout.names,
            fixed,
            free,
            scale,
            lower,
            upper,
            kinks,
            start,
            model_start,
            options: opts.optimizer.unwrap_or_default(),
        })
    }

    pub fn n(&self) -> usize {
        self.names.len()
    }

    pub fn has_kinks(&self) -> bool {
        self.kinks.iter().any(|&k| k)
    }

    /// The optimizer's coordinates of a full parameter vector (clamped into the bounds).
    pub fn z_of(&self, x: &[f64]) -> Vec<f64> {
        self.free
            .iter()
            .enumerate()
            .map(|(k, &i)| (x[i] / self.scale[k]).clamp(self.lower[k], self.upper[k]))
            .collect()
    }

    /// Writes the free entries of `x` from the optimizer's coordinates.
    pub fn set_x(&self, z: &[f64], x: &mut [f64]) {
        for (k, &i) in self.free.iter().enumerate() {
            x[i] = z[k] * self.scale[k];
        }
    }

    /// The full parameter vector of `z` (fixed parameters at their values).
    pub fn x_of(&self, z: &[f64]) -> Vec<f64> {
        let mut x = self.start.clone();
        self.set_x(z, &mut x);
        x
    }
}

/// Each parameter's natural scale: its constraint's width (σ, or 1/√τ for a Poisson one), else
/// 1. Fits and polishing steps work in θ/scale.
fn parameter_scales(model: &Model) -> Vec<f64> {
    model
        .parameters
        .iter()
        .map(|p| match p.constraint {
            Constraint::Gauss { sigma } if sigma > 0.0 => sigma,
            Constraint::Poisson { tau } if tau > 0.0 => 1.0 / tau.sqrt(),
            _ => 1.0,
        })
        .collect()
}

/// The parameters whose interpolation has a kink at 0: those driving a modifier that uses code 0
/// or 1.
fn kinked_parameters(model: &Model) -> Vec<bool> {
    let kinked_code = |c: InterpCode| matches!(c, InterpCode::Code0 | InterpCode::Code1);
    let mut k = vec![false; model.parameters.len()];
    if kinked_code(model.settings.normsys) {
        for e in &model.normsys {
            k[e.par as usize] = true;
        }
    }
    if kinked_code(model.settings.histosys) {
        for e in &model.histosys {
            k[e.par as usize] = true;
        }
    }
    k
}
