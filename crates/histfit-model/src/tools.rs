//! Workspace tools with pyhf's semantics, on the workspace JSON: the digest (SHA-256 of the
//! canonical text pyhf hashes, so a patchset's recorded digest can be checked), sorting, and
//! pruning and renaming channels, samples, modifiers (by name or type) and measurements. Every
//! result is a workspace that parses and validates again.

use crate::error::{ModelError, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// SHA-256 (hex) of the text pyhf digests a workspace by: JSON with sorted keys, `", "` and
/// `": "` separators, non-ASCII characters as they are, floats as Python writes them.
pub fn digest(v: &Value) -> String {
    Sha256::digest(canonical_text(v).as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The text [`digest`] hashes.
pub fn canonical_text(v: &Value) -> String {
    let mut text = String::new();
    canonical(v, &mut text);
    text
}

fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (_, Some(u), _) => out.push_str(&u.to_string()),
            (_, _, Some(f)) => out.push_str(&python_float(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                canonical(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                canonical(&m[k], out);
            }
            out.push('}');
        }
    }
}

/// A float as Python's `repr` writes it: the shortest digits that read back to the same value,
/// in positional notation for decimal exponents −4 ≤ e < 16 (with at least one decimal), else as
/// `d.ddde±XX`.
pub fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let (digits, exp) = shortest_digits(x.abs());
    let sign = if x < 0.0 { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp >= n - 1 {
            // An integer value: digits, zeros up to the units, ".0".
            format!("{digits}{}.0", "0".repeat((exp - (n - 1)) as usize))
        } else if exp >= 0 {
            let (int, frac) = digits.split_at((exp + 1) as usize);
            format!("{int}.{frac}")
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let es = if exp < 0 { "-" } else { "+" };
        format!("{sign}{m}e{es}{:02}", exp.abs())
    }
}

/// The shortest digits that read back to `x` (> 0) and the decimal exponent of the first, as
/// Python chooses them: where two candidates are equally close to the exact value (a tie, as
/// for float32 values such as 585.19635009765625), the one with the even last digit.
fn shortest_digits(x: f64) -> (String, i32) {
    // Rust's `{:e}` gives the shortest round-trip digits ("d.ddde-5"), breaking ties upwards.
    let e_form = format!("{x:e}");
    let (mantissa, exp) = e_form.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("integer exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let n = digits.len();
    // The exact value to 30 more digits (correctly rounded): a tie shows as "5" then zeros.
    let exact = format!("{:.*e}", n + 30, x);
    let (m, e2) = exact.split_once('e').expect("exponent form");
    let exact_digits: String = m.chars().filter(|c| *c != '.').collect();
    let tie = e2.parse::<i32>() == Ok(exp)
        && exact_digits.as_bytes()[n] == b'5'
        && exact_digits[n + 1..].bytes().all(|b| b == b'0');
    if !tie {
        return (digits, exp);
    }
    let down = exact_digits[..n].to_owned();
    let up = increment(&down);
    let even = |d: &str| (d.as_bytes()[d.len() - 1] - b'0').is_multiple_of(2);
    let reads_back = |d: &str| {
        format!("{}.{}e{exp}", &d[..1], &d[1..])
            .parse::<f64>()
            .is_ok_and(|v| v == x)
    };
    match up {
        Some(up) if up.len() == n => {
            let pick = if even(&down) { &down } else { &up };
            if reads_back(pick) {
                return (pick.clone(), exp);
            }
            (digits, exp)
        }
        _ => (digits, exp),
    }
}

/// The decimal digit string plus one in its last place (`None` past all nines).
fn increment(d: &str) -> Option<String> {
    let mut b = d.as_bytes().to_vec();
    for i in (0..b.len()).rev() {
        if b[i] < b'9' {
            b[i] += 1;
            return String::from_utf8(b).ok();
        }
        b[i] = b'0';
    }
    None
}

/// The workspace with channels, samples, modifiers (by name, then type), measurements, their
/// parameter configs and observations in name order, as pyhf sorts it.
pub fn sorted(v: &Value) -> Value {
    let mut w = v.clone();
    let name = |x: &Value| x["name"].as_str().unwrap_or_default().to_owned();
    let sort_by_name = |a: &mut Value| {
        if let Some(a) = a.as_array_mut() {
            a.sort_by_key(|x| name(x));
        }
    };
    sort_by_name(&mut w["channels"]);
    for c in array_mut(&mut w, "channels") {
        sort_by_name(&mut c["samples"]);
        for s in array_mut(c, "samples") {
            if let Some(m) = s["modifiers"].as_array_mut() {
                m.sort_by_key(|x| (name(x), x["type"].as_str().unwrap_or_default().to_owned()));
            }
        }
    }
    sort_by_name(&mut w["measurements"]);
    for m in array_mut(&mut w, "measurements") {
        sort_by_name(&mut m["config"]["parameters"]);
    }
    sort_by_name(&mut w["observations"]);
    w
}

fn array_mut<'a>(v: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    v.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// What to prune and rename (pyhf's `prune` and `rename`; names must exist in the workspace).
#[derive(Debug, Clone, Default)]
pub struct Edits {
    pub prune_channels: Vec<String>,
    pub prune_samples: Vec<String>,
    pub prune_modifiers: Vec<String>,
    pub prune_modifier_types: Vec<String>,
    pub prune_measurements: Vec<String>,
    pub rename_channels: HashMap<String, String>,
    pub rename_samples: HashMap<String, String>,
    pub rename_modifiers: HashMap<String, String>,
    pub rename_measurements: HashMap<String, String>,
}

/// The names the workspace holds, by kind (for the existence checks).
struct Names {
    channels: Vec<String>,
    samples: Vec<String>,
    modifiers: Vec<String>,
    modifier_types: Vec<String>,
    measurements: Vec<String>,
}

fn names(v: &Value) -> Names {
    let s = |x: &Value, k: &str| x[k].as_str().unwrap_or_default().to_owned();
    let mut n = Names {
        channels: Vec::new(),
        samples: Vec::new(),
        modifiers: Vec::new(),
        modifier_types: Vec::new(),
        measurements: Vec::new(),
    };
    for c in v["channels"].as_array().into_iter().flatten() {
        n.channels.push(s(c, "name"));
        for smp in c["samples"].as_array().into_iter().flatten() {
            n.samples.push(s(smp, "name"));
            for m in smp["modifiers"].as_array().into_iter().flatten() {
                n.modifiers.push(s(m, "name"));
                n.modifier_types.push(s(m, "type"));
            }
        }
    }
    for m in v["measurements"].as_array().into_iter().flatten() {
        n.measurements.push(s(m, "name"));
    }
    n
}

/// Prunes and renames, checking first that every named item exists (one error naming the first
/// that does not); the result is validated as a workspace.
pub fn prune_and_rename(v: &Value, e: &Edits) -> Result<Value> {
    let have = names(v);
    let checks: [(&str, &Vec<String>, Vec<&String>); 5] = [
        (
            "modifier type",
            &have.modifier_types,
            e.prune_modifier_types.iter().collect(),
        ),
        (
            "modifier",
            &have.modifiers,
            e.prune_modifiers
                .iter()
                .chain(e.rename_modifiers.keys())
                .collect(),
        ),
        (
            "sample",
            &have.samples,
            e.prune_samples
                .iter()
                .chain(e.rename_samples.keys())
                .collect(),
        ),
        (
            "channel",
            &have.channels,
            e.prune_channels
                .iter()
                .chain(e.rename_channels.keys())
                .collect(),
        ),
        (
            "measurement",
            &have.measurements,
            e.prune_measurements
                .iter()
                .chain(e.rename_measurements.keys())
                .collect(),
        ),
    ];
    for (kind, present, asked) in checks {
        if let Some(missing) = asked.into_iter().find(|n| !present.contains(n)) {
            return Err(ModelError::new(
                "workspace",
                format!("there is no {kind} \"{missing}\" to prune or rename"),
            ));
        }
    }
    let new = |map: &HashMap<String, String>, old: &str| -> Value {
        Value::String(map.get(old).cloned().unwrap_or_else(|| old.to_owned()))
    };
    let name = |x: &Value| x["name"].as_str().unwrap_or_default().to_owned();
    let mut w = v.clone();
    if let Some(channels) = w["channels"].as_array_mut() {
        channels.retain(|c| !e.prune_channels.contains(&name(c)));
        for c in channels.iter_mut() {
            let n = name(c);
            c["name"] = new(&e.rename_channels, &n);
            if let Some(samples) = c["samples"].as_array_mut() {
                samples.retain(|s| !e.prune_samples.contains(&name(s)));
                for s in samples.iter_mut() {
                    let n = name(s);
                    s["name"] = new(&e.rename_samples, &n);
                    if let Some(mods) = s["modifiers"].as_array_mut() {
                        mods.retain(|m| {
                            !e.prune_modifiers.contains(&name(m))
                                && !e
                                    .prune_modifier_types
                                    .iter()
                                    .any(|t| Some(t.as_str()) == m["type"].as_str())
                        });
                        for m in mods.iter_mut() {
                            let n = name(m);
                            m["name"] = new(&e.rename_modifiers, &n);
                        }
                    }
                }
            }
        }
    }
    if let Some(ms) = w["measurements"].as_array_mut() {
        ms.retain(|m| !e.prune_measurements.contains(&name(m)));
        for m in ms.iter_mut() {
            let n = name(m);
            m["name"] = new(&e.rename_measurements, &n);
            let config = &mut m["config"];
            if let Some(ps) = config["parameters"].as_array_mut() {
                ps.retain(|p| !e.prune_modifiers.contains(&name(p)));
                for p in ps.iter_mut() {
                    let n = name(p);
                    p["name"] = new(&e.rename_modifiers, &n);
                }
            }
            if let Some(poi) = config["poi"].as_str().map(str::to_owned) {
                config["poi"] = new(&e.rename_modifiers, &poi);
            }
        }
    }
    if let Some(obs) = w["observations"].as_array_mut() {
        obs.retain(|o| !e.prune_channels.contains(&name(o)));
        for o in obs.iter_mut() {
            let n = name(o);
            o["name"] = new(&e.rename_channels, &n);
        }
    }
    // The result must be a workspace: something left of each part, and no name twice.
    let ws = crate::Workspace::from_value(&w)?;
    for (what, empty) in [
        ("channel", ws.channels.is_empty()),
        ("measurement", ws.measurements.is_empty()),
    ] {
        if empty {
            return Err(ModelError::new(
                "workspace",
                format!("no {what} would remain: a workspace needs one"),
            ));
        }
    }
    crate::compile::check_names(&ws)?;
    let mut seen = std::collections::HashSet::new();
    if let Some(m) = ws.measurements.iter().find(|m| !seen.insert(&m.name)) {
        return Err(ModelError::new(
            "measurements",
            format!("two measurements would be named \"{}\"", m.name),
        ));
    }
    Ok(w)
}

/// Refuses a patchset whose recorded SHA-256 digest (`metadata.digests.sha256`) is not the
/// workspace's: its patches were made for another workspace. A patchset without a recorded
/// digest is accepted.
pub fn check_patchset_digest(workspace: &Value, patchset: &Value, source: &str) -> Result<()> {
    let recorded = patchset
        .pointer("/metadata/digests/sha256")
        .and_then(Value::as_str);
    match recorded {
        Some(want) if want != digest(workspace) => Err(ModelError::new(
            source,
            format!(
                "the patchset was made for the workspace with sha256 {want}, this one has {} (--force applies it anyway)",
                digest(workspace)
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::python_float;

    #[test]
    fn floats_as_python_writes_them() {
        for (x, want) in [
            (1.0, "1.0"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.2345e16, "1.2345e+16"),
            (123456789012345.6, "123456789012345.6"),
            (-2.5, "-2.5"),
            (0.0, "0.0"),
            (1e-10, "1e-10"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (9999999999999998.0, "9999999999999998.0"),
            (0.30000000000000004, "0.30000000000000004"),
            // Ties between two shortest candidates go to the even digit, as in Python.
            (f64::from(585.196_35_f32), "585.1963500976562"),
            (f64::from(559.889_95_f32), "559.8899536132812"),
        ] {
            assert_eq!(python_float(x), want, "{x:e}");
        }
    }
}

/// How [`combine`] joins items of the same name (pyhf's joins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// No name may appear on both sides.
    None,
    /// Items of the same name must be identical (kept once); measurements of the same name are
    /// merged (same POI; their parameter configs joined the same way).
    Outer,
    /// The left side's item wins where a name appears on both.
    LeftOuter,
    /// The right side's item wins where a name appears on both.
    RightOuter,
}

impl std::str::FromStr for Join {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Join, String> {
        match s {
            "none" => Ok(Join::None),
            "outer" => Ok(Join::Outer),
            "left outer" | "left-outer" => Ok(Join::LeftOuter),
            "right outer" | "right-outer" => Ok(Join::RightOuter),
            other => Err(format!(
                "join \"{other}\": expected none, outer, left outer or right outer"
            )),
        }
    }
}

fn item_name(v: &Value) -> &str {
    v["name"].as_str().unwrap_or_default()
}

/// Joins two lists of named items: the primary side (the right one for a right outer join)
/// whole, then each item of the other side that the join lets in. With `deep`, an item whose name
/// the primary side has gets the other's `deep` entries (samples) it lacks, by name.
fn join_items(join: Join, left: &[Value], right: &[Value], deep: Option<&str>) -> Vec<Value> {
    let (primary, secondary) = match join {
        Join::RightOuter => (right, left),
        _ => (left, right),
    };
    let mut joined = primary.to_vec();
    let names: Vec<String> = primary.iter().map(|v| item_name(v).to_owned()).collect();
    for item in secondary {
        let at = names.iter().position(|n| n == item_name(item));
        match (deep, at) {
            (Some(key), Some(k)) => {
                let mine = joined[k][key].as_array().cloned().unwrap_or_default();
                let theirs = item[key].as_array().cloned().unwrap_or_default();
                joined[k][key] = Value::Array(join_items(Join::LeftOuter, &mine, &theirs, None));
            }
            _ => {
                let take = match join {
                    Join::None => true,
                    Join::Outer => !primary.contains(item),
                    Join::LeftOuter | Join::RightOuter => at.is_none(),
                };
                if take {
                    joined.push(item.clone());
                }
            }
        }
    }
    joined
}

/// Refuses a name that appears twice after a join.
fn refuse_duplicates(joined: &[Value], what: &str) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    if let Some(v) = joined.iter().find(|v| !seen.insert(item_name(v))) {
        return Err(ModelError::new(
            what,
            format!(
                "\"{}\" is on both sides with different contents (an outer join keeps only identical ones)",
                item_name(v)
            ),
        ));
    }
    Ok(())
}

/// Refuses a name on both sides (the `none` join).
fn refuse_common(left: &[Value], right: &[Value], what: &str) -> Result<()> {
    if let Some(v) = right
        .iter()
        .find(|r| left.iter().any(|l| item_name(l) == item_name(r)))
    {
        return Err(ModelError::new(
            what,
            format!(
                "\"{}\" is in both workspaces (join none); rename one, or choose another join",
                item_name(v)
            ),
        ));
    }
    Ok(())
}

fn list(v: &Value, key: &str) -> Vec<Value> {
    v[key].as_array().cloned().unwrap_or_default()
}

/// Combines two workspaces as pyhf does: channels, observations and measurements joined by name
/// (`join`), channels of the same name merged sample by sample with `merge_channels` (outer
/// joins only); the versions must agree. The result is validated as a workspace.
pub fn combine(left: &Value, right: &Value, join: Join, merge_channels: bool) -> Result<Value> {
    if merge_channels && join == Join::None {
        return Err(ModelError::new(
            "combine",
            "merging channels needs an outer, left outer or right outer join",
        ));
    }
    if left["version"] != right["version"] {
        return Err(ModelError::new(
            "version",
            format!(
                "workspaces of different versions cannot be combined: {} and {}",
                left["version"], right["version"]
            ),
        ));
    }
    let (lc, rc) = (list(left, "channels"), list(right, "channels"));
    let channels = join_items(join, &lc, &rc, merge_channels.then_some("samples"));
    let (lo, ro) = (list(left, "observations"), list(right, "observations"));
    let observations = join_items(join, &lo, &ro, None);
    let (lm, rm) = (list(left, "measurements"), list(right, "measurements"));
    let mut measurements = join_items(join, &lm, &rm, None);
    match join {
        Join::None => {
            refuse_common(&lc, &rc, "channels")?;
            refuse_common(&lo, &ro, "observations")?;
            refuse_common(&lm, &rm, "measurements")?;
        }
        Join::Outer => {
            refuse_duplicates(&channels, "channels")?;
            refuse_duplicates(&observations, "observations")?;
            // Measurements of one name: the same POI, their parameter configs joined.
            let mut names: Vec<String> = Vec::new();
            let mut groups: HashMap<String, Vec<Value>> = HashMap::new();
            for m in measurements {
                let n = item_name(&m).to_owned();
                if !groups.contains_key(&n) {
                    names.push(n.clone());
                }
                groups.entry(n).or_default().push(m);
            }
            measurements = Vec::new();
            for n in names {
                let group = &groups[&n];
                if group.len() == 1 {
                    measurements.push(group[0].clone());
                    continue;
                }
                let poi = &group[0]["config"]["poi"];
                if group.iter().any(|m| &m["config"]["poi"] != poi) {
                    return Err(ModelError::new(
                        "measurements",
                        format!("measurement \"{n}\" has a different POI on each side"),
                    ));
                }
                let params = join_items(
                    Join::Outer,
                    &list(&group[0]["config"], "parameters"),
                    &list(&group[1]["config"], "parameters"),
                    None,
                );
                refuse_duplicates(&params, &format!("measurement \"{n}\" parameters"))?;
                measurements.push(serde_json::json!({
                    "name": n,
                    "config": {"poi": poi, "parameters": params},
                }));
            }
        }
        Join::LeftOuter | Join::RightOuter => {}
    }
    let mut out = serde_json::Map::new();
    out.insert("channels".into(), Value::Array(channels));
    out.insert("measurements".into(), Value::Array(measurements));
    out.insert("observations".into(), Value::Array(observations));
    out.insert("version".into(), left["version"].clone());
    let w = Value::Object(out);
    let ws = crate::Workspace::from_value(&w)?;
    crate::compile::check_names(&ws)?;
    Ok(w)
}
