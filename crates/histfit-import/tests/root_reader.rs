//! histfit's ROOT reader against uproot (tests/fixtures/xml/goldens/root_histograms.json, made by
//! scripts/make_xml_goldens.py): every one-dimensional histogram of every shipped ROOT file (pyhf's
//! validation inputs, and files written with each compression ROOT uses) has the same contents,
//! edges and HistFactory errors; what is not a TH1 is refused with a message naming it.

use histfit_import::RootFile;
use histfit_testutil::{fixture, floats, json};
use std::path::Path;

#[test]
fn every_histogram_reads_as_uproot_reads_it() {
    let goldens = json("xml/goldens/root_histograms.json");
    let mut checked = 0;
    for (file, expected) in goldens.as_object().expect("files") {
        let mut root = RootFile::open(Path::new(&fixture(&format!("xml/{file}"))))
            .unwrap_or_else(|e| panic!("{e}"));
        for (key, h) in expected["histograms"].as_object().expect("histograms") {
            let got = root.histogram(key).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got.class_name, h["class"].as_str().unwrap(), "{file} {key}");
            assert_eq!(
                got.contents,
                floats(&h["contents"]),
                "{file} {key}: contents"
            );
            assert_eq!(got.errors(), floats(&h["errors"]), "{file} {key}: errors");
            let edges = floats(&h["edges"]);
            assert_eq!(got.edges.len(), edges.len(), "{file} {key}: edges");
            for (a, b) in got.edges.iter().zip(&edges) {
                assert!(
                    (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                    "{file} {key}: edge {a} vs {b}"
                );
            }
            checked += 1;
        }
        for (key, class) in expected["other_classes"].as_object().expect("others") {
            let class = class.as_str().unwrap();
            let err = root.histogram(key).expect_err("not a TH1").to_string();
            assert!(err.contains(file.rsplit('/').next().unwrap()), "{err}");
            if class.starts_with("TH2") {
                assert!(err.contains("2-dimensional"), "{err}");
            } else {
                assert!(err.contains(class), "{err}");
            }
        }
    }
    // 15 files from pyhf's repository and 5 written with each compression.
    assert_eq!(checked, 108, "histograms compared");
}

#[test]
fn each_compression_gives_the_same_histograms() {
    let mut reference = None;
    for name in ["none", "zlib", "lz4", "zstd", "lzma"] {
        let mut root =
            RootFile::open(Path::new(&fixture(&format!("xml/generated/{name}.root")))).unwrap();
        let read: Vec<_> = ["weighted", "plain", "dir/sub/variable", "dir/counts"]
            .iter()
            .map(|k| root.histogram(k).unwrap())
            .collect();
        assert!(read[0].sumw2.is_some() && read[1].sumw2.is_none());
        assert_eq!(read[0].contents.len(), 300);
        match &reference {
            None => reference = Some(read),
            Some(r) => assert_eq!(&read, r, "{name}"),
        }
    }
}

#[test]
fn damaged_files_give_one_clear_error() {
    let good = std::fs::read(fixture("xml/generated/zlib.root")).unwrap();
    let dir = std::env::temp_dir().join(format!("histfit-root-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    // Not a ROOT file at all.
    let e = RootFile::open(&write("text.root", b"hello"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("text.root") && e.contains("not a ROOT file"),
        "{e}"
    );
    // Missing file.
    let e = RootFile::open(&dir.join("absent.root"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("absent.root") && e.contains("cannot open"),
        "{e}"
    );
    // Every truncation of a real file: an error or a histogram, never a panic.
    for cut in (0..good.len()).step_by(97) {
        let path = write("cut.root", &good[..cut]);
        if let Ok(mut f) = RootFile::open(&path) {
            let _ = f
                .histogram("weighted")
                .map_err(|e| assert!(e.to_string().contains("cut.root")));
        }
    }
    // Flipped bytes anywhere: the same.
    for at in (0..good.len()).step_by(13) {
        let mut bad = good.clone();
        bad[at] ^= 0x5a;
        let path = write("flip.root", &bad);
        if let Ok(mut f) = RootFile::open(&path) {
            for key in ["weighted", "plain", "dir/sub/variable", "dir/counts"] {
                let _ = f.histogram(key);
            }
        }
    }
    // A name that is not there, and a directory asked for as a histogram.
    let mut f = RootFile::open(Path::new(&fixture("xml/generated/zlib.root"))).unwrap();
    let e = f.histogram("nothing").unwrap_err().to_string();
    assert!(
        e.contains("zlib.root") && e.contains("no object \"nothing\""),
        "{e}"
    );
    let e = f.histogram("dir").unwrap_err().to_string();
    assert!(e.contains("TDirectory"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
