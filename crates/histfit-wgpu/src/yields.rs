//! Input yields on the portable f32 evaluator: the differentiable layer with its tensors on the
//! CPU, bridged to any GPU. A profiled statistic's fits — hundreds of evaluations — run on the
//! adapter, with the input samples' yields written into the session's tables
//! ([`Session::set_yields`](crate::batch::Session::set_yields)); its gradient with respect to
//! the yields — a few evaluations at the fits' end points (envelope theorem) — and the Asimov
//! data built from the yields come from the session's host evaluator in f64, which holds the same
//! yields. So the statistic is the f32 fits' and its gradient is exact at their end points.

use crate::adapter::Backend;
use crate::{Precision, Result, WgpuBatch};
use histfit_compute::{
    BatchEvaluator, Dataset, Evaluator, OneAtATime, ParameterSpace, YieldEvaluator, YieldGradTerms,
    YieldGradient,
};
use histfit_model::Model;
use std::sync::Arc;

/// A wgpu evaluator whose samples' yields are inputs (see the module's text).
#[derive(Debug)]
pub struct WgpuYields {
    eval: OneAtATime<WgpuBatch>,
}

impl WgpuYields {
    /// Opens adapter `index` of `backend` for `model`, as [`WgpuBatch::new`].
    pub fn new(
        model: Arc<Model>,
        backend: Backend,
        index: Option<usize>,
        precision: Option<Precision>,
    ) -> Result<WgpuYields> {
        Ok(WgpuYields {
            eval: OneAtATime {
                batch: WgpuBatch::new(model, backend, index, precision)?,
            },
        })
    }

    pub fn batch(&self) -> &WgpuBatch {
        &self.eval.batch
    }
}

impl Evaluator for WgpuYields {
    fn space(&self) -> &ParameterSpace {
        self.eval.space()
    }
    fn nll(&mut self, params: &[f64], data: &Dataset) -> histfit_compute::Result<f64> {
        self.eval.nll(params, data)
    }
    fn nll_grad(
        &mut self,
        params: &[f64],
        data: &Dataset,
        grad: &mut [f64],
    ) -> histfit_compute::Result<f64> {
        self.eval.nll_grad(params, data, grad)
    }
    fn asimov(&mut self, params: &[f64]) -> histfit_compute::Result<Dataset> {
        self.eval.asimov(params)
    }
    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        self.eval.toys(params, seed, indices)
    }
    fn expected_main(&mut self, params: &[f64], out: &mut [f64]) -> histfit_compute::Result<()> {
        self.eval.expected_main(params, out)
    }
}

/// Batches (a statistic's independent fits in lockstep) on the adapter.
impl BatchEvaluator for WgpuYields {
    fn space(&self) -> &ParameterSpace {
        BatchEvaluator::space(&self.eval.batch)
    }
    fn nll_grad_batch(
        &mut self,
        params: &[f64],
        data: &[&Dataset],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> histfit_compute::Result<()> {
        self.eval.batch.nll_grad_batch(params, data, nll, grad)
    }
    fn asimov(&mut self, params: &[f64]) -> histfit_compute::Result<Dataset> {
        BatchEvaluator::asimov(&mut self.eval.batch, params)
    }
    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        BatchEvaluator::toys(&mut self.eval.batch, params, seed, indices)
    }
    fn expected_main_batch(
        &mut self,
        params: &[f64],
        out: &mut [f64],
    ) -> histfit_compute::Result<()> {
        self.eval.batch.expected_main_batch(params, out)
    }
}

impl YieldEvaluator for WgpuYields {
    fn check_inputs(&self, samples: &[usize]) -> histfit_compute::Result<()> {
        self.eval.batch.session().host().check_inputs(samples)
    }
    fn set_yields(&mut self, sample: usize, yields: &[f64]) -> histfit_compute::Result<()> {
        self.eval.batch.session().set_yields(sample, yields)
    }
    fn reset_yields(&mut self) {
        self.eval.batch.session().reset_yields()
    }
}

/// From the host evaluator, in f64, holding the same yields as the adapter's tables.
impl YieldGradient for WgpuYields {
    fn inputs_asimov(&mut self, at: &[f64]) -> histfit_compute::Result<Dataset> {
        self.eval.batch.session().host().inputs_asimov(at)
    }
    fn yield_grad_sum(
        &mut self,
        samples: &[usize],
        g: &YieldGradTerms,
    ) -> histfit_compute::Result<Option<Vec<f64>>> {
        self.eval.batch.session().host().yield_grad_sum(samples, g)
    }
}
