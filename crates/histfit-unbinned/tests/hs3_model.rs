//! HS3 documents as ROOT 6.40 writes them, opened and evaluated: −ln L and its gradient against
//! the formula written out here, the extended mixture's yields, a constraint term, weighted
//! events, and bad input named by its place.

use histfit_seam::Evaluator;
use histfit_unbinned::{open, Choice};
use serde_json::{json, Value};

/// The benchmark model as ROOT's exporter writes it: Gaussian + exponential (c negated through a
/// generic function), extended with free yields, events inline.
fn bench(events: &[f64], weights: Option<&[f64]>) -> Value {
    let mut data = json!({
        "axes": [{"max": 120.0, "min": 60.0, "name": "x"}],
        "entries": events.iter().map(|x| vec![*x]).collect::<Vec<_>>(),
        "name": "obsData",
        "type": "unbinned"
    });
    if let Some(w) = weights {
        data["weights"] = json!(w);
    }
    json!({
        "data": [data],
        "distributions": [
            {"coefficients": ["nsig", "nbkg"], "extended": true, "name": "model",
             "summands": ["sig", "bkg"], "type": "mixture_dist"},
            {"c": "lambda_exponential_inverted", "name": "bkg", "type": "exponential_dist", "x": "x"},
            {"mean": "mean", "name": "sig", "sigma": "sigma", "type": "gaussian_dist", "x": "x"}
        ],
        "domains": [{"axes": [
            {"max": 0.0, "min": -1.0, "name": "lambda"},
            {"max": 100.0, "min": 80.0, "name": "mean"},
            {"max": 100000.0, "min": 0.0, "name": "nbkg"},
            {"max": 100000.0, "min": 0.0, "name": "nsig"},
            {"max": 10.0, "min": 0.5, "name": "sigma"},
            {"max": 120.0, "min": 60.0, "name": "x"}
        ], "name": "default_domain", "type": "product_domain"}],
        "functions": [{"expression": "-lambda", "name": "lambda_exponential_inverted",
                       "type": "generic_function"}],
        "metadata": {"hs3_version": "0.2", "packages": [{"name": "ROOT", "version": "6.40.00"}]},
        "misc": {"ROOT_internal": {}},
        "parameter_points": [{"name": "default_values", "parameters": [
            {"max": 0.0, "min": -1.0, "name": "lambda", "value": -0.03},
            {"max": 120.0, "min": 60.0, "name": "x", "value": 90.0},
            {"max": 100000.0, "min": 0.0, "name": "nbkg", "value": 1000.0},
            {"max": 100000.0, "min": 0.0, "name": "nsig", "value": 500.0},
            {"max": 100.0, "min": 80.0, "name": "mean", "value": 91.0},
            {"max": 10.0, "min": 0.5, "name": "sigma", "value": 2.5}
        ]}]
    })
}

fn events(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 60.0 + 60.0 * ((i as f64 * 0.754_877_666) % 1.0))
        .collect()
}

/// −ln L of the benchmark model, written out: Σν − Σ w ln(ν_s g(x) + ν_b e(x)).
fn reference(p: &[f64; 5], xs: &[f64], ws: Option<&[f64]>) -> f64 {
    let [mean, sigma, lambda, nsig, nbkg] = *p;
    let erf = libm::erf;
    let gnorm = sigma
        * (std::f64::consts::PI / 2.0).sqrt()
        * (erf((120.0 - mean) / (2f64.sqrt() * sigma))
            - erf((60.0 - mean) / (2f64.sqrt() * sigma)));
    let enorm = ((lambda * 120.0).exp() - (lambda * 60.0).exp()) / lambda;
    let mut f = nsig + nbkg;
    for (i, &x) in xs.iter().enumerate() {
        let g = (-0.5 * ((x - mean) / sigma).powi(2)).exp() / gnorm;
        let e = (lambda * x).exp() / enorm;
        f -= ws.map_or(1.0, |w| w[i]) * (nsig * g + nbkg * e).ln();
    }
    f
}

fn at(names: &[String], values: &[(&str, f64)]) -> Vec<f64> {
    names
        .iter()
        .map(|n| values.iter().find(|(m, _)| m == n).unwrap().1)
        .collect()
}

#[test]
fn the_benchmark_model_as_root_writes_it() {
    let xs = events(3000);
    let ws: Vec<f64> = (0..xs.len()).map(|i| 0.3 + (i % 5) as f64 * 0.2).collect();
    for weights in [None, Some(&ws[..])] {
        let mut m = open(&bench(&xs, weights), &Choice::default()).unwrap();
        assert_eq!(m.notes.len(), 1, "{:?}", m.notes);
        assert!(m.notes[0].contains("no likelihood"), "{:?}", m.notes);
        let names = m.space.names.clone();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, ["lambda", "mean", "nbkg", "nsig", "sigma"]);
        let data = m.observed_dataset();
        for p in [
            [91.0, 2.5, -0.03, 500.0, 1000.0],
            [89.3, 3.1, -0.012, 812.0, 2211.0],
        ] {
            let v = at(
                &names,
                &[
                    ("mean", p[0]),
                    ("sigma", p[1]),
                    ("lambda", p[2]),
                    ("nsig", p[3]),
                    ("nbkg", p[4]),
                ],
            );
            let want = reference(&p, &xs, weights);
            let got = m.nll(&v, &data).unwrap();
            assert!(((got - want) / want).abs() < 1e-12, "{got} vs {want}");
            let mut grad = vec![0.0; v.len()];
            let g2 = m.nll_grad(&v, &data, &mut grad).unwrap();
            assert_eq!(g2, got);
            for k in 0..v.len() {
                let h = 1e-6 * v[k].abs().max(1e-3);
                let (mut up, mut dn) = (v.clone(), v.clone());
                up[k] += h;
                dn[k] -= h;
                let pp: [f64; 5] = std::array::from_fn(|j| {
                    let n = ["mean", "sigma", "lambda", "nsig", "nbkg"][j];
                    up[names.iter().position(|m| m == n).unwrap()]
                });
                let pm: [f64; 5] = std::array::from_fn(|j| {
                    let n = ["mean", "sigma", "lambda", "nsig", "nbkg"][j];
                    dn[names.iter().position(|m| m == n).unwrap()]
                });
                let fd = (reference(&pp, &xs, weights) - reference(&pm, &xs, weights)) / (2.0 * h);
                assert!(
                    (fd - grad[k]).abs() < 1e-6 * fd.abs().max(1.0),
                    "{}: {} vs {fd}",
                    names[k],
                    grad[k]
                );
            }
        }
    }
}

/// The same bits on one thread and on many: blocks are summed in a fixed order.
#[test]
fn the_same_bits_on_one_thread_or_many() {
    let xs = events(200_000);
    let mut m = open(&bench(&xs, None), &Choice::default()).unwrap();
    let data = m.observed_dataset();
    let v = m.space.init.clone();
    let mut g_many = vec![0.0; v.len()];
    let many = m.nll_grad(&v, &data, &mut g_many).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let mut g_one = vec![0.0; v.len()];
    let one = pool.install(|| m.nll_grad(&v, &data, &mut g_one).unwrap());
    assert_eq!(one.to_bits(), many.to_bits());
    assert_eq!(g_one, g_many);
}

/// A request at the point just evaluated is answered from that evaluation (a fit asks for its
/// minimum three times): the same bits as a fresh model's, a gradient computed where the kept
/// evaluation had none, and other events or another constant evaluated afresh.
#[test]
fn repeated_points_give_the_same_answers() {
    let xs = events(5_000);
    let doc = bench(&xs, None);
    let mut m = open(&doc, &Choice::default()).unwrap();
    let data = m.observed_dataset();
    let v = m.space.init.clone();
    let n = v.len();
    let fresh = |p: &[f64], d: &histfit_seam::Dataset| {
        let mut g = vec![0.0; n];
        let mut again = open(&doc, &Choice::default()).unwrap();
        (again.nll_grad(p, d, &mut g).unwrap().to_bits(), g)
    };
    // nll first (no gradient kept), then nll_grad at the same point must compute one.
    let f = m.nll(&v, &data).unwrap();
    let mut g = vec![0.0; n];
    let fg = m.nll_grad(&v, &data, &mut g).unwrap();
    assert_eq!((fg.to_bits(), g.clone()), fresh(&v, &data));
    assert_eq!(f.to_bits(), fg.to_bits());
    // The same point again: the same bits, value and gradient.
    let mut g2 = vec![1.0; n];
    assert_eq!(
        m.nll_grad(&v, &data, &mut g2).unwrap().to_bits(),
        fg.to_bits()
    );
    assert_eq!(g2, g);
    assert_eq!(m.nll(&v, &data).unwrap().to_bits(), fg.to_bits());
    // Other events at the same point, and the same events with another constant.
    let other = {
        let mut d = open(&bench(&events(4_000), None), &Choice::default())
            .unwrap()
            .observed_dataset();
        d.aux = data.aux.clone();
        d
    };
    let mut g3 = vec![0.0; n];
    let f3 = m.nll_grad(&v, &other, &mut g3).unwrap();
    assert_eq!((f3.to_bits(), g3), fresh(&v, &other));
    assert_ne!(f3.to_bits(), fg.to_bits());
    let mut shifted = data.clone();
    shifted.constant += 1.5;
    assert_eq!(m.nll(&v, &shifted).unwrap(), fg + 1.5);
    // Too few parameters for a model with global observables: an error, not a panic.
    let mut c = open(&fixture_doc("constrained.json"), &Choice::default()).unwrap();
    let observed = c.observed_dataset();
    let e = c.nll(&[1.0], &observed).unwrap_err().to_string();
    assert!(e.contains("parameters"), "{e}");
}

