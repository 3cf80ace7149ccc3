//! Structure-aware workspaces: up to 8 channels of up to 2000 bins, samples with every modifier
//! type (and thousands of modifiers through a repeat count), numbers from a palette of edge cases
//! (zero, −0, negative, huge, subnormal, NaN and infinities written as Python's json writes them),
//! arrays of the right length or not, names from a tiny alphabet so they collide — written as pyhf
//! JSON text and checked as the workspace target checks raw bytes.
#![no_main]
use arbitrary::Arbitrary;
use serde_json::{json, Value};

#[derive(Arbitrary, Debug)]
struct Ws {
    channels: Vec<Channel>,
    poi: u8,
    params: Vec<(u8, u8, u8, u8, bool)>,
}

#[derive(Arbitrary, Debug)]
struct Channel {
    name: u8,
    bins: u16,
    observed: Numbers,
    samples: Vec<Sample>,
}

#[derive(Arbitrary, Debug)]
struct Sample {
    name: u8,
    data: Numbers,
    modifiers: Vec<Modifier>,
    /// Copies of the modifiers with distinct names (thousands of modifiers).
    repeat: u8,
}

/// Values by palette index, and whether the array takes the channel's length.
#[derive(Arbitrary, Debug)]
struct Numbers {
    values: Vec<u8>,
    right_length: bool,
}

#[derive(Arbitrary, Debug)]
enum Modifier {
    NormFactor(u8),
    Lumi,
    NormSys(u8, u8, u8),
    HistoSys(u8, Numbers, Numbers),
    StatError(u8, Numbers),
    ShapeSys(u8, Numbers),
    ShapeFactor(u8),
    Unknown(u8),
}

const PALETTE: [&str; 16] = [
    "1", "10", "0", "-0.0", "0.5", "2.5", "100", "-1", "1e308", "-1e308", "5e-324", "1e-300", "NaN",
    "Infinity", "-Infinity", "1e999",
];

fn name(k: u8) -> String {
    ["a", "b", "c", "mu", "lumi", ""][k as usize % 6].to_string()
}

/// A placeholder the JSON text replaces with the palette's raw token (NaN is not JSON).
fn num(k: u8) -> Value {
    json!(format!("@{}@", k as usize % PALETTE.len()))
}

/// How many numbers `nums` writes.
fn count(v: &Numbers, n: usize) -> usize {
    if v.right_length || v.values.is_empty() {
        n
    } else {
        v.values.len()
    }
}

/// How many numbers a modifier writes (for the budget).
fn cost(m: &Modifier, n: usize) -> usize {
    1 + match m {
        Modifier::HistoSys(_, hi, lo) => count(hi, n) + count(lo, n),
        Modifier::StatError(_, d) | Modifier::ShapeSys(_, d) => count(d, n),
        _ => 0,
    }
}

fn nums(v: &Numbers, n: usize) -> Value {
    let len = if v.right_length { n } else { v.values.len() };
    if v.values.is_empty() {
        return Value::Array(vec![json!(1.0); if v.right_length { n } else { 0 }]);
    }
    Value::Array((0..len).map(|i| num(v.values[i % v.values.len()])).collect())
}

fn modifier(m: &Modifier, n: usize, suffix: &str) -> Value {
    let nm = |k: &u8| format!("{}{suffix}", name(*k));
    match m {
        Modifier::NormFactor(k) => json!({"type": "normfactor", "name": nm(k), "data": null}),
        Modifier::Lumi => json!({"type": "lumi", "name": "lumi", "data": null}),
        Modifier::NormSys(k, hi, lo) => {
            json!({"type": "normsys", "name": nm(k), "data": {"hi": num(*hi), "lo": num(*lo)}})
        }
        Modifier::HistoSys(k, hi, lo) => json!({"type": "histosys", "name": nm(k),
            "data": {"hi_data": nums(hi, n), "lo_data": nums(lo, n)}}),
        Modifier::StatError(k, d) => json!({"type": "staterror", "name": nm(k), "data": nums(d, n)}),
        Modifier::ShapeSys(k, d) => json!({"type": "shapesys", "name": nm(k), "data": nums(d, n)}),
        Modifier::ShapeFactor(k) => json!({"type": "shapefactor", "name": nm(k), "data": null}),
        Modifier::Unknown(k) => json!({"type": name(*k), "name": nm(k), "data": null}),
    }
}

