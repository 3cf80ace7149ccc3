//! Formatting of results: readable tables and stable JSON documents.

use anyhow::{Context, Result};
use histfit_infer::FitResult;
use histfit_model::{Constraint, Model};
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

/// Prior centre and width of a constrained parameter (pull = (θ̂ − centre)/width).
fn prior(model: &Model, i: usize) -> Option<(f64, f64)> {
    let p = &model.parameters[i];
    let aux = p.aux_index.map(|k| model.observed[model.n_main + k])?;
    match p.constraint {
        Constraint::Gauss { sigma } => Some((aux, sigma)),
        Constraint::Poisson { tau } => Some((aux / tau, 1.0 / tau.sqrt())),
        Constraint::None => None,
    }
}

fn settings_json(model: &Model) -> Value {
    json!({"normsys": model.settings.normsys.name(), "histosys": model.settings.histosys.name()})
}

pub fn fit_json(model: &Model, source: &str, r: &FitResult, fit_seconds: f64) -> String {
    let n = model.n_params();
    let pars: Vec<Value> = (0..n)
        .map(|i| {
            let unc = r.uncertainties.as_ref().map(|u| u[i]);
            let mut v = json!({
                "name": model.parameters[i].name,
                "value": r.bestfit[i],
                "uncertainty": unc,
                "fixed": r.fixed[i],
            });
            if let Some((centre, width)) = prior(model, i) {
                v["pull"] = json!((r.bestfit[i] - centre) / width);
                v["constraint"] = json!(unc.map(|u| u / width));
            }
            v
        })
        .collect();
    let correlation = r.correlation.as_ref().map(|c| {
        (0..n)
            .map(|i| c[i * n..(i + 1) * n].to_vec())
            .collect::<Vec<_>>()
    });
    let doc = json!({
        "workspace": source,
        "measurement": model.measurement,
        "interpolation": settings_json(model),
        "poi": model.poi_name(),
        "poi_index": model.poi,
        "converged": r.converged,
        "reason": r.reason,
        "twice_nll": r.twice_nll,
        "iterations": r.iterations,
        "evaluations": r.evaluations,
        "projected_gradient_norm": r.projected_gradient_norm,
        "hessian_positive_definite": r.hessian_positive_definite,
        "parameters": pars,
        "correlation": correlation,
        "fit_seconds": fit_seconds,
    });
    serde_json::to_string_pretty(&doc).expect("serializable") + "\n"
}

pub fn fit_table(model: &Model, r: &FitResult) -> String {
    let mut s = String::new();
    let width = model
        .parameters
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(9)
        .max(9);
    s.push_str(&format!(
        "fit: {} ({}; normsys {}, histosys {})\n",
        if r.converged {
            "converged"
        } else {
            "NOT CONVERGED"
        },
        r.reason,
        model.settings.normsys,
        model.settings.histosys
    ));
    s.push_str(&format!(
        "twice_nll = {:.10}   iterations {}   evaluations {}   |proj. grad| {:.1e}\n\n",
        r.twice_nll, r.iterations, r.evaluations, r.projected_gradient_norm
    ));
    s.push_str(&format!(
        "{:<width$}  {:>14}  {:>12}  {:>8}  {:>10}\n",
        "parameter", "value", "error", "pull", "constraint"
    ));
    for (i, p) in model.parameters.iter().enumerate() {
        let unc = r.uncertainties.as_ref().map(|u| u[i]);
        let err = match (r.fixed[i], unc) {
            (true, _) => "fixed".to_string(),
            (false, Some(u)) => format!("±{u:.6}"),
            (false, None) => "-".to_string(),
        };
        let (pull, constraint) = match prior(model, i) {
            Some((c, w)) if !r.fixed[i] => (
                format!("{:+.3}", (r.bestfit[i] - c) / w),
                unc.map(|u| format!("{:.3}", u / w)).unwrap_or_default(),
            ),
            _ => (String::new(), String::new()),
        };
        let marker = if i == model.poi { " (POI)" } else { "" };
        s.push_str(&format!(
            "{:<width$}  {:>14.8}  {:>12}  {:>8}  {:>10}{marker}\n",
            p.name, r.bestfit[i], err, pull, constraint
        ));
    }
    s
}

fn kinds(model: &Model) -> Vec<(&'static str, Vec<String>)> {
    let mut out: Vec<(&'static str, Vec<String>)> = Vec::new();
    for set in &model.sets {
        match out.iter_mut().find(|(k, _)| *k == set.kind) {
            Some((_, v)) => v.push(set.name.clone()),
            None => out.push((set.kind, vec![set.name.clone()])),
        }
    }
    out
}

pub fn inspect_json(model: &Model, source: &str) -> String {
    let channels: Vec<Value> = model
        .channels
        .iter()
        .map(|c| json!({"name": c.name, "bins": c.n_bins, "samples": c.samples}))
        .collect();
    let params: Vec<Value> = model
        .parameters
        .iter()
        .map(|p| {
            json!({
                "name": p.name, "type": model.sets[p.set].kind, "init": p.init,
                "bounds": [p.lower, p.upper], "fixed": p.fixed,
                "constraint": match p.constraint {
                    Constraint::None => Value::Null,
                    Constraint::Gauss { sigma } => json!({"type": "normal", "sigma": sigma}),
                    Constraint::Poisson { tau } => json!({"type": "poisson", "tau": tau}),
                },
            })
        })
        .collect();
    let by_type: serde_json::Map<String, Value> = kinds(model)
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let doc = json!({
        "workspace": source,
        "measurement": model.measurement,
        "interpolation": settings_json(model),
        "poi": model.poi_name(),
        "channels": channels,
        "n_bins": model.n_main,
        "n_parameters": model.n_params(),
        "n_aux": model.n_aux(),
        "parameter_sets_by_type": by_type,
        "parameters": params,
    });
    serde_json::to_string_pretty(&doc).expect("serializable") + "\n"
}

pub fn inspect_table(model: &Model) -> String {
    let mut s = format!(
        "measurement: {}\nPOI: {}\nbins: {} in {} channels   parameters: {} ({} sets)   auxiliary data: {}\n\n",
        model.measurement,
        model.poi_name(),
        model.n_main,
        model.channels.len(),
        model.n_params(),
        model.sets.len(),
        model.n_aux()
    );
    s.push_str("channels:\n");
    for c in &model.channels {
        s.push_str(&format!(
            "  {:<24} {:>3} bins  samples: {}\n",
            c.name,
            c.n_bins,
            c.samples.join(", ")
        ));
    }
    s.push_str("\nparameters by type:\n");
    for (kind, names) in kinds(model) {
        let shown: Vec<&str> = names.iter().take(8).map(String::as_str).collect();
        let more = if names.len() > 8 {
            format!(", ... ({} more)", names.len() - 8)
        } else {
            String::new()
        };
        s.push_str(&format!(
            "  {:<12} {:>4}  {}{more}\n",
            kind,
            names.len(),
            shown.join(", ")
        ));
    }
    s
}
