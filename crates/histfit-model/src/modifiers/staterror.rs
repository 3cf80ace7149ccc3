//! `staterror`: the Monte Carlo statistical uncertainty, one factor γ_b per bin shared by every
//! sample carrying the same name, constrained by N(1 | γ_b, σ_b) with
//! σ_b = √(Σ δ²) / Σ nominal over those samples (pyhf's Barlow–Beeston-lite). A bin without
//! uncertainty has nothing to constrain and is fixed at 1 (pyhf ≥ 0.7). Bounds [1e-10, 10].

use super::{Defaults, SampleBuild};
use crate::compile::Constraint;
use crate::error::Result;
use crate::spec::ModifierData;
use serde_json::Value;

pub const NAME: &str = "staterror";
/// The nominal value of γ: the default auxiliary datum of its constraint.
pub const NOMINAL: f64 = 1.0;
pub const PER_BIN: bool = true;

pub(crate) fn parse(data: &Value, place: &str) -> Result<ModifierData> {
    Ok(ModifierData::StatError {
        uncertainties: crate::spec::finite_array(data, &format!("{place}.data"))?,
    })
}

/// Adds one sample's per-bin uncertainties and yields to the set's (Σδ², Σnominal).
pub(crate) fn accumulate(acc: &mut [(f64, f64)], uncertainties: &[f64], nominal: &[f64]) {
    for (b, (d, n)) in uncertainties.iter().zip(nominal).enumerate() {
        acc[b].0 += d * d;
        acc[b].1 += n;
    }
}

pub(crate) fn defaults(acc: &[(f64, f64)]) -> Vec<Defaults> {
    acc.iter()
        .map(|&(d2, nom)| {
            let rel = if nom > 0.0 { d2.sqrt() / nom } else { 0.0 };
            let mut d = Defaults::gauss(NOMINAL, 1e-10, 10.0, rel);
            if rel <= 0.0 {
                d.fixed = true;
                d.constraint = Constraint::Gauss { sigma: 1.0 };
            }
            d
        })
        .collect()
}

pub(crate) fn compile(par: u32, b: &mut SampleBuild) {
    b.per_bin_factors(par);
}
