//! MINOS-style asymmetric intervals: for each requested parameter, the two values where the
//! profile likelihood rises by ½ from its minimum (2ΔNLL = 1, the 68.3 % interval of a parameter
//! whose profile is χ²₁), each found by root finding on conditional fits. The Hessian's error
//! gives the first bracket; each conditional fit starts from the previous one. An interval that
//! reaches the parameter's bound before the crossing ends there and says so.

use crate::fit::{fit, FitOptions, FitResult};
use crate::limits::brent;
use crate::{InferError, Result};
use histfit_seam::{Dataset, Evaluator};
use serde::Serialize;

/// One parameter's interval: `value + lower_error` … `value + upper_error`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinosInterval {
    pub name: String,
    pub index: usize,
    pub value: f64,
    /// ≤ 0.
    pub lower_error: f64,
    /// ≥ 0.
    pub upper_error: f64,
    /// The interval ends at the parameter's bound (the profile had not risen by ½ there).
    pub lower_at_bound: bool,
    pub upper_at_bound: bool,
    /// Every conditional fit converged and none went below the nominal minimum.
    pub converged: bool,
    /// A conditional fit found a lower minimum than the nominal fit (as MINOS reports a new
    /// minimum): the interval is measured from a point that is not the minimum; refit from there.
    pub new_minimum: bool,
    /// Conditional fits made.
    pub fits: usize,
}

/// The profile crossing 2ΔNLL = 1 is found to this fraction of the parameter's Hessian error.
const XTOL: f64 = 1e-7;

/// MINOS intervals of the parameters `which` around the minimum `nominal` (a fit of `data` with
/// uncertainties and the options `base`).
pub fn minos<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    nominal: &FitResult,
    which: &[usize],
    base: &FitOptions,
) -> Result<Vec<MinosInterval>> {
    let unc = nominal.uncertainties.as_ref().ok_or_else(|| {
        InferError::Request("MINOS needs a nominal fit with uncertainties".into())
    })?;
    which
        .iter()
        .map(|&i| {
            if i >= nominal.bestfit.len() {
                return Err(InferError::Request(format!(
                    "MINOS: parameter index {i} out of range"
                )));
            }
            if nominal.fixed[i] {
                return Err(InferError::Request(format!(
                    "MINOS: \"{}\" is fixed; it has no interval",
                    nominal.par_names[i]
                )));
            }
            if !unc[i].is_finite() {
                return Err(InferError::Request(format!(
                    "MINOS: \"{}\" has no uncertainty from the nominal fit to start from (above \
                     the dense-Hessian limit only the POI's is computed; raise it with \
                     --max-hessian-parameters)",
                    nominal.par_names[i]
                )));
            }
            let mut fits = 0;
            let mut converged = true;
            let mut new_minimum = false;
            let mut side = |sign: f64| -> Result<(f64, bool)> {
                let r = crossing(eval, data, nominal, i, unc[i], sign, base)?;
                fits += r.fits;
                converged &= r.converged && !r.below_minimum;
                new_minimum |= r.below_minimum;
                Ok((r.at - nominal.bestfit[i], r.at_bound))
            };
            let (lower_error, lower_at_bound) = side(-1.0)?;
            let (upper_error, upper_at_bound) = side(1.0)?;
            Ok(MinosInterval {
                name: nominal.par_names[i].clone(),
                index: i,
                value: nominal.bestfit[i],
                lower_error,
                upper_error,
                lower_at_bound,
                upper_at_bound,
                converged,
                new_minimum,
                fits,
            })
        })
        .collect()
}

struct Crossing {
    at: f64,
    at_bound: bool,
    converged: bool,
    below_minimum: bool,
    fits: usize,
}

/// Where the profile of parameter `i` crosses 2ΔNLL = 1 on the side `sign` of the minimum.
fn crossing<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    nominal: &FitResult,
    i: usize,
    sigma: f64,
    sign: f64,
    base: &FitOptions,
) -> Result<Crossing> {
    let centre = nominal.bestfit[i];
    let (lo, hi) = base
        .bounds
        .as_ref()
        .map(|b| b[i])
        .unwrap_or_else(|| eval.space().bounds[i]);
    let bound = if sign > 0.0 { hi } else { lo };
    let scale = if sigma.is_finite() && sigma > 0.0 {
        sigma
    } else {
        1.0
    };
    let mut warm = nominal.bestfit.clone();
    let mut fits = 0;
    let mut converged = true;
    let mut below_minimum = false;
    // 2ΔNLL − 1 at θ_i = t, from a conditional fit started at the last one's minimum.
    let mut g = |t: f64| -> Result<f64> {
        let mut o = base.clone();
        o.uncertainties = false;
        o.fix.push((i, t));
        let mut init = warm.clone();
        init[i] = t;
        o.init = Some(init);
        let r = fit(eval, data, &o)?;
        fits += 1;
        converged &= r.converged;
        if !r.twice_nll.is_finite() {
            return Err(InferError::Request(format!(
                "MINOS: the likelihood is not finite with \"{}\" at {t}",
                nominal.par_names[i]
            )));
        }
        warm = r.bestfit;
        // Beyond the fits' own resolution below the nominal minimum: a better minimum exists.
        below_minimum |= r.twice_nll < nominal.twice_nll - 1e-6;
        Ok(r.twice_nll - nominal.twice_nll - 1.0)
    };
    // Bracket: from the minimum (g = −1) outwards in steps of the Hessian error, doubling.
    let (mut a, mut fa) = (centre, -1.0);
    let mut step = scale;
    loop {
        let b = if sign > 0.0 {
            (a + step).min(bound)
        } else {
            (a - step).max(bound)
        };
        let fb = g(b)?;
        if fb >= 0.0 {
            let (at, ok) = brent(&mut g, a, b, fa, fb, XTOL * scale)?;
            return Ok(Crossing {
                at,
                at_bound: false,
                converged: converged && ok,
                below_minimum,
                fits,
            });
        }
        if b == bound {
            return Ok(Crossing {
                at: bound,
                at_bound: true,
                converged,
                below_minimum,
                fits,
            });
        }
        (a, fa) = (b, fb);
        step *= 2.0;
    }
}