/// Numbers a workspace may hold (≈ 50 kB of JSON; one channel of 2000 bins, or 1000
/// modifiers over a few bins). The instrumented build (coverage, address
/// sanitizer, debug assertions) runs 10–30× slower than a release build, and inputs beyond
/// this only time the instrumented parser: the four structured timeouts (1.6–5 MB, up to 16
/// samples × 8 channels of thousands of copies) take 30–50 ms each on stable now that compile
/// has no quadratic look-ups. Scale itself is measured by `histfit-infer`'s `scale` example.
const NUMBERS: usize = 5_000;

fn build(w: &Ws) -> String {
    let mut channels = Vec::new();
    let mut observations = Vec::new();
    let mut budget = NUMBERS;
    for c in w.channels.iter().take(8) {
        // Mostly a few bins (fast executions explore the structure), one channel in 16 up to
        // 2000 bins.
        let n = if c.bins % 16 == 0 {
            (c.bins / 16 % 2001) as usize
        } else {
            (c.bins % 9) as usize
        };
        let mut samples = Vec::new();
        for s in c.samples.iter().take(16) {
            // Thousands of bins or thousands of modifiers (copies), within the budget.
            // What the sample writes once (its data and modifiers) and per copy, counted as
            // written (an array of the wrong length has its own length).
            let once = count(&s.data, n) + s.modifiers.iter().take(64).map(|m| cost(m, n)).sum::<usize>();
            if once > budget {
                break;
            }
            budget -= once;
            let mut mods: Vec<Value> =
                s.modifiers.iter().take(64).map(|m| modifier(m, n, "")).collect();
            // Mostly none or a few copies; one sample in 16 up to a thousand (4000 copies took
            // 0.4 s in the instrumented build, most of it sorting their names: 10 ms on stable;
            // structured-timeout-02915333).
            let wanted = if s.repeat >= 240 {
                (s.repeat as usize - 239) * 64
            } else {
                s.repeat as usize % 4
            };
            let per_copy = s.modifiers.iter().map(|m| cost(m, n)).max().unwrap_or(1);
            let copies = wanted.min(budget / per_copy);
            budget -= copies * per_copy;
            for r in 0..copies {
                if let Some(m) = s.modifiers.get(r % s.modifiers.len().max(1)) {
                    mods.push(modifier(m, n, &format!("_{r}")));
                }
            }
            samples.push(json!({"name": name(s.name), "data": nums(&s.data, n), "modifiers": mods}));
        }
        channels.push(json!({"name": name(c.name), "samples": samples}));
        observations.push(json!({"name": name(c.name), "data": nums(&c.observed, n)}));
    }
    // Lumi needs its auxdata and sigma in the measurement: give them, from the palette too.
    let mut parameters: Vec<Value> = vec![json!({"name": "lumi", "auxdata": [1.0], "sigmas": [num(w.poi)], "inits": [1.0]})];
    parameters.extend(w.params.iter().take(4).map(|(k, init, lo, hi, fixed)| {
        json!({"name": name(*k), "inits": [num(*init)], "bounds": [[num(*lo), num(*hi)]], "fixed": fixed})
    }));
    let doc = json!({
        "channels": channels,
        "observations": observations,
        "measurements": [{"name": "m", "config": {"poi": name(w.poi), "parameters": parameters}}],
        "version": "1.0.0"
    });
    let text = serde_json::to_string(&doc).expect("JSON");
    // Each placeholder "@i@" becomes palette token i, in one pass over the text.
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find("\"@") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 2..];
        match tail.find("@\"").and_then(|end| Some((end, tail[..end].parse::<usize>().ok()?))) {
            Some((end, i)) if i < PALETTE.len() => {
                out.push_str(PALETTE[i]);
                rest = &tail[end + 2..];
            }
            _ => {
                out.push_str("\"@");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

libfuzzer_sys::fuzz_target!(|w: Ws| {
    let text = build(&w);
    // `HISTFIT_FUZZ_DUMP=FILE` writes the JSON an input makes (a finding becomes a
    // workspace_json regression, replayed on stable).
    if let Ok(path) = std::env::var("HISTFIT_FUZZ_DUMP") {
        std::fs::write(path, &text).expect("dump file");
    }
    histfit_testutil::inputs::workspace_bytes(text.as_bytes());
});
