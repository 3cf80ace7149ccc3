//! Compilation of a validated [`Workspace`] into the flat, immutable [`Model`] that every evaluator
//! reads: the parameter table in pyhf's order, and the modifier tables with everything that does
//! not depend on the parameters precomputed (interpolation coefficients, staterror σ, shapesys τ).
//! This module walks the workspace; what each modifier kind means lives in
//! [`crate::modifiers`].
//!
//! Parameter order follows pyhf 0.7: modifier types in alphabetical order; within a type, the order
//! of first appearance when walking channels sorted by name, their samples sorted by name, and each
//! sample's modifiers sorted by name. Main bins are ordered by channel name; auxiliary data follow
//! the constrained parameters in parameter order.

use crate::error::{ModelError, Result};
use crate::interp::{self, InterpCode};
use crate::modifiers::{self, Defaults, SampleBuild, SetContext};
use crate::spec::{Channel, Measurement, ParameterConfig, Workspace};
use crate::NameMap;
use std::collections::BTreeMap;

/// Choices made when compiling a workspace into a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub normsys: InterpCode,
    pub histosys: InterpCode,
    /// How histosys variations follow input yields (read only when yields are inputs).
    pub yield_variations: YieldVariations,
}

impl Settings {
    /// pyhf's `Model` default and histfit's default: smooth code4 / code4p.
    pub fn smooth() -> Settings {
        Settings {
            normsys: InterpCode::Code4,
            histosys: InterpCode::Code4p,
            yield_variations: YieldVariations::Relative,
        }
    }
    /// pyhf's per-modifier defaults (and older ROOT HistFactory's): code1 / code0. ROOT 6.40's
    /// HistFactory builds code 4 / code 4p ([`Settings::smooth`]), which its HS3 export writes.
    pub fn pyhf_defaults() -> Settings {
        Settings {
            normsys: InterpCode::Code1,
            histosys: InterpCode::Code0,
            yield_variations: YieldVariations::Relative,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings::smooth()
    }
}

/// What a sample's histosys variations do when its yields are replaced by inputs (the
/// differentiable layer: a network's histogram in place of the workspace's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum YieldVariations {
    /// Held relative to the yields: per bin, the variations scale with the input
    /// (Δ = y·Δ₀/nominal₀), as a shape uncertainty of the new histogram. Bins whose workspace
    /// nominal is zero keep their absolute variation.
    #[default]
    Relative,
    /// Held absolute: the workspace's deltas at each α (for additive codes the interpolation of
    /// hi − nominal and lo − nominal; for multiplicative ones nominal·(κ(α) − 1)) are added to
    /// the input.
    Absolute,
}

impl std::str::FromStr for YieldVariations {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "relative" => Ok(YieldVariations::Relative),
            "absolute" => Ok(YieldVariations::Absolute),
            other => Err(format!(
                "yield variations \"{other}\": expected \"relative\" or \"absolute\""
            )),
        }
    }
}

/// How a parameter is constrained by auxiliary data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Constraint {
    None,
    /// Normal(aux | θ, σ).
    Gauss {
        sigma: f64,
    },
    /// Poisson(aux | θ·τ) with continuous aux.
    Poisson {
        tau: f64,
    },
}

/// One scalar parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    /// pyhf's name: `mu`, or `staterror_SR[3]` for a component of a per-bin set (an HS3
    /// document's HistFactory channels rename each to the document's: `gamma_stat_SR_bin_3`).
    pub name: String,
    /// Index into [`Model::sets`].
    pub set: usize,
    pub init: f64,
    pub lower: f64,
    pub upper: f64,
    pub fixed: bool,
    pub constraint: Constraint,
    /// Position of this parameter's datum in the auxiliary data, if constrained.
    pub aux_index: Option<usize>,
}

/// A named group of parameters created by one modifier name (one entry for scalar modifiers).
#[derive(Debug, Clone, PartialEq)]
pub struct ParameterSet {
    pub name: String,
    /// The pyhf modifier type that created it.
    pub kind: &'static str,
    pub start: usize,
    pub len: usize,
}

/// A channel's place in the main data.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelLayout {
    pub name: String,
    pub bin_start: usize,
    pub n_bins: usize,
    pub samples: Vec<String>,
}

