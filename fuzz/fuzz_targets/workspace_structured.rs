//! Structure-aware workspaces: up to 8 channels of up to 2000 bins, samples with every modifier
//! type (and thousands of modifiers through a repeat count), numbers from a palette of edge cases
//! (zero, −0, negative, huge, subnormal, NaN and infinities written as Python's json writes them),
//! arrays of the right length or not, names from a tiny alphabet so they collide — written as pyhf
//! JSON text and checked as the workspace target checks raw bytes.
#![no_main]
use arbitrary::Arbitrary;

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
    "1",
    "10",
    "0",
    "-0.0",
    "0.5",
    "2.5",
    "100",
    "-1",
    "1e308",
    "-1e308",
    "5e-324",
    "1e-300",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
];

fn name(k: u8) -> &'static str {
    ["a", "b", "c", "mu", "lumi", ""][k as usize % 6]
}

/// Palette token `k` (NaN and the infinities as Python's json writes them: not JSON).
fn num(k: u8) -> &'static str {
    PALETTE[k as usize % PALETTE.len()]
}

/// How many numbers `nums` writes.
fn count(v: &Numbers, n: usize) -> usize {
    if v.right_length || v.values.is_empty() {
        n
    } else {
        v.values.len()
    }
}

/// How many numbers a modifier writes, or parameters it makes (for the budget): a shapefactor
/// writes no number and makes one parameter per bin (961 of them over 784 bins are 7.5·10⁵
/// parameters from 50 kB of JSON: 0.15 s on stable, over the 1 s limit in the instrumented
/// build, all of it allocating them; structured-timeout-f4b5e57e and -25ab3e3a replay such
/// models on stable).
fn cost(m: &Modifier, n: usize) -> usize {
    1 + match m {
        Modifier::HistoSys(_, hi, lo) => count(hi, n) + count(lo, n),
        Modifier::StatError(_, d) | Modifier::ShapeSys(_, d) => count(d, n),
        Modifier::ShapeFactor(_) => n,
        _ => 0,
    }
}

/// The JSON text is written directly (names come from a tiny alphabet and need no escaping):
/// building a `serde_json::Value` and serialising it took a quarter of each execution.
fn nums(out: &mut String, v: &Numbers, n: usize) {
    out.push('[');
    if v.values.is_empty() {
        if v.right_length {
            push_joined(out, (0..n).map(|_| "1.0"));
        }
    } else {
        let len = if v.right_length { n } else { v.values.len() };
        push_joined(out, (0..len).map(|i| num(v.values[i % v.values.len()])));
    }
    out.push(']');
}

fn push_joined<'a>(out: &mut String, items: impl Iterator<Item = &'a str>) {
    for (i, s) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(s);
    }
}

