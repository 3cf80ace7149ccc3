//! `lumi`: the luminosity, one factor scaling every sample that carries it, constrained by
//! N(aux | θ, σ). Its σ and auxiliary datum must come from the measurement's config; init 1,
//! bounds [0, 10].

use super::{Defaults, SampleBuild, SetContext};
use crate::error::{ModelError, Result};

pub const NAME: &str = "lumi";
/// The nominal luminosity factor: the default auxiliary datum of its constraint (the
/// measurement must give one anyway).
pub const NOMINAL: f64 = 1.0;

pub(crate) fn defaults(cx: &SetContext) -> Result<Vec<Defaults>> {
    let c = cx.cfg.ok_or_else(|| {
        ModelError::new(
            cx.place,
            format!(
                "lumi modifier \"{}\" needs an entry in the measurement's config.parameters with auxdata and sigmas",
                cx.name
            ),
        )
    })?;
    let sigma = c
        .sigmas
        .as_ref()
        .and_then(|s| s.first().copied())
        .ok_or_else(|| ModelError::new(cx.cplace, "lumi parameter needs \"sigmas\": [σ]"))?;
    if c.auxdata.is_none() {
        return Err(ModelError::new(
            cx.cplace,
            "lumi parameter needs \"auxdata\": [value]",
        ));
    }
    Ok(vec![Defaults::gauss(NOMINAL, 0.0, 10.0, sigma)])
}

pub(crate) fn compile(par: u32, b: &mut SampleBuild) {
    b.scale(par);
}
