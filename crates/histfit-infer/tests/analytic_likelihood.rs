//! A second likelihood behind the seam, written here from its formula: one counting experiment
//! whose background carries a Gaussian-constrained uncertainty,
//!
//!   −ln L(μ, θ | n, a) = λ − n ln λ + ln Γ(n+1) + ½(a − θ)² + ½ ln 2π,  λ = μS + B(1 + σθ).
//!
//! It knows nothing of HistFactory, and inference runs on it unchanged. Its minima have closed
//! forms (θ̂ = a, λ(μ̂, θ̂) = n; the conditional θ̂̂(μ) is the root of a monotone function,
//! found here by bisection), and so do the uncertainties and impacts (σ_θ = 1, Δμ̂ = ∓Bσ/S):
//! the fit, the profile scan, asymptotic CLs, the ranking and the toy ensemble are checked
//! against them.

use histfit_compute::BatchEvaluator;
use histfit_compute::{ComputeError, Dataset, Evaluator, ParameterSpace, Prior};
use histfit_infer::batch::Batcher;
use histfit_infer::toys::{fit_toys_on, hypotest_toys, hypotest_toys_on, Batched};
use histfit_infer::{
    asymptotic::normal_sf, fit, fit_toys, profile_scan, ranking, upper_limit, AsymptoticCalculator,
    FitOptions, TestStat,
};

const S: f64 = 5.0;
const B: f64 = 10.0;
const SIGMA: f64 = 0.1;
const HALF_LN_2PI: f64 = 0.918_938_533_204_672_8;

fn lambda(p: &[f64]) -> f64 {
    p[0] * S + B * (1.0 + SIGMA * p[1])
}

/// Observed count `n` and auxiliary measurement `a`.
fn data(n: f64, a: f64) -> Dataset {
    Dataset::raw(vec![n], vec![a], libm::lgamma(n + 1.0) + HALF_LN_2PI)
}

#[derive(Debug, Clone)]
struct Counting {
    space: ParameterSpace,
}

impl Counting {
    /// The constraint's centre is the observed auxiliary measurement.
    fn new(observed_aux: f64) -> Counting {
        Counting {
            space: ParameterSpace {
                names: vec!["mu".into(), "theta".into()],
                init: vec![1.0, 0.0],
                bounds: vec![(-1.5, 10.0), (-5.0, 5.0)],
                fixed: vec![false, false],
                poi: Some(0),
                priors: vec![
                    Prior::Free,
                    Prior::Gauss {
                        centre: observed_aux,
                        width: 1.0,
                    },
                ],
                scales: vec![1.0, 1.0],
                kinked: vec![false, false],
                local_term: vec![None, None],
                curvature_units: false,
            },
        }
    }
}

impl Evaluator for Counting {
    fn space(&self) -> &ParameterSpace {
        &self.space
    }

    fn nll(&mut self, p: &[f64], d: &Dataset) -> histfit_compute::Result<f64> {
        let mut g = [0.0; 2];
        self.nll_grad(p, d, &mut g)
    }

    fn nll_grad(&mut self, p: &[f64], d: &Dataset, g: &mut [f64]) -> histfit_compute::Result<f64> {
        if p.len() != 2 || g.len() != 2 {
            return Err(ComputeError::Length {
                what: "parameters",
                expected: 2,
                got: p.len(),
            });
        }
        let (n, a) = (d.main[0], d.aux[0]);
        let l = lambda(p);
        if l <= 0.0 {
            g.fill(f64::NAN);
            return Ok(f64::INFINITY);
        }
        let dl = 1.0 - n / l;
        g[0] = dl * S;
        g[1] = dl * B * SIGMA + (p[1] - a);
        Ok(l - n * l.ln() + 0.5 * (a - p[1]).powi(2) + d.constant_term())
    }

    fn asimov(&mut self, p: &[f64]) -> histfit_compute::Result<Dataset> {
        Ok(data(lambda(p), p[1]))
    }

    fn toys(
        &mut self,
        p: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        use histfit_compute::rng::{ToyStream, STREAM_AUX, STREAM_MAIN};
        Ok(indices
            .map(|i| {
                let n = ToyStream::new(seed, i, STREAM_MAIN).poisson(lambda(p));
                let a = p[1] + ToyStream::new(seed, i, STREAM_AUX).normal();
                data(n, a)
            })
            .collect())
    }
}

