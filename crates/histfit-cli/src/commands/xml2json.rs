//! `histfit xml2json CONFIG.xml`: a HistFactory XML configuration and the ROOT histograms it
//! names → a pyhf JSON workspace, as pyhf's `xml2json` makes it (histfit-import does the work).

use anyhow::{anyhow, Result};
use histfit_import::{xml2json, Mount};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The top-level HistFactory XML file (`<Combination>`).
    config: PathBuf,
    /// The directory the paths in the XML files are relative to (default: the current one).
    #[arg(long, value_name = "DIR", default_value = ".")]
    basedir: PathBuf,
    /// HOST:MOUNT: files the XML names under MOUNT are read from HOST (repeatable).
    #[arg(short = 'v', long = "mount", value_name = "HOST:MOUNT")]
    mounts: Vec<String>,
    /// Accepted for uniformity: the output is a workspace JSON document either way.
    #[arg(long)]
    #[allow(dead_code)]
    json: bool,
    /// Write the workspace to this file instead of stdout.
    #[arg(
        short = 'o',
        long = "output",
        alias = "output-file",
        value_name = "FILE"
    )]
    output: Option<String>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let mounts = a
        .mounts
        .iter()
        .map(|m| {
            let (host, mount) = m
                .split_once(':')
                .ok_or_else(|| anyhow!("--mount {m}: expected HOST:MOUNT"))?;
            Ok(Mount {
                host: host.into(),
                mount: mount.into(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let imported = xml2json(&a.config, &a.basedir, &mounts).map_err(|e| {
        // A file the XML names that is not found from the current directory: most often the
        // paths are relative to the XML's own directory.
        let missing = e.to_string().contains("No such file");
        if missing && a.basedir == std::path::Path::new(".") {
            // The first directory above the XML from which the missing path exists.
            let found = a
                .config
                .ancestors()
                .skip(1)
                .find(|d| !d.as_os_str().is_empty() && d.join(&e.place).exists());
            let hint = found.map_or(String::new(), |d| format!(" (--basedir {})", d.display()));
            anyhow!("{e}; the XML's paths are read relative to --basedir, the current directory by default{hint}")
        } else {
            anyhow!(e)
        }
    })?;
    super::warn_all(&imported.warnings);
    let text = serde_json::to_string_pretty(&imported.workspace)? + "\n";
    crate::output::emit(&text, a.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
}
