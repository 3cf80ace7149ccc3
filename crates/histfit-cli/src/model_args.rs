//! The options every command shares for choosing and compiling a model (workspace file,
//! measurement, patch, POI, interpolation settings, device), and the fit options every
//! inference command shares (fixed, starting and bounded parameters; the Asimov dataset).

use crate::device::{AnyEval, Device, Likelihood};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use histfit_compute::{Dataset, ParameterSpace};
use histfit_device::likelihood::Sniffed;
use histfit_model::patch::{apply_json_patch, apply_patchset};
use histfit_model::tools::check_patchset_digest;
use histfit_model::{
    compile, read_json, workspace_from_file, workspace_from_value, InterpCode, Model, Settings,
};
use std::sync::Arc;

/// What [`ModelArgs::prepare_fit`] gives an inference command: the likelihood, a description
/// of its source, the dataset, the evaluator and the fit options.
pub type Prepared = (
    Likelihood,
    String,
    Dataset,
    AnyEval,
    histfit_infer::FitOptions,
);
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// The model: a pyhf JSON workspace, or an HS3 document as ROOT writes them (an event-level
    /// model, or HistFactory channels: the binned model); the format is read from the document.
    #[arg(value_name = "MODEL")]
    pub workspace: String,
    /// HS3: the analysis to open (its likelihood and parameters of interest), where the
    /// document has several.
    #[arg(long, value_name = "NAME")]
    pub analysis: Option<String>,
    /// HS3: the likelihood to open, where the document has several (and no analysis is named).
    #[arg(long, value_name = "NAME")]
    pub likelihood: Option<String>,
    /// Measurement to use (default: the first).
    #[arg(long)]
    pub measurement: Option<String>,
    /// Apply a patch: FILE:NAME from a pyhf patchset, or FILE holding a JSON Patch (an array of
    /// operations).
    #[arg(long, value_name = "FILE[:NAME]")]
    pub patch: Option<String>,
    /// Interpolation defaults: smooth (normsys code4, histosys code4p) or pyhf (code1, code0).
    #[arg(long = "interp-defaults", default_value = "smooth", value_parser = ["smooth", "pyhf"])]
    pub interp_defaults: String,
    /// Override one modifier type's code: normsys=code1, histosys=code2, ... (repeatable).
    #[arg(long = "interp", value_name = "TYPE=CODE")]
    pub interp: Vec<String>,
    /// Evaluate on a GPU: cuda (device 0) or cuda:N; cuda:N,M,… or cuda:all split toy ensembles by
    /// toy index over those devices (an ordinal may repeat), everything else on the first. Any
    /// GPU in f32: wgpu[:N] (or vulkan, metal, dx12), with +double-float (default), +compensated
    /// or +host-reduced for the precision strategy. Default: the CPU.
    #[arg(long = "gpu", value_name = "cuda[:N[,M…]|:all]|wgpu[:N][+PRECISION]")]
    pub gpu: Option<Device>,
    /// Apply a patch even when the patchset's recorded digest is not this workspace's.
    #[arg(long)]
    pub force: bool,
    /// The parameter of interest instead of the measurement's (a scalar parameter), or "none":
    /// fits work without one; tests, limits, scans and rankings say they need one.
    #[arg(long, value_name = "NAME|none")]
    pub poi: Option<String>,
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
        self.gpu.clone().unwrap_or(Device::Cpu)
    }

    /// [`load`](Self::load), plus the observed data and an evaluator on the chosen device (made
    /// for toy ensembles where `ensembles`: [`crate::device::open`]): what every command needs.
    fn prepare(&self, ensembles: bool) -> Result<(Likelihood, String, Dataset, AnyEval)> {
        let (likelihood, source) = self.open()?;
        crate::timing::mark("model read and compiled");
        let data = likelihood.observed();
        let eval = crate::device::open(&likelihood, self.device(), ensembles)?;
        crate::timing::mark("device opened");
        Ok((likelihood, source, data, eval))
    }

    /// Opens the model file as the likelihood its format describes.
    pub fn open(&self) -> Result<(Likelihood, String)> {
        match histfit_device::likelihood::sniff(&self.workspace) {
            Sniffed::Hs3(doc) => self.open_hs3(&doc),
            Sniffed::Other(text) => {
                if self.analysis.is_some() || self.likelihood.is_some() {
                    bail!("--analysis and --likelihood choose within an HS3 document; {} is a pyhf workspace", self.workspace);
                }
                let (model, source) = self.load_text(text)?;
                Ok((Likelihood::HistFactory(model), source))
            }
        }
    }

    fn open_hs3(&self, doc: &serde_json::Value) -> Result<(Likelihood, String)> {
        let pyhf_only = [
            ("--measurement", self.measurement.is_some()),
            ("--patch", self.patch.is_some()),
            ("--interp", !self.interp.is_empty()),
            ("--interp-defaults", self.interp_defaults != "smooth"),
            ("--force", self.force),
        ];
        if let Some((flag, _)) = pyhf_only.iter().find(|f| f.1) {
            bail!(
                "{flag} applies to pyhf workspaces; {} is an HS3 document",
                self.workspace
            );
        }
        // Files the document names (events) lie beside it; from standard input, here.
        let directory = (self.workspace != "-").then(|| {
            std::path::Path::new(&self.workspace)
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default()
        });
        let choice = histfit_unbinned::Choice {
            analysis: self.analysis.clone(),
            likelihood: self.likelihood.clone(),
            directory,
            events: Vec::new(),
        };
        let mut likelihood =
            Likelihood::from_hs3(doc, &choice).map_err(|e| anyhow!("{}: {e}", self.workspace))?;
        if let Some(poi) = &self.poi {
            likelihood.set_poi(poi).map_err(|e| anyhow!("--poi {e}"))?;
        }
        for n in &likelihood.notes() {
            eprintln!("note: {}: {n}", self.workspace);
        }
        Ok((likelihood, self.workspace.clone()))
    }

    /// `--patch FILE:NAME` (a patch of a pyhf patchset, checked against the digest the patchset
    /// records unless `--force`) or `--patch FILE` (a JSON Patch file: an array of operations, as
    /// published single signal points are).
    fn apply_patch(&self, value: &mut serde_json::Value, p: &str) -> Result<()> {
        let (file, name) = match p.rsplit_once(':') {
            Some((f, n)) if std::path::Path::new(f).is_file() => (f, Some(n)),
            _ => (p, None),
        };
        let patch = read_json(file)?;
        match (patch.as_array(), name) {
            (Some(_), Some(name)) => {
                bail!("--patch {p}: {file} is a JSON Patch, not a patchset with a patch \"{name}\" (give the file alone)")
            }
            (Some(ops), None) => Ok(apply_json_patch(value, ops, file)?),
            (None, Some(name)) => {
                if !self.force {
                    check_patchset_digest(value, &patch, file)?;
                }
                Ok(apply_patchset(value, &patch, name, file)?)
            }
            (None, None) => {
                bail!("--patch {p}: a patchset: name the patch, FILE:NAME (or give a JSON Patch file)")
            }
        }
    }

    /// `--poi NAME` (or `none`): the measurement's POI replaced before compiling, so the model
    /// is built with it — and a background-only file whose own POI only a signal patch adds
    /// compiles without one (the empty name).
    pub fn apply_poi(&self, ws: &mut histfit_model::Workspace) -> Result<()> {
        if let Some(poi) = &self.poi {
            ws.set_poi(self.measurement.as_deref(), poi)?;
        }
        Ok(())
    }

    /// [`prepare`](Self::prepare) for an inference command: the fit options of `fit` and the
    /// dataset they choose (observed, or Asimov with `--asimov`).
    pub fn prepare_fit(&self, fit: &FitArgs) -> Result<Prepared> {
        self.prepare_fit_for(fit, false)
    }

    /// [`prepare_fit`](Self::prepare_fit) for a command that fits toy ensembles: the devices of a
    /// split (`--gpu cuda:all`) start opening beside the first.
    pub fn prepare_fit_for_ensembles(&self, fit: &FitArgs) -> Result<Prepared> {
        self.prepare_fit_for(fit, true)
    }

    fn prepare_fit_for(&self, fit: &FitArgs, ensembles: bool) -> Result<Prepared> {
        let (model, source, observed, mut eval) = self.prepare(ensembles)?;
        let mut options = fit.options(histfit_compute::Evaluator::space(&eval))?;
        // The kind's default; commands with `--starts N` replace it.
        options.starts = model.default_starts();
        let data = fit.data(&mut eval, observed, &options)?;
        Ok((model, source, data, eval, options))
    }

    /// Loads (from the file's text where it was read already: a pipe), patches, validates and
    /// compiles a pyhf workspace; returns the model and a description of the source.
    fn load_text(&self, text: Option<String>) -> Result<(Arc<Model>, String)> {
        let mut ws = match (&self.patch, text) {
            (None, Some(text)) => histfit_model::workspace_from_text(&text, &self.workspace)?,
            // Read straight into the workspace's types: no JSON tree to patch.
            (None, None) => workspace_from_file(&self.workspace)?,
            (Some(p), text) => {
                let mut value = match text {
                    Some(t) => histfit_model::parse_json(&t, &self.workspace)?,
                    None => read_json(&self.workspace)?,
                };
                self.apply_patch(&mut value, p)?;
                workspace_from_value(&value, &self.workspace)?
            }
        };
        self.apply_poi(&mut ws)?;
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
    let (i, value) = name_value(space, "--fix", item)?;
    let v: f64 = value
        .parse()
        .map_err(|_| anyhow!("--fix {item}: \"{value}\" is not a number"))?;
    histfit_infer::check_fixed_value(space, i, v)?;
    Ok((i, v))
}

