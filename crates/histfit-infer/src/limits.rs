//! Upper limits on the POI: the μ where CLs(μ) = α, observed and for each point of the expected
//! band, by bracketing and Brent's method on ln CLs (which stays well-conditioned across many
//! orders of magnitude), or from a grid of hypotests with interpolation.
//!
//! Bracketing starts from the Asimov-based estimate of each crossing and expands geometrically, so
//! it works whatever the POI's bounds are (the shipped ATLAS workspaces allow [−100, 100]). The
//! expected band only needs the Asimov test statistic, so its root finding costs one conditional
//! fit per trial.

use crate::asymptotic::{normal_sf, AsymptoticCalculator, HypotestResult, TestStat, BAND};
use crate::fit::FitOptions;
use crate::{InferError, Result};
use histfit_seam::{Dataset, Evaluator};
use serde::Serialize;

/// Observed and expected upper limits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpperLimit {
    pub alpha: f64,
    pub test_stat: TestStat,
    pub obs: f64,
    /// Expected limits at the band points (−2σ … +2σ in μ, ascending).
    pub exp: [f64; 5],
    /// Every hypotest evaluated on the way (μ, CLs observed, CLs expected band).
    pub evaluations: Vec<LimitEvaluation>,
    pub converged: bool,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LimitEvaluation {
    pub mu: f64,
    pub cls_obs: Option<f64>,
    pub cls_exp: [f64; 5],
}

/// Upper limits need a CLs-type statistic and a sensible α.
fn check_request(alpha: f64, test_stat: TestStat) -> Result<()> {
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(InferError::Request(format!(
            "alpha must lie in (0, 1), got {alpha}"
        )));
    }
    if !matches!(test_stat, TestStat::Qmu | TestStat::QmuTilde) {
        return Err(InferError::Request(format!(
            "upper limits use q or qtilde, not {test_stat}"
        )));
    }
    Ok(())
}

/// Brent's method for g(x) = 0 on [a, b] with g(a)·g(b) ≤ 0.
pub(crate) fn brent(
    g: &mut dyn FnMut(f64) -> Result<f64>,
    mut a: f64,
    mut b: f64,
    mut fa: f64,
    mut fb: f64,
    xtol: f64,
) -> Result<(f64, bool)> {
    if fa == 0.0 {
        return Ok((a, true));
    }
    if fb == 0.0 {
        return Ok((b, true));
    }
    let (mut c, mut fc) = (a, fa);
    let mut d = b - a;
    let mut e = d;
    for _ in 0..100 {
        if fb.signum() == fc.signum() {
            c = a;
            fc = fa;
            d = b - a;
            e = d;
        }
        if fc.abs() < fb.abs() {
            a = b;
            b = c;
            c = a;
            fa = fb;
            fb = fc;
            fc = fa;
        }
        let tol = 2.0 * f64::EPSILON * b.abs() + 0.5 * xtol;
        let m = 0.5 * (c - b);
        if m.abs() <= tol || fb == 0.0 {
            return Ok((b, true));
        }
        if e.abs() >= tol && fa.abs() > fb.abs() {
            let s = fb / fa;
            let (mut p, mut q);
            if a == c {
                p = 2.0 * m * s;
                q = 1.0 - s;
            } else {
                let qq = fa / fc;
                let r = fb / fc;
                p = s * (2.0 * m * qq * (qq - r) - (b - a) * (r - 1.0));
                q = (qq - 1.0) * (r - 1.0) * (s - 1.0);
            }
            if p > 0.0 {
                q = -q;
            } else {
                p = -p;
            }
            if 2.0 * p < (3.0 * m * q - (tol * q).abs()).min((e * q).abs()) {
                e = d;
                d = p / q;
            } else {
                d = m;
                e = m;
            }
        } else {
            d = m;
            e = m;
        }
        a = b;
        fa = fb;
        b += if d.abs() > tol { d } else { tol * m.signum() };
        fb = g(b)?;
    }
    Ok((b, false))
}

