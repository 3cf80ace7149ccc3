//! `histosys`: a shape uncertainty, each bin interpolated between lo_data (α = −1) and hi_data
//! (α = +1) with the settings' histosys code; α is shared with a normsys of the same name and
//! constrained by N(0 | α, 1), init 0, bounds [−5, 5]. The interpolation coefficients of every
//! bin are computed here, once.

use super::{Defaults, SampleBuild};
use crate::compile::HistoSysEntry;
use crate::error::{ModelError, Result};
use crate::interp;
use crate::spec::ModifierData;
use serde_json::Value;

pub const NAME: &str = "histosys";
/// The nominal value of α (shared with a normsys of the same name): the default auxiliary
/// datum of its constraint.
pub const NOMINAL: f64 = super::normsys::NOMINAL;

pub(crate) fn parse(data: &Value, place: &str) -> Result<ModifierData> {
    let d = super::data_object(data, place)?;
    let array = |key: &str| {
        crate::spec::finite_array(
            crate::spec::field(d, key, place)?,
            &format!("{place}.data.{key}"),
        )
    };
    Ok(ModifierData::HistoSys {
        hi_data: array("hi_data")?,
        lo_data: array("lo_data")?,
    })
}

pub(crate) fn bin_arrays<'a>(
    hi_data: &'a [f64],
    lo_data: &'a [f64],
) -> Vec<(&'static str, &'a [f64], bool)> {
    vec![("hi_data", hi_data, false), ("lo_data", lo_data, false)]
}

pub(crate) fn defaults() -> Vec<Defaults> {
    vec![Defaults::gauss(NOMINAL, -5.0, 5.0, 1.0)]
}

pub(crate) fn compile(
    hi_data: &[f64],
    lo_data: &[f64],
    par: u32,
    b: &mut SampleBuild,
    place: &dyn Fn() -> String,
) -> Result<()> {
    let code = b.settings.histosys;
    let coef_start = b.model.histosys_coef.len() as u32;
    for (bin, ((&nom, &hi), &lo)) in b.nominal.iter().zip(hi_data).zip(lo_data).enumerate() {
        if code.is_multiplicative() {
            let (up, dn) = if nom != 0.0 {
                (hi / nom, lo / nom)
            } else {
                (1.0, 1.0)
            };
            if up <= 0.0 || dn <= 0.0 {
                return Err(ModelError::new(
                    place(),
                    format!("bin {bin}: hi/nominal and lo/nominal must be positive for {code} interpolation"),
                ));
            }
            let c8 = interp::multiplicative_coefficients(code, up, dn);
            b.model.histosys_coef.push([nom, c8[0], c8[1], 0.0]);
            b.model
                .histosys_poly
                .push([c8[2], c8[3], c8[4], c8[5], c8[6], c8[7]]);
        } else {
            b.model
                .histosys_coef
                .push(interp::additive_coefficients(code, nom, hi, lo));
            b.model.histosys_poly.push([0.0; 6]);
        }
    }
    b.model.histosys.push(HistoSysEntry {
        par,
        code,
        coef_start,
    });
    Ok(())
}
