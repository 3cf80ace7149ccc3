//! Events from Parquet files (pyarrow-written fixtures, `scripts/make_parquet_fixtures.py`)
//! through HS3's `histfit_source` extension: the same events and the same −ln L bits as the
//! dataset written inline, every column type and compression the fixtures hold, weights, the
//! domains as a fit range (row groups skipped by their statistics, rows filtered), and bad input
//! named by its place.

use histfit_events::{read_parquet, read_parquet_bytes, ColumnRequest, SourceSpec};
use histfit_seam::Evaluator;
use histfit_unbinned::{open, Choice};
use serde_json::Value;
use std::path::PathBuf;

fn events_dir() -> PathBuf {
    PathBuf::from(histfit_testutil::fixture("events"))
}

fn doc(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(events_dir().join(name)).unwrap()).unwrap()
}

fn choice() -> Choice {
    Choice {
        directory: Some(events_dir()),
        ..Choice::default()
    }
}

fn spec(file: &str, column: &str, weight: Option<&str>, drop_outside: bool) -> SourceSpec {
    SourceSpec {
        file: events_dir().join(file),
        columns: vec![ColumnRequest {
            observable: "x".into(),
            column: column.into(),
            lo: 60.0,
            hi: 120.0,
        }],
        weight: weight.map(str::to_owned),
        drop_outside,
    }
}

/// The inline copy's events, in file order.
fn inline_events() -> Vec<f64> {
    doc("gauss_exp.inline.json")["data"][0]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[0].as_f64().unwrap())
        .collect()
}

#[test]
fn parquet_events_are_the_inline_events() {
    let xs = inline_events();
    assert_eq!(xs.len(), 3000);
    let mut from_file = open(&doc("gauss_exp.json"), &choice()).unwrap();
    let mut inline = open(&doc("gauss_exp.inline.json"), &Choice::default()).unwrap();
    assert_eq!(from_file.space.names, inline.space.names);
    let (a, b) = (from_file.observed_dataset(), inline.observed_dataset());
    for v in [
        from_file.space.init.clone(),
        from_file
            .space
            .init
            .iter()
            .map(|x| x * 1.01)
            .collect::<Vec<_>>(),
    ] {
        let mut ga = vec![0.0; v.len()];
        let mut gb = vec![0.0; v.len()];
        let fa = from_file.nll_grad(&v, &a, &mut ga).unwrap();
        let fb = inline.nll_grad(&v, &b, &mut gb).unwrap();
        assert_eq!(fa.to_bits(), fb.to_bits());
        assert_eq!(ga, gb);
    }
}

/// Doubles, floats and integers; snappy (three row groups), zstd and gzip (one); dictionary and PLAIN
/// pages; the weight column.
#[test]
fn column_types_compressions_and_weights() {
    let xs = inline_events();
    let snappy = read_parquet(&spec("gauss_exp.parquet", "x", Some("w"), false)).unwrap();
    assert_eq!(snappy.table.columns[0], xs);
    let w = snappy.table.weights.clone().unwrap();
    assert_eq!(w.len(), xs.len());
    assert!(w.iter().all(|&v| (0.5..=1.5).contains(&v)));
    let zstd = read_parquet(&spec("gauss_exp_zstd.parquet", "x", Some("w"), false)).unwrap();
    assert_eq!(zstd.table, snappy.table);
    let gzip = read_parquet(&spec("gauss_exp_gzip.parquet", "x", Some("w"), false)).unwrap();
    assert_eq!(gzip.table, snappy.table);
    // PLAIN pages (copied, not decoded) of both data page formats, many pages a chunk.
    for file in ["gauss_exp_plain_v1.parquet", "gauss_exp_plain_v2.parquet"] {
        let plain = read_parquet(&spec(file, "x", Some("w"), false)).unwrap();
        assert_eq!(plain.table, snappy.table, "{file}");
    }
    let required = read_parquet(&spec("gauss_exp_required.parquet", "x", None, false)).unwrap();
    assert_eq!(required.table.columns[0], xs);
    let floats = read_parquet(&spec("gauss_exp.parquet", "x32", None, false)).unwrap();
    for (f, x) in floats.table.columns[0].iter().zip(&xs) {
        assert_eq!(*f, *x as f32 as f64);
    }
    let mut ints = spec("gauss_exp.parquet", "n", None, false);
    ints.columns[0].lo = 0.0;
    ints.columns[0].hi = 1e6;
    let n = read_parquet(&ints).unwrap();
    assert_eq!(
        n.table.columns[0],
        (0..3000).map(|i| i as f64).collect::<Vec<_>>()
    );
}

