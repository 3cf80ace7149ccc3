//! Structure-aware workspaces: 1–4 channels of 0–6 bins, samples with every modifier type and
//! extreme numbers (zero, negative, huge, subnormal, NaN/inf written as the JSON parser sees
//! them), names from a tiny alphabet so they collide, shared and one-sided modifiers — turned
//! into pyhf JSON and checked as the workspace target checks raw bytes.
#![no_main]
use arbitrary::Arbitrary;
use serde_json::{json, Value};

#[derive(Arbitrary, Debug)]
struct Ws {
    channels: Vec<Channel>,
    poi: u8,
    params: Vec<(u8, f64, f64, f64, bool)>,
}

#[derive(Arbitrary, Debug)]
struct Channel {
    name: u8,
    bins: u8,
    observed: Vec<f64>,
    samples: Vec<Sample>,
}

#[derive(Arbitrary, Debug)]
struct Sample {
    name: u8,
    data: Vec<f64>,
    modifiers: Vec<Modifier>,
}

#[derive(Arbitrary, Debug)]
enum Modifier {
    NormFactor(u8),
    Lumi,
    NormSys(u8, f64, f64),
    HistoSys(u8, Vec<f64>, Vec<f64>),
    StatError(u8, Vec<f64>),
    ShapeSys(u8, Vec<f64>),
    ShapeFactor(u8),
    Unknown(u8),
}

fn name(k: u8) -> String {
    ["a", "b", "c", "mu", "lumi", ""][k as usize % 6].to_string()
}

/// Numbers as a physicist's file holds them, and the edge cases the fuzzer picks.
fn num(x: f64) -> Value {
    json!(if x.is_finite() { x } else { 0.0 })
}

fn nums(v: &[f64], n: usize) -> Value {
    Value::Array((0..n).map(|i| num(v.get(i).copied().unwrap_or(1.0))).collect())
}

fn build(w: &Ws) -> Value {
    let mut channels = Vec::new();
    let mut observations = Vec::new();
    for c in w.channels.iter().take(4) {
        let n = (c.bins % 7) as usize;
        let samples: Vec<Value> = c
            .samples
            .iter()
            .take(5)
            .map(|s| {
                let mods: Vec<Value> = s
                    .modifiers
                    .iter()
                    .take(6)
                    .map(|m| match m {
                        Modifier::NormFactor(k) => json!({"type": "normfactor", "name": name(*k), "data": null}),
                        Modifier::Lumi => json!({"type": "lumi", "name": "lumi", "data": null}),
                        Modifier::NormSys(k, hi, lo) => json!({"type": "normsys", "name": name(*k), "data": {"hi": num(*hi), "lo": num(*lo)}}),
                        Modifier::HistoSys(k, hi, lo) => json!({"type": "histosys", "name": name(*k), "data": {"hi_data": nums(hi, n), "lo_data": nums(lo, n)}}),
                        Modifier::StatError(k, d) => json!({"type": "staterror", "name": name(*k), "data": nums(d, n)}),
                        Modifier::ShapeSys(k, d) => json!({"type": "shapesys", "name": name(*k), "data": nums(d, n)}),
                        Modifier::ShapeFactor(k) => json!({"type": "shapefactor", "name": name(*k), "data": null}),
                        Modifier::Unknown(k) => json!({"type": name(*k), "name": name(*k), "data": null}),
                    })
                    .collect();
                json!({"name": name(s.name), "data": nums(&s.data, n), "modifiers": mods})
            })
            .collect();
        channels.push(json!({"name": name(c.name), "samples": samples}));
        observations.push(json!({"name": name(c.name), "data": nums(&c.observed, n)}));
    }
    let parameters: Vec<Value> = w
        .params
        .iter()
        .take(4)
        .map(|(k, init, lo, hi, fixed)| {
            json!({"name": name(*k), "inits": [num(*init)], "bounds": [[num(*lo), num(*hi)]], "fixed": fixed})
        })
        .collect();
    json!({
        "channels": channels,
        "observations": observations,
        "measurements": [{"name": "m", "config": {"poi": name(w.poi), "parameters": parameters}}],
        "version": "1.0.0"
    })
}

libfuzzer_sys::fuzz_target!(|w: Ws| {
    let text = serde_json::to_string(&build(&w)).expect("JSON");
    histfit_testutil::inputs::workspace_bytes(text.as_bytes());
});
