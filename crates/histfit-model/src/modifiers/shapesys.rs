//! `shapesys`: an uncorrelated per-bin shape uncertainty, one factor γ_b per bin constrained by
//! Poisson(τ_b | γ_b τ_b) with τ_b = (nominal_b / δ_b)², taken from the first sample carrying
//! the name (pyhf's rule). A bin without a usable uncertainty keeps γ_b = 1, fixed. Bounds
//! [1e-10, 10].

use super::{Defaults, SampleBuild};
use crate::error::Result;
use crate::spec::{ModifierData, Workspace};
use crate::NameMap;
use serde_json::Value;

pub const NAME: &str = "shapesys";
pub const PER_BIN: bool = true;

pub(crate) fn parse(data: &Value, place: &str) -> Result<ModifierData> {
    Ok(ModifierData::ShapeSys {
        uncertainties: crate::spec::finite_array(data, &format!("{place}.data"))?,
    })
}

/// The set's defaults from its first occurrence (nominal yields, uncertainties).
pub(crate) fn defaults((nominal, uncertainties): (&[f64], &[f64])) -> Vec<Defaults> {
    nominal
        .iter()
        .zip(uncertainties)
        .map(|(&v, &d)| {
            if v > 0.0 && d > 0.0 {
                Defaults::poisson(1.0, 1e-10, 10.0, (v / d) * (v / d))
            } else {
                let mut x = Defaults::poisson(1.0, 1e-10, 10.0, 1.0);
                x.fixed = true;
                x
            }
        })
        .collect()
}

/// Per shapesys name, the nominal yields and uncertainties of the first sample carrying it
/// (workspace order): one walk for all sets, not one per set.
pub(crate) fn first_occurrences(ws: &Workspace) -> NameMap<&str, (&[f64], &[f64])> {
    let mut out = NameMap::default();
    for s in ws.channels.iter().flat_map(|c| &c.samples) {
        for m in &s.modifiers {
            if let ModifierData::ShapeSys { uncertainties } = &m.data {
                out.entry(m.name.as_str())
                    .or_insert((s.data.as_slice(), uncertainties.as_slice()));
            }
        }
    }
    out
}

pub(crate) fn compile(par: u32, b: &mut SampleBuild) {
    b.per_bin_factors(par);
}
