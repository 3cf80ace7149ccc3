//! ROOT's own TTrees (written by ROOT 6.40, `scripts/make_tree_fixtures.py`) read by histfit's
//! reader: every number type, in every compression ROOT writes, equal value for value to the same
//! values written by pyarrow; branches the reader does not read are refused naming why.

use histfit_events::{read_branches, read_parquet, ColumnRequest, SourceSpec};
use std::path::PathBuf;

const BRANCHES: [&str; 9] = ["mass", "pt", "n", "big", "flag", "u", "s", "b", "w"];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/events")
        .join(name)
}

/// The reference values: the Parquet file's columns (the boolean column is checked apart).
fn reference() -> Vec<Vec<f64>> {
    let spec = SourceSpec {
        file: fixture("tree_values.parquet"),
        columns: BRANCHES
            .iter()
            .filter(|&&b| b != "flag")
            .map(|b| ColumnRequest {
                observable: b.to_string(),
                column: b.to_string(),
                lo: f64::NEG_INFINITY,
                hi: f64::INFINITY,
            })
            .collect(),
        weight: None,
        drop_outside: false,
    };
    let mut cols = read_parquet(&spec)
        .expect("the reference values")
        .table
        .columns;
    cols.insert(4, Vec::new());
    cols
}

#[test]
fn every_compression_and_number_type_reads_as_root_wrote_it() {
    let want = reference();
    let names: Vec<String> = BRANCHES.iter().map(|b| b.to_string()).collect();
    for comp in ["zlib", "lz4", "lzma", "zstd", "none", "default"] {
        let got = read_branches(&fixture(&format!("tree_{comp}.root")), "events", &names)
            .unwrap_or_else(|e| panic!("{comp}: {e}"));
        for (k, name) in BRANCHES.iter().enumerate() {
            assert_eq!(got[k].len(), 1000, "{comp} {name}");
            if *name == "flag" {
                continue;
            }
            for (i, (a, b)) in got[k].iter().zip(&want[k]).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{comp} {name}[{i}]: {a} vs {b}");
            }
        }
        assert!(got[4].iter().all(|&v| v == 0.0 || v == 1.0));
        let flags: f64 = got[4].iter().sum();
        assert!((200.0..400.0).contains(&flags), "{comp}: {flags} flags set");
    }
}

#[test]
fn branches_not_read_are_refused_saying_why() {
    let file = fixture("tree_kinds.root");
    let x = read_branches(&file, "sub/events", &["x".into()]).unwrap();
    assert_eq!(x[0], (0..10).map(f64::from).collect::<Vec<_>>());
    for (branch, why) in [
        ("arr", "holds an array"),
        ("ab", "several leaves"),
        ("vec", "not a flat branch"),
        ("nope", "no such branch (it has x, arr, ab, vec)"),
    ] {
        let e = read_branches(&file, "sub/events", &[branch.into()]).unwrap_err();
        assert!(e.rule.contains(why), "{branch}: {e}");
        assert!(e.rule.contains(&format!("branch \"{branch}\"")), "{e}");
    }
    let e = read_branches(&file, "events", &["x".into()]).unwrap_err();
    assert!(
        e.rule
            .contains("no tree \"events\" (here: sub/ (a directory))"),
        "{e}"
    );
    let e = read_branches(&fixture("tree_values.parquet"), "events", &["x".into()]).unwrap_err();
    assert!(e.rule.contains("not a ROOT file"), "{e}");
}