/// ln CLs − ln α, with CLs = 0 (underflow) mapped to a large negative number.
fn log_gap(cls: f64, alpha: f64) -> f64 {
    if cls > 0.0 {
        cls.ln() - alpha.ln()
    } else {
        -1e3
    }
}

/// Expected CLs at band point `n` given the Asimov statistic.
fn cls_expected(q_a: f64, n: f64, test_stat: TestStat) -> f64 {
    let sq_a = q_a.sqrt();
    let clb = normal_sf(n);
    let clsb = normal_sf(n + sq_a);
    if test_stat == TestStat::Q0 || clb == 0.0 {
        clsb
    } else {
        clsb / clb
    }
}

/// Finds the μ where `g` crosses zero, starting near `estimate` and expanding the bracket inside
/// [lo, hi]; `g` decreases with μ.
fn solve(
    g: &mut dyn FnMut(f64) -> Result<f64>,
    estimate: f64,
    lo: f64,
    hi: f64,
    rtol: f64,
) -> Result<(f64, bool)> {
    let scale = estimate.abs().max(1e-3);
    let mut a = (estimate - 0.5 * scale).max(lo);
    let mut b = (estimate + 0.5 * scale).min(hi);
    let mut fa = g(a)?;
    let mut fb = g(b)?;
    let mut step = scale;
    for _ in 0..60 {
        if fa >= 0.0 && fb <= 0.0 {
            let (x, ok) = brent(g, a, b, fa, fb, rtol * scale)?;
            return Ok((x, ok));
        }
        if fa < 0.0 {
            if a <= lo {
                return Err(InferError::Request(format!(
                    "CLs is already below α at the POI's lower bound {lo}: no upper limit inside the bounds"
                )));
            }
            b = a;
            fb = fa;
            a = (a - step).max(lo);
            fa = g(a)?;
        } else {
            if b >= hi {
                return Err(InferError::AboveBound { bound: hi });
            }
            a = b;
            fa = fb;
            b = (b + step).min(hi);
            fb = g(b)?;
        }
        step *= 2.0;
    }
    Err(InferError::NoResult(
        "could not bracket the upper limit".into(),
    ))
}

/// The relative tolerance on a limit every front end uses: far below any physics need, a few
/// hypotests above the bracket.
pub const DEFAULT_RTOL: f64 = 1e-7;

