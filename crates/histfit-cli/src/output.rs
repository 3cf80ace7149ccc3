//! What every command's output shares: writing it, the header of a result document, and the
//! line of an expected band. Each command formats its own table and document
//! (`commands/*`).

use anyhow::{Context, Result};
use histfit_device::Likelihood;
use histfit_model::Model;
use serde_json::{json, Value};

/// Writes `text` to the file or stdout.
pub fn emit(text: &str, path: Option<&str>) -> Result<()> {
    match path {
        Some(p) => std::fs::write(p, text).with_context(|| format!("cannot write {p}")),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// The interpolation codes of a document.
pub fn settings_json(model: &Model) -> Value {
    json!({"normsys": model.settings.normsys.name(), "histosys": model.settings.histosys.name()})
}

/// A result document: the likelihood's header (for a workspace its file, measurement, POI and
/// interpolation; for an HS3 model its file and likelihood), then the result's fields.
pub fn json<T: serde::Serialize>(source: &str, likelihood: &Likelihood, result: &T) -> String {
    let mut doc = Value::Object(likelihood.header(source));
    if let (Value::Object(d), Ok(Value::Object(r))) = (&mut doc, serde_json::to_value(result)) {
        d.extend(r);
    }
    serde_json::to_string_pretty(&doc).expect("serializable") + "\n"
}

/// One line of an expected band, −2σ … +2σ.
pub fn band_line(label: &str, values: &[f64; 5]) -> String {
    let [a, b, c, d, e] = values.map(significant);
    format!("{label:<14} -2σ {a}   -1σ {b}   median {c}   +1σ {d}   +2σ {e}\n")
}

/// A number to 7 significant digits as a person writes it: positional from 1e-4 to 1e6
/// (0.2012364, 1.700359), scientific outside.
pub fn significant(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || !v.is_finite() || !(1e-4..1e6).contains(&a) {
        return if v == 0.0 || !v.is_finite() {
            format!("{v}")
        } else {
            format!("{v:.6e}")
        };
    }
    let decimals = (6 - a.log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}
