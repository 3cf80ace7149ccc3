//! HistFactory workspaces as ROOT 6.40 exports them to HS3 (`histfactory_dist`), opened as
//! histfit's binned model, against RooFit's numbers on the workspaces ROOT exported
//! (`scripts/make_hs3_histfactory.py`): −ln L differences between two points within 1e-9, the
//! fit's minimum at or below the reference's, parameters within 0.05 σ, Hesse errors within 2 %;
//! and the document's malformed or unsupported parts refused with their place named.

use histfit_compute::Evaluator;
use histfit_device::likelihood::OpenError;
use histfit_device::{Device, Likelihood};
use histfit_unbinned::Choice;
use serde_json::{json, Value};

const FIXTURES: [&str; 8] = [
    "shapesys",
    "histosys_2chan",
    "normsys_2chan",
    "staterror",
    "shapefactor",
    "shapesys_normsys",
    "shared_nuisance",
    "lumi_free",
];

fn read(name: &str) -> Value {
    let path = format!(
        "{}/../../tests/fixtures/hs3/histfactory/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn open(doc: &Value) -> Result<Likelihood, OpenError> {
    Likelihood::from_hs3(doc, &Choice::default())
}

/// The parameter vector with the named values set, the rest at their starting values.
fn point(l: &Likelihood, values: &Value) -> Vec<f64> {
    let space = l.space();
    let mut x = space.init.clone();
    for (n, v) in values.as_object().unwrap() {
        let k = space.index(n).unwrap_or_else(|| panic!("no parameter {n}"));
        x[k] = v.as_f64().unwrap();
    }
    x
}

#[test]
fn root_exported_histfactory_workspaces_agree_with_roofit() {
    for name in FIXTURES {
        let doc = read(&format!("{name}.json"));
        let l = open(&doc).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            matches!(l, Likelihood::HistFactory(_)),
            "{name}: a binned model"
        );
        agrees_with_roofit(name, &l);
    }
}

/// A HistFactory workspace with an event-level channel (an extended Gaussian + exponential
/// whose yields share the POI, the luminosity and a normsys's α with the binned channels), as
/// ROOT exports their `RooSimultaneous`: one likelihood, against RooFit's.
#[test]
fn binned_and_event_level_channels_in_one_likelihood_agree_with_roofit() {
    let doc = read("mixed.json");
    // three analyses (ROOT's pair of the HistFactory workspace and the combined one): the
    // document says which to choose
    let e = open(&doc).unwrap_err().to_string();
    assert!(
        e.contains("--analysis") && e.contains("combPdf_obsData_all"),
        "{e}"
    );
    let l = Likelihood::from_hs3(&doc, &combined()).unwrap();
    let Likelihood::Mixed(m) = &l else {
        panic!("a mixed likelihood")
    };
    assert_eq!(m.binned_model().channels.len(), 2);
    assert_eq!(m.events_model().channels.len(), 1);
    assert_eq!(l.space().poi_name(), Some("SigXsecOverSM"));
    // parameters of both parts appear once
    for shared in ["SigXsecOverSM", "Lumi", "alpha_coupled_overall"] {
        assert_eq!(
            l.space().names.iter().filter(|n| *n == shared).count(),
            1,
            "{shared}"
        );
    }
    agrees_with_roofit("mixed", &l);
    // the POI may be a parameter of either part
    let mut other = l.clone();
    other.set_poi("nbkg0").unwrap();
    assert_eq!(other.space().poi_name(), Some("nbkg0"));
    other.set_poi("Lumi").unwrap();
    assert!(other
        .set_poi("nope")
        .unwrap_err()
        .contains("not a parameter"));
    // the whole likelihood's gradient against central differences of −ln L
    let data = l.observed();
    let mut e = l.evaluator(Device::Cpu, false).unwrap();
    let want = read("mixed.roofit.json");
    let x = point(&l, &want["second"]);
    let mut g = vec![0.0; x.len()];
    e.nll_grad(&x, &data, &mut g).unwrap();
    for k in 0..x.len() {
        let h = 1e-5 * x[k].abs().max(1e-2);
        let (mut up, mut dn) = (x.clone(), x.clone());
        up[k] += h;
        dn[k] -= h;
        let fd = (e.nll(&up, &data).unwrap() - e.nll(&dn, &data).unwrap()) / (2.0 * h);
        assert!(
            (g[k] - fd).abs() <= 1e-5 * fd.abs().max(1.0),
            "∂/∂{}: {} against {fd}",
            l.space().names[k],
            g[k]
        );
    }
}

