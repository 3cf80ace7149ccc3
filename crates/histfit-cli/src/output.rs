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
        "starts": r.starts,
        "kinks": r.kinks,
        "warnings": r.warnings,
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

/// A result document: the workspace, measurement, POI and interpolation, then the result's fields.
pub fn json<T: serde::Serialize>(source: &str, model: &Model, result: &T) -> String {
    let mut doc = json!({
        "workspace": source,
        "measurement": model.measurement,
        "interpolation": settings_json(model),
        "poi": model.poi_name(),
    });
    if let (Value::Object(d), Ok(Value::Object(r))) = (&mut doc, serde_json::to_value(result)) {
        d.extend(r);
    }
    serde_json::to_string_pretty(&doc).expect("serializable") + "\n"
}

fn band_line(label: &str, values: &[f64; 5]) -> String {
    format!(
        "{label:<14} -2σ {:.6e}   -1σ {:.6e}   median {:.6e}   +1σ {:.6e}   +2σ {:.6e}\n",
        values[0], values[1], values[2], values[3], values[4]
    )
}

pub fn scan_table(r: &histfit_infer::ScanResult) -> String {
    let mut s = format!(
        "profile scan of {}: μ̂ = {:.6}, min twice_nll = {:.8}\n\n",
        r.poi, r.mu_hat, r.twice_nll_min
    );
    s.push_str(&format!(
        "{:>12}  {:>14}  {:>12}  {}\n",
        r.poi, "2ΔNLL", "twice_nll", "converged"
    ));
    for p in &r.points {
        s.push_str(&format!(
            "{:>12.6}  {:>14.8}  {:>12.6}  {}\n",
            p.mu,
            p.delta_twice_nll,
            p.twice_nll,
            if p.converged { "yes" } else { "NO" }
        ));
    }
    s
}

pub fn hypotest_table(r: &histfit_infer::HypotestResult) -> String {
    let mut s = format!(
        "hypotest at μ = {} ({:?}): q = {:.6}, q_A = {:.6}, μ̂ = {:.6}\n",
        r.mu, r.test_stat, r.q_obs, r.q_asimov, r.mu_hat
    );
    s.push_str(&format!(
        "CLs = {:.6e}   CLs+b = {:.6e}   CLb = {:.6e}\n",
        r.cls_obs, r.clsb_obs, r.clb_obs
    ));
    // BAND is +2σ…−2σ in the statistic: the ascending CLs are −2σ…+2σ in μ.
    s.push_str(&band_line("expected CLs", &r.cls_exp));
    s
}

pub fn limit_table(r: &histfit_infer::UpperLimit) -> String {
    let mut s = format!(
        "upper limit at CLs = {} ({:?}), {} hypotests\n",
        r.alpha,
        r.test_stat,
        r.evaluations.len()
    );
    s.push_str(&format!("observed       {:.6}\n", r.obs));
    s.push_str(&band_line("expected", &r.exp));
    s
}

pub fn significance_table(r: &histfit_infer::Significance) -> String {
    format!(
        "discovery test (q0): μ̂ = {:.6}\nobserved  q0 = {:.6}  p0 = {:.6e}  Z = {:.4}\nexpected  q0 = {:.6}  p0 = {:.6e}  Z = {:.4}\n{}",
        r.mu_hat,
        r.q0_obs,
        r.p0_obs,
        r.z_obs,
        r.q0_exp,
        r.p0_exp,
        r.z_exp,
        band_line("expected p0", &r.p0_exp_band)
    )
}

pub fn ranking_table(r: &histfit_infer::Ranking, top: usize) -> String {
    let width = r
        .entries
        .iter()
        .map(|e| e.name.len())
        .max()
        .unwrap_or(9)
        .max(9);
    let mut s = format!(
        "ranking of {} nuisance parameters: {} = {:.6} ± {:.6}\n\n",
        r.entries.len(),
        r.poi,
        r.mu_hat,
        r.mu_uncertainty
    );
    s.push_str(&format!(
        "{:<width$}  {:>8}  {:>10}  {:>11}  {:>11}  {:>11}  {:>11}\n",
        "parameter", "pull", "constraint", "post-fit +", "post-fit -", "pre-fit +", "pre-fit -"
    ));
    for e in r.entries.iter().take(top) {
        s.push_str(&format!(
            "{:<width$}  {:>+8.3}  {:>10.3}  {:>+11.5}  {:>+11.5}  {:>+11.5}  {:>+11.5}{}\n",
            e.name,
            e.pull,
            e.constraint,
            e.impact_postfit_up,
            e.impact_postfit_down,
            e.impact_prefit_up,
            e.impact_prefit_down,
            if e.converged {
                ""
            } else {
                "  (a refit did not converge)"
            }
        ));
    }
    s
}

/// The `toys --json` document (also what `merge-toys` reads back): the ensemble of
/// histfit-infer with its kind.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ToysDoc {
    pub kind: String,
    #[serde(flatten)]
    pub ensemble: histfit_infer::ToyEnsemble,
}

impl From<histfit_infer::ToyEnsemble> for ToysDoc {
    fn from(ensemble: histfit_infer::ToyEnsemble) -> Self {
        ToysDoc {
            kind: "toys".into(),
            ensemble,
        }
    }
}