/// The fit options of every inference command.
#[derive(Args, Debug, Clone, Default)]
pub struct FitArgs {
    /// Hold a parameter at a value: NAME=VALUE (repeatable).
    #[arg(long = "fix", value_name = "NAME=VALUE", allow_hyphen_values = true)]
    pub fix: Vec<String>,
    /// Start a parameter at a value: NAME=VALUE (repeatable).
    #[arg(long = "init", value_name = "NAME=VALUE", allow_hyphen_values = true)]
    pub init: Vec<String>,
    /// Replace a parameter's bounds: NAME=LO:HI (repeatable).
    #[arg(long = "bounds", value_name = "NAME=LO:HI", allow_hyphen_values = true)]
    pub bounds: Vec<String>,
    /// Use the Asimov dataset of the pre-fit prediction (the initial parameters, with --init and
    /// --fix applied) instead of the observed data: what a blinded analysis fits.
    #[arg(long)]
    pub asimov: bool,
    /// The most free parameters for which uncertainties build the dense n×n Hessian (default
    /// 4096: five matrices of 128 MiB, seconds to invert). Above it a fit reports the POI's
    /// uncertainty alone (conjugate gradients, no matrix), and what needs the full covariance
    /// (ranking, yields with uncertainties) refuses with a word.
    #[arg(long = "max-hessian-parameters", value_name = "N")]
    pub max_hessian_parameters: Option<usize>,
}

