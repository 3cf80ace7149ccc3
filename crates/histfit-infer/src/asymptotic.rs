//! Profile-likelihood test statistics and their asymptotic distributions (Cowan, Cranmer, Gross &
//! Vitells 2011), with pyhf 0.7's definitions: tμ, t̃μ, qμ, q̃μ and q0; CLs+b, CLb and CLs for the
//! observed data and the expected band from the Asimov dataset; discovery significance.
//!
//! Tail probabilities use `erfc`, so CLs values of 1e-200 are still exact. The
//! [`AsymptoticCalculator`] caches what does not depend on the tested μ (the free fits and the
//! Asimov dataset) and warm-starts each conditional fit from the previous one, so scans and limit
//! searches cost two conditional fits per point.

use crate::fit::{fit, FitOptions, FitResult};
use crate::{InferError, Result};
use histfit_seam::{Dataset, Evaluator};
use serde::{Deserialize, Serialize};

/// Which test statistic (pyhf names in parentheses; documents write these names, and read the
/// names earlier versions wrote too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TestStat {
    /// Two-sided −2 ln λ(μ) ("tmu").
    #[serde(rename = "tmu")]
    Tmu,
    /// Two-sided with μ̂ ≥ 0 ("tmu_tilde"); the POI's lower bound is raised to 0.
    #[serde(rename = "tmu_tilde", alias = "tmutilde")]
    TmuTilde,
    /// One-sided for upper limits: 0 when μ̂ > μ ("q").
    #[serde(rename = "q", alias = "qmu")]
    Qmu,
    /// As qμ, with the q̃ asymptotic formula for CLs ("qtilde", pyhf's default). As in pyhf, the
    /// fits use the POI's bounds as given: with a negative lower bound this is qμ in effect.
    #[serde(rename = "qtilde", alias = "qmutilde")]
    QmuTilde,
    /// Discovery: −2 ln λ(0), 0 when μ̂ < 0 ("q0").
    #[serde(rename = "q0")]
    Q0,
}

impl std::str::FromStr for TestStat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "tmu" => Ok(TestStat::Tmu),
            "tmu_tilde" | "tmutilde" => Ok(TestStat::TmuTilde),
            "q" | "qmu" => Ok(TestStat::Qmu),
            "qtilde" | "qmu_tilde" | "qmutilde" => Ok(TestStat::QmuTilde),
            "q0" => Ok(TestStat::Q0),
            other => Err(format!(
                "unknown test statistic \"{other}\" (tmu, tmu_tilde, q, qtilde, q0)"
            )),
        }
    }
}

/// pyhf's names, as `--test-stat` takes them: what messages and tables show.
impl std::fmt::Display for TestStat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TestStat::Tmu => "tmu",
            TestStat::TmuTilde => "tmu_tilde",
            TestStat::Qmu => "q",
            TestStat::QmuTilde => "qtilde",
            TestStat::Q0 => "q0",
        })
    }
}

impl TestStat {
    /// The statistic from t = 2(NLL(μ, θ̂̂) − NLL(μ̂, θ̂)) ≥ 0: one-sided statistics are 0 when the
    /// data pull away from the alternative (μ̂ > μ for qμ, μ̂ < 0 for q0).
    pub fn from_ratio(self, t: f64, mu_hat: f64, mu: f64) -> f64 {
        match self {
            TestStat::Tmu | TestStat::TmuTilde => t,
            TestStat::Qmu | TestStat::QmuTilde if mu_hat > mu => 0.0,
            TestStat::Q0 if mu_hat < 0.0 => 0.0,
            _ => t,
        }
    }
}

/// Standard normal upper tail P(Z > x), accurate far into the tail.
pub fn normal_sf(x: f64) -> f64 {
    0.5 * libm::erfc(x / std::f64::consts::SQRT_2)
}

/// Standard normal CDF.
pub fn normal_cdf(x: f64) -> f64 {
    normal_sf(-x)
}

/// The n-σ points of the expected band, in pyhf's order (+2σ … −2σ in the test statistic, which
/// gives CLs values in ascending order).
pub const BAND: [f64; 5] = [2.0, 1.0, 0.0, -1.0, -2.0];