#[test]
fn a_fit_finds_the_minimum() {
    // Events drawn here by inversion from a known mixture: 600 Gaussian(91, 2.5), 1400
    // exponential(−0.03), deterministic quasi-random.
    let mut xs = Vec::new();
    for i in 0..600 {
        let u = (i as f64 + 0.5) / 600.0;
        xs.push(91.0 + 2.5 * inverse_normal(u));
    }
    for i in 0..1400 {
        let u = ((i as f64 + 0.5) * 0.618_033_988_7) % 1.0;
        let (a, b) = ((-0.03f64 * 60.0).exp(), (-0.03f64 * 120.0).exp());
        xs.push((a + u * (b - a)).ln() / -0.03);
    }
    let mut m = open(&bench(&xs, None), &Choice::default()).unwrap();
    let data = m.observed_dataset();
    let r = histfit_infer::fit(
        &mut m,
        &data,
        &histfit_infer::FitOptions {
            uncertainties: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(r.converged, "{}", r.reason);
    let names = m.space.names.clone();
    let get = |n: &str| r.bestfit[names.iter().position(|m| m == n).unwrap()];
    // The extended fit's yields sum to the number of events at the minimum.
    assert!(
        (get("nsig") + get("nbkg") - 2000.0).abs() < 1e-3,
        "{}",
        get("nsig") + get("nbkg")
    );
    assert!((get("mean") - 91.0).abs() < 0.3 && (get("sigma") - 2.5).abs() < 0.3);
    // A minimum: the gradient vanishes there.
    let mut grad = vec![0.0; names.len()];
    m.nll_grad(&r.bestfit, &data, &mut grad).unwrap();
    for (k, gk) in grad.iter().enumerate() {
        let sigma = r.uncertainties.as_ref().unwrap()[k];
        assert!((gk * sigma).abs() < 1e-3, "{}: gradient {gk}", names[k]);
    }
}

#[test]
fn bad_documents_name_the_place_and_the_rule() {
    let xs = events(10);
    let cases: Vec<(Value, &str)> = vec![
        (
            {
                let mut d = bench(&xs, None);
                d["distributions"][2]["type"] = json!("nonsense_dist");
                d
            },
            "distributions[2] (\"sig\").type: unknown or not yet supported distribution type \"nonsense_dist\"",
        ),
        (
            {
                let mut d = bench(&xs, None);
                d["functions"][0]["expression"] = json!("-lambda +* 2");
                d
            },
            "functions[0] (\"lambda_exponential_inverted\").expression: \"-lambda +* 2\" at character 9",
        ),
        (
            {
                let mut d = bench(&xs, None);
                d["data"][0]["entries"][3] = json!([130.0]);
                d
            },
            "1 events with \"x\" outside its domain [60, 120]",
        ),
        (
            {
                let mut d = bench(&xs, Some(&[1.0; 10]));
                d["data"][0]["weights"][4] = json!(-1.0);
                d
            },
            "data[0] (\"obsData\").weights[4]: -1: weights must be finite and not negative",
        ),
        (
            {
                let mut d = bench(&xs, None);
                d["distributions"][2]["sigma"] = json!("width");
                d["parameter_points"][0]["parameters"][5]["name"] = json!("other");
                d
            },
            "parameter \"width\" (in distributions[2] (\"sig\")): used but never defined",
        ),
    ];
    for (doc, needle) in cases {
        let e = open(&doc, &Choice::default()).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}\n  lacks: {needle}");
    }
}

/// Toys: a pure function of (θ, seed, index); extended counts Poisson around ν; and fits of
/// toys drawn at the fit of the observed data give pulls of mean 0 and width 1 (within 3
/// standard errors, 300 toys; the 2 000-toy validation is in BENCHMARKS.md).
#[test]
fn toys_are_reproducible_and_their_fits_pull_right() {
    let (doc, _) = (
        serde_json::from_str::<Value>(
            &std::fs::read_to_string(histfit_testutil::fixture("hs3/gauss_exp_ext.json")).unwrap(),
        )
        .unwrap(),
        (),
    );
    let mut m = open(&doc, &Choice::default()).unwrap();
    let data = m.observed_dataset();
    let options = histfit_infer::FitOptions {
        uncertainties: true,
        ..Default::default()
    };
    let truth = histfit_infer::fit(&mut m, &data, &options).unwrap();
    let gen = truth.bestfit.clone();
    let a = m.toys(&gen, 7, 0..3).unwrap();
    let b = m.toys(&gen, 7, 1..2).unwrap();
    assert_eq!(a[1].events, b[0].events, "toy 1 the same drawn alone");
    assert_ne!(a[0].events, a[1].events);
    let n_toys = 300;
    let names = m.space.names.clone();
    let mut pulls = vec![Vec::new(); names.len()];
    let mut counts = Vec::new();
    let toys = m.toys(&gen, 11, 0..n_toys).unwrap();
    // One start per toy fit: this model has one minimum (the fits' further starts are for
    // HistFactory's multimodal likelihoods; the fit of the observed data made them).
    let options = histfit_infer::FitOptions {
        starts: histfit_infer::Starts::Count(0),
        ..options
    };
    for toy in &toys {
        let ev = toy.events.as_ref().unwrap();
        counts.push(ev.channels[0].len() as f64);
        assert!(ev.channels[0].columns[0]
            .iter()
            .all(|x| (60.0..=120.0).contains(x)));
        let r = histfit_infer::fit(&mut m, toy, &options).unwrap();
        assert!(r.converged, "{}", r.reason);
        let e = r.uncertainties.as_ref().unwrap();
        for k in 0..names.len() {
            pulls[k].push((r.bestfit[k] - gen[k]) / e[k]);
        }
    }
    let stats = |v: &[f64]| {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt())
    };
    let nu: f64 = gen[m.space.index("nsig").unwrap()] + gen[m.space.index("nbkg").unwrap()];
    let (mean_n, sd_n) = stats(&counts);
    let se = (1.0 / n_toys as f64).sqrt();
    assert!(
        (mean_n - nu).abs() < 3.0 * nu.sqrt() * se,
        "{mean_n} vs ν {nu}"
    );
    assert!(
        (sd_n / nu.sqrt() - 1.0).abs() < 3.0 * se / 2f64.sqrt() * 1.5,
        "{sd_n}"
    );
    for (k, p) in pulls.iter().enumerate() {
        let (mean, width) = stats(p);
        assert!(mean.abs() < 3.0 * se, "{}: pull mean {mean}", names[k]);
        assert!(
            (width - 1.0).abs() < 3.0 * se / 2f64.sqrt(),
            "{}: pull width {width}",
            names[k]
        );
    }
}

/// The Asimov dataset: fitted, it returns the parameters it was made at (to the midpoint
/// rule's O(h²) on 4 000 cells), and its Σw is the expected number of events.
#[test]
fn a_fit_of_the_asimov_dataset_returns_its_parameters() {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(histfit_testutil::fixture("hs3/gauss_exp_ext.json")).unwrap(),
    )
    .unwrap();
    let mut m = open(&doc, &Choice::default()).unwrap();
    let at = m.space.init.clone();
    let asimov = m.asimov(&at).unwrap();
    let table = &asimov.events.as_ref().unwrap().channels[0];
    let nu = at[m.space.index("nsig").unwrap()] + at[m.space.index("nbkg").unwrap()];
    assert!((table.sum_of_weights() - nu).abs() < 1e-6 * nu);
    let options = histfit_infer::FitOptions {
        uncertainties: true,
        ..Default::default()
    };
    let r = histfit_infer::fit(&mut m, &asimov, &options).unwrap();
    assert!(r.converged, "{}", r.reason);
    let e = r.uncertainties.as_ref().unwrap();
    for (k, n) in m.space.names.iter().enumerate() {
        assert!(
            (r.bestfit[k] - at[k]).abs() < 1e-3 * e[k],
            "{n}: {} vs {} (σ {})",
            r.bestfit[k],
            at[k],
            e[k]
        );
    }
}

fn fixture_doc(name: &str) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(histfit_testutil::fixture(&format!("hs3/{name}"))).unwrap(),
    )
    .unwrap()
}

/// A Gaussian constraint's global observable is data: drawn in toys around the constraint's
/// mean at θ, set to that mean in the Asimov dataset (whose fit then returns θ), and read from
/// the dataset by −ln L.
#[test]
fn global_observables_are_data() {
    let mut m = open(&fixture_doc("constrained.json"), &Choice::default()).unwrap();
    assert_eq!(m.globals.len(), 1);
    let observed = m.observed_dataset();
    let g = m.globals[0].param;
    assert_eq!(m.space.names[g], "gmean");
    assert_eq!(observed.aux, vec![m.space.init[g]]);
    let at = m.space.init.clone();
    let toys = m.toys(&at, 3, 0..200).unwrap();
    let draws: Vec<f64> = toys.iter().map(|t| t.aux[0]).collect();
    let mean_at = at[m.space.index("mean").unwrap()];
    let avg = draws.iter().sum::<f64>() / 200.0;
    let sd = (draws.iter().map(|d| (d - avg).powi(2)).sum::<f64>() / 199.0).sqrt();
    // The constraint's width is 0.5.
    assert!((avg - mean_at).abs() < 3.0 * 0.5 / 200f64.sqrt(), "{avg}");
    assert!((sd / 0.5 - 1.0).abs() < 0.15, "{sd}");
    // −ln L reads the global observable from the dataset.
    let mut shifted = observed.clone();
    shifted.aux[0] += 0.5;
    let (a, b) = (
        m.nll(&at, &observed).unwrap(),
        m.nll(&at, &shifted).unwrap(),
    );
    let z0 = (observed.aux[0] - mean_at) / 0.5;
    let z1 = (shifted.aux[0] - mean_at) / 0.5;
    assert!(
        ((b - a) - 0.5 * (z1 * z1 - z0 * z0)).abs() < 1e-9,
        "{a} {b}"
    );
    // The Asimov dataset at a point away from the observed global observable.
    let mut p = at.clone();
    p[m.space.index("mean").unwrap()] = 90.7;
    let asimov = m.asimov(&p).unwrap();
    assert!((asimov.aux[0] - 90.7).abs() < 1e-12);
    let options = histfit_infer::FitOptions {
        uncertainties: true,
        ..Default::default()
    };
    let r = histfit_infer::fit(&mut m, &asimov, &options).unwrap();
    let e = r.uncertainties.as_ref().unwrap();
    for (k, n) in m.space.names.iter().enumerate() {
        if !m.space.fixed[k] {
            assert!(
                (r.bestfit[k] - p[k]).abs() < 1e-3 * e[k],
                "{n}: {} vs {}",
                r.bestfit[k],
                p[k]
            );
        }
    }
}

