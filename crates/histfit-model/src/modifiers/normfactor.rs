//! `normfactor`: a free normalisation θ scaling the whole sample (a signal strength, a
//! background normalisation). No constraint; pyhf's defaults init 1, bounds [0, 10].

use super::{Defaults, SampleBuild};

pub const NAME: &str = "normfactor";

pub(crate) fn defaults() -> Vec<Defaults> {
    vec![Defaults::free(1.0, 0.0, 10.0)]
}

pub(crate) fn compile(par: u32, b: &mut SampleBuild) {
    b.scale(par);
}
