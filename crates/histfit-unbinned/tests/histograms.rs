//! The numbers the plot of an event-level fit draws (`histfit_unbinned::histogram`): the events
//! histogrammed, and the expected counts per bin — in total and per mixture component — against
//! closed-form integrals of the benchmark model written out here.

use histfit_unbinned::histogram::histograms;
use histfit_unbinned::{open, Choice};
use libm::erf;

#[test]
fn expected_counts_per_bin_are_the_integrals_of_the_components() {
    let path = histfit_testutil::fixture("events/gauss_exp.inline.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let m = open(&doc, &Choice::default()).unwrap();
    let p = vec![900.0, 2100.0, 91.0, 2.5, -0.03]; // nsig, nbkg, mean, sigma, lambda
    assert_eq!(m.space.names, ["nsig", "nbkg", "mean", "sigma", "lambda"]);
    let (h, notes) = histograms(&m, &p, 30).unwrap();
    assert!(notes.is_empty());
    let c = &h[0];
    assert_eq!((c.edges.len(), c.edges[0], c.edges[30]), (31, 60.0, 120.0));
    assert_eq!(c.counts.iter().sum::<f64>(), 3000.0);
    assert_eq!(c.errors[7], c.counts[7].sqrt());
    // ∫ over [a, b] of the Gaussian and the exponential, each normalised on [60, 120].
    let gauss = |a: f64, b: f64| {
        let z = |x: f64| erf((x - 91.0) / (2.5 * std::f64::consts::SQRT_2));
        (z(b) - z(a)) / (z(120.0) - z(60.0))
    };
    let expo = |a: f64, b: f64| {
        let e = |x: f64| (-0.03 * x).exp();
        (e(b) - e(a)) / (e(120.0) - e(60.0))
    };
    let names: Vec<&str> = c.components.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["sig", "bkg"]);
    for k in 0..30 {
        let (a, b) = (c.edges[k], c.edges[k + 1]);
        let (sig, bkg) = (900.0 * gauss(a, b), 2100.0 * expo(a, b));
        let close = |got: f64, want: f64| (got - want).abs() <= 1e-9 * want.max(1e-3);
        assert!(
            close(c.components[0].1[k], sig),
            "bin {k}: {} vs {sig}",
            c.components[0].1[k]
        );
        assert!(close(c.components[1].1[k], bkg), "bin {k}");
        assert!(close(c.expected[k], sig + bkg), "bin {k}");
        let pull = (c.counts[k] - c.expected[k]) / c.expected[k].sqrt();
        assert!((c.pulls[k] - pull).abs() < 1e-12);
    }
}

