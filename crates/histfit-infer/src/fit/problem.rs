//! What a fit minimises, in the optimizer's coordinates: the free parameters, their scales
//! (z = θ/s), bounds and kinks, and the starting point; the checks of a fit request.
//!
//! The scale s of a parameter is the likelihood's ([`ParameterSpace::scales`]: a constraint's
//! width, else 1), so a lumi with σ = 2 % and a free normalisation have similar curvature, which
//! is what L-BFGS-B's single scalar θ assumes; or the request's ([`FitOptions::scales`]: toy
//! ensembles use the likelihood's curvature at the generating point, [`super::curvature_scales`]).

use super::FitOptions;
use crate::{InferError, Result};
use histfit_optim::Options;
use histfit_seam::{ParameterSpace, Prior};

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
    /// Per free coordinate: a free normalisation (no constraint, a lower bound of 0 or more, a
    /// positive initial value), what [`super::starts::low_normalisations`] starts low.
    pub normalisations: Vec<bool>,
    /// The requested start (fixed parameters at their values).
    pub start: Vec<f64>,
    /// The model's initial point with the request's fixed values: the fallback start.
    pub model_start: Vec<f64>,
    pub options: Options,
    /// The coordinates are the likelihood's curvature units
    /// ([`ParameterSpace::curvature_units`]): the first step is the whole gradient and a
    /// certified minimum gets no further Newton round ([`super::polish`]).
    pub curvature_units: bool,
}

impl Problem {
    pub fn new(space: &ParameterSpace, opts: &FitOptions) -> Result<Problem> {
        space.check()?;
        let n = space.names.len();
        let mut start = match &opts.init {
            Some(v) if v.len() != n => {
                return Err(InferError::Request(format!(
                    "init has {} values, the model has {n} parameters",
                    v.len()
                )))
            }
            Some(v) => v.clone(),
            None => space.init.clone(),
        };
        let mut bounds = space.bounds.clone();
        if let Some(b) = &opts.bounds {
            if b.len() != n {
                return Err(InferError::Request(format!(
                    "bounds have {} entries, the model has {n} parameters",
                    b.len()
                )));
            }
            bounds = b.clone();
        }
        let mut fixed = space.fixed.clone();
        let mut model_start = space.init.clone();
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
        let scales = match &opts.scales {
            None => &space.scales,
            Some(s) if s.len() != n => {
                return Err(InferError::Request(format!(
                    "scales have {} values, the model has {n} parameters",
                    s.len()
                )))
            }
            Some(s) => {
                let bad = |&i: &usize| !(fixed[i] || s[i].is_finite() && s[i] > 0.0);
                if let Some(i) = (0..n).find(bad) {
                    return Err(InferError::Request(format!(
                        "the scale of \"{}\" is {}: a scale is a positive finite number",
                        space.names[i], s[i]
                    )));
                }
                s
            }
        };
        let scale: Vec<f64> = free.iter().map(|&i| scales[i]).collect();
        let z = |f: &dyn Fn(&(f64, f64)) -> f64| -> Vec<f64> {
            free.iter()
                .zip(&scale)
                .map(|(&i, s)| f(&bounds[i]) / s)
                .collect()
        };
        let (lower, upper) = (z(&|b| b.0), z(&|b| b.1));
        let kinks = free.iter().map(|&i| space.kinked[i]).collect();
        let normalisations = free
            .iter()
            .map(|&i| {
                matches!(space.priors[i], Prior::Free) && bounds[i].0 >= 0.0 && space.init[i] > 0.0
            })
            .collect();
        // The likelihood's own curvature units (not a caller's scales, which toy ensembles pass
        // — binned and event-level — and the devices' kernels fit in): see `curvature_units`.
        // It turns `full_first_step` on whatever the caller's optimizer options say.
        let curvature_units = space.curvature_units && opts.scales.is_none();
        let mut options = opts.optimizer.unwrap_or_default();
        options.full_first_step |= curvature_units;
        Ok(Problem {
            names: space.names.clone(),
            fixed,
            free,
            scale,
            lower,
            upper,
            kinks,
            normalisations,
            start,
            model_start,
            options,
            curvature_units,
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

    /// Bounds in the parameters' own units, one pair per parameter: the request's for the free
    /// ones, the held value for the others (what a difference step must stay inside).
    pub fn x_bounds(&self) -> Vec<(f64, f64)> {
        let mut b: Vec<(f64, f64)> = self.start.iter().map(|&v| (v, v)).collect();
        for (k, &i) in self.free.iter().enumerate() {
            b[i] = (self.lower[k] * self.scale[k], self.upper[k] * self.scale[k]);
        }
        b
    }

    /// The full parameter vector of `z` (fixed parameters at their values).
    pub fn x_of(&self, z: &[f64]) -> Vec<f64> {
        let mut x = self.start.clone();
        self.set_x(z, &mut x);
        x
    }
}
