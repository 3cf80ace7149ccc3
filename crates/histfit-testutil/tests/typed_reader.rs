//! The typed workspace reader on every workspace the project ships: the fixtures (the ATLAS
//! tHu workspace, the pyhf validation and XML-import goldens, …) and the published ATLAS
//! likelihoods of `tests/fixtures/public`. Each must be read by the fast path (none may fall
//! back to the walk) and equal the walk's reading.

use flate2::read::GzDecoder;
use histfit_model::{typed, Workspace};
use std::io::Read;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn every_shipped_workspace_is_read_by_the_typed_reader_as_the_walk_reads_it() {
    let mut all = Vec::new();
    files(
        Path::new(&histfit_testutil::fixture("")).parent().unwrap(),
        &mut all,
    );
    let (mut read, mut public) = (0, 0);
    for path in all {
        let name = path.to_string_lossy().to_string();
        let text = if name.ends_with(".json.gz") {
            let mut s = String::new();
            GzDecoder::new(std::fs::File::open(&path).unwrap())
                .read_to_string(&mut s)
                .unwrap();
            public += 1;
            s
        } else if name.ends_with(".json") {
            std::fs::read_to_string(&path).unwrap()
        } else {
            continue;
        };
        let Ok(value) = serde_json::from_str(&text) else {
            continue;
        };
        // Only workspaces (patchsets, goldens and documents are other JSON).
        let Ok(walked) = Workspace::from_value(&value) else {
            continue;
        };
        let fast =
            typed::read(&text).unwrap_or_else(|| panic!("{name}: not read by the typed reader"));
        assert_eq!(fast, walked, "{name}");
        read += 1;
    }
    assert!(public >= 13, "{public} public workspaces");
    assert!(read >= 17, "{read} workspaces");
    eprintln!("{read} workspaces read alike ({public} public)");
}
