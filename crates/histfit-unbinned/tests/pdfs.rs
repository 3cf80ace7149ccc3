//! Every PDF of `pdf`: it integrates to 1 over its domain (a fine midpoint rule, independent of
//! the quadrature the module uses), its value matches the formula written out here, and the
//! program's reverse-mode gradient of Σ ln f over events matches central differences.

use histfit_unbinned::graph::{Graph, Id};
use histfit_unbinned::pdf::{self, Domain};
use histfit_unbinned::program::Program;

/// A PDF under test: builds ln f(x) from column 0 and params, over `dom`.
struct Case {
    name: &'static str,
    params: Vec<f64>,
    dom: Domain,
    build: fn(&mut Graph, Id, &[Id], Domain, &[f64]) -> Id,
    /// The density written out independently (unnormalised is fine: compared up to the norm).
    formula: fn(f64, &[f64]) -> f64,
}

fn cases() -> Vec<Case> {
    let d = Domain {
        lo: 60.0,
        hi: 120.0,
    };
    vec![
        Case {
            name: "gaussian",
            params: vec![91.0, 2.5],
            dom: d,
            build: |g, x, p, dom, _| pdf::gaussian(g, x, p[0], p[1], dom),
            formula: |x, p| (-0.5 * ((x - p[0]) / p[1]).powi(2)).exp(),
        },
        Case {
            name: "exponential",
            params: vec![0.03],
            dom: d,
            build: |g, x, p, dom, _| pdf::exponential(g, x, p[0], dom),
            formula: |x, p| (-p[0] * x).exp(),
        },
        Case {
            name: "exponential at c = 0",
            params: vec![0.0],
            dom: d,
            build: |g, x, p, dom, _| pdf::exponential(g, x, p[0], dom),
            formula: |_, _| 1.0,
        },
        Case {
            name: "bifurcated gaussian",
            params: vec![90.0, 2.0, 5.0],
            dom: d,
            build: |g, x, p, dom, _| pdf::bifurcated_gaussian(g, x, p[0], p[1], p[2], dom),
            formula: |x, p| {
                let s = if x < p[0] { p[1] } else { p[2] };
                (-0.5 * ((x - p[0]) / s).powi(2)).exp()
            },
        },
        Case {
            name: "crystal ball",
            params: vec![90.0, 3.0, 1.2, 3.5],
            dom: d,
            build: |g, x, p, dom, _| pdf::crystal_ball(g, x, p[0], p[1], p[2], p[3], dom),
            formula: cb,
        },
        Case {
            name: "crystal ball, tail above (alpha < 0)",
            params: vec![90.0, 3.0, -0.8, 2.0],
            dom: d,
            build: |g, x, p, dom, _| pdf::crystal_ball(g, x, p[0], p[1], p[2], p[3], dom),
            formula: cb,
        },
        Case {
            name: "crystal ball, n = 1",
            params: vec![90.0, 3.0, 1.0, 1.0],
            dom: d,
            build: |g, x, p, dom, _| pdf::crystal_ball(g, x, p[0], p[1], p[2], p[3], dom),
            formula: cb,
        },
        Case {
            name: "double-sided crystal ball",
            params: vec![90.0, 2.0, 4.0, 1.1, 3.0, 1.7, 5.0],
            dom: d,
            build: |g, x, p, dom, _| {
                pdf::crystal_ball_double(g, x, p[0], p[1], p[2], p[3], p[4], p[5], p[6], dom)
            },
            formula: |x, p| {
                let (x0, sl, sr, al, nl, ar, nr) = (p[0], p[1], p[2], p[3], p[4], p[5], p[6]);
                if x < x0 {
                    cb_shape((x - x0) / sl, al, nl)
                } else {
                    cb_shape(-(x - x0) / sr, ar, nr)
                }
            },
        },
        Case {
            name: "polynomial",
            params: vec![1.0, 0.01, 0.0002],
            dom: d,
            build: |g, x, p, dom, _| pdf::polynomial(g, x, p, dom),
            formula: |x, p| p[0] + p[1] * x + p[2] * x * x,
        },
        Case {
            name: "chebychev",
            params: vec![0.3, -0.2, 0.1],
            dom: d,
            build: |g, x, p, dom, _| pdf::chebychev(g, x, p, dom),
            formula: |x, p| {
                let u = (2.0 * x - 180.0) / 60.0;
                let t2 = 2.0 * u * u - 1.0;
                let t3 = 2.0 * u * t2 - u;
                1.0 + p[0] * u + p[1] * t2 + p[2] * t3
            },
        },
        Case {
            name: "bernstein",
            params: vec![1.0, 0.5, 0.3, 0.8],
            dom: d,
            build: |g, x, p, dom, _| pdf::bernstein(g, x, p, dom),
            formula: |x, p| {
                let u = (x - 60.0) / 60.0;
                let v = 1.0 - u;
                p[0] * v.powi(3)
                    + 3.0 * p[1] * u * v * v
                    + 3.0 * p[2] * u * u * v
                    + p[3] * u.powi(3)
            },
        },
        Case {
            name: "lognormal",
            params: vec![4.5, 0.1],
            dom: d,
            build: |g, x, p, dom, _| pdf::lognormal(g, x, p[0], p[1], dom),
            formula: |x, p| (-0.5 * ((x.ln() - p[0]) / p[1]).powi(2)).exp() / x,
        },
        Case {
            name: "generalized normal, flat top (beta = 8)",
            params: vec![88.0, 9.0, 8.0],
            dom: d,
            build: |g, x, p, dom, _| pdf::generalized_normal(g, x, p[0], p[1], p[2], dom),
            formula: |x, p| (-((x - p[0]).abs() / p[1]).powf(p[2])).exp(),
        },
        Case {
            name: "generalized normal, cusp (beta = 1.3), mean near an end",
            params: vec![64.0, 7.0, 1.3],
            dom: d,
            build: |g, x, p, dom, _| pdf::generalized_normal(g, x, p[0], p[1], p[2], dom),
            formula: |x, p| (-((x - p[0]).abs() / p[1]).powf(p[2])).exp(),
        },
        Case {
            name: "generalized normal, mean outside the domain",
            params: vec![55.0, 20.0, 2.6],
            dom: d,
            build: |g, x, p, dom, _| pdf::generalized_normal(g, x, p[0], p[1], p[2], dom),
            formula: |x, p| (-((x - p[0]).abs() / p[1]).powf(p[2])).exp(),
        },
        Case {
            name: "landau",
            params: vec![75.0, 3.0],
            dom: d,
            build: |g, x, p, dom, _| pdf::landau(g, x, p[0], p[1], dom),
            // (Checked against its defining integral and SciPy in `landau_against_independent_values`.)
            formula: |x, p| histfit_unbinned::landau::pdf((x - p[0]) / p[1]),
        },
        Case {
            name: "landau, domain above the peak",
            params: vec![50.0, 0.8],
            dom: d,
            build: |g, x, p, dom, _| pdf::landau(g, x, p[0], p[1], dom),
            formula: |x, p| histfit_unbinned::landau::pdf((x - p[0]) / p[1]),
        },
        Case {
            name: "argus",
            params: vec![125.0, -5.0, 0.5],
            dom: d,
            build: |g, x, p, dom, _| pdf::argus(g, x, p[0], p[1], p[2], dom),
            formula: argus_shape,
        },
        Case {
            name: "argus with its edge inside the domain",
            params: vec![110.0, -8.0, 0.5],
            dom: d,
            build: |g, x, p, dom, _| pdf::argus(g, x, p[0], p[1], p[2], dom),
            formula: argus_shape,
        },
        Case {
            name: "gamma, μ below the domain, γ < 1",
            params: vec![0.8, 25.0, 40.0],
            dom: d,
            build: |g, x, p, dom, _| pdf::gamma(g, x, p[0], p[1], p[2], dom),
            formula: |x, p| (x - p[2]).powf(p[0] - 1.0) * (-(x - p[2]) / p[1]).exp(),
        },
        Case {
            name: "gamma, μ inside the domain",
            params: vec![2.6, 15.0, 70.0],
            dom: d,
            build: |g, x, p, dom, _| pdf::gamma(g, x, p[0], p[1], p[2], dom),
            formula: |x, p| {
                if x <= p[2] {
                    0.0
                } else {
                    (x - p[2]).powf(p[0] - 1.0) * (-(x - p[2]) / p[1]).exp()
                }
            },
        },
        Case {
            name: "power sum",
            params: vec![1.0, -2.5, 30.0, -1.0],
            dom: d,
            build: |g, x, p, dom, _| pdf::power_sum(g, x, &[p[0], p[2]], &[p[1], p[3]], dom),
            formula: |x, p| p[0] * x.powf(p[1]) + p[2] * x.powf(p[3]),
        },
        Case {
            name: "exponential of a line",
            params: vec![0.4, -0.05],
            dom: d,
            build: |g, x, p, dom, _| pdf::exp_linear(g, x, p, dom),
            formula: |x, p| (p[0] + p[1] * x).exp(),
        },
    ]
}