/// Upper limits by root finding on CLs(μ) = α (observed and the expected band), to `rtol` of
/// the limit (front ends pass [`DEFAULT_RTOL`]).
pub fn upper_limit<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    alpha: f64,
    test_stat: TestStat,
    base: &FitOptions,
    rtol: f64,
) -> Result<UpperLimit> {
    check_request(alpha, test_stat)?;
    let poi = eval.space().poi()?;
    let (lo_b, hi) = base
        .bounds
        .as_ref()
        .map(|b| b[poi])
        .unwrap_or_else(|| eval.space().bounds[poi]);
    let mut calc = AsymptoticCalculator::new(eval, data.clone(), test_stat, base.clone())?;
    let mu_hat = calc.free_fit_observed()?.bestfit[poi];
    let lo = lo_b.max(0.0);
    if hi <= lo {
        return Err(InferError::Request(format!(
            "the POI's bounds [{lo_b}, {hi}] leave no room above 0 for an upper limit"
        )));
    }
    let mut evaluations: Vec<LimitEvaluation> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();

    // Asimov scale: qA(μ) ≈ (μ/σ)² gives a first estimate of every crossing.
    let probe = 1.0f64.clamp(lo.max(1e-6), hi);
    let q_a1 = calc.asimov_q(probe)?;
    let sigma = if q_a1 > 0.0 {
        probe / q_a1.sqrt()
    } else {
        probe
    };
    let mut exp = [0.0; 5];
    let mut all_ok = true;
    for (k, &n) in BAND.iter().enumerate() {
        // CLs_exp = Φ(−n − μ/σ)/Φ(−n) = α  ⇒  μ/σ = z(αΦ(−n)) − n with z the upper quantile.
        let target = alpha * normal_sf(n);
        let estimate = (sigma * (upper_quantile(target) - n)).clamp(lo.max(1e-9), hi);
        let mut g = |mu: f64| -> Result<f64> {
            let q_a = calc.asimov_q(mu)?;
            warnings.extend(calc.take_warnings().1);
            let band: [f64; 5] = std::array::from_fn(|j| cls_expected(q_a, BAND[j], test_stat));
            evaluations.push(LimitEvaluation {
                mu,
                cls_obs: None,
                cls_exp: band,
            });
            Ok(log_gap(band[k], alpha))
        };
        let (x, ok) = solve(&mut g, estimate, lo, hi, rtol)?;
        all_ok &= ok;
        exp[k] = x;
    }
    // Observed: start from the median expected limit shifted by μ̂.
    let estimate = (exp[2] + mu_hat.max(0.0)).clamp(lo.max(1e-9), hi);
    let mut g = |mu: f64| -> Result<f64> {
        let h: HypotestResult = calc.hypotest(mu)?;
        if !h.converged {
            warnings.extend(h.warnings.iter().cloned());
        }
        evaluations.push(LimitEvaluation {
            mu,
            cls_obs: Some(h.cls_obs),
            cls_exp: h.cls_exp,
        });
        Ok(log_gap(h.cls_obs, alpha))
    };
    let (obs, ok) = solve(&mut g, estimate, lo, hi, rtol)?;
    all_ok &= ok;
    if !all_ok {
        warnings.push("root finding hit its iteration limit".into());
    }
    let (cached, _) = calc.take_warnings();
    warnings.extend(cached);
    warnings.sort();
    warnings.dedup();
    let converged = warnings.is_empty();
    warnings.splice(0..0, calc.notes().iter().cloned());
    // The band in ascending μ: +2σ in the statistic is the lowest limit.
    Ok(UpperLimit {
        alpha,
        test_stat,
        obs,
        exp,
        evaluations,
        converged,
        warnings,
    })
}

/// Upper limits from hypotests on a grid: the first crossing of CLs = α, interpolated linearly in
/// ln CLs between the two grid points around it.
pub fn upper_limit_scan<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    alpha: f64,
    test_stat: TestStat,
    base: &FitOptions,
    values: &[f64],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<UpperLimit> {
    check_request(alpha, test_stat)?;
    let mut calc = AsymptoticCalculator::new(eval, data.clone(), test_stat, base.clone())?;
    let mut evaluations = Vec::new();
    let mut warnings = Vec::new();
    for (i, &mu) in values.iter().enumerate() {
        let h = calc.hypotest(mu)?;
        warnings.extend(h.warnings.iter().cloned());
        evaluations.push(LimitEvaluation {
            mu,
            cls_obs: Some(h.cls_obs),
            cls_exp: h.cls_exp,
        });
        progress(i + 1, values.len());
    }
    warnings.sort();
    warnings.dedup();
    let (obs, exp) = limits_from_scan(&evaluations, alpha)?;
    let converged = warnings.is_empty();
    warnings.splice(0..0, calc.notes().iter().cloned());
    Ok(UpperLimit {
        alpha,
        test_stat,
        obs,
        exp,
        evaluations,
        converged,
        warnings,
    })
}

/// The observed and expected limits of a scan (its points in increasing μ): where each CLs first
/// falls through α, ln CLs interpolated linearly between the two points around it.
fn limits_from_scan(evaluations: &[LimitEvaluation], alpha: f64) -> Result<(f64, [f64; 5])> {
    let crossing = |get: &dyn Fn(&LimitEvaluation) -> f64| -> Result<f64> {
        for w in evaluations.windows(2) {
            let (g0, g1) = (log_gap(get(&w[0]), alpha), log_gap(get(&w[1]), alpha));
            if g0 >= 0.0 && g1 < 0.0 {
                return Ok(w[0].mu + (w[1].mu - w[0].mu) * g0 / (g0 - g1));
            }
        }
        Err(InferError::NoResult(format!(
            "CLs does not cross α = {alpha} inside the scanned range; widen it"
        )))
    };
    let obs = crossing(&|e| e.cls_obs.unwrap_or(f64::NAN))?;
    let mut exp = [0.0; 5];
    for (k, e) in exp.iter_mut().enumerate() {
        *e = crossing(&|x| x.cls_exp[k])?;
    }
    Ok((obs, exp))
}

