//! The invariants of histfit's input handling, as functions of raw input: the fuzz targets
//! (`fuzz/fuzz_targets/*`, nightly) call them on the fuzzer's bytes, and the ordinary test suite
//! replays every input the fuzzer found (`fuzz/regressions/<target>/*`) through them on stable.
//! Each panics when an invariant breaks: an input that parses either gives a finite −ln L and
//! gradient at its initial point or an error that names the place and the rule.

use histfit_compute::HistFactoryData;
use histfit_compute::{CpuEvaluator, Dataset, Evaluator};
use histfit_import::RootFile;
use histfit_model::{compile, Model, Settings, Workspace};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// An error must say where and what.
fn named(place: &str, rule: &str) {
    assert!(
        !rule.trim().is_empty(),
        "an error without a rule (at {place:?})"
    );
}

/// A workspace's bytes: parse, validate, compile under both settings, −ln L and its gradient at
/// the initial point.
pub fn workspace_bytes(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    reads_as_written_without_indentation(text);
    // The walk's reading (the authority), with the typed one checked against it.
    let parsed = match serde_json::from_str::<Value>(text) {
        Err(_) => Workspace::from_str(text, "fuzz.json"),
        Ok(v) => {
            let walked = Workspace::from_value(&v);
            typed_agrees(text, &walked);
            walked
        }
    };
    match parsed {
        Err(e) => named(&e.place, &e.rule),
        Ok(ws) => workspace(&ws),
    }
}

/// The typed reader ([`histfit_model::typed`]) may refuse what the walk accepts (the walk then
/// reads it), never accept what the walk refuses, and reads what it accepts exactly as the
/// walk does.
pub fn typed_reads_as_the_walk(text: &str) {
    reads_as_written_without_indentation(text);
    match serde_json::from_str::<Value>(text) {
        Ok(v) => typed_agrees(text, &Workspace::from_value(&v)),
        Err(e) => assert!(
            histfit_model::typed::read(text).is_none(),
            "the typed reader accepted text that is not JSON: {e}"
        ),
    }
}

/// The typed reader on `text` without its indentation (what `histfit_model::workspace_from_file`
/// reads) reads exactly what it reads from the text as written, accepting and refusing alike.
fn reads_as_written_without_indentation(text: &str) {
    // In chunks of a size the input picks, as a file is read in chunks (the blanks of one line
    // may span two).
    let (mut bytes, mut at_line_start) = (Vec::new(), false);
    for chunk in text.as_bytes().chunks(1 + text.len() % 61) {
        histfit_model::unindent::unindent_into(chunk, &mut at_line_start, &mut bytes);
    }
    let unindented = String::from_utf8(bytes).expect("removing ASCII blanks keeps UTF-8");
    assert_eq!(
        histfit_model::typed::read(&unindented),
        histfit_model::typed::read(text),
        "the typed reader reads the text differently without its indentation"
    );
}

/// The typed reading of `text` against the walk's reading of the same text.
fn typed_agrees(text: &str, walked: &histfit_model::Result<Workspace>) {
    if let Some(typed) = histfit_model::typed::read(text) {
        match walked {
            Ok(w) => assert_eq!(&typed, w, "the typed reader and the walk differ"),
            Err(e) => panic!("the typed reader accepted what the walk refuses: {e}"),
        }
    }
}

/// A parsed workspace: compile under both settings and evaluate at the initial point.
pub fn workspace(ws: &Workspace) {
    for settings in [Settings::smooth(), Settings::pyhf_defaults()] {
        match compile(ws, None, &settings) {
            Err(e) => named(&e.place, &e.rule),
            Ok(m) => binned_model(Arc::new(m)),
        }
    }
}

/// A compiled model: at its initial point −ln L is finite with a finite gradient, or +∞ with
/// the bins that make it so nameable.
pub fn binned_model(model: Arc<Model>) {
    let settings = model.settings;
    let data = Dataset::observed(&model);
    let mut eval = CpuEvaluator::new(model.clone());
    let init = model.init();
    let mut grad = vec![0.0; init.len()];
    match eval.nll_grad(&init, &data, &mut grad) {
        Err(e) => named("evaluation", &e.to_string()),
        // +∞ is a likelihood of 0 (a factor 0 at the start, a yield only a variation makes):
        // then the bins that make it so must be nameable, as the fit's report names them.
        Ok(v) if v == f64::INFINITY => {
            let bins =
                histfit_compute::histfactory::zero_likelihood_bins(&mut eval, &model, &data, &init)
                    .expect("expected counts at the initial point");
            assert!(
                !bins.is_empty(),
                "−ln L is +∞ at the initial point, no bin says why"
            );
        }
        Ok(v) => {
            assert!(
                v.is_finite(),
                "−ln L at the initial point is {v} ({settings:?})"
            );
            assert!(
                grad.iter().all(|g| g.is_finite()),
                "a non-finite gradient at the initial point ({settings:?})"
            );
        }
    }
}