fn argus_shape(m: f64, p: &[f64]) -> f64 {
    let u = 1.0 - (m / p[0]).powi(2);
    if u < 0.0 {
        0.0
    } else {
        m * u.powf(p[2]) * (p[1] * u).exp()
    }
}

fn cb_shape(t: f64, a: f64, n: f64) -> f64 {
    if t >= -a {
        (-0.5 * t * t).exp()
    } else {
        (n / a).powf(n) * (-0.5 * a * a).exp() * (n / a - a - t).powf(-n)
    }
}

fn cb(x: f64, p: &[f64]) -> f64 {
    let t = (x - p[0]) / p[1];
    let t = if p[2] < 0.0 { -t } else { t };
    cb_shape(t, p[2].abs(), p[3])
}

fn program(c: &Case) -> (Program, Graph) {
    let mut g = Graph::new();
    let x = g.column(0);
    let ps: Vec<Id> = (0..c.params.len()).map(|i| g.param(i)).collect();
    let l = (c.build)(&mut g, x, &ps, c.dom, &c.params);
    let zero = g.constant(0.0);
    (Program::new(&g, l, zero), g)
}

fn sample_points(dom: Domain, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| dom.lo + (i as f64 + 0.5) * dom.width() / n as f64)
        .collect()
}

#[test]
fn every_pdf_integrates_to_one_and_matches_its_formula() {
    for c in cases() {
        let (prog, _) = program(&c);
        let xs = sample_points(c.dom, 400_000);
        let h = c.dom.width() / xs.len() as f64;
        let mut integral = 0.0;
        let mut ratio = None;
        let logs = prog.event_values(&c.params, &[&xs]);
        for (&x, &lf) in xs.iter().zip(&logs) {
            let f = lf.exp();
            integral += f * h;
            let shape = (c.formula)(x, &c.params);
            if shape > 1e-200 && f > 1e-200 {
                let r = f / shape;
                match ratio {
                    None => ratio = Some(r),
                    Some(r0) => assert!(
                        ((r - r0) / r0).abs() < 1e-9,
                        "{}: density/formula not constant at x = {x}: {r} vs {r0}",
                        c.name
                    ),
                }
            }
        }
        assert!(
            (integral - 1.0).abs() < 2e-7,
            "{}: integrates to {integral}",
            c.name
        );
    }
}