/// The same likelihood as a batch evaluator (one problem after another), so the lockstep runner
/// of device ensembles runs on it too.
impl BatchEvaluator for Counting {
    fn space(&self) -> &ParameterSpace {
        &self.space
    }
    fn nll_grad_batch(
        &mut self,
        params: &[f64],
        data: &[&Dataset],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> histfit_compute::Result<()> {
        for (k, d) in data.iter().enumerate() {
            nll[k] = self.nll_grad(&params[2 * k..2 * k + 2], d, &mut grad[2 * k..2 * k + 2])?;
        }
        Ok(())
    }
    fn asimov(&mut self, p: &[f64]) -> histfit_compute::Result<Dataset> {
        Evaluator::asimov(self, p)
    }
    fn toys(
        &mut self,
        p: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        Evaluator::toys(self, p, seed, indices)
    }
}

/// −ln L without its constant, minimised over θ at fixed μ by bisection on the derivative
/// (which rises monotonically in θ): the test's own profile, independent of the optimizer.
fn profile(mu: f64, n: f64, a: f64) -> (f64, f64) {
    let dnll = |t: f64| {
        let l = lambda(&[mu, t]);
        (1.0 - n / l) * B * SIGMA + (t - a)
    };
    let (mut lo, mut hi) = (-5.0, 5.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if dnll(mid) > 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let t = 0.5 * (lo + hi);
    let l = lambda(&[mu, t]);
    (t, l - n * l.ln() + 0.5 * (a - t).powi(2))
}

const N_OBS: f64 = 18.0;
const A_OBS: f64 = 0.3;

#[test]
fn free_fit_reaches_the_closed_form_minimum() {
    let mut ev = Counting::new(A_OBS);
    let d = data(N_OBS, A_OBS);
    let r = fit(
        &mut ev,
        &d,
        &FitOptions {
            uncertainties: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(r.converged, "{}", r.reason);
    let mu_hat = (N_OBS - B * (1.0 + SIGMA * A_OBS)) / S;
    // A fit stops at an estimated distance to the minimum of 1e-11 in −ln L: parameters to
    // about √(2e-11 / curvature) ≈ 5e-6 here.
    assert!((r.bestfit[0] - mu_hat).abs() < 2e-5, "{:?}", r.bestfit);
    assert!((r.bestfit[1] - A_OBS).abs() < 2e-5, "{:?}", r.bestfit);
    let twice_min = 2.0 * (N_OBS - N_OBS * N_OBS.ln() + libm::lgamma(N_OBS + 1.0) + HALF_LN_2PI);
    assert!((r.twice_nll - twice_min).abs() < 1e-9, "{}", r.twice_nll);
    // Inverse Hessian at the minimum (λ = n): σ_μ² = ((Bσ)² + n)/S², σ_θ = 1.
    let unc = r.uncertainties.unwrap();
    let sigma_mu = ((B * SIGMA).powi(2) + N_OBS).sqrt() / S;
    assert!((unc[0] - sigma_mu).abs() < 1e-5 * sigma_mu, "{unc:?}");
    assert!((unc[1] - 1.0).abs() < 1e-5, "{unc:?}");
}

#[test]
fn profile_scan_follows_the_bisected_profile() {
    let mut ev = Counting::new(A_OBS);
    let d = data(N_OBS, A_OBS);
    let values = [0.0, 0.5, 1.0, 2.0, 3.0, 4.5];
    let scan = profile_scan(&mut ev, &d, &values, &FitOptions::default(), &mut |_, _| {}).unwrap();
    assert_eq!(scan.poi, "mu");
    let (_, free) = profile((N_OBS - B * (1.0 + SIGMA * A_OBS)) / S, N_OBS, A_OBS);
    for (pt, &mu) in scan.points.iter().zip(&values) {
        let (theta, cond) = profile(mu, N_OBS, A_OBS);
        assert!(pt.converged, "mu = {mu}: {}", pt.reason);
        assert!((pt.bestfit[1] - theta).abs() < 2e-5, "mu = {mu}");
        let want = 2.0 * (cond - free);
        assert!(
            (pt.delta_twice_nll - want).abs() < 1e-8,
            "mu = {mu}: {} vs {want}",
            pt.delta_twice_nll
        );
    }
}

#[test]
fn asymptotic_cls_matches_the_formula_on_the_bisected_profiles() {
    let mut ev = Counting::new(A_OBS);
    let d = data(N_OBS, A_OBS);
    let base = FitOptions {
        bounds: Some(vec![(0.0, 10.0), (-5.0, 5.0)]),
        ..Default::default()
    };
    let mut calc = AsymptoticCalculator::new(&mut ev, d, TestStat::QmuTilde, base).unwrap();
    let mu = 3.0;
    let r = calc.hypotest(mu).unwrap();
    assert!(r.converged, "{:?}", r.warnings);
    let (q_obs, q_a, cls) = reference_cls(mu);
    assert!((r.q_obs - q_obs).abs() < 1e-8, "{} vs {q_obs}", r.q_obs);
    // The Asimov data come from a fit (θ̂̂(0) to ≈ 5e-6), so q_A agrees to what that allows.
    assert!((r.q_asimov - q_a).abs() < 1e-5, "{} vs {q_a}", r.q_asimov);
    assert!(
        (r.cls_obs - cls).abs() < 1e-5 * cls,
        "CLs {} vs {cls}",
        r.cls_obs
    );
    // The median expected CLs: CLs+b = Φ̄(√q_A), CLb = ½.
    let median = 2.0 * normal_sf(q_a.sqrt());
    assert!(
        (r.cls_exp[2] - median).abs() < 1e-5 * median,
        "{:?} vs {median}",
        r.cls_exp
    );
}

/// q̃μ observed, q̃μ on the Asimov data and CLs at `mu` (≥ μ̂ = 1.54), from the bisected
/// profiles and the asymptotic formulas.
fn reference_cls(mu: f64) -> (f64, f64, f64) {
    // Observed: μ̂ lies in [0, μ], so q̃ = 2[NLL(μ, θ̂̂) − NLL(μ̂, θ̂)].
    let mu_hat = (N_OBS - B * (1.0 + SIGMA * A_OBS)) / S;
    let q_obs = 2.0 * (profile(mu, N_OBS, A_OBS).1 - profile(mu_hat, N_OBS, A_OBS).1);
    // Asimov data of the background-only conditional fit; their free fit is μ̂ = 0, θ̂ = θ̂̂(0).
    let (t0, _) = profile(0.0, N_OBS, A_OBS);
    let (n_a, a_a) = (lambda(&[0.0, t0]), t0);
    let q_a = 2.0 * (profile(mu, n_a, a_a).1 - profile(0.0, n_a, a_a).1);
    let (sq, sqa) = (q_obs.sqrt(), q_a.sqrt());
    let (clsb, clb) = if q_obs <= q_a {
        (normal_sf(sq), normal_sf(sq - sqa))
    } else {
        (
            normal_sf((q_obs + q_a) / (2.0 * sqa)),
            normal_sf((q_obs - q_a) / (2.0 * sqa)),
        )
    };
    (q_obs, q_a, clsb / clb)
}

#[test]
fn upper_limit_is_where_the_formula_crosses_alpha() {
    let mut ev = Counting::new(A_OBS);
    let d = data(N_OBS, A_OBS);
    let base = FitOptions {
        bounds: Some(vec![(0.0, 10.0), (-5.0, 5.0)]),
        ..Default::default()
    };
    let r = upper_limit(&mut ev, &d, 0.05, TestStat::QmuTilde, &base, 1e-7).unwrap();
    assert!(r.converged, "{:?}", r.warnings);
    // The test's own root of CLs(μ) = 0.05 by bisection above μ̂.
    let (mut lo, mut hi) = (1.6, 10.0);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if reference_cls(mid).2 > 0.05 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let want = 0.5 * (lo + hi);
    assert!((r.obs - want).abs() < 1e-4 * want, "{} vs {want}", r.obs);
}

#[test]
fn ranking_gives_the_closed_form_impacts() {
    let ev = Counting::new(A_OBS);
    let d = data(N_OBS, A_OBS);
    let r = ranking(&ev, &d, &FitOptions::default(), &|_, _| {}).unwrap();
    assert_eq!(r.poi, "mu");
    assert_eq!(r.failed_fits, 0);
    assert_eq!(r.entries.len(), 1);
    let e = &r.entries[0];
    assert_eq!(e.name, "theta");
    // θ̂ = a, the constraint's centre; σ̂_θ = 1, the prior width: no pull, no constraint (to the
    // fits' ≈ 5e-6 in the parameters).
    assert!(
        e.pull.abs() < 2e-5 && (e.constraint - 1.0).abs() < 2e-5,
        "{e:?}"
    );
    // Holding θ at θ̂ ± 1 moves μ̂ by ∓Bσ/S, pre-fit and post-fit alike.
    let shift = B * SIGMA / S;
    for (got, want) in [
        (e.impact_prefit_up, -shift),
        (e.impact_prefit_down, shift),
        (e.impact_postfit_up, -shift),
        (e.impact_postfit_down, shift),
    ] {
        // Each impact is a difference of two fits.
        assert!((got - want).abs() < 4e-5, "{e:?}");
    }
}

#[test]
fn toy_ensemble_is_unbiased_and_thread_independent() {
    let ev = Counting::new(0.0);
    let gen = [1.0, 0.0];
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            fit_toys(
                &ev,
                &gen,
                7,
                2000,
                0..2000,
                &FitOptions::default(),
                &|_, _| {},
            )
            .unwrap()
        })
    };
    let one = run(1);
    assert_eq!(one, run(2), "thread count changed the ensemble");
    assert!(one.iter().all(|t| t.converged));
    // Each toy's fit is the closed-form minimum of the toy the likelihood drew.
    let mut e = ev.clone();
    for t in one.iter().step_by(97) {
        let toy = Evaluator::toys(&mut e, &gen, 7, t.index..t.index + 1)
            .unwrap()
            .pop()
            .unwrap();
        let want = ((toy.main[0] - B * (1.0 + SIGMA * toy.aux[0])) / S).max(-1.5);
        assert!(
            (t.poi - want).abs() < 1e-5,
            "toy {}: {} vs {want}",
            t.index,
            t.poi
        );
    }
    // μ̂ is unbiased here (E[n] = λ, E[a] = θ); its spread is √(λ + (Bσ)²)/S = 0.8 per toy.
    let mean = one.iter().map(|t| t.poi).sum::<f64>() / one.len() as f64;
    assert!(
        (mean - 1.0).abs() < 4.0 * 0.8 / (one.len() as f64).sqrt(),
        "{mean}"
    );
}

#[test]
fn lockstep_runner_gives_the_cpu_ensembles() {
    // The device path (fits as futures on a batch evaluator, lockstep) on this likelihood: the
    // same toys, the same fits, the same toy CLs as the CPU threads.
    let ev = Counting::new(A_OBS);
    let d = data(N_OBS, A_OBS);
    let gen = [1.0, 0.0];
    let o = FitOptions::default();
    let cpu = fit_toys(&ev, &gen, 11, 300, 0..300, &o, &|_, _| {}).unwrap();
    let batcher = Batcher::new(ev.clone());
    let runner = Batched {
        batcher: &batcher,
        window: 64,
        chunk: 100,
        resident: false,
    };
    let lockstep = fit_toys_on(&runner, &gen, 11, 300, 0..300, &o, &|_, _| {}).unwrap();
    assert_eq!(cpu, lockstep);
    let ts = TestStat::QmuTilde;
    let a = hypotest_toys(&ev, &d, 3.0, ts, 5, 200, 0..200, &o, &|_, _| {}).unwrap();
    let b = hypotest_toys_on(&runner, &d, 3.0, ts, None, 5, 200, 0..200, &o, &|_, _| {}).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.summary.failed_sb + a.summary.failed_b, 0);
    // With this little data the toy CLs sits near the asymptotic one (within 0.05 here; 200
    // toys a side).
    let (_, _, cls) = reference_cls(3.0);
    assert!(
        (a.summary.cls_obs - cls).abs() < 0.05,
        "{} vs {cls}",
        a.summary.cls_obs
    );
}