/// One (channel, sample) with its per-sample modifier tables (ranges into the `Model` tables).
#[derive(Debug, Clone, PartialEq)]
pub struct SampleLayout {
    pub channel: usize,
    pub name: String,
    /// First main bin of the channel.
    pub bin_start: usize,
    pub n_bins: usize,
    /// First sample-bin (index into `nominal`, `bin_factor_offsets`).
    pub sb_start: usize,
    /// Range into `scale_factors` (normfactor, lumi: factor θ).
    pub scale_factors: (u32, u32),
    /// Range into `normsys`.
    pub normsys: (u32, u32),
    /// Range into `histosys`.
    pub histosys: (u32, u32),
}

/// A normsys entry: the sample is scaled by κ(α).
#[derive(Debug, Clone, PartialEq)]
pub struct NormSysEntry {
    pub par: u32,
    pub code: InterpCode,
    /// Multiplicative codes: [`interp::multiplicative_coefficients`]; additive: first 4 are
    /// [`interp::additive_coefficients`] with nominal 1 and κ = 1 + Δ.
    pub coef: [f64; 8],
}

impl NormSysEntry {
    /// κ(α) and dκ/dα.
    #[inline]
    pub fn factor(&self, a: f64) -> (f64, f64) {
        if self.code.is_multiplicative() {
            interp::multiplicative_value(self.code, &self.coef, a)
        } else {
            let (w, dw) = interp::additive_weights(self.code, a);
            let c = &self.coef;
            (
                1.0 + w[0] * c[0] + w[1] * c[1] + w[2] * c[2] + w[3] * c[3],
                dw[0] * c[0] + dw[1] * c[1] + dw[2] * c[2] + dw[3] * c[3],
            )
        }
    }
}

/// A histosys entry: one parameter acting on all bins of one sample.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoSysEntry {
    pub par: u32,
    pub code: InterpCode,
    /// Start of this entry's `n_bins` rows in `histosys_coef`.
    pub coef_start: u32,
}

/// The compiled model: flat, immutable, shared by all evaluators.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub parameters: Vec<Parameter>,
    pub sets: Vec<ParameterSet>,
    /// The parameter of interest; `None` for a model compiled without one (a measurement whose
    /// POI is the empty name: background-only files whose POI only a signal patch adds).
    pub poi: Option<usize>,
    pub measurement: String,
    pub settings: Settings,
    pub channels: Vec<ChannelLayout>,
    pub n_main: usize,
    /// Observed data: main bins (channel order) then auxiliary data (parameter order).
    pub observed: Vec<f64>,
    /// The parameter owning each auxiliary datum.
    pub aux_params: Vec<usize>,
    pub samples: Vec<SampleLayout>,
    /// Nominal yield per sample-bin.
    pub nominal: Vec<f64>,
    /// Main-bin index of each sample-bin.
    pub sb_bin: Vec<u32>,
    /// Parameters whose value multiplies a whole sample (normfactor, lumi).
    pub scale_factors: Vec<u32>,
    pub normsys: Vec<NormSysEntry>,
    pub histosys: Vec<HistoSysEntry>,
    /// Per histosys entry and bin: additive coefficients, or `[nominal, ln up, ln dn, 0]` plus the
    /// code-4 polynomial in `histosys_poly` for multiplicative codes.
    pub histosys_coef: Vec<[f64; 4]>,
    /// Code-4 polynomial coefficients for multiplicative histosys rows (same indexing).
    pub histosys_poly: Vec<[f64; 6]>,
    /// CSR offsets (len = n_sample_bins + 1) into `bin_factors`.
    pub bin_factor_offsets: Vec<u32>,
    /// Parameters multiplying a single sample-bin (shapefactor, staterror, shapesys).
    pub bin_factors: Vec<u32>,
    /// Notes the user should see (config for unknown parameters, ...).
    pub warnings: Vec<String>,
}

impl Model {
    pub fn n_params(&self) -> usize {
        self.parameters.len()
    }
    pub fn n_aux(&self) -> usize {
        self.aux_params.len()
    }
    pub fn par_names(&self) -> Vec<String> {
        self.parameters.iter().map(|p| p.name.clone()).collect()
    }
    /// Index of the parameter with this pyhf name.
    pub fn par_index(&self, name: &str) -> Option<usize> {
        self.parameters.iter().position(|p| p.name == name)
    }
    pub fn init(&self) -> Vec<f64> {
        self.parameters.iter().map(|p| p.init).collect()
    }
    pub fn bounds(&self) -> Vec<(f64, f64)> {
        self.parameters.iter().map(|p| (p.lower, p.upper)).collect()
    }
    pub fn fixed(&self) -> Vec<bool> {
        self.parameters.iter().map(|p| p.fixed).collect()
    }
    pub fn poi_name(&self) -> Option<&str> {
        self.poi.map(|i| self.parameters[i].name.as_str())
    }
}