/// The upper limit from toys: at each of `values` (increasing) the toy-based CLs of
/// [`hypotest_toys_on`](crate::toys::hypotest_toys_on) with `n_toys` toys of `seed` — the very
/// toys `histfit hypotest-toys --mu μ --seed SEED` fits —, the observed and expected (the toys'
/// band) limits where each CLs falls through α, interpolated as [`upper_limit_scan`] does.
/// Every point's failed fits are counted in the warnings.
#[allow(clippy::too_many_arguments)]
pub fn upper_limit_toys_on<R: crate::toys::ToyRunner>(
    runner: &R,
    data: &Dataset,
    alpha: f64,
    test_stat: TestStat,
    base: &FitOptions,
    values: &[f64],
    seed: u64,
    n_toys: u64,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<UpperLimit> {
    check_request(alpha, test_stat)?;
    if values.len() < 2 || values.windows(2).any(|w| w[1] <= w[0]) {
        return Err(InferError::Request(
            "a toy limit needs at least two values of the POI, increasing".into(),
        ));
    }
    let mut evaluations = Vec::with_capacity(values.len());
    let mut warnings = Vec::new();
    for (i, &mu) in values.iter().enumerate() {
        let h = crate::toys::hypotest_toys_on(
            runner,
            data,
            mu,
            test_stat,
            None,
            seed,
            n_toys,
            0..n_toys,
            base,
            &|_, _| {},
        )?;
        let s = &h.summary;
        if s.failed_sb + s.failed_b > 0 {
            warnings.push(format!(
                "μ = {mu}: {} s+b and {} b-only toy fits did not converge (left out of its CLs)",
                s.failed_sb, s.failed_b
            ));
        }
        evaluations.push(LimitEvaluation {
            mu,
            cls_obs: Some(s.cls_obs),
            cls_exp: s.cls_exp,
        });
        progress(i + 1, values.len());
    }
    let (obs, exp) = limits_from_scan(&evaluations, alpha)?;
    Ok(UpperLimit {
        alpha,
        test_stat,
        obs,
        exp,
        evaluations,
        converged: warnings.is_empty(),
        warnings,
    })
}

/// Upper-tail quantile of the standard normal: z with P(Z > z) = p (Acklam's rational
/// approximation polished by one Newton step on the exact tail).
pub fn upper_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::INFINITY;
    }
    if p >= 1.0 {
        return f64::NEG_INFINITY;
    }
    // Start from the logistic-style approximation, then Newton on normal_sf (accurate in tails).
    let mut z = if p < 0.5 {
        let t = (-2.0 * p.ln()).sqrt();
        t - (2.515517 + 0.802853 * t + 0.010328 * t * t)
            / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t)
    } else {
        let q = 1.0 - p;
        let t = (-2.0 * q.ln()).sqrt();
        -(t - (2.515517 + 0.802853 * t + 0.010328 * t * t)
            / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t))
    };
    for _ in 0..4 {
        let pdf = (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
        if pdf == 0.0 {
            break;
        }
        z += (normal_sf(z) - p) / pdf;
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_inverts_the_tail() {
        for p in [1e-12, 1e-5, 0.025, 0.3, 0.5, 0.9] {
            let z = upper_quantile(p);
            assert!((normal_sf(z) / p - 1.0).abs() < 1e-10, "{p}: {z}");
        }
    }

    #[test]
    fn brent_finds_roots() {
        let mut g = |x: f64| -> Result<f64> { Ok(x.powi(3) - 2.0) };
        let (x, ok) = brent(&mut g, 0.0, 2.0, -2.0, 6.0, 1e-12).unwrap();
        assert!(ok && (x - 2f64.powf(1.0 / 3.0)).abs() < 1e-10);
    }
}