impl FitArgs {
    /// The fit options these arguments ask for, checked against the parameters.
    pub fn options(&self, space: &ParameterSpace) -> Result<histfit_infer::FitOptions> {
        let mut o = histfit_infer::FitOptions {
            max_dense_parameters: self.max_hessian_parameters,
            ..Default::default()
        };
        let mut bounds = space.bounds.clone();
        for item in &self.bounds {
            let (i, spec) = name_value(space, "--bounds", item)?;
            let (lo, hi) =
                crate::commands::parse_range(spec).map_err(|e| anyhow!("--bounds {item}: {e}"))?;
            bounds[i] = (lo, hi);
        }
        let mut init = space.init.clone();
        for item in &self.init {
            let (i, v) = name_value(space, "--init", item)?;
            let v: f64 = v
                .parse()
                .map_err(|_| anyhow!("--init {item}: \"{v}\" is not a number"))?;
            let (lo, hi) = bounds[i];
            if !(v.is_finite() && lo <= v && v <= hi) {
                bail!(
                    "--init {item}: outside the bounds [{lo}, {hi}] of \"{}\"",
                    space.names[i]
                );
            }
            init[i] = v;
        }
        // Fixed values are checked against the bounds in force (--bounds included).
        let mut in_force = space.clone();
        in_force.bounds = bounds.clone();
        for item in &self.fix {
            o.fix.push(parse_fix(&in_force, item)?);
        }
        if !self.init.is_empty() {
            o.init = Some(init);
        }
        if !self.bounds.is_empty() {
            // The start must lie inside the new bounds.
            let start = o.init.as_ref().unwrap_or(&space.init);
            for (i, b) in bounds.iter().enumerate() {
                if !(b.0 <= start[i] && start[i] <= b.1) {
                    bail!(
                        "--bounds: the initial value {} of \"{}\" lies outside [{}, {}]; give --init too",
                        start[i], space.names[i], b.0, b.1
                    );
                }
            }
            o.bounds = Some(bounds);
        }
        Ok(o)
    }

    /// The dataset to fit: the observed one, or with `--asimov` the Asimov dataset of the
    /// initial parameters (with `options`' start and fixed values).
    pub fn data(
        &self,
        eval: &mut AnyEval,
        observed: Dataset,
        options: &histfit_infer::FitOptions,
    ) -> Result<Dataset> {
        if !self.asimov {
            return Ok(observed);
        }
        let space = histfit_compute::Evaluator::space(eval);
        let mut at = options.init.clone().unwrap_or_else(|| space.init.clone());
        for &(i, v) in &options.fix {
            at[i] = v;
        }
        Ok(histfit_compute::Evaluator::asimov(eval, &at)?)
    }
}

/// Splits NAME=VALUE and finds the parameter.
fn name_value<'a>(space: &ParameterSpace, flag: &str, item: &'a str) -> Result<(usize, &'a str)> {
    let (name, value) = item
        .split_once('=')
        .ok_or_else(|| anyhow!("{flag} {item}: expected NAME=VALUE"))?;
    let i = space.index(name.trim()).ok_or_else(|| {
        anyhow!(
            "{flag} {item}: \"{}\" is not a parameter of the model",
            name.trim()
        )
    })?;
    Ok((i, value.trim()))
}
