//! `shapesys`: an uncorrelated per-bin shape uncertainty, one factor γ_b per bin constrained by
//! Poisson(τ_b | γ_b τ_b) with τ_b = (nominal_b / δ_b)², taken from the first sample carrying
//! the name (pyhf's rule). A bin without a usable uncertainty keeps γ_b = 1, fixed. Bounds
//! [1e-10, 10].

use super::{Defaults, SampleBuild};
use crate::error::Result;
use crate::spec::{ModifierData, Workspace};
use serde_json::Value;

pub const NAME: &str = "shapesys";
pub const PER_BIN: bool = true;

pub(crate) fn parse(data: &Value, place: &str) -> Result<ModifierData> {
    Ok(ModifierData::ShapeSys {
        uncertainties: crate::spec::finite_array(data, &format!("{place}.data"))?,
    })
}

pub(crate) fn defaults(ws: &Workspace, name: &str) -> Vec<Defaults> {
    let (nominal, uncertainties) = first_occurrence(ws, name);
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

/// The nominal yields and uncertainties of the first sample carrying shapesys `name`.
fn first_occurrence<'a>(ws: &'a Workspace, name: &str) -> (&'a [f64], &'a [f64]) {
    for c in &ws.channels {
        for s in &c.samples {
            for m in &s.modifiers {
                if let (true, ModifierData::ShapeSys { uncertainties }) = (m.name == name, &m.data)
                {
                    return (&s.data, uncertainties);
                }
            }
        }
    }
    unreachable!("shapesys set {name} has an occurrence")
}

pub(crate) fn compile(par: u32, b: &mut SampleBuild) {
    b.per_bin_factors(par);
}
