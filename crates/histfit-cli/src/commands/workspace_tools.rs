//! Workspace tools with pyhf's semantics: `digest`, `sort`, `prune`, `rename`. Each reads a
//! workspace, checks it, and writes the result (a workspace that validates again) or the digest.

use anyhow::{bail, Result};
use histfit_model::tools::{self, Edits};
use histfit_model::{read_json, workspace_from_value};
use serde_json::Value;
use std::process::ExitCode;

/// `histfit digest WS`: the workspace's SHA-256 digest, as pyhf computes it (and patchsets
/// record it).
#[derive(clap::Args)]
pub struct DigestArgs {
    /// pyhf JSON workspace.
    workspace: String,
    /// {"sha256": DIGEST} instead of sha256:DIGEST.
    #[arg(long)]
    json: bool,
}

pub fn digest(a: DigestArgs) -> Result<ExitCode> {
    let v = read(&a.workspace)?;
    let d = tools::digest(&v);
    if a.json {
        println!("{}", serde_json::json!({"sha256": d}));
    } else {
        println!("sha256:{d}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `histfit sort WS`: channels, samples, modifiers, measurements and observations in name order.
#[derive(clap::Args)]
pub struct SortArgs {
    /// pyhf JSON workspace.
    workspace: String,
    /// Accepted for uniformity: the output is a workspace JSON document either way.
    #[arg(long)]
    #[allow(dead_code)]
    json: bool,
    /// Write the workspace to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<String>,
}

pub fn sort(a: SortArgs) -> Result<ExitCode> {
    let v = read(&a.workspace)?;
    write(&tools::sorted(&v), a.output.as_deref())
}

/// `histfit prune WS`: channels, samples, modifiers (by name or type) and measurements removed.
#[derive(clap::Args)]
pub struct PruneArgs {
    /// pyhf JSON workspace.
    workspace: String,
    /// A channel to remove, with its observation (repeatable).
    #[arg(short = 'c', long = "channel", value_name = "NAME")]
    channels: Vec<String>,
    /// A sample to remove from every channel (repeatable).
    #[arg(short = 's', long = "sample", value_name = "NAME")]
    samples: Vec<String>,
    /// A modifier to remove everywhere, with its measurement config (repeatable).
    #[arg(short = 'm', long = "modifier", value_name = "NAME")]
    modifiers: Vec<String>,
    /// Every modifier of a type to remove: normsys, histosys, ... (repeatable).
    #[arg(short = 't', long = "modifier-type", value_name = "TYPE")]
    modifier_types: Vec<String>,
    /// A measurement to remove (repeatable).
    #[arg(long = "measurement", value_name = "NAME")]
    measurements: Vec<String>,
    /// Accepted for uniformity: the output is a workspace JSON document either way.
    #[arg(long)]
    #[allow(dead_code)]
    json: bool,
    /// Write the workspace to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<String>,
}

pub fn prune(a: PruneArgs) -> Result<ExitCode> {
    let v = read(&a.workspace)?;
    let e = Edits {
        prune_channels: a.channels,
        prune_samples: a.samples,
        prune_modifiers: a.modifiers,
        prune_modifier_types: a.modifier_types,
        prune_measurements: a.measurements,
        ..Default::default()
    };
    let w = tools::prune_and_rename(&v, &e).map_err(|e| anyhow::anyhow!("{}: {e}", a.workspace))?;
    write(&w, a.output.as_deref())
}

/// `histfit rename WS`: channels, samples, modifiers and measurements renamed (the observations,
/// measurement configs and POI follow).
#[derive(clap::Args)]
pub struct RenameArgs {
    /// pyhf JSON workspace.
    workspace: String,
    /// Rename a channel: OLD NEW (repeatable).
    #[arg(short = 'c', long = "channel", num_args = 2, value_names = ["OLD", "NEW"])]
    channels: Vec<String>,
    /// Rename a sample: OLD NEW (repeatable).
    #[arg(short = 's', long = "sample", num_args = 2, value_names = ["OLD", "NEW"])]
    samples: Vec<String>,
    /// Rename a modifier: OLD NEW (repeatable).
    #[arg(short = 'm', long = "modifier", num_args = 2, value_names = ["OLD", "NEW"])]
    modifiers: Vec<String>,
    /// Rename a measurement: OLD NEW (repeatable).
    #[arg(long = "measurement", num_args = 2, value_names = ["OLD", "NEW"])]
    measurements: Vec<String>,
    /// Accepted for uniformity: the output is a workspace JSON document either way.
    #[arg(long)]
    #[allow(dead_code)]
    json: bool,
    /// Write the workspace to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<String>,
}

pub fn rename(a: RenameArgs) -> Result<ExitCode> {
    let v = read(&a.workspace)?;
    let pairs = |x: &[String]| -> std::collections::HashMap<String, String> {
        x.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect()
    };
    let e = Edits {
        rename_channels: pairs(&a.channels),
        rename_samples: pairs(&a.samples),
        rename_modifiers: pairs(&a.modifiers),
        rename_measurements: pairs(&a.measurements),
        ..Default::default()
    };
    let w = tools::prune_and_rename(&v, &e).map_err(|e| anyhow::anyhow!("{}: {e}", a.workspace))?;
    write(&w, a.output.as_deref())
}

/// Reads a workspace and checks that it is one.
fn read(path: &str) -> Result<Value> {
    let v = read_json(path)?;
    workspace_from_value(&v, path)?;
    Ok(v)
}

fn write(v: &Value, output: Option<&str>) -> Result<ExitCode> {
    if v.is_null() {
        bail!("nothing to write");
    }
    crate::output::emit(&(serde_json::to_string_pretty(v)? + "\n"), output)?;
    Ok(ExitCode::SUCCESS)
}

/// `histfit combine LEFT RIGHT`: one workspace from two, channels, observations and measurements
/// joined by name as pyhf joins them.
#[derive(clap::Args)]
pub struct CombineArgs {
    /// pyhf JSON workspace (the left side).
    left: String,
    /// pyhf JSON workspace (the right side).
    right: String,
    /// How names on both sides are joined: none (refused), outer (identical ones kept once,
    /// measurements merged), left-outer or right-outer (that side wins).
    #[arg(long, default_value = "none")]
    join: tools::Join,
    /// Merge channels of the same name sample by sample (outer joins only).
    #[arg(long = "merge-channels")]
    merge_channels: bool,
    /// Accepted for uniformity: the output is a workspace JSON document either way.
    #[arg(long)]
    #[allow(dead_code)]
    json: bool,
    /// Write the workspace to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<String>,
}

pub fn combine(a: CombineArgs) -> Result<ExitCode> {
    let (l, r) = (read(&a.left)?, read(&a.right)?);
    let w = tools::combine(&l, &r, a.join, a.merge_channels)
        .map_err(|e| anyhow::anyhow!("combining {} and {}: {e}", a.left, a.right))?;
    write(&w, a.output.as_deref())
}