/// A factor over an observable the data lack is not taken for a constraint.
#[test]
fn a_missing_axis_is_an_error_not_a_constraint() {
    let mut doc = fixture_doc("prod2d.json");
    // Drop the second axis from the data (and every event's second value).
    let data = &mut doc["data"][0];
    let axes = data["axes"].as_array().unwrap().clone();
    data["axes"] = json!([axes[0].clone()]);
    let entries: Vec<Value> = data["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| json!([e[0].clone()]))
        .collect();
    data["entries"] = json!(entries);
    let e = open(&doc, &Choice::default()).unwrap_err().to_string();
    let missing = axes[1]["name"].as_str().unwrap();
    assert!(e.contains(&format!("lacks the axis \"{missing}\"")), "{e}");
}

/// A density whose normalisation is zero over the range is refused when the file is opened.
#[test]
fn a_zero_normalisation_is_refused_at_open() {
    let mut doc = fixture_doc("argus.json");
    // The ARGUS edge m0 (a constant) below the whole range [5.2, 5.29].
    let points = doc["parameter_points"][0]["parameters"]
        .as_array_mut()
        .unwrap();
    let m0 = points.iter_mut().find(|p| p["name"] == "m0").unwrap();
    m0["value"] = json!(5.1);
    let e = open(&doc, &Choice::default()).unwrap_err().to_string();
    assert!(e.contains("not finite at the initial parameters"), "{e}");
}

/// Pull widths of the sandwich and the naive errors, per free parameter, over `n_toys` toys of
/// `m` drawn at its fit to the observed data (global observables drawn too), each event given a
/// weight 0.1 or 1.9 at random — independent of x: the weighted fit stays consistent, and the
/// naive errors of what the events measure are too small by √(E[w²]/E[w]) ≈ 1.35.
fn weighted_pull_widths(
    m: &mut histfit_unbinned::UnbinnedModel,
    n_toys: u64,
) -> Vec<(String, f64, f64)> {
    let options = histfit_infer::FitOptions {
        uncertainties: true,
        starts: histfit_infer::Starts::Count(0),
        ..Default::default()
    };
    let observed = m.observed_dataset();
    let gen = histfit_infer::fit(m, &observed, &options).unwrap().bestfit;
    let free: Vec<usize> = (0..m.space.len()).filter(|&i| !m.space.fixed[i]).collect();
    let (mut sandwich, mut naive) = (vec![Vec::new(); free.len()], vec![Vec::new(); free.len()]);
    for (t, toy) in m.toys(&gen, 5, 0..n_toys).unwrap().into_iter().enumerate() {
        let n = toy.events.as_ref().unwrap().channels[0].len();
        let weights = histfit_testutil::coverage_weights(n, t as u64);
        let weighted = histfit_testutil::with_event_weights(&toy, weights);
        let r = histfit_infer::fit(m, &weighted, &options).unwrap();
        assert!(r.converged, "toy {t}: {}", r.reason);
        let u = histfit_unbinned::weighted::weighted_uncertainties(m, &weighted, &r.bestfit, &free)
            .unwrap();
        for (j, &i) in free.iter().enumerate() {
            sandwich[j].push((r.bestfit[i] - gen[i]) / u.sandwich[j]);
            naive[j].push((r.bestfit[i] - gen[i]) / u.naive[j]);
        }
    }
    let width = histfit_testutil::sample_width;
    free.iter()
        .enumerate()
        .map(|(j, &i)| {
            let (ws, wn) = (width(&sandwich[j]), width(&naive[j]));
            eprintln!(
                "{}: pull width sandwich {ws:.3}, naive {wn:.3}",
                m.space.names[i]
            );
            (m.space.names[i].clone(), ws, wn)
        })
        .collect()
}

/// Weighted events: the sandwich errors cover and the naive ones do not. 400 toys of the
/// weighted fixture's model (non-extended Gaussian + exponential), weights 0.1 or 1.9
/// ([`weighted_pull_widths`]): the sandwich pulls' width is 1 within 3 standard errors, the
/// naive pulls' is not.
#[test]
fn sandwich_errors_cover_weighted_fits_and_naive_ones_do_not() {
    let mut m = open(&fixture_doc("weighted.json"), &Choice::default()).unwrap();
    let n_toys = 400;
    let se = 1.0 / (2.0 * n_toys as f64).sqrt();
    for (name, ws, wn) in weighted_pull_widths(&mut m, n_toys) {
        assert!(
            (ws - 1.0).abs() < 3.0 * se,
            "{name}: sandwich pull width {ws}"
        );
        assert!(wn - 1.0 > 3.0 * se, "{name}: naive pull width {wn} covers");
    }
}

/// The `constrained.json` fixture's model with its constraint on the mean `width` wide.
fn constrained_with_width(width: f64) -> histfit_unbinned::UnbinnedModel {
    let mut doc = fixture_doc("constrained.json");
    for p in doc["parameter_points"][0]["parameters"]
        .as_array_mut()
        .unwrap()
    {
        if p["name"] == "csig" {
            p["value"] = json!(width);
        }
    }
    open(&doc, &Choice::default()).unwrap()
}

/// The same with a Gaussian constraint of width 0.05 on the mean (the events alone measure it to
/// ≈ 0.1; its global observable drawn with every toy): every sandwich pull's width is 1 within 3
/// standard errors — the constraint's information counted in the score's variance; without it
/// the mean's sandwich errors came out too small.
#[test]
fn sandwich_errors_cover_weighted_fits_with_a_constraint() {
    let mut m = constrained_with_width(0.05);
    let n_toys = 400;
    let se = 1.0 / (2.0 * n_toys as f64).sqrt();
    for (name, ws, _) in weighted_pull_widths(&mut m, n_toys) {
        assert!(
            (ws - 1.0).abs() < 3.0 * se,
            "{name}: sandwich pull width {ws}"
        );
    }
}

/// Events of weight 1 given as weights: the sandwich and SumW2 errors equal the naive ones up to
/// the events' fluctuation, the constrained parameter's included. The constraint (width 0.02 on
/// the mean, against the data's ≈ 0.1) carries most of the mean's information: were it left out
/// of the score's variance, the mean's sandwich error would come out 7.5 times too small (0.0026
/// against 0.0198).
#[test]
fn unit_weights_give_the_naive_errors_with_a_constraint() {
    use histfit_seam::{Dataset, EventTable, Events};
    let mut m = constrained_with_width(0.02);
    let observed = m.observed_dataset();
    let table = &observed.events.as_ref().unwrap().channels[0];
    let weighted = Dataset::of_events(
        std::sync::Arc::new(Events {
            channels: vec![EventTable {
                weights: Some(vec![1.0; table.len()]),
                ..table.clone()
            }],
        }),
        Vec::new(),
        observed.aux.clone(),
        0.0,
    );
    let options = histfit_infer::FitOptions {
        uncertainties: true,
        ..Default::default()
    };
    let r = histfit_infer::fit(&mut m, &weighted, &options).unwrap();
    assert!(r.converged, "{}", r.reason);
    let free: Vec<usize> = (0..m.space.len()).filter(|&i| !m.space.fixed[i]).collect();
    let u =
        histfit_unbinned::weighted::weighted_uncertainties(&mut m, &weighted, &r.bestfit, &free)
            .unwrap();
    for (j, &i) in free.iter().enumerate() {
        let name = &m.space.names[i];
        assert!(
            (u.sumw2[j] / u.naive[j] - 1.0).abs() < 1e-6,
            "{name}: {u:?}"
        );
        let limit = if name == "mean" { 0.01 } else { 0.1 };
        assert!(
            (u.sandwich[j] / u.naive[j] - 1.0).abs() < limit,
            "{name}: sandwich {} naive {}",
            u.sandwich[j],
            u.naive[j]
        );
    }
    let mean = free
        .iter()
        .position(|&i| m.space.names[i] == "mean")
        .unwrap();
    assert!(u.naive[mean] < 0.02 && u.naive[mean] > 0.015, "{u:?}");
}

/// Poisson and multivariate normal constraints (as ROOT 6.40 writes RooPoisson and
/// RooMultiVarGaussian): −ln L with them minus −ln L without them equals their closed forms,
/// λ − k ln λ + ln k! and ½ rᵀΣ⁻¹r + ½ ln det(2πΣ); toys draw their global observables with
/// the constraint's mean, variance and correlation, and the Asimov dataset sets them to the means.
#[test]
fn poisson_and_multivariate_normal_constraints() {
    let doc = fixture_doc("constrained_pois_mvn.json");
    let mut m = open(&doc, &Choice::default()).unwrap();
    let mut bare_doc = doc.clone();
    for d in bare_doc["distributions"].as_array_mut().unwrap() {
        if d["name"] == "full" {
            d["factors"] = serde_json::json!(["model"]);
        }
    }
    let mut bare = open(&bare_doc, &Choice::default()).unwrap();
    let at = |m: &histfit_unbinned::UnbinnedModel, vals: &[(&str, f64)]| {
        let mut p = m.space.init.clone();
        for (n, v) in vals {
            p[m.space.index(n).unwrap()] = *v;
        }
        p
    };
    let point = [("nbkg", 1420.5), ("mean", 91.4), ("sigma", 2.3)];
    let (p, pb) = (at(&m, &point), at(&bare, &point));
    let diff = m.nll(&p, &m.observed_dataset()).unwrap()
        - bare.nll(&pb, &bare.observed_dataset()).unwrap();
    let (k, lam) = (1380.0, 1420.5);
    let poisson = lam - k * f64::ln(lam) + libm::lgamma(k + 1.0);
    let (r0, r1) = (91.2 - 91.4, 2.45 - 2.3);
    let (a, b, c) = (0.25, 0.05, 0.04);
    let det = a * c - b * b;
    let quad = (c * r0 * r0 - 2.0 * b * r0 * r1 + a * r1 * r1) / det;
    let mvn = 0.5 * quad + 0.5 * ((2.0 * std::f64::consts::PI).powi(2) * det).ln();
    assert!(
        (diff - (poisson + mvn)).abs() < 1e-9 * (poisson + mvn).abs(),
        "{diff} vs {}",
        poisson + mvn
    );

    assert_eq!(m.globals.len(), 3);
    let idx = |name: &str| {
        let i = m.space.index(name).unwrap();
        m.globals.iter().position(|g| g.param == i).unwrap()
    };
    let (kb, gm, gs) = (idx("nobs_b"), idx("gmean"), idx("gsig"));
    let toys = m.toys(&p, 7, 0..4000).unwrap();
    let column = |j: usize| toys.iter().map(|t| t.aux[j]).collect::<Vec<f64>>();
    let moments = |v: &[f64]| {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        (
            mean,
            v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0),
        )
    };
    let counts = column(kb);
    assert!(
        counts.iter().all(|c| c.fract() == 0.0),
        "Poisson draws are counts"
    );
    let (mk, vk) = moments(&counts);
    // Mean within 4 standard errors; variance λ within 4 of its standard errors (≈ λ√(2/n)).
    assert!((mk - lam).abs() < 4.0 * (lam / 4000.0).sqrt(), "{mk}");
    assert!(
        (vk - lam).abs() < 4.0 * lam * (2.0f64 / 4000.0).sqrt(),
        "{vk}"
    );
    let (x0, x1) = (column(gm), column(gs));
    let ((m0, v0), (m1, v1)) = (moments(&x0), moments(&x1));
    assert!((m0 - 91.4).abs() < 4.0 * (0.25f64 / 4000.0).sqrt(), "{m0}");
    assert!((m1 - 2.3).abs() < 4.0 * (0.04f64 / 4000.0).sqrt(), "{m1}");
    assert!(
        (v0 / 0.25 - 1.0).abs() < 0.1 && (v1 / 0.04 - 1.0).abs() < 0.1,
        "{v0} {v1}"
    );
    let cov = x0
        .iter()
        .zip(&x1)
        .map(|(a, b)| (a - m0) * (b - m1))
        .sum::<f64>()
        / 3999.0;
    let rho = cov / (v0 * v1).sqrt();
    assert!(
        (rho - 0.05 / (0.25f64 * 0.04).sqrt()).abs() < 0.05,
        "ρ = {rho}"
    );
    let asimov = m.asimov(&p).unwrap();
    assert_eq!(asimov.aux[kb], lam);
    assert_eq!((asimov.aux[gm], asimov.aux[gs]), (91.4, 2.3));
}

/// A multivariate normal's covariance that is not square, not symmetric or not positive
/// definite, and one over the data's observables, are errors naming the place.
#[test]
fn bad_multivariate_normals_are_named() {
    let doc = fixture_doc("constrained_pois_mvn.json");
    let with = |f: &dyn Fn(&mut Value)| {
        let mut d = doc.clone();
        for x in d["distributions"].as_array_mut().unwrap() {
            if x["name"] == "mvn" {
                f(x);
            }
        }
        open(&d, &Choice::default()).unwrap_err().to_string()
    };
    let e = with(&|x| x["covariances"] = serde_json::json!([[0.25, 0.05]]));
    assert!(e.contains("covariances") && e.contains("2 rows"), "{e}");
    let e = with(&|x| x["covariances"] = serde_json::json!([[0.25, 0.05], [0.06, 0.04]]));
    assert!(
        e.contains("covariances[1][0]") && e.contains("not symmetric"),
        "{e}"
    );
    let e = with(&|x| x["covariances"] = serde_json::json!([[0.25, 0.5], [0.5, 0.04]]));
    assert!(e.contains("not positive definite"), "{e}");
    let e = with(&|x| x["mean"] = serde_json::json!(["mean"]));
    assert!(e.contains("mvn") && e.contains("mean"), "{e}");
    let e = with(&|x| x["x"] = serde_json::json!(["x", "gsig"]));
    assert!(e.contains("observable of the data"), "{e}");
}

