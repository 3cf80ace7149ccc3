//! `histfit-unbinned`: event-level likelihoods. An HS3 document ([`hs3`]) becomes one typed
//! expression [`graph`] over event columns and parameters — named PDFs ([`pdf`]) and `generic_*`
//! expressions ([`expr`]) alike — which the CPU evaluates over blocks of events with
//! reverse-mode gradients ([`program`]); [`model`] is the likelihood (extended or not, weighted
//! events, constraint terms, several channels) behind histfit's `Evaluator` seam; [`template`] makes
//! densities from simulated events with per-event weight systematics. Events a dataset
//! names in files (its `histfit_source`) are read by `histfit-events`: Parquet columns, and TTree
//! branches through the expressions of [`tree_source`].

pub mod asimov;
pub mod expr;
pub mod faddeeva;
pub mod graph;
pub mod histogram;
pub mod hs3;
pub mod hs3_histfactory;
pub mod landau;
mod landau_tables;
pub mod model;
pub mod pdf;
pub mod program;
pub mod sample;
pub mod smooth;
pub mod template;
pub mod tree_source;
pub mod vmath;
pub mod weighted;

pub use hs3::{is_hs3, open, Choice, Hs3Error};
pub use hs3_histfactory::{histfactory, BinnedDoc, BinnedParameter};
pub use model::UnbinnedModel;