fn modifier(out: &mut String, m: &Modifier, n: usize, suffix: &str) {
    let (kind, k) = match m {
        Modifier::NormFactor(k) => ("normfactor", Some(*k)),
        Modifier::Lumi => ("lumi", None),
        Modifier::NormSys(k, ..) => ("normsys", Some(*k)),
        Modifier::HistoSys(k, ..) => ("histosys", Some(*k)),
        Modifier::StatError(k, _) => ("staterror", Some(*k)),
        Modifier::ShapeSys(k, _) => ("shapesys", Some(*k)),
        Modifier::ShapeFactor(k) => ("shapefactor", Some(*k)),
        Modifier::Unknown(k) => (name(*k), Some(*k)),
    };
    let nm = k.map_or_else(|| "lumi".to_string(), |k| format!("{}{suffix}", name(k)));
    out.push_str(&format!(r#"{{"type":"{kind}","name":"{nm}","data":"#));
    match m {
        Modifier::NormSys(_, hi, lo) => {
            out.push_str(&format!(r#"{{"hi":{},"lo":{}}}"#, num(*hi), num(*lo)))
        }
        Modifier::HistoSys(_, hi, lo) => {
            out.push_str(r#"{"hi_data":"#);
            nums(out, hi, n);
            out.push_str(r#","lo_data":"#);
            nums(out, lo, n);
            out.push('}');
        }
        Modifier::StatError(_, d) | Modifier::ShapeSys(_, d) => nums(out, d, n),
        _ => out.push_str("null"),
    }
    out.push('}');
}

/// Numbers a workspace may hold (≈ 50 kB of JSON; one channel of 2000 bins, or 1000
/// modifiers over a few bins). The instrumented build (coverage, address
/// sanitizer, debug assertions) runs 10–30× slower than a release build, and inputs beyond
/// this only time the instrumented parser: the four structured timeouts (1.6–5 MB, up to 16
/// samples × 8 channels of thousands of copies) take 30–50 ms each on stable now that compile
/// has no quadratic look-ups. Scale itself is measured by `histfit-infer`'s `scale` example.
const NUMBERS: usize = 5_000;

fn build(w: &Ws) -> String {
    let mut channels = String::from("[");
    let mut observations = String::from("[");
    let mut budget = NUMBERS;
    for (ci, c) in w.channels.iter().take(8).enumerate() {
        // Mostly a few bins (fast executions explore the structure), one channel in 16 up to
        // 2000 bins.
        let n = if c.bins % 16 == 0 {
            (c.bins / 16 % 2001) as usize
        } else {
            (c.bins % 9) as usize
        };
        if ci > 0 {
            channels.push(',');
            observations.push(',');
        }
        channels.push_str(&format!(r#"{{"name":"{}","samples":["#, name(c.name)));
        for (si, s) in c.samples.iter().take(16).enumerate() {
            // Thousands of bins or thousands of modifiers (copies), within the budget.
            // What the sample writes once (its data and modifiers) and per copy, counted as
            // written (an array of the wrong length has its own length).
            let once = count(&s.data, n)
                + s.modifiers
                    .iter()
                    .take(64)
                    .map(|m| cost(m, n))
                    .sum::<usize>();
            if once > budget {
                break;
            }
            budget -= once;
            if si > 0 {
                channels.push(',');
            }
            channels.push_str(&format!(r#"{{"name":"{}","data":"#, name(s.name)));
            nums(&mut channels, &s.data, n);
            channels.push_str(r#","modifiers":["#);
            let mut first = true;
            let mut sep = |out: &mut String| {
                if !std::mem::take(&mut first) {
                    out.push(',');
                }
            };
            for m in s.modifiers.iter().take(64) {
                sep(&mut channels);
                modifier(&mut channels, m, n, "");
            }
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
                    sep(&mut channels);
                    modifier(&mut channels, m, n, &format!("_{r}"));
                }
            }
            channels.push_str("]}");
        }
        channels.push_str("]}");
        observations.push_str(&format!(r#"{{"name":"{}","data":"#, name(c.name)));
        nums(&mut observations, &c.observed, n);
        observations.push('}');
    }
    channels.push(']');
    observations.push(']');
    // Lumi needs its auxdata and sigma in the measurement: give them, from the palette too.
    let mut parameters = format!(
        r#"[{{"name":"lumi","auxdata":[1.0],"sigmas":[{}],"inits":[1.0]}}"#,
        num(w.poi)
    );
    for (k, init, lo, hi, fixed) in w.params.iter().take(4) {
        parameters.push_str(&format!(
            r#",{{"name":"{}","inits":[{}],"bounds":[[{},{}]],"fixed":{fixed}}}"#,
            name(*k),
            num(*init),
            num(*lo),
            num(*hi)
        ));
    }
    parameters.push(']');
    format!(
        r#"{{"channels":{channels},"observations":{observations},"measurements":[{{"name":"m","config":{{"poi":"{}","parameters":{parameters}}}}}],"version":"1.0.0"}}"#,
        name(w.poi)
    )
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
