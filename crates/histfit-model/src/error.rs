//! The one error type of `histfit-model`: every message names the place in the input (a JSON path or
//! a file) and the rule that was broken, so a user can fix the workspace without reading our code.

use std::fmt;

/// An error found while reading, patching, validating or compiling a workspace.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ModelError {
    /// Where: a JSON path such as `channels[2].samples[0].modifiers[3] (histosys "jes")`, or a file.
    pub place: String,
    /// What rule was broken, in words.
    pub rule: String,
}

impl ModelError {
    pub fn new(place: impl Into<String>, rule: impl Into<String>) -> Self {
        ModelError {
            place: place.into(),
            rule: rule.into(),
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.place.is_empty() {
            write!(f, "{}", self.rule)
        } else {
            write!(f, "{}: {}", self.place, self.rule)
        }
    }
}

pub type Result<T> = std::result::Result<T, ModelError>;

/// Turns a serde_json syntax error into a message with line and column, and says plainly when the
/// cause is a NaN or Infinity literal (which Python's `json` writes but JSON forbids).
pub(crate) fn json_syntax_error(source: &str, text: &str, err: &serde_json::Error) -> ModelError {
    let (line, col) = (err.line(), err.column());
    let offending = text
        .lines()
        .nth(line.saturating_sub(1))
        .map(|l| {
            // serde's column counts bytes: step back to the character it falls in (fuzz
            // regression workspace_json/crash-a4cedc8a: a column inside a two-byte character).
            let mut start = col.saturating_sub(1).min(l.len());
            while !l.is_char_boundary(start) {
                start -= 1;
            }
            l[start..].trim_start_matches(['-', '+'])
        })
        .unwrap_or("");
    let rule = if ["NaN", "Infinity", "inf", "nan"]
        .iter()
        .any(|w| offending.starts_with(w))
    {
        format!(
            "non-finite number at line {line} column {col}: yields, uncertainties and data must be finite numbers"
        )
    } else {
        format!("malformed JSON: {err}")
    };
    ModelError::new(source, rule)
}
