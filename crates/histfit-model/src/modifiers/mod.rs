//! One module per HistFactory modifier kind, each holding everything about it: how its JSON
//! data reads, which arrays must match the channel's bins, its parameters' defaults (pyhf's),
//! the auxiliary data its constraint expects by default, and its compile step into the model's
//! flat tables. `spec` and `compile` walk the workspace and dispatch here by the pyhf type name
//! (or the parsed data's variant); nothing else in the crate matches on a modifier kind.
//!
//! The compiled tables are shared by kinds that act alike: normfactor and lumi scale a sample
//! (`scale_factors`), shapefactor, staterror and shapesys scale single bins (`bin_factors`),
//! normsys and histosys interpolate (`normsys`, `histosys`). Evaluators read those tables, so
//! a new kind that fits one of them needs no device code.

pub mod histosys;
pub mod lumi;
pub mod normfactor;
pub mod normsys;
pub mod shapefactor;
pub mod shapesys;
pub mod staterror;

use crate::compile::{Constraint, Model, Settings};
use crate::error::Result;
use crate::spec::{ModifierData, ParameterConfig};
use crate::NameMap;
use serde_json::{Map, Value};

/// The pyhf type names, in the order an error message lists them.
pub const KINDS: [&str; 7] = [
    normfactor::NAME,
    shapefactor::NAME,
    normsys::NAME,
    histosys::NAME,
    lumi::NAME,
    staterror::NAME,
    shapesys::NAME,
];

/// Reads the `data` of a modifier of type `kind` (`None`: not a known type).
pub(crate) fn parse(kind: &str, data: &Value, place: &str) -> Option<Result<ModifierData>> {
    Some(match kind {
        normfactor::NAME => Ok(ModifierData::NormFactor),
        shapefactor::NAME => Ok(ModifierData::ShapeFactor),
        lumi::NAME => Ok(ModifierData::Lumi),
        normsys::NAME => normsys::parse(data, place),
        histosys::NAME => histosys::parse(data, place),
        staterror::NAME => staterror::parse(data, place),
        shapesys::NAME => shapesys::parse(data, place),
        _ => return None,
    })
}

/// The modifier's arrays that must have one entry per bin of its channel; `true` marks
/// uncertainties, which must not be negative.
pub(crate) fn bin_arrays(data: &ModifierData) -> Vec<(&'static str, &[f64], bool)> {
    match data {
        ModifierData::HistoSys { hi_data, lo_data } => histosys::bin_arrays(hi_data, lo_data),
        ModifierData::StatError { uncertainties } | ModifierData::ShapeSys { uncertainties } => {
            vec![("data", uncertainties, true)]
        }
        _ => Vec::new(),
    }
}

/// What a kind gathers over all samples before its defaults can be set: staterror's per-bin
/// (Σδ², Σnominal) over the samples carrying the name.
pub(crate) fn collect(
    data: &ModifierData,
    name: &str,
    nominal: &[f64],
    stat: &mut NameMap<String, Vec<(f64, f64)>>,
) {
    if let ModifierData::StatError { uncertainties } = data {
        let acc = stat
            .entry(name.to_owned())
            .or_insert_with(|| vec![(0.0, 0.0); nominal.len()]);
        // A set whose bin count differs is refused by the caller with a message.
        if acc.len() == nominal.len() {
            staterror::accumulate(acc, uncertainties, nominal);
        }
    }
}

/// Whether a modifier of this kind has one parameter per bin (named `name[k]`).
pub(crate) fn per_bin(kind: &str) -> bool {
    match kind {
        shapefactor::NAME => shapefactor::PER_BIN,
        staterror::NAME => staterror::PER_BIN,
        shapesys::NAME => shapesys::PER_BIN,
        _ => false,
    }
}

/// Whether two kinds may share a parameter name. normsys and histosys parameters are the same
/// kind of nuisance (one Gaussian-constrained α): a systematic with a norm and a shape part
/// shares it.
pub(crate) fn may_share(a: &str, b: &str) -> bool {
    let alpha = |k: &str| k == normsys::NAME || k == histosys::NAME;
    a == b || (alpha(a) && alpha(b))
}

/// A parameter's defaults before the measurement's config is applied.
#[derive(Clone)]
pub(crate) struct Defaults {
    pub init: f64,
    pub lower: f64,
    pub upper: f64,
    pub fixed: bool,
    pub constraint: Constraint,
}