/// The result of one asymptotic hypothesis test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HypotestResult {
    pub mu: f64,
    pub test_stat: TestStat,
    /// The test statistic on the observed data and on the Asimov dataset.
    pub q_obs: f64,
    pub q_asimov: f64,
    pub cls_obs: f64,
    pub clsb_obs: f64,
    pub clb_obs: f64,
    /// Expected CLs at the band points [`BAND`] (ascending); for q0 the expected p0.
    pub cls_exp: [f64; 5],
    /// Best-fit POI on the observed data.
    pub mu_hat: f64,
    /// twice_nll of the fits behind the result.
    pub fits: HypotestFits,
    /// Every fit converged; otherwise `warnings` says which did not.
    pub converged: bool,
    pub warnings: Vec<String>,
}

/// twice_nll at the minimum of each fit a hypotest makes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HypotestFits {
    pub free: f64,
    pub conditional: f64,
    /// The conditional fit (μ = 0, or for q0 its alternative) the Asimov dataset is built from.
    pub asimov_source: f64,
    pub asimov_free: f64,
    pub asimov_conditional: f64,
}

/// Asymptotic calculator for one model, dataset and test statistic.
pub struct AsymptoticCalculator<'a, E: Evaluator + ?Sized> {
    eval: &'a mut E,
    data: Dataset,
    pub test_stat: TestStat,
    base: FitOptions,
    poi: usize,
    asimov: Option<Dataset>,
    asimov_source: f64,
    /// Best fit the Asimov dataset was generated from: the natural start for fits to it.
    asimov_init: Option<Vec<f64>>,
    free_obs: Option<FitResult>,
    free_asimov: Option<FitResult>,
    /// Last conditional fits (μ, best fit) on the observed and Asimov data, for warm starts.
    warm_obs: Option<(f64, Vec<f64>)>,
    warm_asimov: Option<(f64, Vec<f64>)>,
    /// Non-convergence of the cached fits (reported with every result that uses them) and of
    /// the fits made since the last report.
    cached_warnings: Vec<String>,
    warnings: Vec<String>,
    /// About the request itself (reported with every result; not a failed fit).
    notes: Vec<String>,
    /// The POI value of q0's alternative: the Asimov dataset of the expected discovery
    /// significance is built at it ([`Self::with_q0_alternative`]).
    discovery_alternative: f64,
}

impl<'a, E: Evaluator + ?Sized> AsymptoticCalculator<'a, E> {
    /// `base` supplies init, extra fixed parameters and bounds for every fit.
    pub fn new(
        eval: &'a mut E,
        data: Dataset,
        test_stat: TestStat,
        mut base: FitOptions,
    ) -> Result<Self> {
        let poi = eval.space().poi()?;
        crate::check_poi_not_fixed(eval.space(), &base, poi)?;
        if matches!(test_stat, TestStat::Tmu | TestStat::TmuTilde) {
            // Their asymptotic distributions differ from the one-sided ones used here; toys
            // (hypotest-toys) handle every statistic.
            return Err(InferError::Request(format!(
                "asymptotic CLs is available for q, qtilde and q0, not {test_stat}; use toys for two-sided statistics"
            )));
        }
        base.uncertainties = false;
        let mut notes = Vec::new();
        let lower = base
            .bounds
            .as_ref()
            .map_or_else(|| eval.space().bounds[poi].0, |b| b[poi].0);
        if test_stat == TestStat::QmuTilde && lower < 0.0 {
            // pyhf warns here too: q̃'s asymptotic formula assumes μ̂ ≥ 0, which the fits (with
            // the bounds as given) do not impose.
            notes.push(format!(
                "qtilde with the POI's lower bound at {lower} < 0: the fits allow a negative POI, so this is q in effect; use the q statistic, or bound the POI at 0"
            ));
        }
        Ok(AsymptoticCalculator {
            notes,
            eval,
            data,
            test_stat,
            base,
            poi,
            asimov: None,
            asimov_source: f64::NAN,
            asimov_init: None,
            free_obs: None,
            free_asimov: None,
            warm_obs: None,
            warm_asimov: None,
            cached_warnings: Vec::new(),
            warnings: Vec::new(),
            discovery_alternative: 1.0,
        })
    }

