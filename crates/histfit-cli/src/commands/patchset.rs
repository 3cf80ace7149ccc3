//! `histfit patchset list|apply|verify`: pyhf patchsets (published signal grids) by themselves —
//! the patches and their values, one patch applied and written out as a workspace, and whether
//! the patchset was made for a given background-only workspace (its recorded sha256 digest).

use anyhow::{bail, Result};
use clap::Subcommand;
use histfit_model::patch::{apply_patch_point, patch_points};
use histfit_model::tools::{check_patchset_digest, digest};
use histfit_model::{read_json, workspace_from_value};
use serde_json::json;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Subcommand)]
enum Sub {
    /// The patches of a patchset: name and values (by the patchset's labels).
    List {
        /// pyhf patchset JSON.
        patchset: String,
        /// One JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Apply one patch to the background-only workspace and write the signal workspace.
    Apply {
        /// The background-only workspace.
        workspace: String,
        /// pyhf patchset JSON.
        patchset: String,
        /// The patch's name.
        name: String,
        /// Apply even when the patchset records another workspace's digest.
        #[arg(long)]
        force: bool,
        /// Write the workspace to this file instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<String>,
    },
    /// Whether the patchset was made for this workspace: its recorded sha256 against the
    /// workspace's (exit 0 when they agree, 2 with both digests when not).
    Verify {
        /// The background-only workspace.
        workspace: String,
        /// pyhf patchset JSON.
        patchset: String,
    },
}

pub fn run(a: Args) -> Result<ExitCode> {
    match a.command {
        Sub::List { patchset, json } => {
            let ps = read_json(&patchset)?;
            let (labels, points) = patch_points(&ps, &patchset)?;
            if json {
                let doc = json!({
                    "kind": "patchset",
                    "labels": labels,
                    "digests": ps.pointer("/metadata/digests"),
                    "patches": points
                        .iter()
                        .map(|p| json!({"name": p.name, "values": p.values}))
                        .collect::<Vec<_>>(),
                });
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                println!("{} patches; values: {}", points.len(), labels.join(", "));
                for p in &points {
                    let v: Vec<String> = p.values.iter().map(|x| x.to_string()).collect();
                    println!("{}  {}", p.name, v.join(" "));
                }
            }
        }
        Sub::Apply {
            workspace,
            patchset,
            name,
            force,
            output,
        } => {
            let mut v = read_json(&workspace)?;
            let ps = read_json(&patchset)?;
            if !force {
                check_patchset_digest(&v, &ps, &patchset)?;
            }
            let (_, points) = patch_points(&ps, &patchset)?;
            let Some(p) = points.iter().find(|p| p.name == name) else {
                bail!(
                    "{patchset}: no patch named \"{name}\" ({} patches)",
                    points.len()
                );
            };
            apply_patch_point(&mut v, &ps, p, &patchset)?;
            workspace_from_value(&v, &workspace)?;
            crate::output::emit(
                &(serde_json::to_string_pretty(&v)? + "\n"),
                output.as_deref(),
            )?;
        }
        Sub::Verify {
            workspace,
            patchset,
        } => {
            let v = read_json(&workspace)?;
            let ps = read_json(&patchset)?;
            if ps.pointer("/metadata/digests/sha256").is_none() {
                bail!("{patchset}: the patchset records no sha256 digest to verify against");
            }
            check_patchset_digest(&v, &ps, &patchset)?;
            println!(
                "{patchset}: made for this workspace (sha256 {})",
                digest(&v)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
