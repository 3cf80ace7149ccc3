//! Any likelihood's evaluator on the host, boxed ([`HostEval`]): an event-level model today,
//! any other kind tomorrow, with no variant per kind in [`crate::AnyEval`] or
//! [`crate::AnyRunner`].

use histfit_compute::{Dataset, Evaluator, ParameterSpace};

/// What a host evaluator must offer to be boxed: evaluation, cloning (a toy ensemble fits on
/// one clone per thread), and sharing between threads.
pub trait DynHost: Evaluator + Send + Sync + std::fmt::Debug {
    fn boxed_clone(&self) -> Box<dyn DynHost>;
}

impl<T: Evaluator + Clone + Send + Sync + std::fmt::Debug + 'static> DynHost for T {
    fn boxed_clone(&self) -> Box<dyn DynHost> {
        Box::new(self.clone())
    }
}

/// A boxed host evaluator.
#[derive(Debug)]
pub struct HostEval(pub Box<dyn DynHost>);

impl HostEval {
    pub fn new<T: DynHost + 'static>(eval: T) -> HostEval {
        HostEval(Box::new(eval))
    }
}

impl Clone for HostEval {
    fn clone(&self) -> HostEval {
        HostEval(self.0.boxed_clone())
    }
}

impl Evaluator for HostEval {
    fn space(&self) -> &ParameterSpace {
        self.0.space()
    }
    fn nll(&mut self, p: &[f64], d: &Dataset) -> histfit_compute::Result<f64> {
        self.0.nll(p, d)
    }
    fn nll_grad(&mut self, p: &[f64], d: &Dataset, g: &mut [f64]) -> histfit_compute::Result<f64> {
        self.0.nll_grad(p, d, g)
    }
    fn asimov(&mut self, p: &[f64]) -> histfit_compute::Result<Dataset> {
        self.0.asimov(p)
    }
    fn toys(
        &mut self,
        p: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        self.0.toys(p, seed, indices)
    }
    fn expected_main(&mut self, p: &[f64], out: &mut [f64]) -> histfit_compute::Result<()> {
        self.0.expected_main(p, out)
    }
    fn saturated_gap(&mut self, p: &[f64], d: &Dataset) -> histfit_compute::Result<(f64, usize)> {
        self.0.saturated_gap(p, d)
    }
}
