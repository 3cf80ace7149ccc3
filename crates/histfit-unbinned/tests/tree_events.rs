//! Events from ROOT TTrees (written by ROOT 6.40, `scripts/make_tree_fixtures.py`) through HS3's
//! `histfit_source` with `"format": "root"`: observables, a weight and a selection as expressions
//! over branches give the same −ln L bits as the same events written inline; bad input is named
//! by its place.

use histfit_events::{read_parquet, ColumnRequest, SourceSpec};
use histfit_seam::Evaluator;
use histfit_unbinned::{open, Choice};
use serde_json::{json, Value};
use std::path::PathBuf;

fn events_dir() -> PathBuf {
    PathBuf::from(histfit_testutil::fixture("events"))
}

fn base() -> Value {
    serde_json::from_str(&std::fs::read_to_string(events_dir().join("gauss_exp.json")).unwrap())
        .unwrap()
}

/// The benchmark model with its events from `source`.
fn with_source(source: Value) -> Value {
    let mut d = base();
    d["data"][0]["histfit_source"] = source;
    d
}

fn choice() -> Choice {
    Choice {
        directory: Some(events_dir()),
        ..Choice::default()
    }
}

fn tree_source() -> Value {
    json!({"format": "root", "file": "tree_zstd.root", "tree": "events",
           "columns": {"x": "mass"}, "weight": "w", "selection": "pt > 10 && n >= 0"})
}

/// The same events, selected and weighted here from the fixture's reference values.
fn inline_copy() -> Value {
    let column = |c: &str| ColumnRequest {
        observable: c.into(),
        column: c.into(),
        lo: f64::NEG_INFINITY,
        hi: f64::INFINITY,
    };
    let spec = SourceSpec {
        file: events_dir().join("tree_values.parquet"),
        columns: vec![column("mass"), column("pt"), column("n"), column("w")],
        weight: None,
        drop_outside: false,
    };
    let c = read_parquet(&spec).unwrap().table.columns;
    let keep: Vec<usize> = (0..c[0].len())
        .filter(|&i| c[1][i] > 10.0 && c[2][i] >= 0.0)
        .collect();
    assert!(keep.len() > 300 && keep.len() < 900, "{}", keep.len());
    let mut d = base();
    let data = d["data"][0].as_object_mut().unwrap();
    data.remove("histfit_source");
    data.insert(
        "entries".into(),
        keep.iter().map(|&i| json!([c[0][i]])).collect(),
    );
    data.insert(
        "weights".into(),
        keep.iter().map(|&i| json!(c[3][i])).collect(),
    );
    d
}

#[test]
fn tree_events_are_the_selected_weighted_events() {
    let mut from_tree = open(&with_source(tree_source()), &choice()).unwrap();
    let mut inline = open(&inline_copy(), &Choice::default()).unwrap();
    let (a, b) = (from_tree.observed_dataset(), inline.observed_dataset());
    let v = from_tree.space.init.clone();
    let (mut ga, mut gb) = (vec![0.0; v.len()], vec![0.0; v.len()]);
    let fa = from_tree.nll_grad(&v, &a, &mut ga).unwrap();
    let fb = inline.nll_grad(&v, &b, &mut gb).unwrap();
    assert_eq!(fa.to_bits(), fb.to_bits());
    assert_eq!(ga, gb);
    assert!(
        from_tree
            .notes
            .iter()
            .any(|n| n.contains("not selected, 0 outside")),
        "{:?}",
        from_tree.notes
    );
}

#[test]
fn expressions_and_the_fit_range() {
    // An observable computed from branches; the domain as a fit range.
    let mut s = tree_source();
    s["columns"]["x"] = json!("mass + 30");
    let Err(e) = open(&with_source(s.clone()), &choice()) else {
        panic!("events beyond 120 were accepted")
    };
    assert!(e.place.ends_with("histfit_source.columns.x"), "{e}");
    assert!(e.rule.contains("lie outside the domain [60, 120]"), "{e}");
    s["outside"] = json!("drop");
    let m = open(&with_source(s), &choice()).unwrap();
    assert!(
        m.notes
            .iter()
            .any(|n| n.contains("outside the domains dropped")),
        "{:?}",
        m.notes
    );
    let x = m.observed.channels[0].columns[0].clone();
    assert!(!x.is_empty() && x.iter().all(|&x| (90.0..=120.0).contains(&x)));
}

#[test]
fn bad_tree_sources_are_named() {
    for (key, value, place, rule) in [
        (
            "selection",
            json!("pt > 10 &&"),
            "histfit_source.selection",
            "does not parse",
        ),
        (
            "selection",
            json!("ptt > 10"),
            "histfit_source.selection",
            "\"ptt\" is no branch of tree \"events\" in",
        ),
        (
            "weight",
            json!("w - 5"),
            "histfit_source.weight",
            "must be finite and not negative",
        ),
        ("tree", json!("nope"), "histfit_source", "no tree \"nope\""),
        (
            "format",
            json!("csv"),
            "histfit_source.format",
            "\"parquet\" and \"root\"",
        ),
        (
            "file",
            json!("missing.root"),
            "histfit_source",
            "cannot open",
        ),
    ] {
        let mut s = tree_source();
        s[key] = value;
        let Err(e) = open(&with_source(s), &choice()) else {
            panic!("{key}: accepted")
        };
        assert!(e.place.ends_with(place), "{key}: {e}");
        assert!(e.rule.contains(rule), "{key}: {e}");
    }
    let mut s = tree_source();
    s.as_object_mut().unwrap().remove("tree");
    let Err(e) = open(&with_source(s), &choice()) else {
        panic!("no tree: accepted")
    };
    assert!(e.rule.contains("\"tree\""), "{e}");
    let mut p = base();
    p["data"][0]["histfit_source"]["selection"] = json!("x > 70");
    let Err(e) = open(&p, &choice()) else {
        panic!("a Parquet selection: accepted")
    };
    assert!(e.place.ends_with("histfit_source.selection"), "{e}");
}