impl Defaults {
    pub fn free(init: f64, lower: f64, upper: f64) -> Defaults {
        Defaults {
            init,
            lower,
            upper,
            fixed: false,
            constraint: Constraint::None,
        }
    }
    pub fn gauss(init: f64, lower: f64, upper: f64, sigma: f64) -> Defaults {
        Defaults {
            constraint: Constraint::Gauss { sigma },
            ..Defaults::free(init, lower, upper)
        }
    }
    pub fn poisson(init: f64, lower: f64, upper: f64, tau: f64) -> Defaults {
        Defaults {
            constraint: Constraint::Poisson { tau },
            ..Defaults::free(init, lower, upper)
        }
    }
}

/// What a kind's defaults may read about one parameter set.
pub(crate) struct SetContext<'a> {
    /// shapesys name → its first occurrence ([`shapesys::first_occurrences`]).
    pub shapesys: &'a NameMap<&'a str, (&'a [f64], &'a [f64])>,
    pub name: &'a str,
    pub len: usize,
    /// The set's first occurrence, for messages.
    pub place: &'a str,
    /// The measurement's config entry and its place.
    pub cfg: Option<&'a ParameterConfig>,
    pub cplace: &'a str,
    /// staterror name → per-bin (Σδ², Σnominal) over the samples that carry it.
    pub stat: &'a NameMap<String, Vec<(f64, f64)>>,
}

/// pyhf's defaults for each parameter of a set of kind `kind`.
pub(crate) fn defaults(kind: &str, cx: &SetContext) -> Result<Vec<Defaults>> {
    Ok(match kind {
        normfactor::NAME => normfactor::defaults(),
        shapefactor::NAME => shapefactor::defaults(cx.len),
        normsys::NAME => normsys::defaults(),
        histosys::NAME => histosys::defaults(),
        lumi::NAME => lumi::defaults(cx)?,
        staterror::NAME => staterror::defaults(&cx.stat[cx.name]),
        shapesys::NAME => shapesys::defaults(cx.shapesys[cx.name]),
        other => unreachable!("sets are only made for known kinds, not {other}"),
    })
}

/// The auxiliary datum a constraint of a set of kind `kind` expects when the measurement gives
/// none: the parameter's nominal value for a Gaussian constraint, τ for a Poisson one.
pub(crate) fn default_aux(kind: &str, constraint: Constraint) -> f64 {
    match (constraint, kind) {
        (Constraint::Poisson { tau }, _) => tau,
        (_, normsys::NAME) => normsys::NOMINAL,
        (_, histosys::NAME) => histosys::NOMINAL,
        (_, staterror::NAME) => staterror::NOMINAL,
        _ => lumi::NOMINAL,
    }
}

/// One sample being compiled: the model's tables grow by its entries.
pub(crate) struct SampleBuild<'a> {
    pub model: &'a mut Model,
    pub settings: &'a Settings,
    /// The sample's nominal yields.
    pub nominal: &'a [f64],
    /// The first parameter of each per-bin factor set acting on the sample, in modifier order:
    /// bin b of the sample is scaled by parameters `first + b` of each.
    pub bin_factors: &'a mut Vec<u32>,
}

impl SampleBuild<'_> {
    /// A scale factor θ on the whole sample.
    fn scale(&mut self, par: u32) {
        self.model.scale_factors.push(par);
    }

    /// Bin factors γ_b on every bin (parameters `par + b`).
    fn per_bin_factors(&mut self, par: u32) {
        self.bin_factors.push(par);
    }
}

/// Adds one modifier (its first parameter `par`) to the sample's tables.
pub(crate) fn compile(
    data: &ModifierData,
    par: u32,
    b: &mut SampleBuild,
    place: &dyn Fn() -> String,
) -> Result<()> {
    match data {
        ModifierData::NormFactor => normfactor::compile(par, b),
        ModifierData::Lumi => lumi::compile(par, b),
        ModifierData::ShapeFactor => shapefactor::compile(par, b),
        ModifierData::StatError { .. } => staterror::compile(par, b),
        ModifierData::ShapeSys { .. } => shapesys::compile(par, b),
        ModifierData::NormSys { hi, lo } => return normsys::compile(*hi, *lo, par, b, place),
        ModifierData::HistoSys { hi_data, lo_data } => {
            return histosys::compile(hi_data, lo_data, par, b, place)
        }
    }
    Ok(())
}

/// The object at `place.data`.
fn data_object<'a>(data: &'a Value, place: &str) -> Result<&'a Map<String, Value>> {
    crate::spec::as_object(data, &format!("{place}.data"))
}