/// Compiles `ws` under `settings` for the named measurement (default: the first).
pub fn compile(ws: &Workspace, measurement: Option<&str>, settings: &Settings) -> Result<Model> {
    let meas = ws.measurement(measurement)?;
    check_names(ws)?;
    let n_bins = channel_bins(ws)?;

    // Channels sorted by name, as pyhf orders the main data.
    let mut order: Vec<usize> = (0..ws.channels.len()).collect();
    order.sort_by(|&a, &b| ws.channels[a].name.cmp(&ws.channels[b].name));
    let mut channels = Vec::new();
    let mut bin_start = 0;
    for &ci in &order {
        let c = &ws.channels[ci];
        let mut names: Vec<String> = c.samples.iter().map(|s| s.name.clone()).collect();
        names.sort();
        channels.push(ChannelLayout {
            name: c.name.clone(),
            bin_start,
            n_bins: n_bins[ci],
            samples: names,
        });
        bin_start += n_bins[ci];
    }
    let n_main = bin_start;

    let mut b = Builder {
        ws,
        sets: BTreeMap::new(),
        type_of: NameMap::default(),
        set_pos: NameMap::default(),
        shapesys: modifiers::shapesys::first_occurrences(ws),
        stat: NameMap::default(),
    };
    b.collect_sets(&order)?;
    let (parameters, sets, set_index, mut warnings) = b.parameter_table(meas)?;
    let poi = if meas.poi.is_empty() {
        None
    } else {
        Some(parameters
        .iter()
        .position(|p| p.name == meas.poi)
        .ok_or_else(|| {
            let place = format!(
                "measurements[{}].config.poi",
                ws.measurements
                    .iter()
                    .position(|m| m.name == meas.name)
                    .unwrap_or(0)
            );
            let hint = if set_index.contains_key(&meas.poi) {
                " (it names a per-bin parameter set; the POI must be a scalar parameter)"
            } else {
                " (a background-only file whose POI only a signal patch adds compiles without \
                 one: --poi none, or poi=\"none\" in Python)"
            };
            ModelError::new(
                place,
                format!("POI \"{}\" is not a parameter of the model{hint}", meas.poi),
            )
        })?)
    };

    // Observed data.
    let mut observed = vec![0.0; n_main];
    let mut seen = vec![false; ws.channels.len()];
    // Channel name → (workspace index, position in name order): one look-up per observation.
    let channel_at: NameMap<&str, (usize, usize)> = order
        .iter()
        .enumerate()
        .map(|(pos, &ci)| (ws.channels[ci].name.as_str(), (ci, pos)))
        .collect();
    for (oi, o) in ws.observations.iter().enumerate() {
        let place = || format!("observations[{oi}] (\"{}\")", o.name);
        let Some(&(ci, pos)) = channel_at.get(o.name.as_str()) else {
            // Published patches that remove a channel leave its observation behind (ATLAS
            // SUSY-2018-31's sbottom patches do); pyhf ignores it, and so do we, with a word.
            warnings.push(format!(
                "{}: no channel \"{}\" in the workspace; this observation is ignored",
                place(),
                o.name
            ));
            continue;
        };
        if seen[ci] {
            return Err(ModelError::new(
                place(),
                format!("second observation for channel \"{}\"", o.name),
            ));
        }
        seen[ci] = true;
        if o.data.len() != n_bins[ci] {
            return Err(ModelError::new(
                format!("{}.data", place()),
                format!(
                    "has {} bins, channel \"{}\" has {}",
                    o.data.len(),
                    o.name,
                    n_bins[ci]
                ),
            ));
        }
        if let Some((i, x)) = o.data.iter().enumerate().find(|(_, x)| **x < 0.0) {
            return Err(ModelError::new(
                format!("{}.data[{i}]", place()),
                format!("observed count {x} is negative"),
            ));
        }
        let layout = &channels[pos];
        observed[layout.bin_start..layout.bin_start + layout.n_bins].copy_from_slice(&o.data);
    }
    if let Some(ci) = seen.iter().position(|s| !s) {
        return Err(ModelError::new(
            "observations",
            format!("no observation for channel \"{}\"", ws.channels[ci].name),
        ));
    }
    let mut aux_params = Vec::new();
    for (i, p) in parameters.iter().enumerate() {
        if p.aux_index.is_some() {
            aux_params.push(i);
        }
    }
    let aux_values = aux_defaults(&parameters, &sets, meas)?;
    observed.extend(aux_values);

    // Modifier tables, sample by sample in (sorted channel, sorted sample) order, in vectors
    // sized up front: grown push by push, a 10⁵-channel model spent most of its compile
    // copying and consolidating the heap.
    let sample_bins: usize = ws
        .channels
        .iter()
        .zip(&n_bins)
        .map(|(c, n)| c.samples.len() * n)
        .sum();
    let n_samples: usize = ws.channels.iter().map(|c| c.samples.len()).sum();
    let mut model = Model {
        parameters,
        sets,
        poi,
        measurement: meas.name.clone(),
        settings: *settings,
        channels,
        n_main,
        observed,
        aux_params,
        samples: Vec::with_capacity(n_samples),
        nominal: Vec::with_capacity(sample_bins),
        sb_bin: Vec::with_capacity(sample_bins),
        scale_factors: Vec::new(),
        normsys: Vec::new(),
        histosys: Vec::new(),
        histosys_coef: Vec::new(),
        histosys_poly: Vec::new(),
        bin_factor_offsets: {
            let mut v = Vec::with_capacity(sample_bins + 1);
            v.push(0);
            v
        },
        bin_factors: Vec::new(),
        warnings,
    };
    for (pos, &ci) in order.iter().enumerate() {
        let c = &ws.channels[ci];
        let mut samples: Vec<usize> = (0..c.samples.len()).collect();
        samples.sort_by(|&a, &b| c.samples[a].name.cmp(&c.samples[b].name));
        for si in samples {
            add_sample(&mut model, ws, ci, pos, si, &set_index, settings)?;
        }
    }
    let empty_bins = check_yields(&model, ws, &order)?;
    model.warnings.extend(empty_bins);
    Ok(model)
}

