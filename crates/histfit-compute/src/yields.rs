//! Sample yields as inputs (the differentiable-analysis use: a network produces a signal
//! histogram): which samples may take them, the evaluator traits that set and differentiate them,
//! and the one operation every profiled statistic's gradient reduces to — a weighted sum of
//! yield gradients at a few parameter points ([`YieldGradient`]), which a device evaluator can
//! form where the yields live (in GPU memory) and the CPU evaluator forms on the host.

use crate::{ComputeError, Dataset, Evaluator, Result};
use histfit_model::compile::SampleLayout;
use histfit_model::{Constraint, Model};

/// An evaluator whose samples' nominal yields can be inputs given on the host: replaced, and
/// differentiated.
pub trait YieldEvaluator: Evaluator {
    /// Replaces the nominal yields of `sample` (index into `Model::samples`).
    fn set_yields(&mut self, sample: usize, yields: &[f64]) -> Result<()>;
    /// Restores every sample's yields to the model's.
    fn reset_yields(&mut self);
    /// ∂λ_b/∂y for the yields y of `sample` at `params` (λ is linear in them: one value per
    /// bin of the sample, for the main bin it lies in).
    fn yield_jacobian(&mut self, params: &[f64], sample: usize, out: &mut [f64]) -> Result<()>;
    /// −ln L at `params` and its gradient with respect to the yields of `sample`.
    fn nll_grad_yields(
        &mut self,
        params: &[f64],
        data: &Dataset,
        sample: usize,
        grad_yields: &mut [f64],
    ) -> Result<f64>;
}

/// The data term of a statistic evaluated on an Asimov dataset built from the yields:
/// `coef · Σ_b ln(λ_b(free) / λ_b(cond)) · ∂λ_b/∂y(at)` (a bin where either rate is not positive
/// contributes nothing).
#[derive(Debug, Clone, Copy)]
pub struct AsimovTerm<'a> {
    pub coef: f64,
    pub free: &'a [f64],
    pub cond: &'a [f64],
    pub at: &'a [f64],
}

/// `Σ_i c_i · ∂(−ln L)/∂y (params_i; data)` plus an optional [`AsimovTerm`]: the gradient of a
/// profiled statistic with respect to the input yields (envelope theorem).
#[derive(Debug, Clone, Copy)]
pub struct YieldGradTerms<'a> {
    pub data: &'a Dataset,
    pub terms: &'a [(f64, &'a [f64])],
    pub asimov: Option<AsimovTerm<'a>>,
}

/// What a profiled statistic needs of an evaluator whose input yields are already set (on the
/// host through [`YieldEvaluator::set_yields`], or in device memory by a device evaluator). Its
/// batch evaluation lets independent fits run together.
pub trait YieldGradient: Evaluator + crate::BatchEvaluator {
    /// The evaluator's model, shared.
    fn model_arc(&self) -> std::sync::Arc<Model>;
    /// The Asimov dataset at `at`: expected main counts with the current yields, and expected
    /// auxiliary data. A device evaluator may keep its main counts in device memory
    /// ([`Dataset::resident`]).
    fn asimov(&mut self, at: &[f64]) -> Result<Dataset>;
    /// The gradient `g` over the input samples `samples` (bins concatenated in that order):
    /// `Some` values on the host, or `None` when the evaluator wrote them to its device output.
    fn yield_grad_sum(&mut self, samples: &[usize], g: &YieldGradTerms)
        -> Result<Option<Vec<f64>>>;
}

/// Where an error about a sample's yields points.
pub fn yields_place(m: &Model, smp: &SampleLayout) -> String {
    format!(
        "yields of sample \"{}\" (channel \"{}\")",
        smp.name, m.channels[smp.channel].name
    )
}

/// The layout of `sample` if it may take its yields as inputs; the error names it and the rule.
/// Supported: samples whose modifiers scale them (normfactor, lumi, normsys, shapefactor). A
/// histosys, staterror or shapesys on the sample was compiled from its nominal yields
/// (interpolation coefficients, constraint widths), so replacing them is refused.
pub fn input_sample(m: &Model, sample: usize) -> Result<&SampleLayout> {
    let smp = m
        .samples
        .get(sample)
        .ok_or_else(|| ComputeError::InvalidData {
            place: format!("sample index {sample}"),
            rule: format!("the model has {} samples", m.samples.len()),
        })?;
    let constrained_bin_factor = (smp.sb_start..smp.sb_start + smp.n_bins).any(|sb| {
        m.bin_factors[m.bin_factor_offsets[sb] as usize..m.bin_factor_offsets[sb + 1] as usize]
            .iter()
            .any(|&p| m.parameters[p as usize].constraint != Constraint::None)
    });
    if smp.histosys.1 > smp.histosys.0 || constrained_bin_factor {
        return Err(ComputeError::InvalidData {
            place: yields_place(m, smp),
            rule: "the sample has a histosys, staterror or shapesys modifier, whose terms depend \
                   on its nominal yields; only samples with normfactor, lumi, normsys and \
                   shapefactor modifiers can take yields as inputs"
                .into(),
        });
    }
    Ok(smp)
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

/// [`YieldGradient::yield_grad_sum`] on the host, from the per-sample gradients and Jacobians of
/// a [`YieldEvaluator`].
pub fn host_yield_grad_sum<E: YieldEvaluator + ?Sized>(
    eval: &mut E,
    samples: &[usize],
    g: &YieldGradTerms,
) -> Result<Vec<f64>> {
    let model = Evaluator::model(eval).clone();
    let widths: Vec<usize> = samples
        .iter()
        .map(|&s| input_sample(&model, s).map(|l| l.n_bins))
        .collect::<Result<_>>()?;
    let mut out = vec![0.0; widths.iter().sum()];
    for &(c, params) in g.terms {
        let mut at = 0;
        for (&s, &w) in samples.iter().zip(&widths) {
            let mut one = vec![0.0; w];
            eval.nll_grad_yields(params, g.data, s, &mut one)?;
            for (o, v) in out[at..at + w].iter_mut().zip(&one) {
                *o += c * v;
            }
            at += w;
        }
    }
    if let Some(a) = g.asimov {
        let (mut lf, mut lc) = (vec![0.0; model.n_main], vec![0.0; model.n_main]);
        eval.expected_main(a.free, &mut lf)?;
        eval.expected_main(a.cond, &mut lc)?;
        let mut at = 0;
        for (&s, &w) in samples.iter().zip(&widths) {
            let mut jac = vec![0.0; w];
            eval.yield_jacobian(a.at, s, &mut jac)?;
            let b0 = model.samples[s].bin_start;
            for (k, j) in jac.iter().enumerate() {
                let (f, c) = (lf[b0 + k], lc[b0 + k]);
                if f > 0.0 && c > 0.0 {
                    out[at + k] += a.coef * (f / c).ln() * j;
                }
            }
            at += w;
        }
    }
    Ok(out)
}

impl YieldGradient for crate::CpuEvaluator {
    fn model_arc(&self) -> std::sync::Arc<Model> {
        self.shared_model().clone()
    }
    fn asimov(&mut self, at: &[f64]) -> Result<Dataset> {
        let full = crate::expected_data(self, at)?;
        let model = self.shared_model().clone();
        Dataset::new(&model, &full)
    }
    fn yield_grad_sum(
        &mut self,
        samples: &[usize],
        g: &YieldGradTerms,
    ) -> Result<Option<Vec<f64>>> {
        host_yield_grad_sum(self, samples, g).map(Some)
    }
}
