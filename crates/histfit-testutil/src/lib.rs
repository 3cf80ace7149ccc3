//! Helpers shared by the test suites of the histfit crates: where the fixtures live, reading
//! golden JSON, and compiling a shipped workspace under one of the two reference settings.

pub mod inputs;
pub mod synthetic;

use histfit_compute::Dataset;
use histfit_compute::HistFactoryData;
use histfit_model::{compile, Model, Settings, Workspace};
use serde_json::Value;
use std::sync::Arc;

/// The shipped workspaces with pyhf goldens.
pub const WORKSPACES: [&str; 4] = [
    "simple_workspace",
    "complex_workspace",
    "two_channel_workspace",
    "workspace_tHu",
];

/// The two interpolation settings of the goldens.
pub const SETTINGS: [&str; 2] = ["smooth", "pyhf"];

/// The repository's root, from the manifest folder of the running test's crate (every crate
/// sits at `crates/NAME`). Cargo sets it when it runs a test; the value compiled in is only the
/// fallback, because a test binary reused from a build target shared with a checkout elsewhere
/// would carry that checkout's path.
pub fn repo_root() -> std::path::PathBuf {
    let dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    std::path::Path::new(&dir).join("../..")
}

/// Path of a file in `tests/fixtures` (`$HISTFIT_FIXTURES` overrides the folder, for test
/// binaries built here and run on another machine, such as the lent GPU).
pub fn fixture(name: &str) -> String {
    match std::env::var("HISTFIT_FIXTURES") {
        Ok(dir) => format!("{dir}/{name}"),
        Err(_) => format!("{}/tests/fixtures/{name}", repo_root().display()),
    }
}