/// `doc` with observable `name`'s domain (in the domains and the first dataset's axes) narrowed
/// to [lo, hi] and the events outside dropped; the events kept.
fn narrow_domain(doc: &mut Value, name: &str, lo: f64, hi: f64) -> Vec<Value> {
    for d in doc["domains"].as_array_mut().unwrap() {
        for a in d["axes"].as_array_mut().unwrap() {
            if a["name"] == name {
                a["min"] = lo.into();
                a["max"] = hi.into();
            }
        }
    }
    let data = &mut doc["data"][0];
    let k = data["axes"]
        .as_array()
        .unwrap()
        .iter()
        .position(|a| a["name"] == name)
        .unwrap();
    data["axes"][k]["min"] = lo.into();
    data["axes"][k]["max"] = hi.into();
    let kept: Vec<Value> = data["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| (lo..=hi).contains(&e[k].as_f64().unwrap()))
        .cloned()
        .collect();
    data["entries"] = Value::Array(kept.clone());
    kept
}

/// A histogram template (as ROOT 6.40 writes RooHistPdf, bins of different widths) on a
/// domain narrower than its edges: −ln L against the closed form (each bin's content spread
/// over its width, normalised over the bins' overlap with the domain; the Gaussian by erf);
/// toys draw inside the domain; malformed histograms are named.
#[test]
fn histogram_templates() {
    let mut doc = fixture_doc("histogram.json");
    let (lo, hi) = (0.5, 8.0);
    let kept = narrow_domain(&mut doc, "x", lo, hi);
    let xs: Vec<f64> = kept.iter().map(|e| e[0].as_f64().unwrap()).collect();
    let mut m = open(&doc, &Choice::default()).unwrap();
    let p = m.space.init.clone();
    let (f, mean, sigma) = (
        p[m.space.index("f").unwrap()],
        p[m.space.index("mean").unwrap()],
        p[m.space.index("sigma").unwrap()],
    );
    let edges = [0.0, 1.0, 3.0, 6.0, 10.0];
    let contents = [5.0, 20.0, 30.0, 12.0];
    let dens = |b: usize| contents[b] / (edges[b + 1] - edges[b]);
    let mass: f64 = (0..4)
        .map(|b| dens(b) * (f64::min(edges[b + 1], hi) - f64::max(edges[b], lo)).max(0.0))
        .sum();
    let cdf = |x: f64| 0.5 * (1.0 + libm::erf((x - mean) / (sigma * std::f64::consts::SQRT_2)));
    let gmass = cdf(hi) - cdf(lo);
    let want: f64 = xs
        .iter()
        .map(|&x| {
            let b = edges.iter().rposition(|&e| e <= x).unwrap().min(3);
            let g = (-0.5 * ((x - mean) / sigma).powi(2)).exp()
                / (sigma * (2.0 * std::f64::consts::PI).sqrt())
                / gmass;
            -(f * g + (1.0 - f) * dens(b) / mass).ln()
        })
        .sum();
    let got = m.nll(&p, &m.observed_dataset()).unwrap();
    assert!((got - want).abs() < 1e-10 * want.abs(), "{got} vs {want}");
    let toys = m.toys(&p, 1, 0..3).unwrap();
    for t in &toys {
        let x = &t.events.as_ref().unwrap().channels[0].columns[0];
        assert_eq!(x.len(), xs.len());
        assert!(x.iter().all(|v| (lo..=hi).contains(v)));
    }

    // A bin narrower than the sampler's default grid, holding half the template's mass: toys
    // put their share of events there (the grid is refined to the narrowest bin).
    let mut narrow = fixture_doc("histogram.json");
    for x in narrow["distributions"].as_array_mut().unwrap() {
        if x["type"] == "histogram_dist" {
            let mut contents = vec![1.0; 8192];
            contents[6001] = 8191.0;
            x["data"] = serde_json::json!({
                "axes": [{"name": "x", "min": 0.0, "max": 10.0, "nbins": 8192}],
                "contents": contents,
            });
        }
    }
    let mut m = open(&narrow, &Choice::default()).unwrap();
    let p = m.space.init.clone();
    let f = p[m.space.index("f").unwrap()];
    let (b0, b1) = (6001.0 * 10.0 / 8192.0, 6002.0 * 10.0 / 8192.0);
    let toys = m.toys(&p, 5, 0..5).unwrap();
    let (mut inside, mut all) = (0usize, 0usize);
    for t in &toys {
        let x = &t.events.as_ref().unwrap().channels[0].columns[0];
        inside += x.iter().filter(|&&v| v >= b0 && v < b1).count();
        all += x.len();
    }
    let share = inside as f64 / all as f64;
    let want = (1.0 - f) * 0.5;
    let se = (want * (1.0 - want) / all as f64).sqrt();
    assert!(
        (share - want).abs() < 4.0 * se,
        "{share} of the events in the narrow bin, not {want}"
    );

    let bad = |f: &dyn Fn(&mut Value)| {
        let mut d = fixture_doc("histogram.json");
        for x in d["distributions"].as_array_mut().unwrap() {
            if x["type"] == "histogram_dist" {
                f(x);
            }
        }
        open(&d, &Choice::default()).unwrap_err().to_string()
    };
    let e = bad(&|h| h["data"]["contents"] = serde_json::json!([1, 2, 3]));
    assert!(
        e.contains("data.contents") && e.contains("4 numbers"),
        "{e}"
    );
    let e = bad(&|h| h["data"]["contents"][2] = serde_json::json!(-1.0));
    assert!(e.contains("contents[2]"), "{e}");
    let e = bad(&|h| h["data"]["axes"][0]["edges"] = serde_json::json!([0, 1, 1, 6, 10]));
    assert!(e.contains("edges") && e.contains("increasing"), "{e}");
    let e = bad(&|h| h["data"]["axes"][0]["name"] = "y".into());
    assert!(e.contains("not an observable"), "{e}");
    let e = bad(&|h| {
        let a = h["data"]["axes"][0].clone();
        h["data"]["axes"] = serde_json::json!([a.clone(), a]);
    });
    assert!(e.contains("second axis of the same observable"), "{e}");
    let e = bad(&|h| h["data"]["contents"] = serde_json::json!([0, 0, 0, 0]));
    assert!(e.contains("no content"), "{e}");
}

/// A histogram over two observables (as ROOT 6.40 writes a two-dimensional RooHistPdf: the
/// contents with the last axis fastest) on a box narrower than its edges in y: −ln L against
/// the closed form (each bin's content spread over its box, normalised over the boxes' overlap
/// with the domain); no gradient through the template; toys draw inside the domain with the
/// template's share in each bin; malformed histograms named.
#[test]
fn histograms_over_two_observables() {
    let mut doc = fixture_doc("histogram2d.json");
    let (ylo, yhi) = (0.5, 4.5);
    let kept = narrow_domain(&mut doc, "y", ylo, yhi);
    let yaxis = doc["data"][0]["axes"]
        .as_array()
        .unwrap()
        .iter()
        .position(|a| a["name"] == "y")
        .unwrap();
    let events: Vec<(f64, f64)> = kept
        .iter()
        .map(|e| (e[1 - yaxis].as_f64().unwrap(), e[yaxis].as_f64().unwrap()))
        .collect();
    let mut m = open(&doc, &Choice::default()).unwrap();
    let p = m.space.init.clone();
    let v = |n: &str| p[m.space.index(n).unwrap()];
    let (f, mx, sx, my, sy) = (v("f"), v("mx"), v("sx"), v("my"), v("sy"));
    let xe = [0.0, 1.0, 3.0, 6.0, 10.0];
    let ye = [0.0, 2.0, 3.5, 5.0];
    let c = [
        [5.0, 1.0, 0.5],
        [20.0, 8.0, 2.0],
        [30.0, 25.0, 4.0],
        [12.0, 3.0, 9.0],
    ];
    let dens = |i: usize, j: usize| c[i][j] / ((xe[i + 1] - xe[i]) * (ye[j + 1] - ye[j]));
    let mut mass = 0.0;
    for i in 0..4 {
        for j in 0..3 {
            let overlap = (f64::min(ye[j + 1], yhi) - f64::max(ye[j], ylo)).max(0.0);
            mass += dens(i, j) * (xe[i + 1] - xe[i]) * overlap;
        }
    }
    let gauss = |x: f64, m: f64, s: f64, lo: f64, hi: f64| {
        let cdf = |t: f64| 0.5 * (1.0 + libm::erf((t - m) / (s * std::f64::consts::SQRT_2)));
        (-0.5 * ((x - m) / s).powi(2)).exp()
            / (s * (2.0 * std::f64::consts::PI).sqrt())
            / (cdf(hi) - cdf(lo))
    };
    let bin = |e: &[f64], x: f64| e.iter().rposition(|&b| b <= x).unwrap().min(e.len() - 2);
    let want: f64 = events
        .iter()
        .map(|&(x, y)| {
            let s = gauss(x, mx, sx, 0.0, 10.0) * gauss(y, my, sy, ylo, yhi);
            -(f * s + (1.0 - f) * dens(bin(&xe, x), bin(&ye, y)) / mass).ln()
        })
        .sum();
    let data = m.observed_dataset();
    let got = m.nll(&p, &data).unwrap();
    assert!((got - want).abs() < 1e-10 * want.abs(), "{got} vs {want}");
    let mut g = vec![0.0; p.len()];
    m.nll_grad(&p, &data, &mut g).unwrap();
    for (k, n) in m.space.names.clone().iter().enumerate() {
        let h = 1e-6 * p[k].abs().max(1.0);
        let (mut up, mut dn) = (p.clone(), p.clone());
        up[k] += h;
        dn[k] -= h;
        let fd = (m.nll(&up, &data).unwrap() - m.nll(&dn, &data).unwrap()) / (2.0 * h);
        assert!(
            (g[k] - fd).abs() < 1e-5 * fd.abs().max(1.0),
            "∂/∂{n}: {} vs {fd}",
            g[k]
        );
    }
    // Toys at f = 0: the template alone; each bin's share of the events as its mass says.
    let mut q = p.clone();
    q[m.space.index("f").unwrap()] = 0.0;
    let toys = m.toys(&q, 3, 0..20).unwrap();
    let mut counts = [[0usize; 3]; 4];
    let mut all = 0usize;
    for t in &toys {
        let cols = &t.events.as_ref().unwrap().channels[0].columns;
        let (xs, ys) = (&cols[1 - yaxis], &cols[yaxis]);
        for (&x, &y) in xs.iter().zip(ys) {
            assert!((0.0..=10.0).contains(&x) && (ylo..=yhi).contains(&y));
            counts[bin(&xe, x)][bin(&ye, y)] += 1;
            all += 1;
        }
    }
    for i in 0..4 {
        for j in 0..3 {
            let overlap = (f64::min(ye[j + 1], yhi) - f64::max(ye[j], ylo)).max(0.0);
            let want = dens(i, j) * (xe[i + 1] - xe[i]) * overlap / mass;
            let share = counts[i][j] as f64 / all as f64;
            let se = (want * (1.0 - want) / all as f64).sqrt();
            assert!(
                (share - want).abs() < 4.0 * se + 1e-12,
                "bin ({i}, {j}): {share} vs {want}"
            );
        }
    }
    let bad = |f: &dyn Fn(&mut Value)| {
        let mut d = fixture_doc("histogram2d.json");
        for x in d["distributions"].as_array_mut().unwrap() {
            if x["type"] == "histogram_dist" {
                f(x);
            }
        }
        open(&d, &Choice::default()).unwrap_err().to_string()
    };
    let e = bad(&|h| h["data"]["contents"] = serde_json::json!([1, 2, 3, 4]));
    assert!(
        e.contains("data.contents") && e.contains("12 numbers"),
        "{e}"
    );
    let e = bad(&|h| h["data"]["axes"][1]["name"] = "z".into());
    assert!(
        e.contains("axes[1].name") && e.contains("not an observable"),
        "{e}"
    );
    let e = bad(&|h| {
        h["data"]["axes"][0] = serde_json::json!({"name": "x", "min": 0, "max": 10, "nbins": 400});
        h["data"]["axes"][1] = serde_json::json!({"name": "y", "min": 0, "max": 5, "nbins": 400});
    });
    assert!(e.contains("more than 100000 bins"), "{e}");
}

/// A generic distribution whose expression is large (here 2 000 terms) is normalised on as
/// many quadrature pieces as the node budget allows — the graph stays within it rather than
/// growing to tens of millions of nodes — and the accuracy reached is said.
#[test]
fn large_generic_expressions_stay_within_the_quadrature_budget() {
    let mut doc = fixture_doc("generic.json");
    let terms: Vec<String> = (0..2000).map(|k| format!("{}e-6*x*b", k % 7 + 1)).collect();
    doc["distributions"][0]["expression"] =
        format!("exp(-a*x)*(1+b*x*x) + {}", terms.join(" + ")).into();
    let m = open(&doc, &Choice::default()).unwrap();
    assert!(
        m.graph.len() < histfit_unbinned::pdf::QUADRATURE_NODES + 50_000,
        "{} nodes",
        m.graph.len()
    );
    let v = m.clone().nll(&m.space.init, &m.observed_dataset()).unwrap();
    assert!(v.is_finite());
}

/// A Poisson distribution over an observable of the data (which would need a normalisation over
/// the domain histfit does not build) is refused, naming the observable.
#[test]
fn a_poisson_over_events_is_refused() {
    let mut doc = fixture_doc("histogram.json");
    for x in doc["distributions"].as_array_mut().unwrap() {
        if x["type"] == "histogram_dist" {
            *x = serde_json::json!({"name": "bkg", "type": "poisson_dist", "x": "x", "mean": "f"});
        }
    }
    let e = open(&doc, &Choice::default()).unwrap_err().to_string();
    assert!(
        e.contains("observable of the data") && e.contains("Poisson"),
        "{e}"
    );
}

/// HS3's generalised normal as a constraint (α = 0.05, β = 8 about c): toys draw its global
/// observable from it — the mean, the variance α² Γ(3/β)/Γ(1/β) and the share within α of the
/// mean, P(1/β, 1), each within 4 standard errors over 4 000 toys — and the Asimov dataset sets
/// it to the mean. A `rate_extended_dist` over a distribution that is already extended is refused.
#[test]
fn generalized_normal_constraints_and_rate_extended_distributions() {
    let doc = fixture_doc("generalized_normal.json");
    let mut m = open(&doc, &Choice::default()).unwrap();
    let g = m.space.index("c_obs").unwrap();
    let k = m.globals.iter().position(|x| x.param == g).unwrap();
    let p = m.space.init.clone();
    let c = p[m.space.index("c").unwrap()];
    let toys = m.toys(&p, 11, 0..4000).unwrap();
    let draws: Vec<f64> = toys.iter().map(|t| t.aux[k]).collect();
    let n = draws.len() as f64;
    let mean = draws.iter().sum::<f64>() / n;
    let var = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let (alpha, beta) = (0.05_f64, 8.0_f64);
    let gamma = |x: f64| libm::tgamma(x);
    let v = alpha * alpha * gamma(3.0 / beta) / gamma(1.0 / beta);
    let kurtosis = gamma(5.0 / beta) * gamma(1.0 / beta) / gamma(3.0 / beta).powi(2);
    assert!((mean - c).abs() < 4.0 * (v / n).sqrt(), "mean {mean}");
    assert!(
        (var - v).abs() < 4.0 * v * ((kurtosis - 1.0) / n).sqrt(),
        "variance {var} against {v}"
    );
    let inside = draws.iter().filter(|x| (*x - c).abs() < alpha).count() as f64 / n;
    let share = histfit_unbinned::graph::gamma_p(1.0 / beta, 1.0).0;
    assert!(
        (inside - share).abs() < 4.0 * (share * (1.0 - share) / n).sqrt(),
        "{inside} within α against {share}"
    );
    assert_eq!(m.asimov_globals(&p)[k], c);
    // Its width is the constraint's standard deviation: c is a constrained nuisance parameter.
    let ci = m.space.index("c").unwrap();
    let (centre, width) = m.space.priors[ci].centre_width().unwrap();
    assert!(
        centre == 0.3 && (width - v.sqrt()).abs() < 1e-14,
        "{centre} ± {width}"
    );
    // ROOT's importer's keys (pdf, norm) name the same distribution.
    let mut root_keys = doc.clone();
    for d in root_keys["distributions"].as_array_mut().unwrap() {
        if d["type"] == "rate_extended_dist" {
            let o = d.as_object_mut().unwrap();
            let (dist, rate) = (o.remove("dist").unwrap(), o.remove("rate").unwrap());
            o.insert("pdf".into(), dist);
            o.insert("norm".into(), rate);
        }
    }
    let mut r = open(&root_keys, &Choice::default()).unwrap();
    assert_eq!(
        r.nll(&p, &r.observed_dataset()).unwrap(),
        m.nll(&p, &m.observed_dataset()).unwrap()
    );

    let mut twice = doc.clone();
    for d in twice["distributions"].as_array_mut().unwrap() {
        if d["name"] == "shape" {
            d["coefficients"] = json!(["n_sig", "n_bkg"]);
            d["extended"] = json!(true);
        }
    }
    let pars = twice["parameter_points"][0]["parameters"]
        .as_array_mut()
        .unwrap();
    pars.push(json!({"name": "n_sig", "value": 900.0}));
    pars.push(json!({"name": "n_bkg", "value": 2100.0}));
    let e = open(&twice, &Choice::default()).unwrap_err().to_string();
    assert!(
        e.contains("\"extended\"") && e.contains("is itself extended"),
        "{e}"
    );
}

/// Simulated events with per-event weight systematics (`histfit_template_dist`, the fixture of
/// `scripts/reference/template_weight_sys.py`): the gradient against central differences of
/// −ln L with code 0 on either side and code 4p inside and outside ±1; toys and the Asimov
/// dataset drawn from the template; each malformed part named.
#[test]
fn templates_with_weight_systematics() {
    let doc = fixture_doc("template_weight_sys.json");
    let mut m = open(&doc, &Choice::default()).unwrap();
    let data = m.observed_dataset();
    let names = m.space.names.clone();
    let init = m.space.init.clone();
    let at = |vals: &[(&str, f64)]| {
        let mut p = init.clone();
        for (n, v) in vals {
            p[names.iter().position(|m| m == n).unwrap()] = *v;
        }
        p
    };
    // (Further out, bins where the variation falls below 20 % of the nominal weight go negative.)
    for (jes, eff) in [(0.4, 0.7), (-0.6, -1.3), (1.15, 0.2), (-1.15, 2.5)] {
        let v = at(&[("alpha_jes", jes), ("alpha_eff", eff), ("mu", 1.2)]);
        let mut grad = vec![0.0; v.len()];
        m.nll_grad(&v, &data, &mut grad).unwrap();
        for k in 0..v.len() {
            if m.space.fixed[k] {
                continue;
            }
            let h = 1e-6 * v[k].abs().max(1e-2);
            let (mut up, mut dn) = (v.clone(), v.clone());
            up[k] += h;
            dn[k] -= h;
            let fd = (m.nll(&up, &data).unwrap() - m.nll(&dn, &data).unwrap()) / (2.0 * h);
            assert!(
                (fd - grad[k]).abs() < 1e-5 * fd.abs().max(1.0),
                "({jes}, {eff}) {}: {} vs {fd}",
                names[k],
                grad[k]
            );
        }
    }
    // Far out, bins the extrapolation empties hold 0: −ln L is +∞ or finite, never NaN.
    for jes in [-4.0, 3.0, 4.5] {
        let v = m.nll(&at(&[("alpha_jes", jes)]), &data).unwrap();
        assert!(v.is_finite() || v == f64::INFINITY, "α = {jes}: {v}");
    }
    // Code 0 puts a kink at 0: the fit knows (code 4p has none).
    let kinked: Vec<&str> = (0..names.len())
        .filter(|&i| m.space.kinked[i])
        .map(|i| names[i].as_str())
        .collect();
    assert_eq!(kinked, ["alpha_jes"]);
    // The systematics' parameters are constrained nuisance parameters (pulls, rankings).
    for n in ["alpha_jes", "alpha_eff"] {
        let i = m.space.index(n).unwrap();
        assert_eq!(
            m.space.priors[i],
            histfit_seam::Prior::Gauss {
                centre: 0.0,
                width: 1.0
            }
        );
    }
    let p = m.space.init.clone();
    let toys = m.toys(&p, 3, 0..5).unwrap();
    let events =
        |d: &histfit_seam::Dataset| d.events.as_ref().unwrap().channels[0].sum_of_weights();
    // ≈ 285 signal (μ = 1 × the simulated total) and 1 200 background events each.
    assert!(toys.iter().all(|t| (events(t) - 1485.0).abs() < 200.0));
    let asimov = m.asimov(&p).unwrap();
    assert!(
        (events(&asimov) - 1485.0).abs() < 15.0,
        "{}",
        events(&asimov)
    );
    assert!(m.nll(&p, &asimov).unwrap().is_finite());

    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut d = doc.clone();
        edit(&mut d);
        open(&d, &Choice::default()).unwrap_err().to_string()
    };
    let signal = doc["distributions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|x| x["name"] == "signal")
        .unwrap();
    let edit_signal = |f: &dyn Fn(&mut Value)| broken(&|d| f(&mut d["distributions"][signal]));
    let e = edit_signal(&|s| {
        s.as_object_mut().unwrap().remove("binning");
    });
    assert!(
        e.contains("\"signal\"") && e.contains("missing \"binning\""),
        "{e}"
    );
    let e = edit_signal(&|s| s["binning"] = json!({"edges": [100.0, 120.0, 140.0]}));
    assert!(
        e.contains("binning") && e.contains("must span the domain"),
        "{e}"
    );
    let e = edit_signal(&|s| s["weight_systematics"][0]["up"] = json!("w_jes_upp"));
    assert!(
        e.contains("weight_systematics[0].up") && e.contains("no axis \"w_jes_upp\""),
        "{e}"
    );
    let e = edit_signal(&|s| s["weight_systematics"][1]["interpolation"] = json!("code1"));
    assert!(e.contains("interpolation") && e.contains("code4p"), "{e}");
    let e = edit_signal(&|s| s["weight"] = json!("w_neg"));
    assert!(e.contains("no axis \"w_neg\""), "{e}");
    let e = broken(&|d| {
        for row in d["data"][1]["entries"].as_array_mut().unwrap() {
            row[1] = json!(-row[1].as_f64().unwrap());
        }
    });
    assert!(
        e.contains("must not be negative") && e.contains("bin"),
        "{e}"
    );
    let e = broken(&|d| d["functions"][0]["template"] = json!("background"));
    assert!(e.contains("not a histfit_template_dist"), "{e}");
}

/// A constraint two channels' products name (as ROOT writes a luminosity shared by the
/// channels of a RooSimultaneous) is one term of −ln L, as RooFit counts it: the likelihood
/// equals the one whose constraint is named once, as an auxiliary distribution.
#[test]
fn a_constraint_two_channels_name_is_counted_once() {
    let gauss = |name: &str, x: &str, mean: &str| json!({"type": "gaussian_dist", "name": name, "x": x, "mean": mean, "sigma": "width"});
    let data = |name: &str, x: &str, xs: &[f64]| {
        json!({"type": "unbinned", "name": name, "axes": [{"name": x, "min": -5.0, "max": 5.0}],
               "entries": xs.iter().map(|v| vec![*v]).collect::<Vec<_>>()})
    };
    let params = json!([{"name": "parameter_points", "parameters": [
        {"name": "m1", "value": 0.1}, {"name": "m2", "value": -0.2}, {"name": "width", "value": 1.0},
        {"name": "nom_width", "value": 1.0, "const": true}]}]);
    let constraint = json!({"type": "gaussian_dist", "name": "c", "x": "nom_width", "mean": "width", "sigma": 0.1});
    let base = |dists: Vec<Value>, pdfs: [&str; 2], aux: Vec<&str>| {
        json!({
            "distributions": dists,
            "data": [data("d1", "x1", &[0.3, -0.4, 1.1, 0.2]), data("d2", "x2", &[-0.5, 0.9, 0.0])],
            "likelihoods": [{"name": "L", "distributions": pdfs, "data": ["d1", "d2"], "aux_distributions": aux}],
            "parameter_points": params,
        })
    };
    let shared = base(
        vec![
            gauss("g1", "x1", "m1"),
            gauss("g2", "x2", "m2"),
            constraint.clone(),
            json!({"type": "product_dist", "name": "p1", "factors": ["g1", "c"]}),
            json!({"type": "product_dist", "name": "p2", "factors": ["g2", "c"]}),
        ],
        ["p1", "p2"],
        vec!["c"],
    );
    let once = base(
        vec![gauss("g1", "x1", "m1"), gauss("g2", "x2", "m2"), constraint],
        ["g1", "g2"],
        vec!["c"],
    );
    let open = |doc: &Value| histfit_unbinned::open(doc, &Choice::default()).unwrap();
    let (mut a, mut b) = (open(&shared), open(&once));
    let sorted = |n: &[String]| {
        let mut n = n.to_vec();
        n.sort();
        n
    };
    assert_eq!(sorted(&a.space.names), sorted(&b.space.names));
    assert_eq!(a.globals.len(), 1, "one global observable");
    let (da, db) = (a.observed_dataset(), b.observed_dataset());
    for w in [1.0, 1.2, 0.85] {
        let values = [("m1", 0.1), ("m2", -0.2), ("width", w), ("nom_width", 1.0)];
        let (pa, pb) = (at(&a.space.names, &values), at(&b.space.names, &values));
        let (fa, fb) = (a.nll(&pa, &da).unwrap(), b.nll(&pb, &db).unwrap());
        assert!(
            (fa - fb).abs() <= 1e-12 * fb.abs(),
            "width {w}: {fa} against {fb}"
        );
    }
}

/// The smooth extensions (`histfit_spline_dist`, `histfit_kde_dist`): bad definitions are named,
/// a kernel estimate far narrower than its range is finite across it, and toys of the fixture
/// fitted back pull the yields right (300 toys: mean 0 and width 1 within 3 standard errors).
/// The Voigtian at width 0 is the Gaussian (its −ln L finite, as RooVoigtian's fallback).
#[test]
fn splines_and_kernel_density_estimates() {
    let doc = fixture_doc("smooth.json");
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut d = doc.clone();
        f(&mut d);
        open(&d, &Choice::default()).unwrap_err().to_string()
    };
    let cases: Vec<(String, &str)> = vec![
        (
            edit(&|d| d["distributions"][2]["knots"][3] = json!(75.0)),
            "distributions[2] (\"background\").knots: knots must increase",
        ),
        (
            edit(&|d| d["distributions"][2]["values"][1] = json!(-1.0)),
            "values[1]: -1: a density is not negative",
        ),
        (
            edit(&|d| {
                d["distributions"][2]["values"] = json!([0.0, 0.0, 9.0, 0.0, 0.0, 0.0, 0.0]);
                d["distributions"][2]["interpolation"] = json!("natural");
            }),
            "the natural spline falls to",
        ),
        (
            edit(&|d| d["distributions"][2]["values"].as_array_mut().unwrap().pop().map(drop).unwrap_or(())),
            "7 knots and 6 values",
        ),
        (
            edit(&|d| d["distributions"][1]["bandwidth"] = json!(-2)),
            "distributions[1] (\"signal\").bandwidth: expected a positive number, \"silverman\" or \"scott\"",
        ),
        (
            edit(&|d| d["distributions"][1]["events"] = json!("nowhere")),
            "distributions[1] (\"signal\").events",
        ),
    ];
    for (e, needle) in cases {
        assert!(e.contains(needle), "{e}\n  lacks: {needle}");
    }
    // A bandwidth 120 times smaller than the range's reach from the sample: every kernel
    // underflows at its lower end, where the density's logarithm is still finite.
    let mut narrow = doc.clone();
    narrow["distributions"][1]["bandwidth"] = json!(0.2);
    let mut n = open(&narrow, &Choice::default()).unwrap();
    let p0 = n.space.init.clone();
    assert!(n.nll(&p0, &n.observed_dataset()).unwrap().is_finite());
    let mut m = open(&doc, &Choice::default()).unwrap();
    let options = histfit_infer::FitOptions {
        uncertainties: true,
        ..Default::default()
    };
    let data = m.observed_dataset();
    let gen = histfit_infer::fit(&mut m, &data, &options).unwrap().bestfit;
    let options = histfit_infer::FitOptions {
        starts: histfit_infer::Starts::Count(0),
        ..options
    };
    let ns = m.space.index("nsig").unwrap();
    let mut pulls = Vec::new();
    for toy in &m.toys(&gen, 5, 0..300).unwrap() {
        let r = histfit_infer::fit(&mut m, toy, &options).unwrap();
        assert!(r.converged, "{}", r.reason);
        pulls.push((r.bestfit[ns] - gen[ns]) / r.uncertainties.as_ref().unwrap()[ns]);
    }
    let n = pulls.len() as f64;
    let mean = pulls.iter().sum::<f64>() / n;
    let width = (pulls.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    assert!(mean.abs() < 3.0 / n.sqrt(), "pull mean {mean}");
    assert!(
        (width - 1.0).abs() < 3.0 / (2.0 * n).sqrt(),
        "pull width {width}"
    );
}

/// A Gaussian in x whose mean is a function of another observable y — `polynomial` (RooPolyVar,
/// as ROOT writes rf301) or the expression of a `generic` function (the HS3 test suite's name
/// for `generic_function`) — is a density in x at each event's y: normalised over x's range,
/// conditional on y (RooFit instead normalises over every observable of the dataset the density
/// depends on, x and y here; README, "Normalisation"). Against the formula written out, its
/// normalisation by Simpson's rule.
#[test]
fn functions_of_another_observable_give_conditional_densities() {
    let events: Vec<Value> = (0..400)
        .map(|i| {
            let y = -5.0 + 10.0 * ((i as f64 * 0.618_033_988_749_895) % 1.0);
            let x = -5.0 + 10.0 * ((i as f64 * 0.754_877_666_246_692_8) % 1.0);
            json!([y, x])
        })
        .collect();
    let (a0, a1, sigma) = (-0.7, 0.3, 1.2);
    for mean in [
        json!({"name": "m", "type": "polynomial", "x": "y", "coefficients": ["a0", "a1"]}),
        json!({"name": "m", "type": "generic", "expression": "a0 + a1*y"}),
    ] {
        let doc = json!({
            "metadata": {"hs3_version": "0.2"},
            "distributions": [{"name": "g", "type": "gaussian_dist", "x": "x", "mean": "m", "sigma": "sigma"}],
            "functions": [mean],
            "data": [{"name": "d", "type": "unbinned",
                      "axes": [{"name": "y", "min": -5.0, "max": 5.0}, {"name": "x", "min": -5.0, "max": 5.0}],
                      "entries": events}],
            "domains": [{"name": "dom", "type": "product_domain", "axes": [
                {"name": "a0", "min": -5.0, "max": 5.0}, {"name": "a1", "min": -1.0, "max": 1.0},
                {"name": "sigma", "min": 0.1, "max": 3.0}]}],
            "parameter_points": [{"name": "p", "parameters": [
                {"name": "a0", "value": a0}, {"name": "a1", "value": a1}, {"name": "sigma", "value": sigma}]}]
        });
        let mut m = open(&doc, &Choice::default()).unwrap();
        let names = m.space.names.clone();
        let v = at(&names, &[("a0", a0), ("a1", a1), ("sigma", sigma)]);
        let got = m.nll(&v, &m.observed_dataset()).unwrap();
        // ∫ over [−5, 5] of e^(−(x − μ)²/2σ²) by Simpson's rule on 20 000 intervals.
        let z = |mu: f64| {
            let (n, h) = (20_000, 10.0 / 20_000.0);
            let f = |x: f64| (-0.5 * ((x - mu) / sigma).powi(2)).exp();
            let inner: f64 = (1..n)
                .map(|k| f(-5.0 + k as f64 * h) * if k % 2 == 1 { 4.0 } else { 2.0 })
                .sum();
            (f(-5.0) + f(5.0) + inner) * h / 3.0
        };
        let want: f64 = events
            .iter()
            .map(|e| {
                let (y, x) = (e[0].as_f64().unwrap(), e[1].as_f64().unwrap());
                let mu = a0 + a1 * y;
                0.5 * ((x - mu) / sigma).powi(2) + z(mu).ln()
            })
            .sum();
        assert!(((got - want) / want).abs() < 1e-11, "{got} vs {want}");
    }
}

/// A factor of a product over an axis of the data is a density over the events even where it
/// is flat there — a constant `polynomial_dist` over z (RooFit's rf311): N ln(1/width) in −ln L
/// (it was taken for a constraint, and refused for want of a global observable z).
#[test]
fn a_flat_factor_over_a_data_axis_is_a_density() {
    let events: Vec<Value> = (0..50)
        .map(|i| {
            json!([
                -4.0 + 8.0 * ((i as f64 * 0.618_033_988_749_895) % 1.0),
                0.1 * i as f64 - 2.0
            ])
        })
        .collect();
    let doc = json!({
        "metadata": {"hs3_version": "0.2"},
        "distributions": [
            {"name": "p", "type": "product_dist", "factors": ["g", "flat"]},
            {"name": "g", "type": "gaussian_dist", "x": "x", "mean": "mu", "sigma": 1.5},
            {"name": "flat", "type": "polynomial_dist", "x": "z", "coefficients": [1.0]}
        ],
        "data": [{"name": "d", "type": "unbinned",
                  "axes": [{"name": "z", "min": -5.0, "max": 5.0}, {"name": "x", "min": -4.0, "max": 6.0}],
                  "entries": events}],
        "domains": [{"name": "dom", "type": "product_domain", "axes": [{"name": "mu", "min": -3.0, "max": 3.0}]}],
        "parameter_points": [{"name": "p", "parameters": [{"name": "mu", "value": 0.4}]}]
    });
    let mut m = open(&doc, &Choice::default()).unwrap();
    let got = m.nll(&[0.4], &m.observed_dataset()).unwrap();
    // The Gaussian normalised over x in [−4, 6] by Simpson's rule; the flat factor 1/10.
    let (n, h) = (20_000, 10.0 / 20_000.0);
    let f = |x: f64| (-0.5 * ((x - 0.4) / 1.5f64).powi(2)).exp();
    let inner: f64 = (1..n)
        .map(|k| f(-4.0 + k as f64 * h) * if k % 2 == 1 { 4.0 } else { 2.0 })
        .sum();
    let z = (f(-4.0) + f(6.0) + inner) * h / 3.0;
    let want: f64 = events
        .iter()
        .map(|e| {
            let x = e[1].as_f64().unwrap();
            0.5 * ((x - 0.4) / 1.5).powi(2) + z.ln() + 10f64.ln()
        })
        .sum();
    assert!(((got - want) / want).abs() < 1e-11, "{got} vs {want}");
}

/// `efficiency_product_pdf_dist` (RooEffProd, as ROOT writes rf703): an exponential density in t
/// times the efficiency ½(erf((t − 1)/0.5) + 1), normalised again over t in [0, 5] — against
/// the formula, its normalisation by Simpson's rule, at two points.
#[test]
fn efficiency_products() {
    let ts: Vec<f64> = (0..300)
        .map(|i| 5.0 * ((i as f64 * 0.618_033_988_749_895) % 1.0))
        .collect();
    let doc = json!({
        "metadata": {"hs3_version": "0.2"},
        "distributions": [
            {"name": "modelEff", "type": "efficiency_product_pdf_dist", "pdf": "model", "eff": "eff"},
            {"name": "model", "type": "exponential_dist", "x": "t", "c": "c"}
        ],
        "functions": [{"name": "eff", "type": "generic_function", "expression": "0.5*(erf((t-1)/0.5)+1)"}],
        "data": [{"name": "d", "type": "unbinned", "axes": [{"name": "t", "min": 0.0, "max": 5.0}],
                  "entries": ts.iter().map(|t| json!([t])).collect::<Vec<_>>()}],
        "domains": [{"name": "dom", "type": "product_domain", "axes": [{"name": "c", "min": 0.1, "max": 4.0}]}],
        "parameter_points": [{"name": "p", "parameters": [{"name": "c", "value": 1.54}]}]
    });
    let mut m = open(&doc, &Choice::default()).unwrap();
    assert!(
        m.notes.iter().all(|n| !n.contains("quadrature")),
        "{:?}",
        m.notes
    );
    let data = m.observed_dataset();
    for c in [1.54, 0.9] {
        let got = m.nll(&[c], &data).unwrap();
        let shape = |t: f64| (-c * t).exp() * 0.5 * (libm::erf((t - 1.0) / 0.5) + 1.0);
        let (n, h) = (40_000, 5.0 / 40_000.0);
        let inner: f64 = (1..n)
            .map(|k| shape(k as f64 * h) * if k % 2 == 1 { 4.0 } else { 2.0 })
            .sum();
        let z = (shape(0.0) + shape(5.0) + inner) * h / 3.0;
        let want: f64 = ts.iter().map(|&t| z.ln() - shape(t).ln()).sum();
        assert!(
            ((got - want) / want).abs() < 1e-10,
            "c = {c}: {got} vs {want}"
        );
    }
    // The efficiency's observable must be the density's
    let mut other = doc.clone();
    other["functions"][0]["expression"] = json!("0.5*(erf((u-1)/0.5)+1)");
    other["data"][0]["axes"] =
        json!([{"name": "t", "min": 0.0, "max": 5.0}, {"name": "u", "min": 0.0, "max": 5.0}]);
    other["data"][0]["entries"] = json!([[1.0, 2.0], [2.0, 3.0]]);
    let e = open(&other, &Choice::default()).unwrap_err().to_string();
    assert!(
        e.contains("distributions[0] (\"modelEff\")") && e.contains("2 of the data's observables"),
        "{e}"
    );
}

/// A `polynomial` function without coefficients is refused, naming the place.
#[test]
fn a_polynomial_without_coefficients_is_refused() {
    for coefficients in [None, Some(json!([]))] {
        let mut f = json!({"name": "m", "type": "polynomial", "x": "y"});
        if let Some(c) = coefficients {
            f["coefficients"] = c;
        }
        let doc = json!({
            "metadata": {"hs3_version": "0.2"},
            "distributions": [{"name": "g", "type": "gaussian_dist", "x": "x", "mean": "m", "sigma": 1.0}],
            "functions": [f],
            "data": [{"name": "d", "type": "unbinned",
                      "axes": [{"name": "y", "min": -5.0, "max": 5.0}, {"name": "x", "min": -5.0, "max": 5.0}],
                      "entries": [[0.0, 1.0], [1.0, -1.0]]}]
        });
        let e = open(&doc, &Choice::default()).unwrap_err().to_string();
        assert!(
            e.contains("functions[0] (\"m\").coefficients")
                && e.contains("at least one coefficient"),
            "{e}"
        );
    }
}

/// A relativistic Breit–Wigner's channels that cannot be read are refused, naming the channel
/// and the rule; an event below the first channel's threshold (where the density is 0) is an
/// error at open, not an infinite −ln L in a fit.
#[test]
fn bad_breit_wigner_channels_are_named() {
    let doc = |channels: Value, lo: f64| {
        json!({
            "metadata": {"hs3_version": "0.2"},
            "distributions": [{"name": "bw", "type": "relativistic_breit_wigner_dist", "x": "x",
                               "mass": 0.775, "channels": channels}],
            "data": [{"name": "d", "type": "unbinned",
                      "axes": [{"name": "x", "min": lo, "max": 1.3}],
                      "entries": [[0.25], [0.7], [0.8]]}]
        })
    };
    for (channels, place, rule) in [
        (json!([]), "distributions[0] (\"bw\")", "no channels"),
        (json!({"Gamma": 0.1}), ".channels", "not a list"),
        (
            json!([{"Gamma": 0.1, "l": 7}]),
            ".channels[0].l",
            "an integer from 0 to 4",
        ),
        (
            json!([{"Gamma": 0.1, "l": 1.5}]),
            ".channels[0].l",
            "an integer from 0 to 4",
        ),
        (
            json!([{"Gamma": 0.1}, {"Gamma": 0.1, "m1": "mK"}]),
            ".channels[1].m1",
            "a number",
        ),
        (
            json!([{"Gamma": 0.1, "R": -1.0}]),
            ".channels[0].R",
            "a number ≥ 0",
        ),
        (json!([{"m1": 0.1}]), ".channels[0]", "missing \"Gamma\""),
        (json!([3]), ".channels[0]", "not an object"),
    ] {
        let e = open(&doc(channels.clone(), 0.2), &Choice::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(place) && e.contains(rule), "{channels}: {e}");
    }
    // Two pions: the event at 0.25 lies below the threshold 0.279.
    let pions = json!([{"Gamma": 0.15, "m1": 0.13957, "m2": 0.13957, "l": 1}]);
    let e = open(&doc(pions.clone(), 0.2), &Choice::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not finite at the initial parameters"), "{e}");
    // The same over a range above the threshold, without that event, opens.
    let mut above = doc(pions, 0.3);
    above["data"][0]["entries"] = json!([[0.7], [0.8]]);
    assert!(open(&above, &Choice::default()).is_ok());
}

/// A decay whose basis or resolution model cannot be read is refused, naming the place and the
/// rule.
#[test]
fn bad_decays_are_named() {
    let doc = |decay: Value, resolution: Value| {
        json!({
            "metadata": {"hs3_version": "0.2"},
            "distributions": [decay, resolution,
                              {"name": "g2", "type": "gauss_resolution_model", "x": "t", "mean": 0.0, "sigma": 2.0}],
            "data": [{"name": "d", "type": "unbinned",
                      "axes": [{"name": "t", "min": -5.0, "max": 5.0}],
                      "entries": [[0.5], [1.5], [-0.2]]}]
        })
    };
    let decay = |extra: Value| {
        let mut d = json!({"name": "dec", "type": "decay_dist", "t": "t", "tau": 1.2,
                           "resolutionModel": "res"});
        for (k, v) in extra.as_object().unwrap() {
            d[k] = v.clone();
        }
        d
    };
    let gauss = json!({"name": "res", "type": "gauss_resolution_model", "x": "t", "mean": 0.0, "sigma": 1.0});
    for (d, r, place, rule) in [
        (
            decay(json!({"decayType": 3})),
            gauss.clone(),
            ".decayType",
            "0 (single-sided)",
        ),
        (
            decay(json!({"resolutionModel": "nope"})),
            gauss.clone(),
            ".resolutionModel",
            "no resolution model named \"nope\"",
        ),
        (
            decay(json!({})),
            json!({"name": "res", "type": "gaussian_dist", "x": "t", "mean": 0.0, "sigma": 1.0}),
            "(\"res\").type",
            "not a resolution model",
        ),
        (
            decay(json!({})),
            json!({"name": "res", "type": "truth_model_function", "x": "u"}),
            "(\"res\").x",
            "the decay's time \"t\"",
        ),
        (
            decay(json!({})),
            json!({"name": "res", "type": "mixture_model", "summands": ["g2"], "coefficients": ["a", "b"]}),
            "(\"res\")",
            "1 summands and 2 coefficients",
        ),
        (
            decay(json!({})),
            json!({"name": "res", "type": "gauss_resolution_model", "x": "t", "mean": 0.0}),
            "(\"res\")",
            "missing \"sigma\"",
        ),
    ] {
        let e = open(&doc(d, r), &Choice::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(place) && e.contains(rule), "{place}: {e}");
    }
    // A resolution model named as the likelihood's density is refused as one.
    let mut as_density = doc(decay(json!({})), gauss.clone());
    as_density["likelihoods"] = json!([{"name": "L", "distributions": ["res"], "data": ["d"]}]);
    let e = open(&as_density, &Choice::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("is a resolution model, not a density"), "{e}");
    // The same document with its pieces right opens (a mixture of two Gaussians, one fraction).
    let ok = doc(
        decay(json!({"decayType": 1})),
        json!({"name": "res", "type": "mixture_model", "summands": ["g2", "g2"], "coefficients": [0.3]}),
    );
    assert!(open(&ok, &Choice::default()).is_ok());
}

/// Resolution models: a nested mixture with one weight each weighs its summands as RooAddModel
/// does (normalised), so it equals the flat mixture it stands for; nesting that doubles the
/// models at every level is refused once they pass 64; a double-sided decay far from its peak
/// (every term below e^x's range) keeps a finite −ln L.
#[test]
fn resolution_mixtures_nest_and_far_tails_stay_finite() {
    let doc = |res: Vec<Value>, tau: f64, decay_type: u32, events: Value| {
        let mut dists = vec![
            json!({"name": "dec", "type": "decay_dist", "t": "t", "tau": tau,
                                    "decayType": decay_type, "resolutionModel": "res"}),
        ];
        dists.extend(res);
        json!({
            "metadata": {"hs3_version": "0.2"},
            "distributions": dists,
            "data": [{"name": "d", "type": "unbinned",
                      "axes": [{"name": "t", "min": -10.0, "max": 10.0}], "entries": events}]
        })
    };
    let gauss = |name: &str, s: f64| json!({"name": name, "type": "gauss_resolution_model", "x": "t", "mean": 0.0, "sigma": s});
    let events = json!([[0.5], [1.5], [-0.2], [3.0]]);
    let nll = |d: Value| {
        let mut m = open(&d, &Choice::default()).unwrap();
        let data = m.observed_dataset();
        let init = m.space.init.clone();
        m.nll(&init, &data).unwrap()
    };
    let nested = doc(
        vec![
            json!({"name": "res", "type": "mixture_model", "summands": ["gA", "M"], "coefficients": [0.5]}),
            json!({"name": "M", "type": "mixture_model", "summands": ["gB", "gC"], "coefficients": [2.0, 2.0]}),
            gauss("gA", 0.5),
            gauss("gB", 1.0),
            gauss("gC", 2.0),
        ],
        1.2,
        0,
        events.clone(),
    );
    let flat = doc(
        vec![
            json!({"name": "res", "type": "mixture_model", "summands": ["gA", "gB", "gC"], "coefficients": [0.5, 0.25, 0.25]}),
            gauss("gA", 0.5),
            gauss("gB", 1.0),
            gauss("gC", 2.0),
        ],
        1.2,
        0,
        events.clone(),
    );
    let (a, b) = (nll(nested), nll(flat));
    assert!((a - b).abs() < 1e-12 * b.abs(), "{a} vs {b}");
    // A chain of mixtures each naming the next twice: 2^10 leaves.
    let mut chain: Vec<Value> = (0..10)
        .map(|k| {
            let next = if k == 9 { "g".to_string() } else { format!("m{}", k + 1) };
            let name = if k == 0 { "res".to_string() } else { format!("m{k}") };
            json!({"name": name, "type": "mixture_model", "summands": [next, next], "coefficients": [0.5]})
        })
        .collect();
    chain.push(gauss("g", 1.0));
    let e = open(&doc(chain, 1.2, 0, events), &Choice::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 64 resolution models"), "{e}");
    // Perfect resolution on a range beginning 30 τ past the peak: −ln L in closed form,
    // Σ [t/τ + ln τ − lo/τ + ln(1 − e^(−(hi − lo)/τ))].
    let ts = [6.1, 6.4, 7.0];
    let truth = json!({"name": "res", "type": "truth_model_function", "x": "t"});
    let mut far = doc(
        vec![truth],
        0.2,
        0,
        json!(ts.iter().map(|t| [t]).collect::<Vec<_>>()),
    );
    far["data"][0]["axes"][0]["min"] = json!(6.0);
    let (tau, lo, hi) = (0.2f64, 6.0, 10.0);
    let want: f64 = ts
        .iter()
        .map(|t| t / tau + tau.ln() - lo / tau + (-(-(hi - lo) / tau).exp()).ln_1p())
        .sum();
    let got = nll(far);
    assert!((got - want).abs() < 1e-12 * want.abs(), "{got} vs {want}");
    // τ = 0.01, σ = 0.02 and an event at t = 8: both sides' terms lie far below e^x's range.
    for decay_type in [0, 1, 2] {
        let far = doc(
            vec![gauss("res", 0.02)],
            0.01,
            decay_type,
            json!([[8.0], [0.01]]),
        );
        let v = nll(far);
        assert!(v.is_finite(), "decayType {decay_type}: {v}");
    }
}

/// The parameters of `m` as named in `values`, the others at the model's initial values.
fn point_of(m: &histfit_unbinned::UnbinnedModel, values: &Value) -> Vec<f64> {
    let mut p = m.space.init.clone();
    for (k, n) in m.space.names.iter().enumerate() {
        if let Some(v) = values.get(n).and_then(Value::as_f64) {
            p[k] = v;
        }
    }
    p
}

/// A hierarchical model (scripts/reference/hierarchical.py): four cells' measurements, their
/// scales under a shared prior N(s | g, w), the spread under a hyper-prior — the priors, the
/// likelihood's auxiliary distributions over the model's own parameters, are terms of the
/// likelihood: −ln L at two points equals SciPy's to 1e-10, the fit ends at iminuit's minimum.
#[test]
fn priors_over_parameters_are_terms_of_the_likelihood() {
    let reference = fixture_doc("hierarchical.scipy.json");
    let mut m = open(&fixture_doc("hierarchical.json"), &Choice::default()).unwrap();
    assert!(
        m.notes.iter().any(|n| n.contains("a prior on \"w\"")),
        "{:?}",
        m.notes
    );
    let data = m.observed_dataset();
    let points = [
        (m.space.init.clone(), "nll_at_initial"),
        (point_of(&m, &reference["point2"]), "nll_at_point2"),
    ];
    for (p, want) in points {
        let got = m.nll(&p, &data).unwrap();
        let want = reference[want].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-10 * want.abs(), "{got} vs {want}");
    }
    let options = histfit_infer::FitOptions {
        uncertainties: true,
        ..Default::default()
    };
    let r = histfit_infer::fit(&mut m, &data, &options).unwrap();
    let fit = &reference["fit"];
    assert!(r.converged);
    assert!(r.twice_nll <= 2.0 * fit["nll"].as_f64().unwrap() + 1e-6);
    let errors = r.uncertainties.as_ref().unwrap();
    for (k, n) in m.space.names.iter().enumerate() {
        if let Some(v) = fit[n.as_str()].as_f64() {
            let e = fit[format!("{n}_error")].as_f64().unwrap();
            assert!(
                (r.bestfit[k] - v).abs() < 0.01 * e,
                "{n}: {} vs {v}",
                r.bestfit[k]
            );
            assert!(
                (errors[k] / e - 1.0).abs() < 0.02,
                "{n}: error {} vs {e}",
                errors[k]
            );
        }
    }
}

/// `doc` with a Gaussian `name` over `x` (mean `mean`, width `w_sigma`) among its distributions
/// and its first likelihood's auxiliary distributions.
fn add_aux_gaussian(doc: &mut serde_json::Value, name: &str, x: &str, mean: &str) {
    doc["distributions"].as_array_mut().unwrap().push(
        json!({"name": name, "type": "gaussian_dist", "x": x, "mean": mean, "sigma": "w_sigma"}),
    );
    doc["likelihoods"][0]["aux_distributions"]
        .as_array_mut()
        .unwrap()
        .push(json!(name));
}

/// An auxiliary distribution over a free variable that nothing else uses is not a prior: it is
/// a global observable the file forgot to mark constant, and stays an error naming it.
#[test]
fn an_unused_free_observable_of_an_aux_distribution_is_an_error() {
    let mut doc = fixture_doc("hierarchical.json");
    add_aux_gaussian(&mut doc, "stray", "g_obs", "g");
    doc["parameter_points"][0]["parameters"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "g_obs", "value": 1.0}));
    let e = open(&doc, &Choice::default()).unwrap_err().to_string();
    assert!(
        e.contains("\"stray\"") && e.contains("\"g_obs\" is not a constant"),
        "{e}"
    );
    // Named by a distribution outside the likelihood only: still no prior.
    let mut other = doc.clone();
    other["distributions"].as_array_mut().unwrap().push(
        json!({"name": "elsewhere", "type": "gaussian_dist", "x": "x0", "mean": "g_obs",
                     "sigma": "w_sigma"}),
    );
    let e = open(&other, &Choice::default()).unwrap_err().to_string();
    assert!(e.contains("\"g_obs\" is not a constant"), "{e}");
    // Over an axis of the likelihood's data: no prior either.
    let mut axis = fixture_doc("hierarchical.json");
    add_aux_gaussian(&mut axis, "on_data", "x0", "g");
    let e = open(&axis, &Choice::default()).unwrap_err().to_string();
    assert!(e.contains("\"on_data\"") && e.contains("\"x0\""), "{e}");
}