/// The event-level channel's pdf a product with the luminosity's constraint (as ROOT writes a
/// channel of a RooSimultaneous that shares a constraint with the HistFactory channels): the
/// binned part holds that constraint, the product leaves it out, −ln L is unchanged.
#[test]
fn a_constraint_the_binned_channels_hold_is_left_out_of_event_level_products() {
    let plain = read("mixed.json");
    let mut doc = plain.clone();
    doc["distributions"].as_array_mut().unwrap().push(json!(
        {"type": "product_dist", "name": "events_constrained", "factors": ["model_events", "lumiConstraint"]}
    ));
    for l in doc["likelihoods"].as_array_mut().unwrap() {
        if l["name"] == "combPdf_obsData_all" {
            l["distributions"][2] = json!("events_constrained");
        }
    }
    let (a, b) = (
        Likelihood::from_hs3(&doc, &combined()).unwrap(),
        Likelihood::from_hs3(&plain, &combined()).unwrap(),
    );
    assert_eq!(a.space().names, b.space().names);
    let want = read("mixed.roofit.json");
    let (da, db) = (a.observed(), b.observed());
    let (mut ea, mut eb) = (
        a.evaluator(Device::Cpu, false).unwrap(),
        b.evaluator(Device::Cpu, false).unwrap(),
    );
    for at in ["initial", "second", "third"] {
        let x = point(&a, &want[at]);
        let (fa, fb) = (ea.nll(&x, &da).unwrap(), eb.nll(&x, &db).unwrap());
        assert!(
            (fa - fb).abs() <= 1e-12 * fb.abs(),
            "{at}: {fa} against {fb}"
        );
    }
}

/// The mixed likelihood's toys: the binned part's counts and auxiliary data are the binned
/// model's own toy, the events the event-level model's with its streams past the binned ones';
/// the same toy on every call; the Asimov dataset's fit returns the generating point.
#[test]
fn mixed_likelihood_toys_and_asimov_data() {
    let l = Likelihood::from_hs3(&read("mixed.json"), &combined()).unwrap();
    let Likelihood::Mixed(m) = &l else {
        panic!("a mixed likelihood")
    };
    let mut e = l.evaluator(Device::Cpu, false).unwrap();
    let p = l.space().init.clone();
    let toys = e.toys(&p, 7, 3..5).unwrap();
    assert_eq!(
        toys,
        e.toys(&p, 7, 3..5).unwrap(),
        "a toy is a pure function of (seed, index)"
    );
    let binned = Likelihood::HistFactory(m.binned_model().clone());
    let mut b = binned.evaluator(Device::Cpu, false).unwrap();
    let pb: Vec<f64> = binned
        .space()
        .names
        .iter()
        .map(|n| p[l.space().index(n).unwrap()])
        .collect();
    let own = b.toys(&pb, 7, 3..5).unwrap();
    let mut events = m.events_model().clone();
    assert_eq!(events.toy_stream_base, histfit_device::mixed::EVENT_STREAMS);
    for (t, (toy, own)) in toys.iter().zip(&own).enumerate() {
        assert_eq!(toy.main, own.main);
        assert_eq!(toy.aux[..own.aux.len()], own.aux[..]);
        let want = events.toy(&m.events_params(&p), 7, 3 + t as u64).unwrap();
        assert_eq!(toy.events, want.events);
        assert_eq!(toy.aux[own.aux.len()..], want.aux[..]);
        // and the events are not the ones streams 0 and 1 would give
        events.toy_stream_base = 0;
        let clash = events.toy(&m.events_params(&p), 7, 3 + t as u64).unwrap();
        events.toy_stream_base = histfit_device::mixed::EVENT_STREAMS;
        assert_ne!(toy.events, clash.events);
        let r = histfit_infer::fit(&mut e, toy, &Default::default()).unwrap();
        assert!(r.converged, "toy {t}: {}", r.reason);
    }
    // the Asimov dataset at a point away from the start is fitted back to it
    let mut at = p.clone();
    at[l.space().index("SigXsecOverSM").unwrap()] = 1.5;
    at[l.space().index("nbkg0").unwrap()] = 280.0;
    let asimov = e.asimov(&at).unwrap();
    let r = histfit_infer::fit(&mut e, &asimov, &Default::default()).unwrap();
    assert!(r.converged, "{}", r.reason);
    for (k, name) in l.space().names.iter().enumerate() {
        if !l.space().fixed[k] {
            assert!(
                (r.bestfit[k] - at[k]).abs() <= 2e-3 * at[k].abs().max(1.0),
                "{name}: {} from the Asimov data of {}",
                r.bestfit[k],
                at[k]
            );
        }
    }
}