#[test]
fn minos_interval_is_where_the_profile_rises_by_one_half() {
    let mut ev = Counting::new(A_OBS);
    let d = data(N_OBS, A_OBS);
    let o = FitOptions {
        uncertainties: true,
        ..Default::default()
    };
    let nominal = fit(&mut ev, &d, &o).unwrap();
    let r = histfit_infer::minos(&mut ev, &d, &nominal, &[0, 1], &FitOptions::default()).unwrap();
    let mu_hat = (N_OBS - B * (1.0 + SIGMA * A_OBS)) / S;
    let min = profile(mu_hat, N_OBS, A_OBS).1;
    // The test's own crossings of 2ΔNLL = 1 by bisection on the bisected profile of μ.
    let cross = |mut inside: f64, mut outside: f64| {
        for _ in 0..100 {
            let mid = 0.5 * (inside + outside);
            if 2.0 * (profile(mid, N_OBS, A_OBS).1 - min) < 1.0 {
                inside = mid;
            } else {
                outside = mid;
            }
        }
        0.5 * (inside + outside)
    };
    let (lo, hi) = (cross(mu_hat, -1.5), cross(mu_hat, 10.0));
    let m = &r[0];
    assert!(
        m.converged && !m.lower_at_bound && !m.upper_at_bound,
        "{m:?}"
    );
    assert!((m.value + m.lower_error - lo).abs() < 1e-5, "{m:?} vs {lo}");
    assert!((m.value + m.upper_error - hi).abs() < 1e-5, "{m:?} vs {hi}");
    // Asymmetric (the Poisson term): the upper side longer.
    assert!(m.upper_error > -m.lower_error);
    // θ's profile is exactly parabolic here (μ absorbs the Poisson term): ±1.
    assert!((r[1].lower_error + 1.0).abs() < 1e-5 && (r[1].upper_error - 1.0).abs() < 1e-5);
}