    /// The POI value q0's expected figures are computed at, checked against the POI's bounds;
    /// `None` keeps pyhf's 1 for a signal strength (unchecked, as before: a POI bounded below 1
    /// still gets its result). A POI that is a yield needs its own value: the expected
    /// significance of one signal event is not what anyone asks.
    pub fn with_q0_alternative(mut self, value: Option<f64>) -> Result<Self> {
        if let Some(v) = value {
            check_q0_alternative(self.bounds()[self.poi], v)?;
            self.discovery_alternative = v;
        }
        Ok(self)
    }

    fn bounds(&self) -> Vec<(f64, f64)> {
        self.base
            .bounds
            .clone()
            .unwrap_or_else(|| self.eval.space().bounds.clone())
    }

    fn run_fit(
        &mut self,
        data: &Dataset,
        mu: Option<f64>,
        init: Option<Vec<f64>>,
        what: &str,
        cached: bool,
    ) -> Result<FitResult> {
        let mut opts = self.base.clone();
        if let Some(i) = init {
            opts.init = Some(i);
        }
        if let Some(m) = mu {
            let bounds = self.bounds()[self.poi];
            if m == 0.0 {
                check_background_only(bounds, what)?;
            }
            check_tested_poi(bounds, m)?;
            opts.fix.push((self.poi, m));
        }
        let r = fit(self.eval, data, &opts)?;
        if !r.converged {
            let w = format!("{what} did not converge: {}", r.reason);
            if cached {
                self.cached_warnings.push(w);
            } else {
                self.warnings.push(w);
            }
        }
        Ok(r)
    }

    /// The observed free fit (cached).
    pub fn free_fit_observed(&mut self) -> Result<&FitResult> {
        if self.free_obs.is_none() {
            let data = self.data.clone();
            let r = self.run_fit(&data, None, None, "free fit to the observed data", true)?;
            self.free_obs = Some(r);
        }
        Ok(self.free_obs.as_ref().expect("set above"))
    }

    /// The Asimov dataset (the likelihood's expected data, [`Evaluator::asimov`]) at the
    /// conditional fit of the observed data with μ = 0 (for q0, μ at the discovery
    /// alternative: 1 unless [`Self::with_q0_alternative`] says otherwise).
    pub fn asimov(&mut self) -> Result<Dataset> {
        if let Some(a) = &self.asimov {
            return Ok(a.clone());
        }
        let mu_a = if self.test_stat == TestStat::Q0 {
            self.discovery_alternative
        } else {
            0.0
        };
        let data = self.data.clone();
        let mut init = self.free_fit_observed()?.bestfit.clone();
        init[self.poi] = mu_a;
        let cond = self.run_fit(
            &data,
            Some(mu_a),
            Some(init),
            "conditional fit for the Asimov dataset",
            true,
        )?;
        self.asimov_source = cond.twice_nll;
        self.asimov_init = Some(cond.bestfit.clone());
        let asimov = self.eval.asimov(&cond.bestfit)?;
        self.asimov = Some(asimov.clone());
        Ok(asimov)
    }

