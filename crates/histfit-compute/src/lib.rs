//! `histfit-compute`: the CPU f64 evaluator of binned HistFactory models, and what binds the
//! HistFactory model to the likelihood seam (`histfit-seam`, re-exported here whole so that
//! front ends name one crate): its parameter space ([`histfactory::parameter_space`]), its
//! datasets ([`HistFactoryData`]), its toys ([`rng::generate_toy`]) and its yields as inputs
//! ([`yields`]).

pub use histfit_seam::*;

pub mod cpu;
pub mod dataset;
pub mod flat;
pub mod histfactory;
pub mod rng;
pub mod yields;

pub use cpu::CpuEvaluator;
pub use dataset::HistFactoryData;
pub use histfactory::{check_batch, expected_aux, expected_data};
