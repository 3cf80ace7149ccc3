//! `shapefactor`: one free factor γ_b per bin (a data-driven shape). No constraint; pyhf's
//! defaults init 1, bounds [0, 10].

use super::{Defaults, SampleBuild};

pub const NAME: &str = "shapefactor";
pub const PER_BIN: bool = true;

pub(crate) fn defaults(n_bins: usize) -> Vec<Defaults> {
    vec![Defaults::free(1.0, 0.0, 10.0); n_bins]
}

pub(crate) fn compile(par: u32, b: &mut SampleBuild) {
    b.per_bin_factors(par);
}