struct SetInfo {
    kind: &'static str,
    len: usize,
    /// First place it was seen, for messages.
    place: String,
}

struct Builder<'a> {
    ws: &'a Workspace,
    /// Per modifier type (sorted), the set names in order of first appearance.
    sets: BTreeMap<&'static str, Vec<(String, SetInfo)>>,
    type_of: NameMap<String, (&'static str, String)>,
    /// (type, set name) → its position in `sets[type]`.
    set_pos: NameMap<(&'static str, &'a str), usize>,
    shapesys: NameMap<&'a str, (&'a [f64], &'a [f64])>,
    /// staterror name → per-bin (Σδ², Σnominal).
    stat: NameMap<String, Vec<(f64, f64)>>,
}

impl Builder<'_> {
    fn collect_sets(&mut self, order: &[usize]) -> Result<()> {
        for &ci in order {
            let c = &self.ws.channels[ci];
            let mut samples: Vec<usize> = (0..c.samples.len()).collect();
            samples.sort_by(|&a, &b| c.samples[a].name.cmp(&c.samples[b].name));
            for si in samples {
                let s = &c.samples[si];
                let mut mods: Vec<usize> = (0..s.modifiers.len()).collect();
                mods.sort_by(|&a, &b| {
                    let (ma, mb) = (&s.modifiers[a], &s.modifiers[b]);
                    (&ma.name, ma.data.type_name()).cmp(&(&mb.name, mb.data.type_name()))
                });
                for mi in mods {
                    let m = &s.modifiers[mi];
                    let kind = m.data.type_name();
                    // Formatted only where it is kept (a set's or a name's first appearance)
                    // or reported: once per modifier it cost more than the rest of the walk.
                    let place = || {
                        format!(
                            "channels[{ci}].samples[{si}].modifiers[{mi}] ({kind} \"{}\")",
                            m.name
                        )
                    };
                    if let Some((other, first)) = self.type_of.get(&m.name) {
                        if !modifiers::may_share(other, kind) {
                            return Err(ModelError::new(
                                place(),
                                format!(
                                    "parameter \"{}\" is used by a {kind} modifier here and by a {other} modifier at {first}; one name cannot belong to two modifier types",
                                    m.name
                                ),
                            ));
                        }
                    } else {
                        self.type_of.insert(m.name.clone(), (kind, place()));
                    }
                    let len = if modifiers::per_bin(kind) {
                        s.data.len()
                    } else {
                        1
                    };
                    modifiers::collect(&m.data, &m.name, &s.data, &mut self.stat);
                    let list = self.sets.entry(kind).or_default();
                    match self.set_pos.get(&(kind, m.name.as_str())) {
                        Some(&at) if list[at].1.len != len => {
                            let info = &list[at].1;
                            return Err(ModelError::new(
                                place(),
                                format!(
                                    "per-bin parameter set \"{}\" has {} bins here but {} at {}",
                                    m.name, len, info.len, info.place
                                ),
                            ));
                        }
                        Some(_) => {}
                        None => {
                            self.set_pos.insert((kind, m.name.as_str()), list.len());
                            list.push((
                                m.name.clone(),
                                SetInfo {
                                    kind,
                                    len,
                                    place: place(),
                                },
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    #[allow(clippy::type_complexity)]
    fn parameter_table(
        &self,
        meas: &Measurement,
    ) -> Result<(
        Vec<Parameter>,
        Vec<ParameterSet>,
        NameMap<String, usize>,
        Vec<String>,
    )> {
        let mut parameters = Vec::new();
        let mut sets = Vec::new();
        let mut index = NameMap::default();
        let mut n_aux = 0;
        let meas_pos = self
            .ws
            .measurements
            .iter()
            .position(|m| m.name == meas.name)
            .unwrap_or(0);
        let mut warnings = Vec::new();
        let mut config: NameMap<&str, (usize, &ParameterConfig)> = NameMap::default();
        for (i, p) in meas.parameters.iter().enumerate() {
            let place = format!("measurements[{meas_pos}].config.parameters[{i}]");
            if config.insert(p.name.as_str(), (i, p)).is_some() {
                return Err(ModelError::new(
                    place,
                    format!("parameter \"{}\" is configured twice", p.name),
                ));
            }
        }
        for (_kind, list) in self.sets.iter() {
            for (name, info) in list {
                if index.contains_key(name) {
                    continue; // shared with an earlier type (normsys + histosys)
                }
                let set_id = sets.len();
                index.insert(name.clone(), set_id);
                let start = parameters.len();
                let cfg = config.get(name.as_str()).copied();
                let cplace = cfg
                    .map(|(i, _)| {
                        format!("measurements[{meas_pos}].config.parameters[{i}] (\"{name}\")")
                    })
                    .unwrap_or_default();
                let defaults = self.defaults(name, info, cfg.map(|c| c.1), &cplace)?;
                for (k, d) in defaults.into_iter().enumerate() {
                    let pname = if modifiers::per_bin(info.kind) {
                        indexed_name(name, k)
                    } else {
                        name.clone()
                    };
                    let aux_index = if d.constraint == Constraint::None {
                        None
                    } else {
                        n_aux += 1;
                        Some(n_aux - 1)
                    };
                    if d.init < d.lower || d.init > d.upper {
                        return Err(ModelError::new(
                            if cplace.is_empty() {
                                info.place.clone()
                            } else {
                                cplace.clone()
                            },
                            format!(
                                "init {} of \"{pname}\" lies outside its bounds [{}, {}]",
                                d.init, d.lower, d.upper
                            ),
                        ));
                    }
                    parameters.push(Parameter {
                        name: pname,
                        set: set_id,
                        init: d.init,
                        lower: d.lower,
                        upper: d.upper,
                        fixed: d.fixed,
                        constraint: d.constraint,
                        aux_index,
                    });
                }
                sets.push(ParameterSet {
                    name: name.clone(),
                    kind: info.kind,
                    start,
                    len: info.len,
                });
            }
        }
        for (name, (i, _)) in &config {
            if !index.contains_key(*name) {
                warnings.push(format!(
                    "measurements[{meas_pos}].config.parameters[{i}]: \"{name}\" is not a parameter of the model; its settings are ignored"
                ));
            }
        }
        warnings.sort();
        Ok((parameters, sets, index, warnings))
    }

    /// pyhf's defaults for each component of a set, with the measurement config applied.
    fn defaults(
        &self,
        name: &str,
        info: &SetInfo,
        cfg: Option<&ParameterConfig>,
        cplace: &str,
    ) -> Result<Vec<Defaults>> {
        let n = info.len;
        let mut out = modifiers::defaults(
            info.kind,
            &SetContext {
                shapesys: &self.shapesys,
                name,
                len: n,
                place: &info.place,
                cfg,
                cplace,
                stat: &self.stat,
            },
        )?;
        if let Some(c) = cfg {
            let check_len = |what: &str, len: usize| -> Result<()> {
                if len != n {
                    Err(ModelError::new(
                        format!("{cplace}.{what}"),
                        format!("has {len} entries, parameter set \"{name}\" has {n}"),
                    ))
                } else {
                    Ok(())
                }
            };
            if let Some(v) = &c.inits {
                check_len("inits", v.len())?;
                for (d, x) in out.iter_mut().zip(v) {
                    d.init = *x;
                }
            }
            if let Some(v) = &c.bounds {
                check_len("bounds", v.len())?;
                for (d, b) in out.iter_mut().zip(v) {
                    d.lower = b[0];
                    d.upper = b[1];
                }
            }
            if let Some(f) = c.fixed {
                for d in out.iter_mut() {
                    d.fixed = f;
                }
            }
            if let Some(v) = &c.sigmas {
                check_len("sigmas", v.len())?;
                for (d, s) in out.iter_mut().zip(v) {
                    match &mut d.constraint {
                        Constraint::Gauss { sigma } => *sigma = *s,
                        _ => {
                            return Err(ModelError::new(
                                format!("{cplace}.sigmas"),
                                "only Gaussian-constrained parameters take sigmas",
                            ))
                        }
                    }
                    if *s <= 0.0 {
                        return Err(ModelError::new(
                            format!("{cplace}.sigmas"),
                            "sigmas must be positive",
                        ));
                    }
                }
            }
            if let Some(v) = &c.factors {
                check_len("factors", v.len())?;
                for (d, f) in out.iter_mut().zip(v) {
                    match &mut d.constraint {
                        Constraint::Poisson { tau } => *tau = *f,
                        _ => {
                            return Err(ModelError::new(
                                format!("{cplace}.factors"),
                                "only Poisson-constrained parameters take factors",
                            ))
                        }
                    }
                }
            }
            if let Some(v) = &c.auxdata {
                check_len("auxdata", v.len())?;
                if out.iter().any(|d| d.constraint == Constraint::None) {
                    return Err(ModelError::new(
                        format!("{cplace}.auxdata"),
                        "an unconstrained parameter has no auxiliary data",
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// Auxiliary data: the config's auxdata, else each kind's default ([`modifiers::default_aux`]).
fn aux_defaults(
    parameters: &[Parameter],
    sets: &[ParameterSet],
    meas: &Measurement,
) -> Result<Vec<f64>> {
    let mut aux = Vec::new();
    let auxdata: NameMap<&str, &Vec<f64>> = meas
        .parameters
        .iter()
        .filter_map(|c| Some((c.name.as_str(), c.auxdata.as_ref()?)))
        .collect();
    for (i, p) in parameters.iter().enumerate() {
        if p.aux_index.is_none() {
            continue;
        }
        let set = &sets[p.set];
        // A set's parameters are contiguous from its start.
        let k = i - set.start;
        let cfg = auxdata.get(set.name.as_str());
        let v = match cfg {
            Some(a) => a[k],
            None => modifiers::default_aux(set.kind, p.constraint),
        };
        // A shapesys τ = (nominal / uncertainty)² can overflow even from finite inputs: an
        // infinite auxiliary datum or rate is refused by name, not evaluated to NaN.
        let width = match p.constraint {
            Constraint::Gauss { sigma } => sigma,
            Constraint::Poisson { tau } => tau,
            Constraint::None => 1.0,
        };
        if !(v.is_finite() && width.is_finite()) {
            return Err(ModelError::new(
                format!("parameter \"{}\"", p.name),
                format!(
                    "its constraint is not finite (auxiliary datum {v}, width {width}): for a shapesys, (nominal / uncertainty)² overflows"
                ),
            ));
        }
        // A width so small that 1/σ² (or the term at the initial value) overflows gives NaN
        // where θ = aux (0/0) and ∞ elsewhere: refused by name (fuzz: structured-crash-2b1ba5b0,
        // -1d6b0d69, -c5475ad1, a lumi σ of 1e-300; a staterror of 1e-300 on a yield of 1 is
        // the same).
        if let Constraint::Gauss { sigma } = p.constraint {
            let (d, inv) = (p.init - v, 1.0 / (sigma * sigma));
            if !(inv.is_finite() && (d * inv).is_finite() && (d * d * inv).is_finite()) {
                return Err(ModelError::new(
                    format!("parameter \"{}\"", p.name),
                    format!(
                        "its Gaussian constraint's width {sigma:e} is too small for the likelihood's arithmetic (1/σ² or (init − auxdata)/σ² overflows; widths must be above about 1e-150)"
                    ),
                ));
            }
        }
        aux.push(v);
    }
    Ok(aux)
}

pub(crate) fn check_names(ws: &Workspace) -> Result<()> {
    // First index of each name, by hash: a scan of the earlier names for each one is quadratic
    // (10⁵ channels, thousands of modifiers on one sample).
    let mut channels: NameMap<&str, usize> =
        NameMap::with_capacity_and_hasher(ws.channels.len(), Default::default());
    let mut samples: NameMap<&str, usize> = NameMap::default();
    let mut mods: NameMap<(&str, &str), usize> = NameMap::default();
    for (ci, c) in ws.channels.iter().enumerate() {
        if let Some(prev) = channels.insert(&c.name, ci) {
            return Err(ModelError::new(
                format!("channels[{ci}]"),
                format!(
                    "duplicate channel name \"{}\" (also channels[{prev}])",
                    c.name
                ),
            ));
        }
        samples.clear();
        for (si, s) in c.samples.iter().enumerate() {
            if let Some(prev) = samples.insert(&s.name, si) {
                return Err(ModelError::new(
                    format!("channels[{ci}].samples[{si}]"),
                    format!(
                        "duplicate sample name \"{}\" in channel \"{}\" (also samples[{prev}])",
                        s.name, c.name
                    ),
                ));
            }
            mods.clear();
            for (mi, m) in s.modifiers.iter().enumerate() {
                let kind = m.data.type_name();
                if mods.insert((&m.name, kind), mi).is_some() {
                    return Err(ModelError::new(
                        format!(
                            "channels[{ci}].samples[{si}].modifiers[{mi}] ({kind} \"{}\")",
                            m.name
                        ),
                        "the same modifier appears twice on this sample",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Bins per channel, checking every array against it: the bin count most of its samples have
/// — on a tie, the one its observation has, else the first sample's — so that the error names
/// the array that differs rather than the ones that agree.
fn channel_bins(ws: &Workspace) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for (ci, c) in ws.channels.iter().enumerate() {
        let lengths: Vec<usize> = c.samples.iter().map(|s| s.data.len()).collect();
        let count = |n: usize| lengths.iter().filter(|&&m| m == n).count();
        let most = lengths.iter().map(|&m| count(m)).max().unwrap_or(0);
        let observed = ws
            .observations
            .iter()
            .find(|o| o.name == c.name)
            .map(|o| o.data.len());
        let n = match observed {
            Some(o) if count(o) == most => o,
            _ => lengths
                .iter()
                .copied()
                .find(|&m| count(m) == most)
                .unwrap_or(0),
        };
        if n == 0 {
            return Err(ModelError::new(
                format!("channels[{ci}].samples[0].data"),
                "a channel needs at least one bin",
            ));
        }
        for (si, s) in c.samples.iter().enumerate() {
            let sp = || format!("channels[{ci}].samples[{si}]");
            if s.data.len() != n {
                return Err(ModelError::new(
                    format!("{}.data", sp()),
                    format!(
                        "sample \"{}\" has {} bins, channel \"{}\" has {n}",
                        s.name,
                        s.data.len(),
                        c.name
                    ),
                ));
            }
            for (mi, m) in s.modifiers.iter().enumerate() {
                let mp = || {
                    format!(
                        "{}.modifiers[{mi}] ({} \"{}\")",
                        sp(),
                        m.data.type_name(),
                        m.name
                    )
                };
                for (what, a, uncertainties) in modifiers::bin_arrays(&m.data) {
                    if a.len() != n {
                        return Err(ModelError::new(
                            mp(),
                            format!(
                                "{what} has {} bins, channel \"{}\" has {n}",
                                a.len(),
                                c.name
                            ),
                        ));
                    }
                    if let Some(i) = a.iter().position(|x| *x < 0.0).filter(|_| uncertainties) {
                        return Err(ModelError::new(
                            format!("{}.data[{i}]", mp()),
                            "uncertainties must not be negative",
                        ));
                    }
                }
            }
        }
        out.push(n);
    }
    Ok(out)
}

fn add_sample(
    model: &mut Model,
    ws: &Workspace,
    ci: usize,
    pos: usize,
    si: usize,
    set_index: &NameMap<String, usize>,
    settings: &Settings,
) -> Result<()> {
    let c: &Channel = &ws.channels[ci];
    let s = &c.samples[si];
    let n = s.data.len();
    let sb_start = model.nominal.len();
    let bin_start = model.channels[pos].bin_start;
    let scale_start = model.scale_factors.len() as u32;
    let norm_start = model.normsys.len() as u32;
    let histo_start = model.histosys.len() as u32;
    let mut bin_factors: Vec<u32> = Vec::new();
    for (mi, m) in s.modifiers.iter().enumerate() {
        let par = model.sets[set_index[&m.name]].start as u32;
        let place = || {
            format!(
                "channels[{ci}].samples[{si}].modifiers[{mi}] ({} \"{}\")",
                m.data.type_name(),
                m.name
            )
        };
        modifiers::compile(
            &m.data,
            par,
            &mut SampleBuild {
                model,
                settings,
                nominal: &s.data,
                bin_factors: &mut bin_factors,
            },
            &place,
        )?;
    }
    for b in 0..n {
        model.nominal.push(s.data[b]);
        model.sb_bin.push((bin_start + b) as u32);
        model
            .bin_factors
            .extend(bin_factors.iter().map(|first| first + b as u32));
        model
            .bin_factor_offsets
            .push(model.bin_factors.len() as u32);
    }
    model.samples.push(SampleLayout {
        channel: pos,
        name: s.name.clone(),
        bin_start,
        n_bins: n,
        sb_start,
        scale_factors: (scale_start, model.scale_factors.len() as u32),
        normsys: (norm_start, model.normsys.len() as u32),
        histosys: (histo_start, model.histosys.len() as u32),
    });
    Ok(())
}

/// Rejects negative nominal yields that leave a bin's total prediction at or below zero.
fn check_yields(model: &Model, ws: &Workspace, order: &[usize]) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    let mut total = vec![0.0; model.n_main];
    for (sb, &bin) in model.sb_bin.iter().enumerate() {
        total[bin as usize] += model.nominal[sb];
    }
    for (pos, &ci) in order.iter().enumerate() {
        let c = &ws.channels[ci];
        let layout = &model.channels[pos];
        // Per bin, whether a histosys of the channel can move its yield: built on the first
        // empty bin (once per channel, not once per bin).
        let mut varied: Option<Vec<bool>> = None;
        for b in 0..layout.n_bins {
            let t = total[layout.bin_start + b];
            if t > 0.0 {
                continue;
            }
            if let Some((si, s)) = c.samples.iter().enumerate().find(|(_, s)| s.data[b] < 0.0) {
                return Err(ModelError::new(
                    format!("channels[{ci}].samples[{si}].data[{b}]"),
                    format!(
                        "negative nominal yield {} of sample \"{}\" makes the expected count of channel \"{}\" bin {b} {t} (it must be positive)",
                        s.data[b], s.name, c.name
                    ),
                ));
            }
            // Events where no sample can expect any: every sample's yield is 0 there and no
            // histosys moves it, so the observed data's likelihood is 0 for every parameter
            // value (found by the fuzz target workspace_json, crash-713d63fb). Asimov data and
            // toys still make sense, so this is a warning; a fit of the observed data then
            // names the bin.
            let n = model.observed[layout.bin_start + b];
            let varied = varied.get_or_insert_with(|| {
                let mut v = vec![false; layout.n_bins];
                for m in c.samples.iter().flat_map(|s| &s.modifiers) {
                    if let crate::spec::ModifierData::HistoSys { hi_data, lo_data } = &m.data {
                        for (b, x) in v.iter_mut().enumerate() {
                            *x |= hi_data.get(b).is_some_and(|v| *v != 0.0)
                                || lo_data.get(b).is_some_and(|v| *v != 0.0);
                        }
                    }
                }
                v
            });
            if n > 0.0 && !varied[b] {
                warnings.push(format!(
                    "channel \"{}\" bin {b}: {n} events observed where every sample's yield is 0: the observed data's likelihood is 0 for every parameter value",
                    c.name
                ));
            }
        }
    }
    Ok(warnings)
}

/// `name[k]`, pyhf's name of a per-bin parameter, written without the formatting machinery: a
/// model may have 10⁵–10⁶ of them (a shapefactor per bin of a wide sample), and `format!` with
/// its reallocations was a fifth of compiling and evaluating such a model once.
fn indexed_name(name: &str, k: usize) -> String {
    let (mut digits, mut at, mut rest) = ([0u8; 20], 20, k);
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let mut s = String::with_capacity(name.len() + 22 - at);
    s.push_str(name);
    s.push('[');
    // ASCII digits only.
    s.extend(digits[at..].iter().map(|&d| d as char));
    s.push(']');
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn indexed_names_read_as_pyhf_writes_them() {
        for k in [0, 7, 9, 10, 99, 100, 1427, 823_379, usize::MAX] {
            assert_eq!(super::indexed_name("γ_SR", k), format!("γ_SR[{k}]"));
        }
    }
}
