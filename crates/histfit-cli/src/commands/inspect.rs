//! `histfit inspect`: what a workspace compiles to — channels, bins, samples, parameters by type
//! and the POI.

use super::OutputArgs;
use crate::device::Likelihood;
use crate::model_args::ModelArgs;
use crate::output::settings_json;
use anyhow::Result;
use histfit_model::{Constraint, Model};
use serde_json::{json, Value};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    // A binned HS3 document (ROOT's export of a HistFactory workspace) is inspected as the
    // model it opens as; an event-level one has no channels to list; a mixed one lists its
    // binned channels (its event-level ones are `fit`'s and `distributions`' to show).
    let (model, source) = match a.model.open()? {
        (Likelihood::HistFactory(model), source) => (model, source),
        (Likelihood::Mixed(m), source) => {
            let events: Vec<&str> = m
                .events_model()
                .channels
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            eprintln!(
                "note: the likelihood has event-level channels too ({}), not listed here",
                events.join(", ")
            );
            (m.binned_model().clone(), source)
        }
        (Likelihood::Events(_), _) => anyhow::bail!(
            "{}: inspect lists a binned model's channels and modifiers; this HS3 document is an event-level model (fit shows its parameters)",
            a.model.workspace
        ),
    };
    a.out.emit(|| to_json(&model, &source), || table(&model))?;
    Ok(ExitCode::SUCCESS)
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

fn to_json(model: &Model, source: &str) -> String {
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

fn table(model: &Model) -> String {
    let mut s = format!(
        "measurement: {}\nPOI: {}\nbins: {} in {} channels   parameters: {} ({} sets)   auxiliary data: {}\n\n",
        model.measurement,
        model.poi_name().unwrap_or("none"),
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