/// Weighted events in a likelihood with binned channels: events of weight 1 given as weights
/// give SumW2 and sandwich errors equal to the naive ones (the sandwich up to the events'
/// fluctuation) — the binned part's information, its counts' and constraints', counted in the
/// score's variance — and with weights of 2 the event-level yield's sandwich error is above its
/// naive one.
#[test]
fn weighted_events_beside_binned_channels_get_the_three_estimates() {
    use histfit_compute::{EventTable, Events};
    let l = Likelihood::from_hs3(&read("mixed.json"), &combined()).unwrap();
    let Likelihood::Mixed(m) = &l else {
        panic!("a mixed likelihood")
    };
    let observed = l.observed();
    let with_weights = |w: f64| {
        let table = &observed.events.as_ref().unwrap().channels[0];
        let mut d = observed.clone();
        d.events = Some(std::sync::Arc::new(Events {
            channels: vec![EventTable {
                weights: Some(vec![w; table.len()]),
                ..table.clone()
            }],
        }));
        d
    };
    let mut e = l.evaluator(Device::Cpu, false).unwrap();
    let space = l.space().clone();
    let free: Vec<usize> = (0..space.len()).filter(|&i| !space.fixed[i]).collect();
    // The fit of the events at weight `w` and its three estimates.
    let mut estimates = |w: f64| {
        let d = with_weights(w);
        let r = histfit_infer::fit(&mut e, &d, &Default::default()).unwrap();
        assert!(r.converged, "{}", r.reason);
        (**m)
            .clone()
            .weighted_uncertainties(&d, &r.bestfit, &free)
            .unwrap()
    };
    let u = estimates(1.0);
    for (j, &i) in free.iter().enumerate() {
        let name = &space.names[i];
        assert!(
            (u.sumw2[j] / u.naive[j] - 1.0).abs() < 1e-6,
            "{name}: {u:?}"
        );
        assert!(
            (u.sandwich[j] / u.naive[j] - 1.0).abs() < 0.15,
            "{name}: sandwich {} naive {}",
            u.sandwich[j],
            u.naive[j]
        );
    }
    // Every event counted twice: the event-level background yield's naive error is too small
    // and its sandwich error larger.
    let u2 = estimates(2.0);
    let at = |name: &str| free.iter().position(|&i| space.names[i] == name).unwrap();
    let b = at("nbkg0");
    // (√2 exactly were it uncorrelated with what the binned channels measure; 1.26 here)
    let ratio = u2.sandwich[b] / u2.naive[b];
    assert!(
        ratio > 1.15 && ratio <= 2f64.sqrt() + 1e-9,
        "nbkg0: {ratio}"
    );
}

/// The combined analysis of `mixed.json`.
fn combined() -> Choice {
    Choice {
        analysis: Some("combPdf_obsData_all".into()),
        ..Choice::default()
    }
}