/// The types of s50 refuse what they cannot read, naming the place and the rule: a power-law
/// sum over a range reaching 0 or with unpaired exponents, a weighted sum with too many
/// coefficients or over two observables, a convolution over something that is not an axis of
/// the data, in a function of the observable, or of an extended density.
#[test]
fn bad_sums_and_convolutions_are_named() {
    let doc = |dists: Value, functions: Value, lo: f64| {
        json!({
            "metadata": {"hs3_version": "0.2"},
            "distributions": dists,
            "functions": functions,
            "data": [{"name": "d", "type": "unbinned",
                      "axes": [{"name": "x", "min": lo, "max": 10.0},
                               {"name": "y", "min": 0.0, "max": 1.0}],
                      "entries": [[1.5, 0.5], [2.5, 0.2], [7.0, 0.9]]}],
            "likelihoods": [{"name": "L", "distributions": ["m"], "data": ["d"]}],
        })
    };
    let ps = |cs: Value, es: Value| {
        json!([{"name": "m", "type": "power_sum_dist", "x": "x",
                "coefficients": cs, "exponents": es}])
    };
    let ws = |cs: Value, samples: Value| {
        json!([{"name": "m", "type": "weighted_sum_dist", "coefficients": cs,
                "samples": samples, "extended": false}])
    };
    let conv = |extra: Value| {
        let mut c = json!({"name": "m", "type": "fft_conv_pdf", "conv_var": "x",
                           "pdf1": "g1", "pdf2": "g2", "ipOrder": 2});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        json!([c,
               {"name": "g1", "type": "gaussian_dist", "x": "x", "mean": 5.0, "sigma": 1.0},
               {"name": "g2", "type": "gaussian_dist", "x": "x", "mean": 0.0, "sigma": 0.5},
               {"name": "e", "type": "rate_extended_dist", "dist": "g1", "rate": 10.0},
               // A resolution whose width is another observable, and one over another observable.
               {"name": "gy", "type": "gaussian_dist", "x": "x", "mean": 0.0, "sigma": "y"},
               {"name": "gp", "type": "gaussian_dist", "x": "y", "mean": 0.5, "sigma": 1.0}])
    };
    let fs = json!([{"name": "fy", "type": "generic_function", "expression": "1 + x*y"}]);
    for (d, f, lo, place, rule) in [
        (
            ps(json!([1.0]), json!([-2.0])),
            json!([]),
            0.0,
            "(\"m\")",
            "must lie above 0",
        ),
        (
            ps(json!([1.0, 2.0]), json!([-2.0])),
            json!([]),
            1.0,
            "(\"m\")",
            "one each",
        ),
        (
            ws(json!([0.2, 0.3, 0.5]), json!(["x", "x"])),
            json!([]),
            1.0,
            "(\"m\")",
            "3 coefficients for 2 samples",
        ),
        (
            ws(json!([0.2]), json!(["x", "fy"])),
            fs.clone(),
            1.0,
            "(\"m\")",
            "2 of the data's observables",
        ),
        (
            conv(json!({"conv_var": "z"})),
            json!([]),
            1.0,
            ".conv_var",
            "not an axis of the data",
        ),
        (
            conv(json!({"conv_func": "fy"})),
            json!([]),
            1.0,
            ".conv_func",
            "not read yet",
        ),
        (
            conv(json!({"pdf1": "e"})),
            json!([]),
            1.0,
            ".pdf1",
            "extended or constrained",
        ),
        (
            conv(json!({"pdf2": "gy"})),
            json!([]),
            1.0,
            ".pdf2",
            "a density of \"x\" alone",
        ),
        (
            conv(json!({"pdf2": "gp"})),
            json!([]),
            1.0,
            ".pdf2",
            "a density of \"x\" alone",
        ),
    ] {
        let e = open(&doc(d.clone(), f, lo), &Choice::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(place) && e.contains(rule), "{d}: {e}");
    }
}