/// A patchset applied to one of the shipped workspaces (`base`): every patch it names, then
/// the patched workspace as [`workspace`].
pub fn patchset_bytes(base: &Value, data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Parsed as the CLI parses files (syntax errors with line, column and the offending text).
    let patchset = match histfit_model::parse_json(text, "fuzz-patchset.json") {
        Err(e) => return named(&e.place, &e.rule),
        Ok(v) => v,
    };
    let points = match histfit_model::patch::patch_points(&patchset, "fuzz-patchset.json") {
        Err(e) => return named(&e.place, &e.rule),
        Ok((_, points)) => points,
    };
    for point in points.iter().take(8) {
        let mut doc = base.clone();
        match histfit_model::patch::apply_patch_point(&mut doc, &patchset, point, "fuzz") {
            Err(e) => named(&e.place, &e.rule),
            Ok(()) => match histfit_model::workspace_from_value(&doc, "patched") {
                Err(e) => named(&e.place, &e.rule),
                Ok(ws) => workspace(&ws),
            },
        }
    }
}

/// A ROOT file's bytes: every directory listed and every object read as a histogram.
pub fn root_bytes(data: &[u8]) {
    let mut file = match RootFile::from_bytes(Path::new("fuzz.root"), data.to_vec()) {
        Err(e) => return named(&e.place, &e.rule),
        Ok(f) => f,
    };
    let mut dirs = vec![String::new()];
    let mut listed = 0;
    while let Some(dir) = dirs.pop() {
        listed += 1;
        if listed > 64 {
            break;
        }
        let keys = match file.keys(&dir) {
            Err(e) => {
                named(&e.place, &e.rule);
                continue;
            }
            Ok(k) => k.to_vec(),
        };
        for key in keys.iter().take(64) {
            let path = if dir.is_empty() {
                key.name.clone()
            } else {
                format!("{dir}/{}", key.name)
            };
            if key.class_name.starts_with("TDirectory") {
                dirs.push(path);
            } else if let Err(e) = file.histogram(&path) {
                named(&e.place, &e.rule);
            }
        }
    }
}

/// Raw bytes as a ROOT file of trees: every TTree key of the top directory (and of
/// directories one level down) read as a tree, and each of its branches' values; a flat branch
/// gives one value an entry.
pub fn root_tree_bytes(data: &[u8]) {
    let mut file = match RootFile::from_bytes(Path::new("fuzz.root"), data.to_vec()) {
        Err(e) => return named(&e.place, &e.rule),
        Ok(f) => f,
    };
    let mut paths = Vec::new();
    match file.keys("") {
        Err(e) => return named(&e.place, &e.rule),
        Ok(keys) => {
            for k in keys.iter().take(64) {
                paths.push((k.class_name.clone(), k.name.clone()));
            }
        }
    }
    let dirs: Vec<String> = paths
        .iter()
        .filter(|(c, _)| c.starts_with("TDirectory"))
        .map(|(_, n)| n.clone())
        .take(8)
        .collect();
    for d in dirs {
        if let Ok(keys) = file.keys(&d) {
            let inner: Vec<_> = keys
                .iter()
                .take(64)
                .map(|k| (k.class_name.clone(), format!("{d}/{}", k.name)))
                .collect();
            paths.extend(inner);
        }
    }
    for (_, path) in paths.iter().filter(|(c, _)| c == "TTree") {
        let tree = match file.tree(path) {
            Err(e) => {
                named(&e.place, &e.rule);
                continue;
            }
            Ok(t) => t,
        };
        for b in tree.branches.iter().take(64) {
            match file.branch_values(&tree, &b.name) {
                Err(e) => named(&e.place, &e.rule),
                Ok(v) => assert_eq!(v.len() as u64, tree.entries, "branch {}", b.name),
            }
        }
    }
}

/// Prepares `dir` for [`xml_bytes`]: a `config/` folder and `data/` with the ROOT files the XML
/// target names (pyhf's validation inputs and one zstd-compressed file).
pub fn xml_sandbox(dir: &Path) {
    std::fs::create_dir_all(dir.join("config")).expect("temporary folder");
    std::fs::create_dir_all(dir.join("data")).expect("temporary folder");
    for (from, to) in [
        ("xml/xmlimport_input/data/example.root", "example.root"),
        ("xml/multichannel_histfactory/data/data.root", "data.root"),
        ("xml/xmlimport_input/data/ShapeSys.root", "ShapeSys.root"),
        ("xml/generated/zstd.root", "zstd.root"),
    ] {
        std::fs::copy(crate::fixture(from), dir.join("data").join(to)).expect("fixture copied");
    }
}