    /// Test statistic at `mu` on the observed (`asimov = false`) or Asimov data.
    /// Returns (q, μ̂, twice_nll of the free fit, twice_nll of the conditional fit).
    fn statistic(&mut self, mu: f64, asimov: bool) -> Result<(f64, f64, f64, f64)> {
        let data = if asimov {
            self.asimov()?
        } else {
            self.data.clone()
        };
        let free = if asimov {
            if self.free_asimov.is_none() {
                let init = self.asimov_init.clone();
                let r = self.run_fit(&data, None, init, "free fit to the Asimov data", true)?;
                self.free_asimov = Some(r);
            }
            self.free_asimov.clone().expect("set above")
        } else {
            self.free_fit_observed()?.clone()
        };
        let warm = if asimov {
            &self.warm_asimov
        } else {
            &self.warm_obs
        };
        // Warm start: the last conditional fit on the same data, else the free fit (observed)
        // or the Asimov source (Asimov), with the POI moved to μ.
        let fallback = if asimov {
            self.asimov_init.clone()
        } else {
            Some(free.bestfit.clone())
        };
        let init = warm
            .as_ref()
            .map(|(_, x)| x.clone())
            .or(fallback)
            .map(|mut x| {
                x[self.poi] = mu;
                x
            });
        let what = if asimov {
            "conditional fit to the Asimov data"
        } else {
            "conditional fit to the observed data"
        };
        let cond = self.run_fit(
            &data,
            Some(mu),
            init,
            &format!("{what} at mu = {mu}"),
            false,
        )?;
        let warm_new = Some((mu, cond.bestfit.clone()));
        if asimov {
            self.warm_asimov = warm_new;
        } else {
            self.warm_obs = warm_new;
        }
        if !(free.twice_nll.is_finite() && cond.twice_nll.is_finite()) {
            return Err(InferError::Request(format!(
                "{what} at mu = {mu}: the likelihood is not finite at the best fit (a bin expects no events but has some)"
            )));
        }
        let mu_hat = free.bestfit[self.poi];
        let t = (cond.twice_nll - free.twice_nll).max(0.0);
        let q = self.test_stat.from_ratio(t, mu_hat, mu);
        Ok((q, mu_hat, free.twice_nll, cond.twice_nll))
    }

    /// Notes about the request itself (q̃ with a POI allowed below 0), reported with every
    /// result but not counted as failed fits.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Warnings of the cached fits, and those of the fits made since the last call (drained).
    pub fn take_warnings(&mut self) -> (Vec<String>, Vec<String>) {
        (
            self.cached_warnings.clone(),
            std::mem::take(&mut self.warnings),
        )
    }

    /// The test statistic on the Asimov dataset at `mu` (all the expected band needs).
    pub fn asimov_q(&mut self, mu: f64) -> Result<f64> {
        Ok(self.statistic(mu, true)?.0)
    }

    /// The asymptotic hypothesis test at `mu` (for q0, `mu` is the null, normally 0).
    pub fn hypotest(&mut self, mu: f64) -> Result<HypotestResult> {
        self.warnings.clear();
        // q0 is the test of μ = 0 whatever μ is asked (pyhf's rule, said as pyhf says it): a
        // test at another μ with q0's formulas gives a number that is no p-value.
        let mut asked = Vec::new();
        let mu = if self.test_stat == TestStat::Q0 && mu != 0.0 {
            asked.push(format!(
                "q0 tests the background-only hypothesis μ = 0: the asked μ = {mu} is not used"
            ));
            0.0
        } else {
            mu
        };
        let (q, mu_hat, free, conditional) = self.statistic(mu, false)?;
        let (q_a, _, asimov_free, asimov_conditional) = self.statistic(mu, true)?;
        let fits = HypotestFits {
            free,
            conditional,
            asimov_source: self.asimov_source,
            asimov_free,
            asimov_conditional,
        };
        let (sq, sq_a) = (q.sqrt(), q_a.sqrt());
        // The test statistic in units where the background-only distribution is N(0, 1) and the
        // signal+background one N(−√qA, 1) (pyhf's convention).
        let t = match self.test_stat {
            TestStat::QmuTilde if sq >= sq_a && sq_a > 0.0 => (q - q_a) / (2.0 * sq_a),
            _ => sq - sq_a,
        };
        let pvalues = |t: f64| {
            let clsb = normal_sf(t + sq_a);
            let clb = normal_sf(t);
            let cls = if clb == 0.0 { 0.0 } else { clsb / clb };
            (cls, clsb, clb)
        };
        let (cls_obs, clsb_obs, clb_obs) = pvalues(t);
        let mut cls_exp = [0.0; 5];
        for (k, n) in BAND.iter().enumerate() {
            let (cls, clsb, _) = pvalues(*n);
            cls_exp[k] = if self.test_stat == TestStat::Q0 {
                clsb
            } else {
                cls
            };
        }
        Ok(HypotestResult {
            mu,
            test_stat: self.test_stat,
            q_obs: q,
            q_asimov: q_a,
            cls_obs: if self.test_stat == TestStat::Q0 {
                clsb_obs
            } else {
                cls_obs
            },
            clsb_obs,
            clb_obs,
            cls_exp,
            mu_hat,
            fits,
            converged: self.warnings.is_empty() && self.cached_warnings.is_empty(),
            warnings: self
                .notes
                .iter()
                .chain(&self.cached_warnings)
                .chain(&self.warnings)
                .chain(&asked)
                .cloned()
                .collect(),
        })
    }

