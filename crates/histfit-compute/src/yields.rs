//! Sample yields as inputs (the differentiable-analysis use: a network produces a signal
//! histogram): which samples of a HistFactory model may take them; the evaluator traits that
//! set and differentiate them are the seam's ([`histfit_seam::yields`], re-exported here),
//! and the one operation every profiled statistic's gradient reduces to — a weighted sum of
//! yield gradients at a few parameter points ([`YieldGradient`]), which a device evaluator can
//! form where the yields live (in GPU memory) and the CPU evaluator forms on the host.

pub use histfit_seam::yields::*;

use crate::{ComputeError, Result};
use histfit_model::compile::SampleLayout;
use histfit_model::Model;

/// Where an error about a sample's yields points.
pub fn yields_place(m: &Model, smp: &SampleLayout) -> String {
    format!(
        "yields of sample \"{}\" (channel \"{}\")",
        smp.name, m.channels[smp.channel].name
    )
}

/// The layout of `sample`, whose yields may be inputs. Every sample may take them: its scale and
/// bin factors multiply the input; staterror and shapesys keep the workspace's constraint widths
/// (relative uncertainties, so their absolute uncertainties follow the input); its histosys
/// variations follow the model's `settings.yield_variations` (relative by default).
pub fn input_sample(m: &Model, sample: usize) -> Result<&SampleLayout> {
    m.samples
        .get(sample)
        .ok_or_else(|| ComputeError::InvalidData {
            place: format!("sample index {sample}"),
            rule: format!("the model has {} samples", m.samples.len()),
        })
}

/// Checks that each of `samples` may take yields and appears once.
pub fn check_inputs(m: &Model, samples: &[usize]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for &s in samples {
        let smp = input_sample(m, s)?;
        if !seen.insert(s) {
            return Err(ComputeError::InvalidData {
                place: yields_place(m, smp),
                rule: "the sample is given yields twice".into(),
            });
        }
    }
    Ok(())
}