/// A HistFactory configuration: the top-level XML and one channel XML (split at the first NUL
/// byte of `data`), written into `dir` (which holds `data/*.root` from the fixtures) and
/// imported; an imported workspace is then checked as [`workspace`].
pub fn xml_bytes(dir: &Path, data: &[u8]) {
    let (top, channel) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let config = dir.join("config");
    std::fs::write(config.join("top.xml"), top).expect("temporary file");
    std::fs::write(config.join("channel.xml"), channel).expect("temporary file");
    match histfit_import::xml2json(&config.join("top.xml"), dir, &[]) {
        Err(e) => named(&e.place, &e.rule),
        Ok(imported) => {
            let ws = histfit_model::workspace_from_value(&imported.workspace, "imported")
                .expect("xml2json validates what it returns");
            workspace(&ws);
        }
    }
}

/// An HS3 document's bytes: where its likelihood is binned (`histfactory_dist`), translate it
/// and compile the pyhf workspace as [`workspace`] does; else open it as an event-level
/// likelihood; where it opens, −ln L at the
/// initial point is a number (finite, or +∞ where the density is 0 at an event) and the
/// gradient has one entry per parameter; where it does not, the error names a place and a rule.
pub fn hs3_bytes(data: &[u8]) {
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // Binned HistFactory channels: the translation, compiled and renamed as the document says
    // (or refused, naming the place), never a panic; the model evaluates as any workspace's.
    // Event-level channels: −ln L and its gradient at the start. A mixed likelihood: both parts.
    use histfit_unbinned::hs3_histfactory::{open_document, Opened};
    let events = match open_document(&doc, &histfit_unbinned::Choice::default()) {
        Err(e) => {
            named(&e.place, &e.rule);
            assert!(
                !e.place.trim().is_empty(),
                "an error without a place: {}",
                e.rule
            );
            return;
        }
        Ok(Opened::Binned(model)) => return binned_model(Arc::new(model)),
        Ok(Opened::Events(m)) => m,
        Ok(Opened::Mixed { binned, events, .. }) => {
            binned_model(Arc::new(binned));
            events
        }
    };
    let mut m = events;
    let data = m.observed_dataset();
    let p = m.space.init.clone();
    let mut g = vec![0.0; p.len()];
    if let Ok(v) = m.nll_grad(&p, &data, &mut g) {
        assert!(!v.is_nan(), "−ln L is NaN at the initial point");
    }
}

/// A Parquet file's bytes: read its column "x" (or, where it has none, its first column) as
/// an observable on [60, 120] with column "w" as weights where it has one, keeping or dropping
/// the events outside; where the read succeeds every event lies in the domain, the columns and
/// weights are as long as each other and the weights are finite and ≥ 0, and where it fails the
/// message names the file.
pub fn parquet_bytes(data: &[u8]) {
    use histfit_events::{read_parquet_bytes, ColumnRequest, SourceSpec};
    for (column, weight, drop_outside) in [
        ("x", Some("w"), false),
        ("x", None, true),
        ("x", Some("w"), true),
        ("n", None, true),
    ] {
        let spec = SourceSpec {
            file: "fuzzed.parquet".into(),
            columns: vec![ColumnRequest {
                observable: "x".into(),
                column: column.into(),
                lo: 60.0,
                hi: 120.0,
            }],
            weight: weight.map(str::to_owned),
            drop_outside,
        };
        match read_parquet_bytes(data.to_vec(), &spec) {
            Err(e) => {
                assert_eq!(e.file, "fuzzed.parquet");
                named(&e.file, &e.rule);
            }
            Ok(loaded) => {
                let t = &loaded.table;
                assert!(t.columns[0].iter().all(|x| (60.0..=120.0).contains(x)));
                if let Some(w) = &t.weights {
                    assert_eq!(w.len(), t.columns[0].len());
                    assert!(w.iter().all(|v| v.is_finite() && *v >= 0.0));
                }
            }
        }
    }
}

/// An expression's bytes (a `generic_function`'s text): parse into a graph whose names are all
/// parameters, and evaluate it at one point; an error names its position inside the text.
pub fn expression_bytes(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut g = histfit_unbinned::graph::Graph::new();
    let mut names: Vec<String> = Vec::new();
    let r = histfit_unbinned::expr::parse(&mut g, text, &mut |g, n| {
        let i = match names.iter().position(|m| m == n) {
            Some(i) => i,
            None => {
                names.push(n.to_string());
                names.len() - 1
            }
        };
        Ok(g.param(i))
    });
    match r {
        Err(e) => {
            assert!(
                e.at <= text.chars().count(),
                "position {} past the text",
                e.at
            );
            named(&format!("character {}", e.at), &e.message);
        }
        Ok(id) => {
            let p: Vec<f64> = (0..names.len()).map(|i| 0.5 + i as f64).collect();
            let _ = g.value(id, &p, &[]);
        }
    }
}
