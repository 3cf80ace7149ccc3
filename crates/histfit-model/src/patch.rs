//! pyhf patchsets (the format ATLAS publishes signal grids in) and the JSON Patch operations
//! (RFC 6902) they carry. A patch is applied to the workspace JSON *before* it is parsed, so the
//! patched workspace goes through exactly the same validation as any other.

use crate::error::{ModelError, Result};
use serde_json::Value;

/// One patch of a patchset: its place in the file, its name and its values (the signal point,
/// e.g. masses, in the order of the patchset's `labels`).
#[derive(Debug, Clone, PartialEq)]
pub struct PatchPoint {
    pub index: usize,
    pub name: String,
    pub values: Vec<Value>,
}

/// The patchset's labels (`metadata.labels`, empty where absent) and its patches in file order.
pub fn patch_points(patchset: &Value, source: &str) -> Result<(Vec<String>, Vec<PatchPoint>)> {
    let patches = patches(patchset, source)?;
    let labels = patchset
        .pointer("/metadata/labels")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let points = patches
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let name = p
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ModelError::new(
                        format!("{source}: patches[{i}].metadata.name"),
                        "missing patch name",
                    )
                })?;
            let values = p
                .pointer("/metadata/values")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            Ok(PatchPoint {
                index: i,
                name: name.to_owned(),
                values,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((labels, points))
}

fn patches<'a>(patchset: &'a Value, source: &str) -> Result<&'a Vec<Value>> {
    patchset
        .get("patches")
        .and_then(Value::as_array)
        .ok_or_else(|| ModelError::new(source, "not a pyhf patchset: missing array \"patches\""))
}

/// Applies the patch at `point` (from [`patch_points`] of the same patchset) to `workspace`.
pub fn apply_patch_point(
    workspace: &mut Value,
    patchset: &Value,
    point: &PatchPoint,
    source: &str,
) -> Result<()> {
    let i = point.index;
    let ops = patches(patchset, source)?[i]
        .get("patch")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            ModelError::new(
                format!("{source}: patches[{i}].patch"),
                "expected an array of operations",
            )
        })?;
    apply_json_patch(
        workspace,
        ops,
        &format!("{source}: patches[{i}] (\"{}\")", point.name),
    )
}

/// Applies the patch called `name` from the patchset JSON `patchset` to `workspace` in place.
pub fn apply_patchset(
    workspace: &mut Value,
    patchset: &Value,
    name: &str,
    source: &str,
) -> Result<()> {
    let (_, points) = patch_points(patchset, source)?;
    if let Some(p) = points.iter().find(|p| p.name == name) {
        return apply_patch_point(workspace, patchset, p, source);
    }
    let shown: Vec<&str> = points.iter().take(10).map(|p| p.name.as_str()).collect();
    Err(ModelError::new(
        source,
        format!(
            "no patch named \"{name}\" ({} patches; first: {})",
            points.len(),
            shown.join(", ")
        ),
    ))
}

/// Applies RFC 6902 operations in order; on error the document may be partly patched.
pub fn apply_json_patch(doc: &mut Value, ops: &[Value], place: &str) -> Result<()> {
    for (i, op) in ops.iter().enumerate() {
        let at = format!("{place}.patch[{i}]");
        let kind = op
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| ModelError::new(&at, "missing \"op\""))?;
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| ModelError::new(&at, "missing \"path\""))?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| ModelError::new(&at, format!("\"{kind}\" needs a \"value\"")))
        };
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| ModelError::new(&at, format!("\"{kind}\" needs a \"from\"")))
        };
        match kind {
            "add" => add(doc, path, value()?, &at)?,
            "remove" => {
                remove(doc, path, &at)?;
            }
            "replace" => {
                remove(doc, path, &at)?;
                add(doc, path, value()?, &at)?;
            }
            "move" => {
                let v = remove(doc, from()?, &at)?;
                add(doc, path, v, &at)?;
            }
            "copy" => {
                let v = doc.pointer(from()?).cloned().ok_or_else(|| {
                    ModelError::new(
                        &at,
                        format!("path \"{}\" does not exist", from().unwrap_or("")),
                    )
                })?;
                add(doc, path, v, &at)?;
            }
            "test" => {
                if doc.pointer(path) != Some(&value()?) {
                    return Err(ModelError::new(&at, format!("test failed at \"{path}\"")));
                }
            }
            other => {
                return Err(ModelError::new(
                    &at,
                    format!("unknown JSON Patch op \"{other}\""),
                ))
            }
        }
    }
    Ok(())
}

fn split_pointer<'a>(path: &'a str, at: &str) -> Result<(&'a str, String)> {
    let idx = path
        .rfind('/')
        .ok_or_else(|| ModelError::new(at, format!("\"{path}\" is not a JSON pointer")))?;
    let last = path[idx + 1..].replace("~1", "/").replace("~0", "~");
    Ok((&path[..idx], last))
}

fn add(doc: &mut Value, path: &str, value: Value, at: &str) -> Result<()> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, key) = split_pointer(path, at)?;
    let target = doc
        .pointer_mut(parent)
        .ok_or_else(|| ModelError::new(at, format!("parent of \"{path}\" does not exist")))?;
    match target {
        Value::Object(m) => {
            m.insert(key, value);
        }
        Value::Array(a) => {
            if key == "-" {
                a.push(value);
            } else {
                let i: usize =
                    key.parse().ok().filter(|&i| i <= a.len()).ok_or_else(|| {
                        ModelError::new(at, format!("bad array index in \"{path}\""))
                    })?;
                a.insert(i, value);
            }
        }
        _ => {
            return Err(ModelError::new(
                at,
                format!("parent of \"{path}\" is not a container"),
            ))
        }
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str, at: &str) -> Result<Value> {
    let (parent, key) = split_pointer(path, at)?;
    let missing = || ModelError::new(at, format!("path \"{path}\" does not exist"));
    match doc.pointer_mut(parent).ok_or_else(missing)? {
        Value::Object(m) => m.remove(&key).ok_or_else(missing),
        Value::Array(a) => {
            let i: usize = key
                .parse()
                .ok()
                .filter(|&i| i < a.len())
                .ok_or_else(missing)?;
            Ok(a.remove(i))
        }
        _ => Err(missing()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_ops() {
        let mut d = json!({"a": [1, 2], "b": {"c": 3}});
        let ops = json!([
            {"op": "add", "path": "/a/1", "value": 9},
            {"op": "replace", "path": "/b/c", "value": 4},
            {"op": "add", "path": "/a/-", "value": 5},
            {"op": "remove", "path": "/a/0"},
            {"op": "copy", "from": "/b/c", "path": "/d"},
            {"op": "test", "path": "/d", "value": 4}
        ]);
        apply_json_patch(&mut d, ops.as_array().unwrap(), "p").unwrap();
        assert_eq!(d, json!({"a": [9, 2, 5], "b": {"c": 4}, "d": 4}));
        let bad = json!([{"op": "remove", "path": "/zz"}]);
        let e = apply_json_patch(&mut d, bad.as_array().unwrap(), "p").unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }
}
