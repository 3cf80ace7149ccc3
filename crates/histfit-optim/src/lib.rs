//! `histfit-optim`: bounded minimisation without knowledge of HistFactory.
//!
//! [`Lbfgsb`] is L-BFGS-B (Byrd, Lu, Nocedal & Zhu 1995: generalized Cauchy point, subspace
//! minimisation, projected step as in Morales & Nocedal 2011, and a line search satisfying the
//! strong Wolfe conditions) written as an *ask/tell* state machine: the caller asks for the next
//! point, evaluates f and ∇f however it likes (one CPU evaluator, a pool, a GPU batch) and tells
//! the result. [`linalg`] has the small dense algebra for covariance matrices.

pub mod lbfgsb;
pub mod linalg;

pub use lbfgsb::{minimize, Ask, Lbfgsb, Options, Status};