/// A weighted sum with one coefficient fewer than its samples takes them as fractions (the last
/// 1 − Σ c): its density is c x + (1 − c)·1 normalised over the range, as written out here.
#[test]
fn a_weighted_sum_of_fractions_is_its_formula() {
    let xs: [f64; 4] = [1.5, 2.5, 7.0, 9.5];
    let doc = json!({
        "metadata": {"hs3_version": "0.2"},
        "distributions": [{"name": "m", "type": "weighted_sum_dist", "coefficients": ["c"],
                           "samples": ["x", "one"], "extended": false}],
        "functions": [{"name": "one", "type": "generic_function", "expression": "1"}],
        "data": [{"name": "d", "type": "unbinned", "axes": [{"name": "x", "min": 1.0, "max": 10.0}],
                  "entries": xs.iter().map(|x| json!([x])).collect::<Vec<_>>()}],
        "parameter_points": [{"name": "default_values", "parameters": [{"name": "c", "value": 0.3}]}],
        "domains": [{"name": "default_domain", "type": "product_domain",
                     "axes": [{"name": "c", "min": 0.0, "max": 1.0}]}],
    });
    let mut m = open(&doc, &Choice::default()).unwrap();
    let data = m.observed_dataset();
    for c in [0.3f64, 0.8] {
        let norm = c * (100.0 - 1.0) / 2.0 + (1.0 - c) * 9.0;
        let want: f64 = xs.iter().map(|x| -((c * x + 1.0 - c) / norm).ln()).sum();
        let got = m.nll(&[c], &data).unwrap();
        assert!(
            (got - want).abs() <= 1e-10 * want.abs(),
            "c = {c}: {got} vs {want}"
        );
    }
}