/// A fixture parsed as JSON.
pub fn json(name: &str) -> Value {
    let path = fixture(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A JSON array of numbers.
pub fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

/// |a − b| / |b|.
pub fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

/// A reference's fitted parameters, `{name: {"value", "error"}}`, as `(name, value, error)`.
pub fn reference_params(v: &Value) -> Vec<(String, f64, f64)> {
    let number = |p: &Value, k: &str| p[k].as_f64().unwrap_or_else(|| panic!("no {k} in {p}"));
    v.as_object()
        .expect("parameters by name")
        .iter()
        .map(|(n, p)| (n.clone(), number(p, "value"), number(p, "error")))
        .collect()
}

/// A fit against a reference's `(name, value, error)` per parameter: each value within 0.05 of
/// the reference's error, each error within 2 % (the tolerances of the RooFit and iminuit
/// references); `index` finds a parameter by name, `label` names the case in a failure.
pub fn assert_fit_near(
    label: &str,
    want: &[(String, f64, f64)],
    index: impl Fn(&str) -> usize,
    bestfit: &[f64],
    errors: &[f64],
) {
    for (n, value, error) in want {
        let k = index(n);
        assert!(
            (bestfit[k] - value).abs() <= 0.05 * error,
            "{label}: {n} = {} vs {value} ± {error}",
            bestfit[k]
        );
        assert!(
            ((errors[k] - error) / error).abs() <= 0.02,
            "{label}: σ({n}) = {} vs {error}",
            errors[k]
        );
    }
}

/// "smooth" (code4/code4p) or "pyhf" (code1/code0).
pub fn settings(name: &str) -> Settings {
    match name {
        "smooth" => Settings::smooth(),
        "pyhf" => Settings::pyhf_defaults(),
        other => panic!("unknown setting {other}"),
    }
}

/// A one-channel, two-bin model whose second bin has no events: signal (1, 2) × `mu`
/// (bounds ±5) over a background (10, 0), observed (12, 0). μ < 0 takes the empty bin's λ = 2μ
/// below 0 while the first bin stays positive: the tests of `Dataset::empty_bin_wall`.
pub fn empty_bin_model(settings: Settings) -> Arc<Model> {
    let spec = serde_json::json!({
        "channels": [{"name": "c", "samples": [
            {"name": "s", "data": [1.0, 2.0], "modifiers": [
                {"name": "mu", "type": "normfactor", "data": null}]},
            {"name": "b", "data": [10.0, 0.0], "modifiers": []}]}],
        "observations": [{"name": "c", "data": [12.0, 0.0]}],
        "measurements": [{"name": "m", "config": {"poi": "mu", "parameters": [
            {"name": "mu", "bounds": [[-5.0, 5.0]]}]}}],
        "version": "1.0.0"
    });
    let ws = Workspace::from_value(&spec).expect("valid workspace");
    Arc::new(compile(&ws, None, &settings).expect("compiles"))
}

/// Compiles `tests/fixtures/{name}.json` and returns the model with its observed data.
pub fn load(name: &str, settings: Settings) -> (Arc<Model>, Dataset) {
    let path = fixture(&format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let ws = Workspace::from_str(&text, name).expect("valid workspace");
    let model = Arc::new(compile(&ws, None, &settings).expect("compiles"));
    let data = Dataset::observed(&model);
    (model, data)
}

/// Compiles the public likelihood `tests/fixtures/public/{name}.json.gz` (gzipped; the file may
/// hold the JSON as a JSON string) with the observed data. Where the measurement's POI is not a
/// parameter of the model (a signal patch would add it), the first normfactor is the POI, as in
/// `scripts/public_likelihoods.py`.
pub fn load_public(name: &str, settings: Settings) -> (Arc<Model>, Dataset) {
    use std::io::Read;
    let path = fixture(&format!("public/{name}.json.gz"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut spec: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    if let Value::String(inner) = &spec {
        spec = serde_json::from_str(inner).unwrap_or_else(|e| panic!("{path} (inner JSON): {e}"));
    }
    let mut normfactors: Vec<String> = Vec::new();
    for channel in spec["channels"].as_array().expect("channels") {
        for sample in channel["samples"].as_array().expect("samples") {
            for m in sample["modifiers"].as_array().expect("modifiers") {
                let modifier = m["name"].as_str().expect("modifier name");
                if m["type"] == "normfactor" && !normfactors.iter().any(|n| n == modifier) {
                    normfactors.push(modifier.to_owned());
                }
            }
        }
    }
    let poi = spec["measurements"][0]["config"]["poi"].clone();
    if !normfactors.iter().any(|n| poi == n.as_str()) {
        for m in spec["measurements"].as_array_mut().expect("measurements") {
            m["config"]["poi"] = Value::String(normfactors[0].clone());
        }
    }
    let ws = Workspace::from_str(&spec.to_string(), name).expect("valid workspace");
    let model = Arc::new(compile(&ws, None, &settings).expect("compiles"));
    let data = Dataset::observed(&model);
    (model, data)
}

/// The `settings.{setting}` object of `{name}.golden.json`.
pub fn golden(name: &str, setting: &str) -> Value {
    json(&format!("{name}.golden.json"))["settings"][setting].clone()
}

/// A point a little off the suggested init (±0.1, clamped to the bounds) so that every
/// interpolation branch is live: what the benchmarks and the profiling driver evaluate at.
pub fn off_init_point(model: &Model) -> Vec<f64> {
    model
        .parameters
        .iter()
        .enumerate()
        .map(|(i, q)| (q.init + 0.1 * ((i % 7) as f64 - 3.0) / 3.0).clamp(q.lower, q.upper))
        .collect()
}

/// `count` points around [`off_init_point`], row after row (point k outer): point k's parameter
/// i moved by 1e-3·((k + i) mod 7), so that a batch of evaluations has no two points alike (the
/// benchmarks' batches).
pub fn off_init_batch(model: &Model, count: usize) -> Vec<f64> {
    let base = off_init_point(model);
    (0..count)
        .flat_map(|k| {
            base.iter()
                .enumerate()
                .map(move |(i, v)| v + 1e-3 * ((k + i) % 7) as f64)
        })
        .collect()
}

/// `at` with every free parameter moved by 1e-3 of its unit (`scales`), clamped to its bounds:
/// a second start whose descent takes a path near the first's, as a GPU's and the CPU's fits of
/// the same data do.
pub fn nearby_start(
    space: &histfit_compute::ParameterSpace,
    at: &[f64],
    scales: &[f64],
) -> Vec<f64> {
    (0..at.len())
        .map(|i| {
            if space.fixed[i] {
                at[i]
            } else {
                (at[i] + 1e-3 * scales[i]).clamp(space.bounds[i].0, space.bounds[i].1)
            }
        })
        .collect()
}

/// `workspace_tHu.json` with one more sample in every channel, "nn_signal" (yields 1 + 0.5·k),
/// scaled by the POI, the luminosity and one normsys: a tHu-sized model whose signal histogram
/// can be an input (the same model as `thu_with_network_signal_spec` of the Python tests).
pub fn thu_with_network_signal(settings: Settings) -> (Arc<Model>, Dataset) {
    let mut spec = json("workspace_tHu.json");
    let poi = spec["measurements"][0]["config"]["poi"].clone();
    for c in spec["channels"].as_array_mut().expect("channels") {
        let nb = c["samples"][0]["data"].as_array().expect("data").len();
        let data: Vec<f64> = (0..nb).map(|k| 1.0 + 0.5 * k as f64).collect();
        c["samples"]
            .as_array_mut()
            .expect("samples")
            .push(serde_json::json!({
                "name": "nn_signal",
                "data": data,
                "modifiers": [
                    {"type": "normfactor", "name": poi, "data": null},
                    {"type": "lumi", "name": "lumi", "data": null},
                    {"type": "normsys", "name": "luminosity", "data": {"hi": 1.017, "lo": 0.983}},
                ],
            }));
    }
    let ws = Workspace::from_str(&spec.to_string(), "workspace_tHu + nn_signal").expect("valid");
    let model = Arc::new(compile(&ws, None, &settings).expect("compiles"));
    let data = Dataset::observed(&model);
    (model, data)
}

/// `count` parameter vectors (flattened) around `centre`: the model's init, [`off_init_point`],
/// `centre` itself, then points that move every parameter that is not fixed by up to ± its
/// scale (the constraint's width, else 1) about `centre`, clamped to the bounds. A fixed
/// generator: the same points on every machine.
pub fn points_around(model: &Model, centre: &[f64], count: usize) -> Vec<f64> {
    let space = histfit_compute::histfactory::parameter_space(model);
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    let mut out = Vec::with_capacity(count * centre.len());
    for k in 0..count {
        let p: Vec<f64> = match k {
            0 => model.init(),
            1 => off_init_point(model),
            2 => centre.to_vec(),
            _ => centre
                .iter()
                .enumerate()
                .map(|(i, &c)| {
                    let u = uniform();
                    if space.fixed[i] {
                        c
                    } else {
                        let (lo, hi) = space.bounds[i];
                        (c + u * space.scales[i]).clamp(lo, hi)
                    }
                })
                .collect(),
        };
        out.extend(p);
    }
    out
}

/// Weights for coverage studies of weighted fits: 0.1 or 1.9 with equal odds (mean 1, mean
/// square 1.81), drawn independently of the events from stream (99, `toy`).
pub fn coverage_weights(n: usize, toy: u64) -> Vec<f64> {
    let mut rng = histfit_compute::rng::ToyStream::new(99, toy, 0);
    (0..n)
        .map(|_| if rng.uniform() < 0.5 { 0.1 } else { 1.9 })
        .collect()
}

/// `d` with its (one) event channel's events given `weights`.
pub fn with_event_weights(d: &Dataset, weights: Vec<f64>) -> Dataset {
    let events = d.events.as_ref().expect("events");
    assert_eq!(events.channels.len(), 1, "one event channel");
    let table = &events.channels[0];
    assert_eq!(weights.len(), table.len(), "a weight per event");
    let mut w = d.clone();
    w.events = Some(Arc::new(histfit_compute::Events {
        channels: vec![histfit_compute::EventTable {
            weights: Some(weights),
            ..table.clone()
        }],
    }));
    w
}

/// The sample standard deviation (n − 1 in the denominator): a pull distribution's width.
pub fn sample_width(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}