/// The `hypotest-toys --json` document.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct HypotestToysDoc {
    pub kind: String,
    #[serde(flatten)]
    pub result: histfit_infer::ToyHypotest,
}

impl From<histfit_infer::ToyHypotest> for HypotestToysDoc {
    fn from(result: histfit_infer::ToyHypotest) -> Self {
        HypotestToysDoc {
            kind: "hypotest_toys".into(),
            result,
        }
    }
}

pub fn toys_table(d: &histfit_infer::ToyEnsemble) -> String {
    let s = &d.summary;
    format!(
        "{} toys (seed {}): {} converged, {} failed\nfitted POI: mean {:.6}, standard deviation {:.6}\n",
        s.n, d.seed, s.converged, s.failed, s.poi_mean, s.poi_std
    )
}

/// A refused partial merge names the flag that allows it.
fn name_the_flag(e: histfit_infer::InferError) -> anyhow::Error {
    let m = e.to_string();
    match m.strip_suffix("allow a partial merge") {
        Some(head) => anyhow::anyhow!("{head}pass --allow-partial"),
        None => anyhow::anyhow!(m),
    }
}

/// A merged table; a partial merge's note goes to stderr as a warning (and into the JSON's
/// `warnings`).
fn with_note(table: String, note: &Option<String>) -> String {
    if let Some(n) = note {
        eprintln!("warning: {n}");
    }
    table
}

pub fn hypotest_toys_table(r: &histfit_infer::ToyHypotest) -> String {
    let s = &r.summary;
    let mut out = format!(
        "toy hypotest at μ = {} ({:?}, seed {}): q_obs = {:.6}\n",
        r.mu, r.test_stat, r.seed, r.q_obs
    );
    out.push_str(&format!(
        "CLs = {:.6}   CLs+b = {:.6} ± {:.6}   CLb = {:.6} ± {:.6}\n",
        s.cls_obs, s.clsb_obs, s.clsb_err, s.clb_obs, s.clb_err
    ));
    out.push_str(&band_line("expected CLs", &s.cls_exp));
    out.push_str(&format!(
        "toys: {} s+b, {} b-only used; failed fits: {} s+b, {} b-only\n",
        s.n_sb, s.n_b, s.failed_sb, s.failed_b
    ));
    out
}

/// Reads sharded `--json` outputs and merges them (toys or hypotest-toys, not mixed); the merge
/// itself, with its checks that the shards make one whole ensemble, is histfit-infer's.
pub fn merge_toys(files: &[String], as_json: bool, allow_partial: bool) -> Result<String> {
    let note: Option<String>;
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {f}"))?;
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("{f}: malformed JSON"))?;
        docs.push((f.clone(), v));
    }
    let kind = docs[0].1["kind"].as_str().unwrap_or("").to_owned();
    if let Some((f, _)) = docs
        .iter()
        .find(|(_, v)| v["kind"].as_str() != Some(kind.as_str()))
    {
        anyhow::bail!(
            "{f}: not the same kind of output as {} (\"{kind}\")",
            docs[0].0
        );
    }
    let header: Vec<(&str, Value)> = ["workspace", "measurement", "poi", "interpolation"]
        .iter()
        .map(|k| (*k, docs[0].1[*k].clone()))
        .collect();
    for (f, v) in &docs[1..] {
        for (k, h) in &header {
            if &v[*k] != h {
                anyhow::bail!(
                    "{f}: \"{k}\" differs from {}: the shards are not of one run",
                    docs[0].0
                );
            }
        }
    }
    let mut merged: Value = match kind.as_str() {
        "toys" => {
            let mut parts = Vec::new();
            for (f, v) in &docs {
                parts.push(
                    serde_json::from_value::<ToysDoc>(v.clone())
                        .with_context(|| format!("{f}: not a toys document"))?
                        .ensemble,
                );
            }
            let (doc, n) =
                histfit_infer::merge_toy_ensembles(parts, allow_partial).map_err(name_the_flag)?;
            note = n;
            if !as_json {
                return Ok(with_note(toys_table(&doc), &note));
            }
            serde_json::to_value(ToysDoc::from(doc))?
        }
        "hypotest_toys" => {
            let mut parts = Vec::new();
            for (f, v) in &docs {
                parts.push(
                    serde_json::from_value::<HypotestToysDoc>(v.clone())
                        .with_context(|| format!("{f}: not a hypotest-toys document"))?
                        .result,
                );
            }
            let (r, n) =
                histfit_infer::merge_hypotest_toys(parts, allow_partial).map_err(name_the_flag)?;
            note = n;
            if !as_json {
                return Ok(with_note(hypotest_toys_table(&r), &note));
            }
            serde_json::to_value(HypotestToysDoc::from(r))?
        }
        other => anyhow::bail!(
            "{}: \"kind\" is \"{other}\", expected toys or hypotest_toys",
            docs[0].0
        ),
    };
    let mut doc = serde_json::Map::new();
    for (k, h) in header {
        doc.insert(k.to_owned(), h);
    }
    if let Value::Object(m) = &mut merged {
        doc.extend(std::mem::take(m));
    }
    if let Some(n) = note {
        eprintln!("warning: {n}");
        doc.insert("warnings".into(), Value::from(vec![n]));
    }
    Ok(serde_json::to_string_pretty(&Value::Object(doc)).expect("serializable") + "\n")
}