/// The standard normal's quantile at `u`, by bisection on erf.
fn inverse_normal(u: f64) -> f64 {
    let (mut lo, mut hi) = (-8.0, 8.0);
    for _ in 0..80 {
        let mid = 0.5 * (lo + hi);
        if 0.5 * (1.0 + libm::erf(mid / 2f64.sqrt())) < u {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Events drawn by inversion: `n_sig` Gaussian(91, 2.5) and `n_bkg` exponential(−0.03) on
/// [60, 120], deterministic quasi-random.
fn mixture_events(n_sig: usize, n_bkg: usize) -> Vec<f64> {
    let mut xs = Vec::with_capacity(n_sig + n_bkg);
    for i in 0..n_sig {
        let u = ((i as f64 + 0.5) * 0.414_213_562_37) % 1.0;
        xs.push((91.0 + 2.5 * inverse_normal(u)).clamp(60.0, 120.0));
    }
    for i in 0..n_bkg {
        let u = ((i as f64 + 0.5) * 0.618_033_988_7) % 1.0;
        let (a, b) = ((-0.03f64 * 60.0).exp(), (-0.03f64 * 120.0).exp());
        xs.push((a + u * (b - a)).ln() / -0.03);
    }
    // In an order of no pattern, as events come (the subsample takes every 16th): by a
    // multiplicative hash of the index.
    let mut keyed: Vec<(u32, f64)> = xs
        .into_iter()
        .enumerate()
        .map(|(i, x)| ((i as u32).wrapping_mul(2_654_435_761).rotate_left(13), x))
        .collect();
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|k| k.1).collect()
}

/// A fit of 100 000 events starts from the fit of every 16th (weighted 16 times) and Newton
/// steps with that fit's Hessian (`histfit_infer`'s `thin`): it ends at the minimum the usual
/// search finds (held to by a fit with a further start, which takes no warm start), with and
/// without weights; where the minimum lies on a bound (no signal) the steps leave the bounds
/// and the usual search takes over, to the same minimum.
#[test]
fn large_fits_start_from_their_subsample() {
    let fit = |m: &mut histfit_unbinned::UnbinnedModel, starts| {
        let data = m.observed_dataset();
        let opts = histfit_infer::FitOptions {
            uncertainties: true,
            starts,
            ..Default::default()
        };
        histfit_infer::fit(m, &data, &opts).unwrap()
    };
    let signal = mixture_events(30_000, 70_000);
    let weights: Vec<f64> = (0..signal.len())
        .map(|i| 0.5 + ((i as f64 * 0.377) % 1.0))
        .collect();
    let background = mixture_events(0, 90_000);
    for (what, xs, ws, warm) in [
        ("signal", &signal, None, true),
        ("weighted", &signal, Some(&weights[..]), true),
        ("no signal", &background, None, false),
    ] {
        let mut m = open(&bench(xs, ws), &Choice::default()).unwrap();
        let r = fit(&mut m, histfit_infer::Starts::Count(0));
        assert!(r.converged, "{what}: {}", r.reason);
        assert_eq!(
            r.reason.contains("Newton decrement"),
            warm,
            "{what}: {}",
            r.reason
        );
        let usual = fit(&mut m, histfit_infer::Starts::Count(1));
        assert!(
            !usual.reason.contains("Newton decrement") && usual.converged,
            "{what}: {}",
            usual.reason
        );
        assert!(
            r.twice_nll <= usual.twice_nll + 1e-6,
            "{what}: {} above {}",
            r.twice_nll,
            usual.twice_nll
        );
        let (e, eu) = (r.uncertainties.unwrap(), usual.uncertainties.unwrap());
        for k in 0..e.len() {
            let sigma = eu[k].max(1e-12);
            assert!(
                (r.bestfit[k] - usual.bestfit[k]).abs() <= 1e-3 * sigma,
                "{what}: {}: {} vs {}",
                m.space.names[k],
                r.bestfit[k],
                usual.bestfit[k]
            );
            assert!(
                (e[k] - eu[k]).abs() <= 1e-4 * sigma,
                "{what}: errors {e:?} vs {eu:?}"
            );
        }
    }
}

/// RooLegacyExpPoly as ROOT writes it (coefficients from order 0, "1.0" and "0.0" below the
/// class's lowest order): degree 1 in closed form, degree 2 by quadrature, each against the
/// formula (its integral by a fine Simpson rule); and the HS3 test suite's name for a
/// convolution, `fft_convolution_dist`, reads as ROOT's `fft_conv_pdf`.
#[test]
fn exponential_polynomials_and_the_suites_convolution_name() {
    let xs = [0.5, 2.0, 3.5, 8.0];
    let doc = |coefficients: Value| {
        json!({
            "metadata": {"hs3_version": "0.2"},
            "distributions": [{"name": "m", "type": "legacy_exp_poly_dist", "x": "x",
                               "coefficients": coefficients}],
            "data": [{"name": "d", "type": "unbinned", "axes": [{"name": "x", "min": 0.0, "max": 10.0}],
                      "entries": xs.iter().map(|x| json!([x])).collect::<Vec<_>>()}],
            "parameter_points": [{"name": "default_values", "parameters": [{"name": "a", "value": -0.3}]}],
            "domains": [{"name": "default_domain", "type": "product_domain",
                         "axes": [{"name": "a", "min": -1.0, "max": 1.0}]}],
        })
    };
    for (coefficients, power) in [(json!(["1.0", "a"]), 1), (json!(["1.0", "0.0", "a"]), 2)] {
        let mut m = open(&doc(coefficients), &Choice::default()).unwrap();
        let data = m.observed_dataset();
        for a in [-0.3f64, 0.05] {
            let shape = |x: f64| (a * x.powi(power)).exp();
            let n = 200_000;
            let h = 10.0 / n as f64;
            let simpson: f64 = (0..=n)
                .map(|k| {
                    let w = if k == 0 || k == n {
                        1.0
                    } else if k % 2 == 1 {
                        4.0
                    } else {
                        2.0
                    };
                    w * shape(k as f64 * h)
                })
                .sum::<f64>()
                * h
                / 3.0;
            let want: f64 = xs.iter().map(|&x| -(shape(x) / simpson).ln()).sum();
            let got = m.nll(&[a], &data).unwrap();
            assert!(
                (got - want).abs() <= 1e-10 * want.abs(),
                "x^{power}, a = {a}: {got} vs {want}"
            );
        }
    }
    let mut conv = fixture_doc("fft_conv.json");
    let mut suite = conv.clone();
    suite["distributions"][0]["type"] = json!("fft_convolution_dist");
    let (mut a, mut b) = (
        open(&conv, &Choice::default()).unwrap(),
        open(&suite, &Choice::default()).unwrap(),
    );
    let (da, db) = (a.observed_dataset(), b.observed_dataset());
    let init = a.space.init.clone();
    assert_eq!(a.nll(&init, &da).unwrap(), b.nll(&init, &db).unwrap());
    conv["distributions"][0]["conv_func"] = json!("x");
    let e = open(&conv, &Choice::default()).unwrap_err().to_string();
    assert!(e.contains(".conv_func"), "{e}");
}

/// Two convolutions in one mixture, over the same observable: each is built as it would be
/// alone (its rule chosen from its own densities, not the other's nodes), so the mixture at
/// fraction 1 (0) is the first (second) convolution's −ln L, and no accuracy note is given.
#[test]
fn two_convolutions_of_one_observable_are_each_their_own() {
    let entries: Vec<Value> = (0..40).map(|i| json!([-2.0 + 0.6 * i as f64])).collect();
    let doc = |top: &str| {
        json!({
            "metadata": {"hs3_version": "0.2"},
            "distributions": [
                {"name": "mix", "type": "mixture_dist", "summands": ["ca", "cb"],
                 "coefficients": ["f"], "extended": false},
                {"name": "ca", "type": "fft_conv_pdf", "conv_var": "x", "pdf1": "lx", "pdf2": "res"},
                {"name": "cb", "type": "fft_conv_pdf", "conv_var": "x", "pdf1": "gx", "pdf2": "res"},
                {"name": "lx", "type": "landau_dist", "x": "x", "mean": 5.0, "sigma": 1.0},
                {"name": "gx", "type": "gaussian_dist", "x": "x", "mean": 12.0, "sigma": 3.0},
                {"name": "res", "type": "gaussian_dist", "x": "x", "mean": 0.0, "sigma": 2.0}
            ],
            "data": [{"name": "d", "type": "unbinned", "axes": [{"name": "x", "min": -10.0, "max": 30.0}],
                      "entries": entries.clone()}],
            "likelihoods": [{"name": "L", "distributions": [top], "data": ["d"]}],
            "parameter_points": [{"name": "default_values", "parameters": [{"name": "f", "value": 0.5}]}],
            "domains": [{"name": "default_domain", "type": "product_domain",
                         "axes": [{"name": "f", "min": 0.0, "max": 1.0}]}],
        })
    };
    let mut mix = open(&doc("mix"), &Choice::default()).unwrap();
    assert!(mix.notes.is_empty(), "{:?}", mix.notes);
    let data = mix.observed_dataset();
    for (f, alone) in [(1.0, "ca"), (0.0, "cb")] {
        let mut a = open(&doc(alone), &Choice::default()).unwrap();
        let da = a.observed_dataset();
        let want = a.nll(&[], &da).unwrap();
        let got = mix.nll(&[f], &data).unwrap();
        assert!(
            (got - want).abs() <= 1e-12 * want.abs(),
            "f = {f}: {got} vs {alone} alone {want}"
        );
    }
}
