//! `normsys`: a normalisation uncertainty, the sample scaled by κ(α) interpolated between lo
//! (α = −1) and hi (α = +1) with the settings' normsys code; α is constrained by N(0 | α, 1),
//! init 0, bounds [−5, 5]. Multiplicative codes need hi and lo positive.

use super::{Defaults, SampleBuild};
use crate::compile::NormSysEntry;
use crate::error::{ModelError, Result};
use crate::interp;
use crate::spec::ModifierData;
use serde_json::Value;

pub const NAME: &str = "normsys";
/// The nominal value of an interpolation parameter α: the default auxiliary datum of its
/// constraint.
pub const NOMINAL: f64 = 0.0;

pub(crate) fn parse(data: &Value, place: &str) -> Result<ModifierData> {
    let d = super::data_object(data, place)?;
    let hi = crate::spec::finite_number(
        crate::spec::field(d, "hi", place)?,
        &format!("{place}.data.hi"),
    )?;
    let lo = crate::spec::finite_number(
        crate::spec::field(d, "lo", place)?,
        &format!("{place}.data.lo"),
    )?;
    Ok(ModifierData::NormSys { hi, lo })
}

pub(crate) fn defaults() -> Vec<Defaults> {
    vec![Defaults::gauss(NOMINAL, -5.0, 5.0, 1.0)]
}

pub(crate) fn compile(
    hi: f64,
    lo: f64,
    par: u32,
    b: &mut SampleBuild,
    place: &dyn Fn() -> String,
) -> Result<()> {
    let code = b.settings.normsys;
    let coef = if code.is_multiplicative() {
        if hi <= 0.0 || lo <= 0.0 {
            return Err(ModelError::new(
                place(),
                format!("hi = {hi} and lo = {lo} must both be positive for {code} (exponential) interpolation"),
            ));
        }
        interp::multiplicative_coefficients(code, hi, lo)
    } else {
        let a = interp::additive_coefficients(code, 1.0, hi, lo);
        [a[0], a[1], a[2], a[3], 0.0, 0.0, 0.0, 0.0]
    };
    b.model.normsys.push(NormSysEntry { par, code, coef });
    Ok(())
}
