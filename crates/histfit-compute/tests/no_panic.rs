//! Mutated workspaces never panic: each of a few thousand random single-node mutations of a real
//! workspace is either rejected with an error or compiles to a model whose likelihood can be
//! evaluated. (Deterministic: a fixed-seed generator picks the mutations.)

use histfit_compute::HistFactoryData;
use histfit_compute::{CpuEvaluator, Dataset, Evaluator};
use histfit_model::{compile, Settings, Workspace};
use histfit_testutil::json;
use serde_json::Value;
use std::sync::Arc;

/// splitmix64: a tiny deterministic generator for picking mutations.
struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Every JSON pointer in the document.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, x)| pointers(x, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, x)| pointers(x, format!("{at}/{i}"), out)),
        _ => {}
    }
}

fn replacement(g: &mut Gen, old: &Value) -> Value {
    match g.below(10) {
        0 => Value::Null,
        1 => Value::from("histosys"),
        2 => Value::from(-1.0),
        3 => Value::from(0.0),
        4 => Value::from(1e300),
        5 => Value::Array(vec![]),
        6 => Value::Array(vec![Value::from(1.0); 7]),
        7 => serde_json::json!({"hi": 0.0, "lo": -2.0}),
        8 => match old {
            Value::Number(n) => Value::from(-n.as_f64().unwrap_or(1.0) * 3.0),
            Value::String(s) => Value::from(format!("{s}_x")),
            _ => Value::Bool(true),
        },
        _ => Value::from("shapesys"),
    }
}

#[test]
fn random_mutations_never_panic() {
    let base = json("complex_workspace.json");
    let mut all = Vec::new();
    pointers(&base, String::new(), &mut all);
    let mut g = Gen(20261122);
    let (mut ok, mut rejected) = (0, 0);
    for _ in 0..3000 {
        let mut ws = base.clone();
        let at = &all[1 + g.below(all.len() - 1)];
        let new = replacement(&mut g, ws.pointer(at).unwrap());
        *ws.pointer_mut(at).unwrap() = new;
        let outcome = std::panic::catch_unwind(|| {
            let parsed = Workspace::from_value(&ws).map_err(|e| e.to_string())?;
            for settings in [Settings::smooth(), Settings::pyhf_defaults()] {
                let model = Arc::new(compile(&parsed, None, &settings).map_err(|e| e.to_string())?);
                let data = Dataset::observed(&model);
                let mut ev = CpuEvaluator::new(model.clone());
                let mut grad = vec![0.0; model.n_params()];
                let v = ev
                    .nll_grad(&model.init(), &data, &mut grad)
                    .map_err(|e| e.to_string())?;
                assert!(
                    !v.is_nan(),
                    "NaN likelihood for a model that compiled ({at})"
                );
            }
            Ok::<(), String>(())
        });
        match outcome {
            Ok(Ok(())) => ok += 1,
            Ok(Err(msg)) => {
                assert!(!msg.is_empty());
                rejected += 1;
            }
            Err(_) => panic!("mutation at {at} panicked"),
        }
    }
    println!("{ok} mutated workspaces compiled and evaluated, {rejected} rejected with an error");
    assert!(ok > 100 && rejected > 100);
}

/// Toys generated at parameters that are not numbers are refused (a Poisson draw for a NaN mean
/// never ended: a shapesys γ of NaN hung the generator).
#[test]
fn toys_at_non_finite_parameters_are_refused() {
    let ws = Workspace::from_value(&json("simple_workspace.json")).unwrap();
    let model = compile(&ws, None, &Settings::smooth()).unwrap();
    let mut params = model.init();
    let expected = vec![1.0; model.n_main];
    assert!(histfit_compute::rng::generate_toy(&model, &expected, &params, 0, 0).is_ok());
    params[1] = f64::NAN;
    let err = histfit_compute::rng::generate_toy(&model, &expected, &params, 0, 0).unwrap_err();
    assert!(err.to_string().contains("must be finite"), "{err}");
}