#[test]
fn gradients_match_central_differences() {
    for c in cases() {
        let (prog, _) = program(&c);
        let xs: Vec<f64> = (0..1500)
            .map(|i| c.dom.lo + c.dom.width() * ((i as f64 * 0.618_034) % 1.0))
            // Events only where the density is positive and not about to vanish (ARGUS above
            // its edge, a gamma density below μ: its log's derivatives grow without bound there,
            // beyond what central differences follow).
            .filter(|&x| {
                let eps = 1e-3 * c.dom.width();
                [x - eps, x, x + eps]
                    .iter()
                    .all(|&y| (c.formula)(y, &c.params) > 0.0)
            })
            .collect();
        let mut grad = vec![0.0; c.params.len()];
        let f0 = prog.eval(&c.params, &[&xs], None, Some(&mut grad));
        assert!(f0.is_finite(), "{}: {f0}", c.name);
        for k in 0..c.params.len() {
            let h = 1e-6 * c.params[k].abs().max(1e-2);
            let mut up = c.params.clone();
            let mut dn = c.params.clone();
            up[k] += h;
            dn[k] -= h;
            let fd = (prog.eval(&up, &[&xs], None, None) - prog.eval(&dn, &[&xs], None, None))
                / (2.0 * h);
            assert!(
                (fd - grad[k]).abs() <= 1e-5 * fd.abs().max(1.0),
                "{}: parameter {k}: reverse mode {} vs differences {fd}",
                c.name,
                grad[k]
            );
        }
    }
}

