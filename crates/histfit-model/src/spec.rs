//! The pyhf workspace format as Rust types, read from a `serde_json::Value` by hand so that every
//! schema violation is reported with its JSON path (`channels[1].samples[0].data[3]`) instead of a
//! serde message without context. Checks that need the whole workspace (bin counts across
//! channels, parameter sharing) live in `compile`.

use crate::error::{ModelError, Result};
use serde_json::{Map, Value};

/// A parsed pyhf workspace (`channels`, `observations`, `measurements`, `version`).
#[derive(Debug, Clone, PartialEq)]
pub struct Workspace {
    pub channels: Vec<Channel>,
    pub observations: Vec<Observation>,
    pub measurements: Vec<Measurement>,
    pub version: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    pub name: String,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub data: Vec<f64>,
    pub modifiers: Vec<Modifier>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Modifier {
    pub name: String,
    pub data: ModifierData,
}

/// The seven HistFactory modifier types with the data each carries.
#[derive(Debug, Clone, PartialEq)]
pub enum ModifierData {
    NormFactor,
    ShapeFactor,
    Lumi,
    NormSys {
        hi: f64,
        lo: f64,
    },
    HistoSys {
        hi_data: Vec<f64>,
        lo_data: Vec<f64>,
    },
    StatError {
        uncertainties: Vec<f64>,
    },
    ShapeSys {
        uncertainties: Vec<f64>,
    },
}

impl ModifierData {
    /// The pyhf type name.
    pub fn type_name(&self) -> &'static str {
        use crate::modifiers::*;
        match self {
            ModifierData::NormFactor => normfactor::NAME,
            ModifierData::ShapeFactor => shapefactor::NAME,
            ModifierData::Lumi => lumi::NAME,
            ModifierData::NormSys { .. } => normsys::NAME,
            ModifierData::HistoSys { .. } => histosys::NAME,
            ModifierData::StatError { .. } => staterror::NAME,
            ModifierData::ShapeSys { .. } => shapesys::NAME,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub name: String,
    pub data: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub name: String,
    pub poi: String,
    pub parameters: Vec<ParameterConfig>,
}

/// `measurements[i].config.parameters[j]`: overrides of a parameter's defaults.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParameterConfig {
    pub name: String,
    pub inits: Option<Vec<f64>>,
    pub bounds: Option<Vec<[f64; 2]>>,
    pub fixed: Option<bool>,
    pub auxdata: Option<Vec<f64>>,
    pub sigmas: Option<Vec<f64>>,
    pub factors: Option<Vec<f64>>,
}

impl Workspace {
    /// Parses JSON text; `source` names the input (a file path) in error messages.
    pub fn from_str(text: &str, source: &str) -> Result<Workspace> {
        if let Some(ws) = crate::typed::read(text) {
            return Ok(ws);
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| crate::error::json_syntax_error(source, text, &e))?;
        Workspace::from_value(&value)
    }

