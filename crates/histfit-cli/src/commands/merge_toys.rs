//! `histfit merge-toys`: the `--json` outputs of sharded `toys` or `hypotest-toys` runs merged
//! into the one result of the whole ensemble.

use super::OutputArgs;
use anyhow::{Context, Result};
use serde_json::Value;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// JSON files written by `toys --json` or `hypotest-toys --json`.
    #[arg(required = true)]
    files: Vec<String>,
    /// Merge even when shards are missing (the result says how many toys it holds).
    #[arg(long = "allow-partial")]
    allow_partial: bool,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let text = merge(&a.files, a.out.json, a.allow_partial)?;
    crate::output::emit(&text, a.out.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
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

/// Reads sharded `--json` outputs and merges them (toys or hypotest-toys, not mixed); the merge
/// itself, with its checks that the shards make one whole ensemble, is histfit-infer's.
fn merge(files: &[String], as_json: bool, allow_partial: bool) -> Result<String> {
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
    // The header of either kind of likelihood (a workspace's; an HS3 model's).
    let header: Vec<(&str, Value)> = [
        "workspace",
        "measurement",
        "poi",
        "interpolation",
        "model",
        "format",
        "likelihood",
    ]
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
                    serde_json::from_value::<super::toys::Doc>(v.clone())
                        .with_context(|| format!("{f}: not a toys document"))?
                        .ensemble,
                );
            }
            let (doc, n) =
                histfit_infer::merge_toy_ensembles(parts, allow_partial).map_err(name_the_flag)?;
            note = n;
            if !as_json {
                return Ok(with_note(super::toys::table(&doc), &note));
            }
            serde_json::to_value(super::toys::Doc::from(doc))?
        }
        "hypotest_toys" => {
            let mut parts = Vec::new();
            for (f, v) in &docs {
                parts.push(
                    serde_json::from_value::<super::hypotest_toys::Doc>(v.clone())
                        .with_context(|| format!("{f}: not a hypotest-toys document"))?
                        .result,
                );
            }
            let (r, n) =
                histfit_infer::merge_hypotest_toys(parts, allow_partial).map_err(name_the_flag)?;
            note = n;
            if !as_json {
                return Ok(with_note(super::hypotest_toys::table(&r), &note));
            }
            serde_json::to_value(super::hypotest_toys::Doc::from(r))?
        }
        other => anyhow::bail!(
            "{}: \"kind\" is \"{other}\", expected toys or hypotest_toys",
            docs[0].0
        ),
    };
    let mut doc = serde_json::Map::new();
    for (k, h) in header {
        if !(h.is_null() && docs[0].1.get(k).is_none()) {
            doc.insert(k.to_owned(), h);
        }
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