/// −ln L differences between RooFit's points, the fit's minimum, parameters and Hesse errors
/// against `NAME.roofit.json`.
fn agrees_with_roofit(name: &str, l: &Likelihood) {
    let want = read(&format!("{name}.roofit.json"));
    let space = l.space();
    let free: Vec<&str> = (0..space.names.len())
        .filter(|&k| !space.fixed[k])
        .map(|k| space.names[k].as_str())
        .collect();
    let mut want_free: Vec<&str> = want["free_parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    want_free.sort();
    let mut got = free.clone();
    got.sort();
    assert_eq!(
        got, want_free,
        "{name}: the free parameters, by ROOT's names"
    );
    let data = l.observed();
    let mut e = l.evaluator(Device::Cpu, false).unwrap();
    let at = |e: &mut histfit_device::AnyEval, v: &Value| e.nll(&point(l, v), &data).unwrap();
    let a = at(&mut e, &want["initial"]);
    // a point near the start, and one 1.5 units out where the interpolations extrapolate;
    // RooFit holds a staterror's relative width in single precision (its domain ends at
    // 1 + 5σ = 1.2500000037 for σ = 0.05), which the far point's (γ − 1)²/2σ² shows at 1e-7
    for (other, of_move) in [("second", 0.0), ("third", 1e-7)] {
        let b = at(&mut e, &want[other]);
        let delta =
            want[format!("nll_{other}")].as_f64().unwrap() - want["nll_initial"].as_f64().unwrap();
        assert!(
            ((b - a) - delta).abs() <= 1e-9 * a.abs().max(1.0) + of_move * delta.abs(),
            "{name}: −ln L moves by {} to the {other} point, RooFit's by {delta}",
            b - a
        );
    }
    let options = histfit_infer::FitOptions {
        uncertainties: true,
        ..Default::default()
    };
    let r = histfit_infer::fit(&mut e, &data, &options).unwrap();
    assert!(r.converged, "{name}: {}", r.reason);
    let min = want["fit"]["minNll"].as_f64().unwrap() - want["nll_initial"].as_f64().unwrap();
    assert!(
        0.5 * r.twice_nll - a <= min + 1e-6,
        "{name}: histfit's minimum {} above the reference's {min} (both from the initial point)",
        0.5 * r.twice_nll - a
    );
    let errors = r.uncertainties.as_ref().unwrap();
    let params = histfit_testutil::reference_params(&want["fit"]["parameters"]);
    let index = |n: &str| space.index(n).unwrap();
    histfit_testutil::assert_fit_near(name, &params, index, &r.bestfit, errors);
}

#[test]
fn roots_interpolation_codes_and_the_observed_analysis() {
    let doc = read("normsys_2chan.json");
    let Likelihood::HistFactory(m) = open(&doc).unwrap() else {
        panic!("a binned model")
    };
    // ROOT 6.40 writes normsys with its code 5 (pyhf's code 4) and histosys without a code (its
    // default 4: pyhf's code 4p)
    assert_eq!(m.settings.normsys.name(), "code4");
    assert_eq!(m.settings.histosys.name(), "code4p");
    assert!(m.warnings.iter().any(|w| w.contains("simPdf_obsData")));
    assert_eq!(m.poi_name(), Some("SigXsecOverSM"));
    // the Asimov analysis when asked for
    let choice = Choice {
        analysis: Some("simPdf_asimovData".into()),
        ..Choice::default()
    };
    let asimov = Likelihood::from_hs3(&doc, &choice).unwrap();
    let observed = open(&doc).unwrap();
    assert_ne!(asimov.observed().main, observed.observed().main);
    // ROOT writes a channel's Asimov data as weighted entries at the centres of its non-empty
    // bins: counted into the bins (shapesys.json: 60 events in bin 0, none in bin 1)
    let doc = read("shapesys.json");
    let asimov = Likelihood::from_hs3(&doc, &choice).unwrap();
    assert_eq!(asimov.observed().main, vec![60.0, 0.0]);
    // the POI may be any scalar parameter, not a γ of a per-bin set
    let mut l = open(&doc).unwrap();
    l.set_poi("Lumi").unwrap();
    let e = l.set_poi("gamma_uncorrshape_bin_0").unwrap_err();
    assert!(e.contains("per-bin set \"uncorrshape\""), "{e}");
}

/// `doc` with the JSON pointer `path` set to `value`.
fn with(doc: &Value, path: &str, value: Value) -> Value {
    let mut d = doc.clone();
    *d.pointer_mut(path).unwrap_or_else(|| panic!("no {path}")) = value;
    d
}

#[test]
fn bad_histfactory_documents_are_refused_with_their_place() {
    let doc = read("staterror.json");
    let sample = "/distributions/0/samples/0";
    let cases = [
        (
            with(&doc, &format!("{sample}/data/contents"), json!([1.0])),
            "distributions[0].samples[0].data.contents",
        ),
        (
            with(
                &doc,
                &format!("{sample}/modifiers/1/interpolation"),
                json!(6),
            ),
            "interpolation code 6",
        ),
        (
            with(&doc, &format!("{sample}/modifiers/1/type"), json!("bogus")),
            "unknown modifier type \"bogus\"",
        ),
        (
            with(
                &doc,
                &format!("{sample}/modifiers/2/constraint_type"),
                json!("Poisson"),
            ),
            "Poisson constraint on a staterror",
        ),
        (
            with(&doc, "/data/1/contents", json!([1.0, "x"])),
            "data[1].contents[1]",
        ),
        (
            with(
                &doc,
                &format!("{sample}/modifiers/1/constraint_name"),
                json!("nowhere"),
            ),
            "no distribution \"nowhere\"",
        ),
        (
            with(&doc, "/distributions/1/sigma", json!(2.0)),
            "unit ones centred on 0",
        ),
    ];
    let two = read("normsys_2chan.json");
    let more = [
        // one channel fitted twice
        (
            with(
                &with(
                    &two,
                    "/likelihoods/0/distributions/1",
                    json!("model_channel1"),
                ),
                "/likelihoods/1/distributions/1",
                json!("model_channel1"),
            ),
            "a second channel \"channel1\"",
        ),
        // a per-bin γ named as a scalar parameter (in both samples carrying the staterror)
        (
            with(
                &with(
                    &doc,
                    &format!("{sample}/modifiers/2/parameters/0"),
                    json!("SigXsecOverSM"),
                ),
                "/distributions/0/samples/1/modifiers/2/parameters/0",
                json!("SigXsecOverSM"),
            ),
            "names two parameters",
        ),
        // data over other axes than the channel's
        (
            with(&doc, "/data/1/axes/0/name", json!("obs_y")),
            "where the channel's are",
        ),
        // a negative count
        (
            with(&doc, "/data/1/contents/0", json!(-3)),
            "data[1].contents[0]",
        ),
        // a starting value outside the document's domain
        (
            with(&doc, "/parameter_points/0/parameters/1/value", json!(7.0)),
            "outside its domain",
        ),
    ];
    // the data's axes may give the channel's binning as edges rather than min/max/nbins
    let edges = json!({"name": "obs_x_channel1", "edges": [0.0, 1.0, 2.0]});
    assert!(open(&with(&doc, "/data/1/axes/0", edges)).is_ok());
    let other = json!({"name": "obs_x_channel1", "edges": [0.0, 0.5, 2.0]});
    let more = more.into_iter().chain([(
        with(&doc, "/data/1/axes/0", other),
        "bin edges other than the channel's",
    )]);
    for (bad, says) in cases.into_iter().chain(more) {
        let e = open(&bad)
            .err()
            .unwrap_or_else(|| panic!("accepted: {says}"));
        assert!(e.to_string().contains(says), "{e} (expected {says})");
    }
    // a histfactory_dist beside an event-level distribution in one likelihood
    let mut mixed = doc.clone();
    mixed["distributions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "uniform_dist", "name": "u", "x": "obs_x_channel1"}));
    for l in mixed["likelihoods"].as_array_mut().unwrap() {
        l["distributions"].as_array_mut().unwrap().push(json!("u"));
        let first = l["data"][0].clone();
        l["data"].as_array_mut().unwrap().push(first);
    }
    let e = open(&mixed).err().unwrap();
    assert!(e.to_string().contains("only unbinned data"), "{e}");
    // a mixed likelihood constraining a binned modifier's parameter a second time
    let mut twice = read("mixed.json");
    twice["distributions"].as_array_mut().unwrap().push(
        json!({"type": "gaussian_dist", "name": "again", "x": "nom_alpha_coupled_overall", "mean": "alpha_coupled_overall", "sigma": 0.5}),
    );
    for l in twice["likelihoods"].as_array_mut().unwrap() {
        if l["name"] == "combPdf_obsData_all" {
            l["aux_distributions"] = json!(["again"]);
        }
    }
    let e = Likelihood::from_hs3(&twice, &combined()).err().unwrap();
    assert!(
        e.to_string()
            .contains("\"alpha_coupled_overall\": constrained by the binned"),
        "{e}"
    );
}

/// A real analysis' likelihood (tHu: 11 channels, 121 samples, 184 parameters) as ROOT exports
/// it (`scripts/make_hs3_histfactory.py --export tests/fixtures/workspace_tHu.json`): −ln L moves
/// between two points as RooFit's does, and equals the pyhf JSON's model at the starting point
/// (to the 7 significant digits in which ROOT writes some of the numbers).
#[test]
fn a_real_analysis_exported_by_root_is_its_pyhf_model() {
    use std::io::Read;
    let dir = format!("{}/../../tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(format!("{dir}/hs3/histfactory/tHu.json.gz")).unwrap(),
    )
    .read_to_string(&mut text)
    .unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let want = read("tHu.roofit.json");
    let l = open(&doc).unwrap();
    let data = l.observed();
    let mut e = l.evaluator(Device::Cpu, false).unwrap();
    let (a, b) = (
        e.nll(&point(&l, &want["initial"]), &data).unwrap(),
        e.nll(&point(&l, &want["second"]), &data).unwrap(),
    );
    let delta = want["nll_second"].as_f64().unwrap() - want["nll_initial"].as_f64().unwrap();
    assert!(
        ((b - a) - delta).abs() <= 1e-8 * a.abs(),
        "−ln L moves by {} between the points, RooFit's by {delta}",
        b - a
    );
    // the same likelihood from its pyhf JSON (histfit's defaults are ROOT's codes)
    let ws = histfit_model::workspace_from_file(&format!("{dir}/workspace_tHu.json")).unwrap();
    let model = histfit_model::compile(&ws, None, &histfit_model::Settings::smooth()).unwrap();
    let pyhf = Likelihood::HistFactory(std::sync::Arc::new(model));
    let mut p = pyhf.evaluator(Device::Cpu, false).unwrap();
    let at_init = p.nll(&pyhf.space().init, &pyhf.observed()).unwrap();
    assert!(
        (a - at_init).abs() <= 1e-8 * a.abs(),
        "−ln L {a} at the starting point, the pyhf JSON's {at_init}"
    );
    assert_eq!(l.space().names.len(), pyhf.space().names.len());
}

/// A γ that multiplies no yield (shapesys bin 1 of `shapesys.json`: no uncertainty, no nominal
/// content) opens whether the document holds it const or leaves it free, and a γ the document
/// does not mention keeps histfit's (pyhf's) treatment: held at 1 with its bounds.
#[test]
fn gammas_of_empty_bins_and_gammas_the_document_leaves_out() {
    let doc = read("shapesys.json");
    let free = with(
        &doc,
        "/parameter_points/0/parameters/3",
        json!({"name": "gamma_uncorrshape_bin_1", "value": 1.0}),
    );
    let l = open(&free).unwrap_or_else(|e| panic!("{e}"));
    let space = l.space();
    let k = space.index("gamma_uncorrshape_bin_1").unwrap();
    assert!(space.fixed[k]);
    let mut silent = doc.clone();
    for points in silent["parameter_points"].as_array_mut().unwrap() {
        points["parameters"]
            .as_array_mut()
            .unwrap()
            .retain(|p| p["name"] != "gamma_uncorrshape_bin_1");
    }
    for domain in silent["domains"].as_array_mut().unwrap() {
        domain["axes"]
            .as_array_mut()
            .unwrap()
            .retain(|a| a["name"] != "gamma_uncorrshape_bin_1");
    }
    let l = open(&silent).unwrap_or_else(|e| panic!("{e}"));
    let space = l.space();
    let k = space.index("gamma_uncorrshape_bin_1").unwrap();
    assert!(space.fixed[k]);
    assert_eq!((space.init[k], space.bounds[k]), (1.0, (1e-10, 10.0)));
    // the constrained γ's lower bound is pyhf's 1e-10 where ROOT's domain says 0
    let k = space.index("gamma_uncorrshape_bin_0").unwrap();
    assert_eq!(space.bounds[k].0, 1e-10);
}

/// The sandwich errors of a likelihood with binned channels and weighted events cover: 400 toys
/// of `mixed.json`'s combined analysis at its fit to the observed data with a stronger signal
/// (SigXsecOverSM 8, the peak's width 2: ≈ 165 signal events beside ≈ 300), each toy's events given
/// weights 0.1 or 1.9 (mean 1, drawn independently of the events), fitted, and every free
/// parameter's pull (θ̂ − θ_gen)/σ_sandwich has width 1 within 3 standard errors — the event
/// part's Σ w² s sᵀ beside the binned part's information in the score's variance. The naive
/// errors of the event-level parameters do not cover (weights of mean 1 and mean square 1.81
/// widen their spread by ≈ √1.81).
#[test]
fn sandwich_errors_cover_weighted_events_beside_binned_channels() {
    let l = Likelihood::from_hs3(&read("mixed.json"), &combined()).unwrap();
    let Likelihood::Mixed(m) = &l else {
        panic!("a mixed likelihood")
    };
    let mut e = l.evaluator(Device::Cpu, false).unwrap();
    let space = l.space().clone();
    let free: Vec<usize> = (0..space.len()).filter(|&i| !space.fixed[i]).collect();
    let options = histfit_infer::FitOptions {
        starts: histfit_infer::Starts::Count(0),
        ..Default::default()
    };
    let fitted = histfit_infer::fit(&mut e, &l.observed(), &options)
        .unwrap()
        .bestfit;
    // A signal strong enough for asymptotic errors: at the observed fit's (≈ 17 signal events of
    // width 1.04) an eighth of the toys end with the width at its bound 0.5, and with 60
    // events its pulls are still skewed (16 % / 84 % quantiles −1.77 / 0.78); here ≈ 165.
    let mut gen = fitted;
    gen[space.index("SigXsecOverSM").unwrap()] = 8.0;
    gen[space.index("width").unwrap()] = 2.0;
    let n_toys = 400u64;
    let (mut sandwich, mut naive) = (vec![Vec::new(); free.len()], vec![Vec::new(); free.len()]);
    let mut left_out = 0;
    for (t, toy) in e.toys(&gen, 11, 0..n_toys).unwrap().into_iter().enumerate() {
        let n = toy.events.as_ref().unwrap().channels[0].len();
        let d = histfit_testutil::with_event_weights(
            &toy,
            histfit_testutil::coverage_weights(n, t as u64),
        );
        let r = histfit_infer::fit(&mut e, &d, &options).unwrap();
        assert!(r.converged, "toy {t}: {}", r.reason);
        // A toy whose Hessian is not positive definite at its minimum has no errors (a
        // parameter at a bound): counted, and left out as pull studies leave it.
        let u = match (**m).clone().weighted_uncertainties(&d, &r.bestfit, &free) {
            Ok(u) => u,
            Err(err) => {
                let at_bound: Vec<&str> = free
                    .iter()
                    .filter(|&&i| {
                        let (lo, hi) = space.bounds[i];
                        r.bestfit[i] <= lo + 1e-6 * (hi - lo)
                            || r.bestfit[i] >= hi - 1e-6 * (hi - lo)
                    })
                    .map(|&i| space.names[i].as_str())
                    .collect();
                eprintln!("toy {t}: {err}; at a bound: {at_bound:?}");
                left_out += 1;
                continue;
            }
        };
        for (j, &i) in free.iter().enumerate() {
            sandwich[j].push((r.bestfit[i] - gen[i]) / u.sandwich[j]);
            naive[j].push((r.bestfit[i] - gen[i]) / u.naive[j]);
        }
    }
    let width = histfit_testutil::sample_width;
    let se = 1.0 / (2.0 * n_toys as f64).sqrt();
    let mut report = Vec::new();
    let mut bad = Vec::new();
    for (j, &i) in free.iter().enumerate() {
        let (ws, wn) = (width(&sandwich[j]), width(&naive[j]));
        report.push(format!(
            "{}: sandwich {ws:.3}, naive {wn:.3}",
            space.names[i]
        ));
        if (ws - 1.0).abs() >= 3.0 * se {
            bad.push(space.names[i].clone());
        }
        // The parameters only the events measure: their naive errors are too small.
        if ["nbkg0", "mean", "width", "slope"].contains(&space.names[i].as_str())
            && wn - 1.0 <= 3.0 * se
        {
            bad.push(format!("{} (naive errors cover)", space.names[i]));
        }
    }
    eprintln!("{}\n{left_out} toys left out", report.join("\n"));
    assert!(
        left_out * 50 <= n_toys,
        "{left_out} of {n_toys} toys without errors"
    );
    assert!(
        bad.is_empty(),
        "pull widths off 1: {bad:?}\n{}",
        report.join("\n")
    );
}
