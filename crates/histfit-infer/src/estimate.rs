//! The parameters and their covariance that error propagation starts from (yield tables, and
//! whatever else shows a prediction with its uncertainty): before the fit, the starting point with
//! the priors' variances on the diagonal; after it, the best fit with its covariance.

use crate::fit::{fit, FitOptions, FitResult};
use crate::{InferError, Result};
use histfit_seam::{Dataset, Evaluator};

/// A parameter point with its covariance (row-major n×n).
#[derive(Debug, Clone, PartialEq)]
pub struct ParameterEstimate {
    pub params: Vec<f64>,
    pub covariance: Vec<f64>,
    /// The fit behind a post-fit estimate.
    pub fit: Option<FitResult>,
}

/// Pre-fit (`postfit` false): the start of `base` (the likelihood's initial point, `base.init`,
/// the fixed values applied) and each constrained parameter's prior variance (its width²), zero
/// for free parameters and fixed or held ones, whose pre-fit values are taken as known.
/// Post-fit: the fit of `data` with `base` and its covariance (an error where the Hessian is not
/// positive definite: there is no covariance to propagate).
pub fn parameter_estimate<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    base: &FitOptions,
    postfit: bool,
) -> Result<ParameterEstimate> {
    // Both estimates are dense n×n matrices (the propagation takes the full covariance).
    let n = eval.space().len();
    crate::check_dense(
        n,
        base.dense_limit(),
        "error propagation (yields with uncertainties)",
    )?;
    if postfit {
        let r = fit(
            eval,
            data,
            &FitOptions {
                uncertainties: true,
                ..base.clone()
            },
        )?;
        let covariance = r.covariance.clone().ok_or_else(|| {
            InferError::Request(
                "the fit has no covariance (its Hessian is not positive definite): no post-fit uncertainties"
                    .into(),
            )
        })?;
        return Ok(ParameterEstimate {
            params: r.bestfit.clone(),
            covariance,
            fit: Some(r),
        });
    }
    let space = eval.space();
    let mut params = base.init.clone().unwrap_or_else(|| space.init.clone());
    for &(i, v) in &base.fix {
        params[i] = v;
    }
    let mut covariance = vec![0.0; n * n];
    for (i, prior) in space.priors.iter().enumerate() {
        let held = space.fixed[i] || base.fix.iter().any(|f| f.0 == i);
        if let (false, Some((_, width))) = (held, prior.centre_width()) {
            if width.is_finite() {
                covariance[i * n + i] = width * width;
            }
        }
    }
    Ok(ParameterEstimate {
        params,
        covariance,
        fit: None,
    })
}
