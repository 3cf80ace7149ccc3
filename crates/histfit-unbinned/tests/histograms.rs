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
    let (h, notes) = histograms(&m, &p, 30);
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
