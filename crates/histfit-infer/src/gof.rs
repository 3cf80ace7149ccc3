//! Goodness of fit against the saturated model: t = −2 ln λ_sat = 2[NLL(θ̂) − NLL_sat(θ̂)], where
//! the saturated model sets every observation's expectation to what was observed and keeps the
//! constraint terms at the fit's θ̂ (so constrained nuisance parameters cost no degree of
//! freedom: their auxiliary measurements pay for them). Degrees of freedom: the number of
//! observations minus the free parameters without a constraint. p = P(χ²_dof ≥ t).

use crate::fit::FitResult;
use crate::{InferError, Result};
use histfit_seam::{Dataset, Evaluator, Prior};
use serde::Serialize;

/// A goodness-of-fit test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GoodnessOfFit {
    /// −2 ln λ_sat at the best fit.
    pub statistic: f64,
    pub dof: usize,
    pub p_value: f64,
    /// twice_nll of the fit it was computed at.
    pub twice_nll: f64,
    pub converged: bool,
}

/// Tests the fit `r` of `data` against the saturated model.
pub fn goodness_of_fit<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    r: &FitResult,
) -> Result<GoodnessOfFit> {
    let (gap, n_obs) = eval.saturated_gap(&r.bestfit, data)?;
    let space = eval.space();
    let unconstrained_free = (0..space.len())
        .filter(|&i| !r.fixed[i] && space.priors[i] == Prior::Free)
        .count();
    let dof = n_obs.checked_sub(unconstrained_free).filter(|&d| d > 0).ok_or_else(|| {
        InferError::Request(format!(
            "goodness of fit: {n_obs} observations leave no degree of freedom for {unconstrained_free} free unconstrained parameters"
        ))
    })?;
    let statistic = 2.0 * gap;
    Ok(GoodnessOfFit {
        statistic,
        dof,
        p_value: chi2_sf(statistic, dof as f64),
        twice_nll: r.twice_nll,
        converged: r.converged,
    })
}

/// P(χ²_k ≥ x): the regularized upper incomplete gamma function Q(k/2, x/2).
pub fn chi2_sf(x: f64, k: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    if !x.is_finite() {
        return 0.0;
    }
    gamma_q(0.5 * k, 0.5 * x)
}

/// Q(a, x) = Γ(a, x)/Γ(a): by its power series for P = 1 − Q where x < a + 1, else by its
/// continued fraction (modified Lentz), each to double precision.
fn gamma_q(a: f64, x: f64) -> f64 {
    let log_prefactor = a * x.ln() - x - libm::lgamma(a);
    if x < a + 1.0 {
        // P(a, x) = e^{−x} x^a / Γ(a+1) · Σ_n x^n / ((a+1)…(a+n)).
        let (mut term, mut sum, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..10_000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-17 {
                break;
            }
        }
        1.0 - sum * log_prefactor.exp()
    } else {
        // Γ(a, x) e^{x} x^{−a} = 1/(x + 1 − a − 1·(1−a)/(x + 3 − a − 2·(2−a)/(x + 5 − a − …))).
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        log_prefactor.exp() * h
    }
}

#[cfg(test)]
mod tests {
    use super::chi2_sf;

    /// Reference values of the χ² survival function (closed forms for k = 1, 2; 4 and 10 from
    /// their finite sums: Q(m, y) = e^{−y} Σ_{j<m} y^j/j! for integer m).
    #[test]
    fn chi2_survival_matches_closed_forms() {
        let erfc = libm::erfc;
        for &x in &[0.01, 0.5, 1.0, 3.84, 10.0, 40.0, 120.0] {
            let k1 = erfc((x / 2.0f64).sqrt());
            let k2 = (-x / 2.0f64).exp();
            let q = |m: usize| {
                let y = x / 2.0;
                let mut t = 1.0;
                let mut s = 1.0;
                for j in 1..m {
                    t *= y / j as f64;
                    s += t;
                }
                (-y).exp() * s
            };
            for (k, want) in [(1.0, k1), (2.0, k2), (4.0, q(2)), (10.0, q(5))] {
                let got = chi2_sf(x, k);
                assert!(
                    (got - want).abs() <= 1e-13 * want.max(1e-300) + 1e-300,
                    "k {k}, x {x}: {got} vs {want}"
                );
            }
        }
        assert_eq!(chi2_sf(0.0, 3.0), 1.0);
    }
}
