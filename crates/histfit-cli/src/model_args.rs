//! The options every command shares for choosing and compiling a model: workspace file,
//! measurement, patch and interpolation settings.

use crate::device::{AnyEval, Device};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use histfit_compute::{Dataset, ParameterSpace};
use histfit_model::{compile, load_workspace, InterpCode, Model, Settings};
use std::sync::Arc;

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// pyhf JSON workspace.
    #[arg(value_name = "WORKSPACE")]
    pub workspace: String,
    /// Measurement to use (default: the first).
    #[arg(long)]
    pub measurement: Option<String>,
    /// Apply a patch from a pyhf patchset: FILE:NAME.
    #[arg(long, value_name = "FILE:NAME")]
    pub patch: Option<String>,
    /// Interpolation defaults: smooth (normsys code4, histosys code4p) or pyhf (code1, code0).
    #[arg(long = "interp-defaults", default_value = "smooth", value_parser = ["smooth", "pyhf"])]
    pub interp_defaults: String,
    /// Override one modifier type's code: normsys=code1, histosys=code2, ... (repeatable).
    #[arg(long = "interp", value_name = "TYPE=CODE")]
    pub interp: Vec<String>,
    /// Evaluate on a GPU: cuda (device 0) or cuda:N. Default: the CPU.
    #[arg(long = "gpu", value_name = "cuda[:N]")]
    pub gpu: Option<Device>,
}

impl ModelArgs {
    pub fn settings(&self) -> Result<Settings> {
        let mut s = if self.interp_defaults == "pyhf" {
            Settings::pyhf_defaults()
        } else {
            Settings::smooth()
        };
        for item in &self.interp {
            let (kind, code) = item.split_once('=').ok_or_else(|| {
                anyhow!("--interp {item}: expected TYPE=CODE, e.g. normsys=code1")
            })?;
            let code: InterpCode = code
                .parse()
                .map_err(|e: String| anyhow!("--interp {item}: {e}"))?;
            match kind.trim() {
                "normsys" => s.normsys = code,
                "histosys" => s.histosys = code,
                other => bail!(
                    "--interp {item}: \"{other}\" has no interpolation code (normsys or histosys)"
                ),
            }
        }
        Ok(s)
    }

    pub fn device(&self) -> Device {
        self.gpu.unwrap_or(Device::Cpu)
    }

    /// [`load`](Self::load), plus the observed data and an evaluator on the chosen device: what
    /// every command needs.
    pub fn prepare(&self) -> Result<(Arc<Model>, String, Dataset, AnyEval)> {
        let (model, source) = self.load()?;
        let data = Dataset::observed(&model);
        let eval = crate::device::open(model.clone(), self.device())?;
        Ok((model, source, data, eval))
    }

    /// Loads, patches, validates and compiles; returns the model and a description of the source.
    pub fn load(&self) -> Result<(Arc<Model>, String)> {
        let patch = match &self.patch {
            None => None,
            Some(p) => Some(
                p.rsplit_once(':')
                    .ok_or_else(|| anyhow!("--patch {p}: expected FILE:NAME"))?,
            ),
        };
        let ws = load_workspace(&self.workspace, patch)?;
        let model = compile(&ws, self.measurement.as_deref(), &self.settings()?)
            .map_err(|e| anyhow!("{}: {e}", self.workspace))?;
        for w in &model.warnings {
            eprintln!("warning: {}: {w}", self.workspace);
        }
        let mut source = self.workspace.clone();
        if let Some(p) = &self.patch {
            source.push_str(&format!(" (patch {p})"));
        }
        Ok((Arc::new(model), source))
    }
}

/// Parses NAME=VALUE into (parameter index, value), checking the bounds.
pub fn parse_fix(space: &ParameterSpace, item: &str) -> Result<(usize, f64)> {
    let (name, value) = item
        .split_once('=')
        .ok_or_else(|| anyhow!("--fix {item}: expected NAME=VALUE"))?;
    let i = space.index(name.trim()).ok_or_else(|| {
        anyhow!(
            "--fix {item}: \"{}\" is not a parameter of the model",
            name.trim()
        )
    })?;
    let v: f64 = value
        .trim()
        .parse()
        .map_err(|_| anyhow!("--fix {item}: \"{}\" is not a number", value.trim()))?;
    histfit_infer::check_fixed_value(space, i, v)?;
    Ok((i, v))
}