/// Weighted events: Σw per bin with √Σw² bars, and pulls on the expected spread scaled by
/// Σw²/Σw (here every weight 2: twice the Poisson variance).
#[test]
fn weighted_events_are_counted_by_their_weights() {
    let path = histfit_testutil::fixture("events/gauss_exp.inline.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let plain = open(&doc, &Choice::default()).unwrap();
    let x = plain.observed.channels[0].columns[0].clone();
    let table = histfit_seam::EventTable {
        names: vec!["x".into()],
        weights: Some(vec![2.0; x.len()]),
        columns: vec![x],
    };
    let choice = Choice {
        events: vec![("obsData".into(), table)],
        ..Choice::default()
    };
    let weighted = open(&doc, &choice).unwrap();
    let p = vec![1800.0, 4200.0, 91.0, 2.5, -0.03];
    let (h, _) = histograms(&weighted, &p, 10).unwrap();
    let (u, _) = histograms(&plain, &p, 10).unwrap();
    for k in 0..10 {
        assert_eq!(h[0].counts[k], 2.0 * u[0].counts[k]);
        assert_eq!(h[0].errors[k], (4.0 * u[0].counts[k]).sqrt());
        let e = h[0].expected[k];
        let pull = (h[0].counts[k] - e) / (2.0 * e).sqrt();
        assert!((h[0].pulls[k] - pull).abs() < 1e-12, "bin {k}");
    }
}

/// One bin over the whole domain holds the whole expectation (a narrow peak inside a wide bin
/// is integrated on pieces); a mixture of yields that is not extended draws its components as
/// shares of the events (they add up to the events' count, not to N · Σν).
#[test]
fn wide_bins_and_mixtures_that_are_not_extended() {
    let path = histfit_testutil::fixture("events/gauss_exp.inline.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let m = open(&doc, &Choice::default()).unwrap();
    let p = vec![900.0, 2100.0, 91.0, 0.6, -0.03];
    let (h, _) = histograms(&m, &p, 1).unwrap();
    assert!(
        (h[0].expected[0] - 3000.0).abs() < 1e-9 * 3000.0,
        "{}",
        h[0].expected[0]
    );
    assert!((h[0].components[0].1[0] - 900.0).abs() < 1e-9 * 900.0);
    // The same mixture, not extended: the expectation is the events' count N = 3000 split by
    // the yields' shares.
    let dists = doc["distributions"].as_array_mut().unwrap();
    let mix = dists
        .iter_mut()
        .find(|d| d["type"] == "mixture_dist")
        .unwrap();
    mix["extended"] = serde_json::json!(false);
    let m = open(&doc, &Choice::default()).unwrap();
    let p = vec![1000.0, 3000.0, 91.0, 2.5, -0.03];
    let (h, _) = histograms(&m, &p, 20).unwrap();
    let c = &h[0];
    let total: f64 = c.expected.iter().sum();
    let shares: Vec<f64> = c.components.iter().map(|(_, v)| v.iter().sum()).collect();
    assert!((total - 3000.0).abs() < 1e-9 * 3000.0, "{total}");
    assert!((shares[0] - 750.0).abs() < 1e-9 * 750.0, "{shares:?}");
    assert!((shares[1] - 2250.0).abs() < 1e-9 * 2250.0, "{shares:?}");
}

fn fixture_model(name: &str) -> histfit_unbinned::UnbinnedModel {
    let path = histfit_testutil::fixture(&format!("hs3/{name}"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    open(&doc, &Choice::default()).unwrap()
}

/// A channel of two observables gives one histogram per observable: the density integrated over
/// the other's domain. For a product of a Gaussian in x and an exponential in y each projection
/// is the other factor's integral (1) times the factor's own, against erf and e^x in closed form.
#[test]
fn products_project_onto_each_observable() {
    let m = fixture_model("prod2d.json");
    let p = m.space.init.clone();
    let v = |n: &str| p[m.space.index(n).unwrap()];
    let (mx, sx, ly) = (v("mx"), v("sx"), v("ly"));
    let (h, notes) = histograms(&m, &p, 20).unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    let observables: Vec<&str> = h.iter().map(|c| c.observable.as_str()).collect();
    assert_eq!(observables, ["x", "y"]);
    let n = h[0].counts.iter().sum::<f64>();
    assert_eq!(n, h[1].counts.iter().sum::<f64>());
    let gauss = |a: f64, b: f64| {
        let z = |x: f64| erf((x - mx) / (sx * std::f64::consts::SQRT_2));
        (z(b) - z(a)) / (z(10.0) - z(0.0))
    };
    // HS3's e^(−c·y) with c = −ly: e^(ly·y)
    let expo = |a: f64, b: f64| {
        let e = |y: f64| (ly * y).exp();
        (e(b) - e(a)) / (e(5.0) - e(0.0))
    };
    for (c, f) in h.iter().zip([&gauss as &dyn Fn(f64, f64) -> f64, &expo]) {
        for k in 0..20 {
            let want = n * f(c.edges[k], c.edges[k + 1]);
            assert!(
                (c.expected[k] - want).abs() <= 1e-9 * want.max(1e-3),
                "{} bin {k}: {} vs {want}",
                c.observable,
                c.expected[k]
            );
        }
    }
}

/// A histogram over two observables projects exactly (the quadrature is cut at its edges): at
/// f = 0, each x bin's expectation is N times the template's mass in that column of bins.
#[test]
fn two_dimensional_histograms_project_exactly() {
    let m = fixture_model("histogram2d.json");
    let mut p = m.space.init.clone();
    p[m.space.index("f").unwrap()] = 0.0;
    let (h, _) = histograms(&m, &p, 10).unwrap();
    let x = h.iter().find(|c| c.observable == "x").unwrap();
    let y = h.iter().find(|c| c.observable == "y").unwrap();
    let n = x.counts.iter().sum::<f64>();
    let xe = [0.0, 1.0, 3.0, 6.0, 10.0];
    let column = [6.5, 30.0, 59.0, 24.0]; // each x bin's contents summed over y
    let total: f64 = column.iter().sum();
    for k in 0..10 {
        let (a, b) = (x.edges[k], x.edges[k + 1]);
        let i = xe.iter().rposition(|&e| e <= a).unwrap().min(3);
        let want = n * column[i] / total * (b - a) / (xe[i + 1] - xe[i]);
        assert!(
            (x.expected[k] - want).abs() <= 1e-10 * want,
            "x bin {k}: {} vs {want}",
            x.expected[k]
        );
    }
    // y: bins of 0.5 over [0, 5]; the template's y edges 2 and 3.5 fall on bin edges
    let ye = [0.0, 2.0, 3.5, 5.0];
    let row = [67.0, 37.0, 15.5]; // each y bin's contents summed over x
    for k in 0..10 {
        let (a, b) = (y.edges[k], y.edges[k + 1]);
        let j = ye.iter().rposition(|&e| e <= a).unwrap().min(2);
        let want = n * row[j] / total * (b - a) / (ye[j + 1] - ye[j]);
        assert!(
            (y.expected[k] - want).abs() <= 1e-10 * want,
            "y bin {k}: {} vs {want}",
            y.expected[k]
        );
    }
}