    /// Reads a workspace from a JSON value, checking the schema as it goes.
    pub fn from_value(v: &Value) -> Result<Workspace> {
        let root = as_object(v, "workspace")?;
        let channels = as_array(field(root, "channels", "workspace")?, "channels")?
            .iter()
            .enumerate()
            .map(|(i, c)| parse_channel(c, &format!("channels[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let observations = as_array(field(root, "observations", "workspace")?, "observations")?
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let path = format!("observations[{i}]");
                let m = as_object(o, &path)?;
                Ok(Observation {
                    name: as_string(field(m, "name", &path)?, &format!("{path}.name"))?,
                    data: finite_array(field(m, "data", &path)?, &format!("{path}.data"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let measurements = as_array(field(root, "measurements", "workspace")?, "measurements")?
            .iter()
            .enumerate()
            .map(|(i, m)| parse_measurement(m, &format!("measurements[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let version = match root.get("version") {
            None | Some(Value::Null) => None,
            Some(v) => Some(as_string(v, "version")?),
        };
        Ok(Workspace {
            channels,
            observations,
            measurements,
            version,
        })
    }

    /// Replaces the POI of measurement `name` (default: the first) before compiling: `"none"`
    /// compiles the model without one (a background-only file whose POI only a signal patch
    /// adds); any other name must be a scalar parameter of the model, which `compile` checks.
    pub fn set_poi(&mut self, measurement: Option<&str>, poi: &str) -> Result<()> {
        let name = self.measurement(measurement)?.name.clone();
        if let Some(m) = self.measurements.iter_mut().find(|m| m.name == name) {
            m.poi = if poi == "none" {
                String::new()
            } else {
                poi.to_owned()
            };
        }
        Ok(())
    }

    /// The measurement with this name, or the first one when `name` is `None`.
    pub fn measurement(&self, name: Option<&str>) -> Result<&Measurement> {
        match name {
            None => self
                .measurements
                .first()
                .ok_or_else(|| ModelError::new("measurements", "the workspace has no measurement")),
            Some(n) => self
                .measurements
                .iter()
                .find(|m| m.name == n)
                .ok_or_else(|| {
                    let known: Vec<&str> =
                        self.measurements.iter().map(|m| m.name.as_str()).collect();
                    ModelError::new(
                        "measurements",
                        format!(
                            "no measurement named \"{n}\" (the workspace has: {})",
                            known.join(", ")
                        ),
                    )
                }),
        }
    }
}

fn parse_channel(v: &Value, path: &str) -> Result<Channel> {
    let m = as_object(v, path)?;
    let name = as_string(field(m, "name", path)?, &format!("{path}.name"))?;
    let samples = as_array(field(m, "samples", path)?, &format!("{path}.samples"))?
        .iter()
        .enumerate()
        .map(|(j, s)| parse_sample(s, &format!("{path}.samples[{j}]")))
        .collect::<Result<Vec<_>>>()?;
    if samples.is_empty() {
        return Err(ModelError::new(
            path,
            format!("channel \"{name}\" has no samples"),
        ));
    }
    Ok(Channel { name, samples })
}

fn parse_sample(v: &Value, path: &str) -> Result<Sample> {
    let m = as_object(v, path)?;
    let name = as_string(field(m, "name", path)?, &format!("{path}.name"))?;
    let data = finite_array(field(m, "data", path)?, &format!("{path}.data"))?;
    let modifiers = as_array(field(m, "modifiers", path)?, &format!("{path}.modifiers"))?
        .iter()
        .enumerate()
        .map(|(k, md)| parse_modifier(md, &format!("{path}.modifiers[{k}]")))
        .collect::<Result<Vec<_>>>()?;
    Ok(Sample {
        name,
        data,
        modifiers,
    })
}

fn parse_modifier(v: &Value, path: &str) -> Result<Modifier> {
    let m = as_object(v, path)?;
    let name = as_string(field(m, "name", path)?, &format!("{path}.name"))?;
    let kind = as_string(field(m, "type", path)?, &format!("{path}.type"))?;
    let place = format!("{path} ({kind} \"{name}\")");
    let data = m.get("data").unwrap_or(&Value::Null);
    let data = match crate::modifiers::parse(&kind, data, &place) {
        Some(d) => d?,
        None => {
            return Err(ModelError::new(
                format!("{path}.type"),
                format!(
                    "unknown modifier type \"{kind}\" for \"{name}\" (known: {})",
                    crate::modifiers::KINDS.join(", ")
                ),
            ))
        }
    };
    Ok(Modifier { name, data })
}

fn parse_measurement(v: &Value, path: &str) -> Result<Measurement> {
    let m = as_object(v, path)?;
    let name = as_string(field(m, "name", path)?, &format!("{path}.name"))?;
    let cpath = format!("{path}.config");
    let config = as_object(field(m, "config", path)?, &cpath)?;
    let poi = match config.get("poi") {
        None | Some(Value::Null) => {
            return Err(ModelError::new(
                format!("{cpath}.poi"),
                format!(
                    "measurement \"{name}\" has no parameter of interest (config.poi is required)"
                ),
            ))
        }
        Some(v) => as_string(v, &format!("{cpath}.poi"))?,
    };
    let parameters = match config.get("parameters") {
        None | Some(Value::Null) => Vec::new(),
        Some(p) => as_array(p, &format!("{cpath}.parameters"))?
            .iter()
            .enumerate()
            .map(|(i, p)| parse_parameter_config(p, &format!("{cpath}.parameters[{i}]")))
            .collect::<Result<Vec<_>>>()?,
    };
    Ok(Measurement {
        name,
        poi,
        parameters,
    })
}

fn parse_parameter_config(v: &Value, path: &str) -> Result<ParameterConfig> {
    let m = as_object(v, path)?;
    let name = as_string(field(m, "name", path)?, &format!("{path}.name"))?;
    let opt_array = |key: &str| -> Result<Option<Vec<f64>>> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => finite_array(v, &format!("{path}.{key}")).map(Some),
        }
    };
    let bounds = match m.get("bounds") {
        None | Some(Value::Null) => None,
        Some(b) => Some(
            as_array(b, &format!("{path}.bounds"))?
                .iter()
                .enumerate()
                .map(|(i, pair)| {
                    let p = format!("{path}.bounds[{i}]");
                    let xs = finite_array(pair, &p)?;
                    if xs.len() != 2 || xs[0] > xs[1] {
                        return Err(ModelError::new(
                            p,
                            "a bound must be [low, high] with low <= high",
                        ));
                    }
                    Ok([xs[0], xs[1]])
                })
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    let fixed = match m.get("fixed") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            return Err(ModelError::new(
                format!("{path}.fixed"),
                "must be true or false",
            ))
        }
    };
    Ok(ParameterConfig {
        name,
        inits: opt_array("inits")?,
        bounds,
        fixed,
        auxdata: opt_array("auxdata")?,
        sigmas: opt_array("sigmas")?,
        factors: opt_array("factors")?,
    })
}

pub(crate) fn as_object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| ModelError::new(path, format!("expected an object, found {}", kind_of(v))))
}

fn as_array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>> {
    v.as_array()
        .ok_or_else(|| ModelError::new(path, format!("expected an array, found {}", kind_of(v))))
}

fn as_string(v: &Value, path: &str) -> Result<String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| ModelError::new(path, format!("expected a string, found {}", kind_of(v))))
}

pub(crate) fn field<'a>(m: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a Value> {
    m.get(key)
        .ok_or_else(|| ModelError::new(path, format!("missing required field \"{key}\"")))
}

/// The largest magnitude a number of a workspace may have (no yield, count or setting comes
/// near it; products and squares of such numbers stay finite).
pub const MAX_MAGNITUDE: f64 = 1e150;

pub(crate) fn finite_number(v: &Value, path: &str) -> Result<f64> {
    number_rule(v).map_err(|rule| ModelError::new(path, rule))
}

/// A workspace number, or the rule it breaks (the caller names the place: formatting a path
/// for every number of a large array cost more than reading it).
fn number_rule(v: &Value) -> std::result::Result<f64, String> {
    let x = v
        .as_f64()
        .ok_or_else(|| format!("expected a number, found {}", kind_of(v)))?;
    check_number(x)
}

/// The rules every number of a workspace obeys.
pub(crate) fn check_number(x: f64) -> std::result::Result<f64, String> {
    if !x.is_finite() {
        return Err("must be a finite number".into());
    }
    // Subnormal numbers (below 2.2e-308 in magnitude) are no physical yield or count, and they
    // overflow the arithmetic of the likelihood (1/λ, λ/n): refused by name (fuzz:
    // structured-crash-6652ae8c, yields of 5e-324; crash-df502771, an observation of 5e-324).
    if x.is_subnormal() {
        return Err(format!(
            "{x:e} is a subnormal number: use 0 or a magnitude of at least 2.2e-308"
        ));
    }
    // Numbers near the top of the f64 range overflow the likelihood's arithmetic (τ =
    // (nominal/σ)² of a shapesys, sums of yields): refused by name (fuzz: crash-5980e708, a
    // yield of 4e211; structured-crash-13107fa2 and -6e016bab, yields of 1e308).
    if x.abs() > MAX_MAGNITUDE {
        return Err(format!(
            "{x:e} exceeds {MAX_MAGNITUDE:e} in magnitude: the likelihood's arithmetic would overflow"
        ));
    }
    Ok(x)
}

pub(crate) fn finite_array(v: &Value, path: &str) -> Result<Vec<f64>> {
    as_array(v, path)?
        .iter()
        .enumerate()
        .map(|(i, x)| number_rule(x).map_err(|rule| ModelError::new(format!("{path}[{i}]"), rule)))
        .collect()
}

pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