    pub fn evaluator(&mut self) -> &mut E {
        self.eval
    }
}

/// Discovery significance from q0: observed and expected p0 and Z (the expected ones from the
/// Asimov dataset at the POI value `expected_at`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Significance {
    pub q0_obs: f64,
    pub p0_obs: f64,
    pub z_obs: f64,
    pub q0_exp: f64,
    pub p0_exp: f64,
    pub z_exp: f64,
    /// Expected p0 at the band points [`BAND`].
    pub p0_exp_band: [f64; 5],
    /// The POI value of the alternative the expected figures are computed at.
    pub expected_at: f64,
    pub mu_hat: f64,
    pub converged: bool,
    pub warnings: Vec<String>,
}

/// Discovery significance of the signal (test of μ = 0 with q0); the expected figures at the
/// POI value `expected_at` (`None`: 1, pyhf's rule for a signal strength).
pub fn significance<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    base: &FitOptions,
    expected_at: Option<f64>,
) -> Result<Significance> {
    let mut calc = AsymptoticCalculator::new(eval, data.clone(), TestStat::Q0, base.clone())?
        .with_q0_alternative(expected_at)?;
    let expected_at = calc.discovery_alternative;
    let h = calc.hypotest(0.0)?;
    Ok(Significance {
        q0_obs: h.q_obs,
        p0_obs: h.cls_obs,
        z_obs: h.q_obs.sqrt(),
        q0_exp: h.q_asimov,
        p0_exp: h.cls_exp[2],
        z_exp: h.q_asimov.sqrt(),
        p0_exp_band: h.cls_exp,
        expected_at,
        mu_hat: h.mu_hat,
        converged: h.converged,
        warnings: h.warnings,
    })
}

/// Refuses a POI whose bounds `(lo, hi)` leave out 0, the background-only hypothesis that `what`
/// (a fit, an ensemble) holds it at: not a value the user asked for, so said as such.
pub(crate) fn check_background_only((lo, hi): (f64, f64), what: &str) -> Result<()> {
    if !(lo..=hi).contains(&0.0) {
        return Err(InferError::Request(format!(
            "the {what} holds the POI at 0, the background-only hypothesis, which lies outside the POI's bounds [{lo}, {hi}]: tests, limits and significances need a POI whose 0 means no signal (a signal strength or a yield; --poi NAME chooses it)"
        )));
    }
    Ok(())
}

/// Refuses a q0 alternative (the POI value of the expected discovery figures) that is not a
/// finite number inside the POI's bounds `(lo, hi)`, naming it as such.
pub(crate) fn check_q0_alternative((lo, hi): (f64, f64), value: f64) -> Result<()> {
    if !(value.is_finite() && (lo..=hi).contains(&value)) {
        return Err(InferError::Request(format!(
            "the POI value of the expected discovery figures (q0's alternative, --expected-at), {value}, is not a number inside the POI's bounds [{lo}, {hi}]"
        )));
    }
    Ok(())
}

/// Refuses a tested POI value outside the POI's bounds `(lo, hi)` (asymptotic and toy tests).
pub(crate) fn check_tested_poi((lo, hi): (f64, f64), m: f64) -> Result<()> {
    if !(lo..=hi).contains(&m) {
        return Err(InferError::Request(format!(
            "tested POI value {m} lies outside the POI's bounds [{lo}, {hi}]"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_tails_stay_exact() {
        assert!((normal_sf(0.0) - 0.5).abs() < 1e-16);
        assert!((normal_sf(1.959963984540054) - 0.025).abs() < 1e-15);
        // Φ(−30) = 4.906713927148187e-198
        assert!((normal_sf(30.0) / 4.906713927148187e-198 - 1.0).abs() < 1e-12);
    }
}
