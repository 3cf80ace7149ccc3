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
pub mod tools;
pub mod typed;
pub mod unindent;

pub use compile::{compile, Constraint, Model, Parameter, ParameterSet, Settings, YieldVariations};
pub use error::{ModelError, Result};
pub use interp::InterpCode;
pub use spec::Workspace;

/// The hash map of compilation's name look-ups (a published workspace's thousands of modifier
/// names): foldhash's seeded hash, several times faster than the standard SipHash on short
/// keys, and still seeded per process.
pub(crate) type NameMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Reads a JSON file (a workspace, a patchset), naming the file and the place of a syntax error.
pub fn read_json(path: &str) -> Result<serde_json::Value> {
    parse_json(&read_text(path)?, path)
}

/// Reads a text file, naming it when it cannot.
pub fn read_text(path: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| ModelError::new(path, format!("cannot read: {e}")))
}

/// Parses JSON text read from `source`, naming it and the place of a syntax error.
pub fn parse_json(text: &str, source: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| error::json_syntax_error(source, text, &e))
}

/// Parses a workspace read from `path` (errors name the file and the JSON path).
pub fn workspace_from_value(value: &serde_json::Value, path: &str) -> Result<Workspace> {
    Workspace::from_value(value)
        .map_err(|e| ModelError::new(format!("{path}: {}", e.place), e.rule))
}

/// Parses a workspace's JSON text read from `path`: the typed reader first, the walk where it
/// refuses (which then accepts the text or names the file, the JSON path and the rule).
pub fn workspace_from_text(text: &str, path: &str) -> Result<Workspace> {
    if let Some(ws) = typed::read(text) {
        return Ok(ws);
    }
    workspace_from_value(&parse_json(text, path)?, path)
}

/// Reads a workspace file: the typed reader on the file without its indentation (a quarter of a
/// pretty-printed file's bytes); where it refuses, the walk on the file as written, so that an
/// error names the line and column a reader sees.
pub fn workspace_from_file(path: &str) -> Result<Workspace> {
    // Only a regular file can be read a second time for the walk: a pipe or /dev/stdin is read
    // once, as written.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return workspace_from_text(&read_text(path)?, path);
    }
    let typed = unindent::read_unindented(path)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| typed::read(&text));
    if let Some(ws) = typed {
        return Ok(ws);
    }
    workspace_from_value(&read_json(path)?, path)
}

/// Reads a workspace file, applies an optional patch (`(patchset file, patch name)`) and parses it.
pub fn load_workspace(path: &str, patch: Option<(&str, &str)>) -> Result<Workspace> {
    let Some((pfile, pname)) = patch else {
        return workspace_from_file(path);
    };
    let mut value = read_json(path)?;
    patch::apply_patchset(&mut value, &read_json(pfile)?, pname, pfile)?;
    workspace_from_value(&value, path)
}
