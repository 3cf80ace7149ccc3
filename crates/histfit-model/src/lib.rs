//! `histfit-model`: pyhf JSON workspaces → a validated [`Workspace`] → a compiled, flat [`Model`].
//!
//! This crate owns the workspace format (parsing with JSON-path errors, patchsets) and the
//! compilation into the tables every evaluator reads. It knows nothing of devices or optimizers.

pub mod compile;
pub mod error;
pub mod interp;
pub mod modifiers;
pub mod patch;
pub mod spec;

pub use compile::{compile, Constraint, Model, Parameter, ParameterSet, Settings};
pub use error::{ModelError, Result};
pub use interp::InterpCode;
pub use spec::Workspace;

/// Reads a workspace file, applies an optional patch (`(patchset file, patch name)`) and parses it.
pub fn load_workspace(path: &str, patch: Option<(&str, &str)>) -> Result<Workspace> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ModelError::new(path, format!("cannot read: {e}")))?;
    let mut value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| error::json_syntax_error(path, &text, &e))?;
    if let Some((pfile, pname)) = patch {
        let ptext = std::fs::read_to_string(pfile)
            .map_err(|e| ModelError::new(pfile, format!("cannot read: {e}")))?;
        let pvalue: serde_json::Value = serde_json::from_str(&ptext)
            .map_err(|e| error::json_syntax_error(pfile, &ptext, &e))?;
        patch::apply_patchset(&mut value, &pvalue, pname, pfile)?;
    }
    Workspace::from_value(&value)
        .map_err(|e| ModelError::new(format!("{path}: {}", e.place), e.rule))
}