/// Page indexes: pages of sorted events that lie wholly outside a domain are not read (their
/// rows counted as dropped), and what is read equals the same file without a page index read
/// and filtered — with two observables whose pages end at different rows (a double and an
/// int32), and with weights. Without "drop", nothing is skipped and the count is an error.
#[test]
fn page_indexes_skip_pages_outside_the_domains() {
    let both = |file: &str, drop_outside: bool| {
        let mut s = spec(file, "x", Some("w"), drop_outside);
        s.columns.push(ColumnRequest {
            observable: "k".into(),
            column: "k".into(),
            lo: 0.0,
            hi: 3000.0,
        });
        s
    };
    let paged = read_parquet(&both("sorted_paged.parquet", true)).unwrap();
    let unpaged = read_parquet(&both("sorted_unpaged.parquet", true)).unwrap();
    assert_eq!(paged.table, unpaged.table);
    assert_eq!(paged.dropped, unpaged.dropped);
    assert_eq!(unpaged.page_rows_skipped, 0);
    // x is uniform over [40, 140]: about 40 % of 4 000 rows lie outside [60, 120] (x's pages
    // of 200 rows), and k leaves out its last 999 (pages of 300 rows): the skipped ranges begin
    // inside the other column's pages, which are read in part.
    assert!(
        paged.page_rows_skipped > 1000 && paged.page_rows_skipped < paged.dropped,
        "{} of {}",
        paged.page_rows_skipped,
        paged.dropped
    );
    let kept = &paged.table;
    assert!(kept.columns[0].iter().all(|x| (60.0..=120.0).contains(x)));
    assert!(kept.columns[1].iter().all(|k| (0.0..=3000.0).contains(k)));
    assert_eq!(kept.len() + paged.dropped, 4000);
    // The same pages as dictionaries, as data pages of format 2, gzipped: the same events.
    for variant in ["dict", "v2", "gzip"] {
        let file = format!("sorted_paged_{variant}.parquet");
        let read = read_parquet(&both(&file, true)).unwrap();
        assert_eq!(read.table, unpaged.table, "{file}");
        assert_eq!(read.dropped, unpaged.dropped, "{file}");
        assert!(read.page_rows_skipped > 1000, "{file}");
    }
    let e = read_parquet(&both("sorted_paged.parquet", false)).unwrap_err();
    assert!(e.rule.contains("outside the domain"), "{e}");
}

/// `"outside": "drop"`: the fourth row group (x in [130, 140]) is not read, the five events at
/// x = 59 are filtered, and the count is said; without it, one error naming the column and count.
#[test]
fn the_domains_as_a_fit_range() {
    let xs = inline_events();
    let dropped = read_parquet(&spec("with_outside.parquet", "x", Some("w"), true)).unwrap();
    assert_eq!(dropped.row_groups_skipped, 1);
    assert_eq!(dropped.dropped, 1005);
    assert_eq!(dropped.table.columns[0], xs[5..]);
    assert_eq!(dropped.table.weights.as_ref().unwrap().len(), 2995);
    let e = read_parquet(&spec("with_outside.parquet", "x", None, false)).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("with_outside.parquet")
            && text.contains("1005 of 4000 events")
            && text.contains("column \"x\"")
            && text.contains("\"drop\""),
        "{text}"
    );
    // Through the HS3 document: the note says what was dropped.
    let mut d = doc("gauss_exp.json");
    d["data"][0]["histfit_source"]["file"] = "with_outside.parquet".into();
    d["data"][0]["histfit_source"]["outside"] = "drop".into();
    let m = open(&d, &choice()).unwrap();
    assert!(
        m.notes.iter().any(|n| n.contains("1005 events outside")),
        "{:?}",
        m.notes
    );
}

#[test]
fn bad_sources_name_the_place_and_the_rule() {
    let cases: Vec<(SourceSpec, &str)> = vec![
        (spec("nope.parquet", "x", None, false), "cannot open"),
        (
            spec("gauss_exp.parquet", "mass", None, false),
            "no column \"mass\" (it has x, w, x32, n, wbad)",
        ),
        (
            spec("gauss_exp.parquet", "x", Some("weight"), false),
            "no column \"weight\"",
        ),
        (spec("with_null.parquet", "x", None, false), "1 null values"),
        (
            spec("unsigned.parquet", "x", None, false),
            "holds unsigned or decimal integers",
        ),
        (
            spec("gauss_exp.json", "x", None, false),
            "not a readable Parquet file",
        ),
    ];
    for (s, want) in cases {
        let e = read_parquet(&s).unwrap_err().to_string();
        assert!(e.contains(want), "{e} lacks {want}");
    }
    let mut d = doc("gauss_exp.json");
    d["data"][0]["histfit_source"]["format"] = "csv".into();
    let e = open(&d, &choice()).unwrap_err().to_string();
    assert!(
        e.contains("histfit_source.format") && e.contains("\"parquet\""),
        "{e}"
    );
    let mut d = doc("gauss_exp.json");
    d["data"][0]["histfit_source"]["columns"] = serde_json::json!({"y": "x"});
    let e = open(&d, &choice()).unwrap_err().to_string();
    assert!(
        e.contains("columns.y") && e.contains("not an observable"),
        "{e}"
    );
    let mut d = doc("gauss_exp.json");
    d["data"][0]["entries"] = serde_json::json!([[90.0]]);
    let e = open(&d, &choice()).unwrap_err().to_string();
    assert!(e.contains("both \"entries\" and \"histfit_source\""), "{e}");
    // Negative and NaN weights: said with their count and the first, the file named.
    let e = read_parquet(&spec("gauss_exp.parquet", "x", Some("wbad"), false))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gauss_exp.parquet")
            && e.contains("2 weights negative or not finite (the first, event 10: -1)"),
        "{e}"
    );
    // A file cut short (as the fuzz target feeds it): an error, not a panic.
    let bytes = std::fs::read(events_dir().join("gauss_exp.parquet")).unwrap();
    let s = spec("gauss_exp.parquet", "x", Some("w"), false);
    assert!(read_parquet_bytes(bytes.clone(), &s).is_ok());
    for cut in [8, bytes.len() / 2, bytes.len() - 9] {
        let e = read_parquet_bytes(bytes[..cut].to_vec(), &s)
            .unwrap_err()
            .to_string();
        assert!(e.contains("gauss_exp.parquet"), "{e}");
    }
}