/// The Landau density against its defining integral φ(λ) = (1/π) ∫₀^∞ e^(−t ln t − λt) sin(πt)
/// dt (composite Simpson's rule on [0, 60], well conditioned for λ ≥ −2.5), and φ, Φ and Q
/// against SciPy 1.17's `scipy.stats.landau` (Boost; its standard form rescaled to ROOT's:
/// φ(λ) = (2/π) p((2/π)(λ − ln(π/2)))) in both tails, all to 1e-10 relative.
#[test]
fn landau_against_independent_values() {
    use histfit_unbinned::landau;
    let integral = |l: f64| {
        let (n, hi) = (600_000, 60.0);
        let h = hi / n as f64;
        let f = |t: f64| {
            if t == 0.0 {
                0.0
            } else {
                (-t * t.ln() - l * t).exp() * (std::f64::consts::PI * t).sin()
            }
        };
        let mut s = f(0.0) + f(hi);
        for i in 1..n {
            s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        s * h / 3.0 / std::f64::consts::PI
    };
    for l in [-2.5, -1.3, -0.2228, 0.0, 0.7, 2.0, 5.5, 9.0, 17.0] {
        let (want, got) = (integral(l), landau::pdf(l));
        assert!(
            ((got - want) / want).abs() < 1e-10,
            "φ({l}) = {got} against {want}"
        );
    }
    // (λ, φ, Φ, Q) from SciPy.
    let scipy = [
        (-6.5, 3.364633345781634e-106, 1.3722551000771943e-108, 1.0),
        (-5.0, 5.729968270573027e-24, 1.0401083461973894e-25, 1.0),
        (
            -3.0,
            0.0006737286139080643,
            8.59212662520897e-05,
            0.9999140787337479,
        ),
        (
            30.0,
            0.001298671406775338,
            0.9632501729103133,
            0.03674982708968668,
        ),
        (
            1e3,
            1.012057179716136e-06,
            0.9989934819741508,
            0.0010065180258491465,
        ),
        (
            1e6,
            1.0000257859166496e-12,
            0.9999989999866071,
            1.0000133928895521e-06,
        ),
        (
            1e12,
            1.000000000053416e-24,
            0.999999999999,
            1.0000000000272083e-12,
        ),
    ];
    for (l, phi, cdf, sf) in scipy {
        for (what, got, want) in [
            ("φ", landau::pdf(l), phi),
            ("Φ", landau::cdf(l), cdf),
            ("Q", landau::sf(l), sf),
        ] {
            assert!(
                ((got - want) / want).abs() < 1e-10,
                "{what}({l}) = {got} against {want}"
            );
        }
    }
}

/// A power-law term so steep that hi^(e+1) underflows (e = −400 on [1, 10]: |e + 1| ln 10 > 709)
/// is normalised by the form that starts from lo^(e+1): ln f equals the closed form, and its
/// mirror (e = +300 on [0.1, 1]) the one from hi^(e+1).
#[test]
fn steep_power_sums_stay_finite() {
    // (Points where x^e itself does not underflow.)
    for (e, lo, hi, xs) in [
        (-400.0f64, 1.0, 10.0, [1.001, 1.5]),
        (300.0, 0.1, 1.0, [0.55, 0.999]),
    ] {
        let dom = Domain { lo, hi };
        let mut g = Graph::new();
        let x = g.column(0);
        let c = g.constant(1.0);
        let ex = g.param(0);
        let l = pdf::power_sum(&mut g, x, &[c], &[ex], dom);
        let zero = g.constant(0.0);
        let prog = Program::new(&g, l, zero);
        let m = e + 1.0;
        // ln ∫ x^e = ln((hi^m − lo^m)/m), each end's power in logarithms.
        let (a, b) = (m * lo.ln(), m * hi.ln());
        let ln_int = a.max(b) + (-(a - b).abs()).exp().mul_add(-1.0, 1.0).ln() - m.abs().ln();
        for xv in xs {
            let got = prog.event_values(&[e], &[&[xv]])[0];
            let want = e * xv.ln() - ln_int;
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "e = {e}, x = {xv}: {got} vs {want}"
            );
        }
    }
}

/// A gamma density at x = μ, as TMath's GammaDist: for γ = 1 (an exponential from μ) the
/// limit from above, 1/β normalised; for γ ≠ 1 zero (not NaN, not +∞), as below μ.
#[test]
fn gamma_at_its_origin() {
    let dom = Domain {
        lo: 60.0,
        hi: 120.0,
    };
    let mut g = Graph::new();
    let x = g.column(0);
    let ps: Vec<Id> = (0..3).map(|i| g.param(i)).collect();
    let l = pdf::gamma(&mut g, x, ps[0], ps[1], ps[2], dom);
    let zero = g.constant(0.0);
    let prog = Program::new(&g, l, zero);
    let mu = 70.0;
    let at = |gamma: f64, v: f64| prog.event_values(&[gamma, 15.0, mu], &[&[v]])[0];
    let (origin, above) = (at(1.0, mu), at(1.0, mu + 1e-9));
    assert!((origin - above).abs() < 1e-9, "{origin} vs {above}");
    for gamma in [0.7, 2.0] {
        assert_eq!(at(gamma, mu), f64::NEG_INFINITY, "γ = {gamma}");
        assert_eq!(at(gamma, mu - 1.0), f64::NEG_INFINITY, "γ = {gamma}");
    }
}
