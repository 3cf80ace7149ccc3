//! HistFactory XML → a pyhf workspace, with the semantics of pyhf's `xml2json` (the reference):
//!
//! - the top-level file's `<Input>` elements name channel files, resolved against the base
//!   directory (after `--mount` rewriting), and its `<Measurement>` elements become measurements
//!   (lumi first: auxdata and init `Lumi`, σ `Lumi·LumiRelErr`, bounds ±5σ; then every
//!   `NormFactor`'s bounds and init, then `<ParamSetting>`'s `Const`/`Val`, which take precedence);
//! - a channel's `<Data>` gives its observations; each `<Sample>` its nominal yields and modifiers:
//!   `NormalizeByTheory="True"` → `lumi`, `OverallSys` → `normsys`, `NormFactor` → `normfactor`,
//!   `HistoSys` → `histosys`, `StatError Activate="True"` → `staterror_<channel>` (the histogram's
//!   errors, or the named relative-error histogram × nominal), `ShapeSys` → `shapesys` (relative
//!   histogram × nominal), `ShapeFactor` → `shapefactor`;
//! - what pyhf ignores (other modifier tags, `ConstraintTerm`, a Poisson `StatErrorConfig`, a
//!   `StatError` not activated, a non-Poisson `ShapeSys`) is ignored too, each with a warning.
//!
//! Unlike pyhf, every histogram's bin count is checked against its channel's data, and every error
//! names the XML file, line and element, or the ROOT file and object.

use crate::root::{Histogram, RootFile};
use crate::ImportError;
use roxmltree::{Document, Node, ParsingOptions};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The schema version pyhf writes into every workspace.
const WORKSPACE_VERSION: &str = "1.0.0";
/// Far more elements than any real configuration has; a bound on what a hostile file can cost.
const MAX_XML_NODES: u32 = 2_000_000;

/// A path prefix as written in the XML (`mount`) and where those files really are (`host`), as
/// pyhf's `--mount host:mount`.
#[derive(Debug, Clone)]
pub struct Mount {
    pub host: PathBuf,
    pub mount: PathBuf,
}

/// An imported workspace (pyhf's JSON structure) and the warnings about what it does not carry.
#[derive(Debug, Clone)]
pub struct Imported {
    pub workspace: Value,
    pub warnings: Vec<String>,
}

/// Imports the HistFactory configuration `config` (a top-level `<Combination>` file), resolving
/// the files it names against `basedir`. The result is validated as a workspace.
pub fn xml2json(config: &Path, basedir: &Path, mounts: &[Mount]) -> Result<Imported, ImportError> {
    let mut importer = Importer {
        basedir: basedir.to_path_buf(),
        mounts,
        files: HashMap::new(),
        warnings: Vec::new(),
    };
    let text = read_text(config)?;
    let top = XmlFile::parse(config, &text)?;
    let root = top.doc.root_element();
    let mut channels = Vec::new();
    let mut observations = Vec::new();
    let mut parameters: Vec<Map<String, Value>> = Vec::new();
    for input in children(root, "Input") {
        let text = input.text().unwrap_or("").trim();
        if text.is_empty() {
            continue;
        }
        let channel = importer.channel(&importer.resolve(text))?;
        channels.push(json!({"name": channel.name, "samples": channel.samples}));
        observations.push(json!({"name": channel.name, "data": channel.data}));
        parameters.extend(channel.parameters);
    }
    let parameters = dedupe(parameters, &top)?;
    let mut measurements = Vec::new();
    for measurement in children(root, "Measurement") {
        measurements.push(importer.measurement(&top, measurement, &parameters)?);
    }
    let workspace = json!({
        "channels": channels,
        "measurements": measurements,
        "observations": observations,
        "version": WORKSPACE_VERSION,
    });
    histfit_model::workspace_from_value(&workspace, &config.display().to_string()).map_err(
        |e| {
            ImportError::new(
                e.place,
                format!("the imported workspace is not valid: {}", e.rule),
            )
        },
    )?;
    Ok(Imported {
        workspace,
        warnings: importer.warnings,
    })
}

fn read_text(path: &Path) -> Result<String, ImportError> {
    std::fs::read_to_string(path)
        .map_err(|e| ImportError::new(path.display().to_string(), format!("cannot read: {e}")))
}

/// A parsed XML file and its name, for messages that say where an element is.
struct XmlFile<'t> {
    path: String,
    doc: Document<'t>,
}

impl<'t> XmlFile<'t> {
    fn parse(path: &Path, text: &'t str) -> Result<XmlFile<'t>, ImportError> {
        let name = path.display().to_string();
        let options = ParsingOptions {
            allow_dtd: true,
            nodes_limit: MAX_XML_NODES,
        };
        let doc = Document::parse_with_options(text, options)
            .map_err(|e| ImportError::new(&name, format!("malformed XML: {e}")))?;
        Ok(XmlFile { path: name, doc })
    }

    /// `file.xml line 12 <Sample Name="ttbar">`: where an element is, for messages.
    fn place(&self, node: Node) -> String {
        let line = self.doc.text_pos_at(node.range().start).row;
        match node.attribute("Name") {
            Some(name) => format!(
                "{} line {line} <{} Name=\"{name}\">",
                self.path,
                node.tag_name().name()
            ),
            None => format!("{} line {line} <{}>", self.path, node.tag_name().name()),
        }
    }

    fn required<'a>(&self, node: Node<'a, '_>, attribute: &str) -> Result<&'a str, ImportError> {
        node.attribute(attribute).ok_or_else(|| {
            ImportError::new(self.place(node), format!("missing attribute {attribute}"))
        })
    }

    fn number(&self, node: Node, attribute: &str) -> Result<f64, ImportError> {
        let text = self.required(node, attribute)?;
        text.trim().parse::<f64>().map_err(|_| {
            ImportError::new(
                self.place(node),
                format!("attribute {attribute}=\"{text}\" is not a number"),
            )
        })
    }
}

fn children<'a, 'i>(node: Node<'a, 'i>, tag: &'a str) -> impl Iterator<Item = Node<'a, 'i>> + 'a {
    node.children()
        .filter(move |n| n.is_element() && n.tag_name().name() == tag)
}

/// One channel file's contribution.
struct Channel {
    name: String,
    data: Vec<f64>,
    samples: Vec<Value>,
    parameters: Vec<Map<String, Value>>,
}

/// Where a histogram is: the file, the directory and the name, as the XML gives them.
struct HistoRef<'a> {
    file: &'a str,
    path: &'a str,
    name: &'a str,
}

struct Importer<'m> {
    basedir: PathBuf,
    mounts: &'m [Mount],
    files: HashMap<PathBuf, RootFile>,
    warnings: Vec<String>,
}

impl Importer<'_> {
    /// A path from the XML: mounts rewritten, then relative to the base directory. `.`
    /// components are dropped first (as pyhf's pathlib does, so a mount `data` matches
    /// `./data/x.root`), and messages show the paths a user would type.
    fn resolve(&self, name: &str) -> PathBuf {
        let mut path = without_dots(Path::new(name));
        for mount in self.mounts {
            if let Ok(rest) = path.strip_prefix(without_dots(&mount.mount)) {
                path = mount.host.join(rest);
                break;
            }
        }
        without_dots(&self.basedir.join(path))
    }

    /// A histogram as HistFactory finds it: `name` from the top of the file, else `path/name`.
    fn histogram(
        &mut self,
        at: &HistoRef,
        xml: &XmlFile,
        node: Node,
        bins: Option<usize>,
    ) -> Result<Histogram, ImportError> {
        let resolved = self.resolve(at.file);
        if !self.files.contains_key(&resolved) {
            let file = RootFile::open(&resolved).map_err(|e| {
                ImportError::new(
                    e.place,
                    format!("{} (named by {})", e.rule, xml.place(node)),
                )
            })?;
            self.files.insert(resolved.clone(), file);
        }
        let file = self.files.get_mut(&resolved).expect("inserted above");
        let dir = at.path.trim_matches('/');
        let full = format!("{dir}/{}", at.name);
        let named_by = |e: ImportError| {
            ImportError::new(
                e.place,
                format!("{} (named by {})", e.rule, xml.place(node)),
            )
        };
        let object = if file.contains(at.name).map_err(named_by)? {
            at.name.to_string()
        } else if file.contains(&full).map_err(named_by)? {
            full
        } else {
            return Err(ImportError::new(
                resolved.display().to_string(),
                format!(
                    "no histogram \"{}\" or \"{full}\" (named by {})",
                    at.name,
                    xml.place(node)
                ),
            ));
        };
        let histogram = file.histogram(&object).map_err(|e| {
            ImportError::new(
                e.place,
                format!("{} (named by {})", e.rule, xml.place(node)),
            )
        })?;
        if let Some(bins) = bins {
            if histogram.contents.len() != bins {
                return Err(ImportError::new(
                    format!("{}: object \"{object}\"", resolved.display()),
                    format!(
                        "{} bins where the channel's data has {bins} (named by {})",
                        histogram.contents.len(),
                        xml.place(node)
                    ),
                ));
            }
        }
        Ok(histogram)
    }

    fn channel(&mut self, path: &Path) -> Result<Channel, ImportError> {
        let text = read_text(path)?;
        let xml = XmlFile::parse(path, &text)?;
        let channel = xml.doc.root_element();
        let name = xml.required(channel, "Name")?.to_string();
        let input_file = channel.attribute("InputFile").unwrap_or("");
        let histo_path = channel.attribute("HistoPath").unwrap_or("");
        let data_node = children(channel, "Data").next().ok_or_else(|| {
            ImportError::new(
                xml.place(channel),
                "the channel has no <Data>: workspaces without observations cannot be imported",
            )
        })?;
        let data_file = data_node.attribute("InputFile").unwrap_or(input_file);
        let data_name = xml.required(data_node, "HistoName")?;
        if data_file.is_empty() || data_name.is_empty() {
            return Err(ImportError::new(
                xml.place(data_node),
                "<Data> names no InputFile or no HistoName: workspaces without observations cannot be imported",
            ));
        }
        let at = HistoRef {
            file: data_file,
            path: data_node.attribute("HistoPath").unwrap_or(histo_path),
            name: data_name,
        };
        let data = self.histogram(&at, &xml, data_node, None)?.contents;
        self.stat_error_config(&xml, channel);
        let mut samples = Vec::new();
        let mut parameters = Vec::new();
        for sample in children(channel, "Sample") {
            let defaults = (input_file, histo_path, name.as_str(), data.len());
            samples.push(self.sample(&xml, sample, defaults, &mut parameters)?);
        }
        Ok(Channel {
            name,
            data,
            samples,
            parameters,
        })
    }

    /// pyhf's staterror is always Gaussian and never pruned: say so when the file asks otherwise.
    fn stat_error_config(&mut self, xml: &XmlFile, channel: Node) {
        for config in children(channel, "StatErrorConfig") {
            if config.attribute("ConstraintType").unwrap_or("Gaussian") != "Gaussian" {
                self.warnings.push(format!(
                    "{}: ConstraintType=\"{}\" is not carried over: pyhf's staterror constraints are Gaussian",
                    xml.place(config),
                    config.attribute("ConstraintType").unwrap_or("")
                ));
            }
            let threshold = config.attribute("RelErrorThreshold").unwrap_or("0");
            if threshold.trim().parse::<f64>().is_ok_and(|t| t > 0.0) {
                self.warnings.push(format!(
                    "{}: RelErrorThreshold=\"{threshold}\" is not carried over: pyhf keeps the staterror of every bin",
                    xml.place(config)
                ));
            }
        }
    }

    fn sample(
        &mut self,
        xml: &XmlFile,
        sample: Node,
        (input_file, histo_path, channel, bins): (&str, &str, &str, usize),
        parameters: &mut Vec<Map<String, Value>>,
    ) -> Result<Value, ImportError> {
        let name = xml.required(sample, "Name")?;
        let input_file = sample.attribute("InputFile").unwrap_or(input_file);
        let nominal_at = HistoRef {
            file: input_file,
            path: sample.attribute("HistoPath").unwrap_or(histo_path),
            name: xml.required(sample, "HistoName")?,
        };
        let nominal = self.histogram(&nominal_at, xml, sample, Some(bins))?;
        let mut modifiers = Vec::new();
        if sample.attribute("NormalizeByTheory") == Some("True") {
            modifiers.push(json!({"name": "lumi", "type": "lumi", "data": null}));
        }
        for tag in sample
            .descendants()
            .filter(|n| n.is_element() && *n != sample)
        {
            let modifier_name = || xml.required(tag, "Name");
            match tag.tag_name().name() {
                "OverallSys" => modifiers.push(json!({
                    "name": modifier_name()?,
                    "type": "normsys",
                    "data": {"hi": xml.number(tag, "High")?, "lo": xml.number(tag, "Low")?},
                })),
                "NormFactor" => {
                    let name = modifier_name()?;
                    modifiers.push(json!({"name": name, "type": "normfactor", "data": null}));
                    let mut config = Map::new();
                    config.insert("name".into(), json!(name));
                    config.insert(
                        "bounds".into(),
                        json!([[xml.number(tag, "Low")?, xml.number(tag, "High")?]]),
                    );
                    config.insert("inits".into(), json!([xml.number(tag, "Val")?]));
                    if let Some(constant) = tag.attribute("Const").filter(|c| !c.is_empty()) {
                        config.insert("fixed".into(), json!(constant == "True"));
                    }
                    parameters.push(config);
                }
                "HistoSys" => {
                    let mut side = |suffix: &str| -> Result<Vec<f64>, ImportError> {
                        let file_attribute = format!("HistoFile{suffix}");
                        let path_attribute = format!("HistoPath{suffix}");
                        let at = HistoRef {
                            file: tag.attribute(file_attribute.as_str()).unwrap_or(input_file),
                            path: tag.attribute(path_attribute.as_str()).unwrap_or(""),
                            name: xml.required(tag, &format!("HistoName{suffix}"))?,
                        };
                        Ok(self.histogram(&at, xml, tag, Some(bins))?.contents)
                    };
                    let lo = side("Low")?;
                    let hi = side("High")?;
                    modifiers.push(json!({
                        "name": modifier_name()?,
                        "type": "histosys",
                        "data": {"hi_data": hi, "lo_data": lo},
                    }));
                }
                "StatError" if tag.attribute("Activate") == Some("True") => {
                    let errors = match tag.attribute("HistoName").filter(|n| !n.is_empty()) {
                        None => nominal.errors(),
                        Some(histo_name) => {
                            let at = HistoRef {
                                file: tag.attribute("HistoFile").unwrap_or(input_file),
                                path: tag.attribute("HistoPath").unwrap_or(""),
                                name: histo_name,
                            };
                            let relative = self.histogram(&at, xml, tag, Some(bins))?.contents;
                            relative
                                .iter()
                                .zip(&nominal.contents)
                                .map(|(r, n)| r * n)
                                .collect()
                        }
                    };
                    modifiers.push(json!({
                        "name": format!("staterror_{channel}"),
                        "type": "staterror",
                        "data": errors,
                    }));
                }
                "StatError" => self.warnings.push(format!(
                    "{}: a StatError that is not activated (Activate=\"{}\") is ignored",
                    xml.place(tag),
                    tag.attribute("Activate").unwrap_or("")
                )),
                "ShapeSys" => {
                    let name = modifier_name()?;
                    let constraint = tag.attribute("ConstraintType").unwrap_or("Poisson");
                    if constraint != "Poisson" {
                        self.warnings.push(format!(
                            "{}: ConstraintType=\"{constraint}\" is not carried over: pyhf's shapesys constraints are Poisson",
                            xml.place(tag)
                        ));
                    }
                    let at = HistoRef {
                        file: tag.attribute("InputFile").unwrap_or(input_file),
                        path: tag.attribute("HistoPath").unwrap_or(""),
                        name: xml.required(tag, "HistoName")?,
                    };
                    let relative = self.histogram(&at, xml, tag, Some(bins))?.contents;
                    let absolute: Vec<f64> = nominal
                        .contents
                        .iter()
                        .zip(&relative)
                        .map(|(n, r)| n * r)
                        .collect();
                    modifiers.push(json!({"name": name, "type": "shapesys", "data": absolute}));
                }
                "ShapeFactor" => modifiers.push(json!({
                    "name": modifier_name()?,
                    "type": "shapefactor",
                    "data": null,
                })),
                other => self.warnings.push(format!(
                    "{}: <{other}> is not a modifier pyhf imports; ignored",
                    xml.place(tag)
                )),
            }
        }
        Ok(json!({"name": name, "data": nominal.contents, "modifiers": modifiers}))
    }

    /// A `<Measurement>`: lumi, then the NormFactors' settings, then `<ParamSetting>` on top
    /// (a parameter a ParamSetting names moves to the end of the list, as in pyhf).
    fn measurement(
        &mut self,
        xml: &XmlFile,
        node: Node,
        normfactors: &[Map<String, Value>],
    ) -> Result<Value, ImportError> {
        let name = xml.required(node, "Name")?;
        let lumi = xml.number(node, "Lumi")?;
        let lumi_error = lumi * xml.number(node, "LumiRelErr")?;
        let poi = children(node, "POI")
            .next()
            .ok_or_else(|| ImportError::new(xml.place(node), "the measurement has no <POI>"))?;
        let mut lumi_config = Map::new();
        lumi_config.insert("name".into(), json!("lumi"));
        lumi_config.insert("auxdata".into(), json!([lumi]));
        lumi_config.insert(
            "bounds".into(),
            json!([[lumi - 5.0 * lumi_error, lumi + 5.0 * lumi_error]]),
        );
        lumi_config.insert("inits".into(), json!([lumi]));
        lumi_config.insert("sigmas".into(), json!([lumi_error]));
        let mut configs: Vec<Map<String, Value>> = normfactors.to_vec();
        for setting in children(node, "ParamSetting") {
            let mut common = Map::new();
            if let Some(constant) = setting.attribute("Const").filter(|c| !c.is_empty()) {
                common.insert("fixed".into(), json!(constant == "True"));
            }
            if setting.attribute("Val").is_some_and(|v| !v.is_empty()) {
                common.insert("inits".into(), json!([xml.number(setting, "Val")?]));
            }
            for root_name in setting.text().unwrap_or("").split_whitespace() {
                let parameter = parameter_name(root_name)
                    .map_err(|rule| ImportError::new(xml.place(setting), rule))?;
                if parameter == "lumi" {
                    lumi_config.extend(common.clone());
                    continue;
                }
                let mut config = match configs.iter().position(|c| c["name"] == parameter) {
                    Some(i) => configs.remove(i),
                    None => Map::from_iter([("name".to_string(), json!(parameter))]),
                };
                config.extend(common.clone());
                configs.push(config);
            }
        }
        for term in children(node, "ConstraintTerm") {
            self.warnings.push(format!(
                "{}: ConstraintTerm Type=\"{}\" for {} is not carried over: pyhf's normsys constraints are Gaussian",
                xml.place(term),
                term.attribute("Type").unwrap_or(""),
                term.text().unwrap_or("").trim()
            ));
        }
        let mut parameters = vec![Value::Object(lumi_config)];
        parameters.extend(configs.into_iter().map(Value::Object));
        Ok(json!({
            "name": name,
            "config": {"poi": poi.text().unwrap_or("").trim(), "parameters": parameters},
        }))
    }
}

/// `path` without `.` components (empty stays `.`).
fn without_dots(path: &Path) -> PathBuf {
    let clean: PathBuf = path
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    if clean.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        clean
    }
}

/// The parameter a ROOT name refers to: `alpha_X` is X, `Lumi` is lumi, others are themselves;
/// `gamma_X_N` (one bin of a shape parameter) cannot be set on its own in a pyhf workspace.
fn parameter_name(root_name: &str) -> Result<String, String> {
    if root_name.starts_with("gamma_") {
        return Err(format!(
            "{root_name} is one bin of a shape parameter (gamma): a pyhf workspace cannot set it constant on its own"
        ));
    }
    if root_name == "alpha_" {
        return Err("\"alpha_\" names no parameter".into());
    }
    Ok(match root_name {
        "Lumi" => "lumi".to_string(),
        _ => root_name
            .strip_prefix("alpha_")
            .unwrap_or(root_name)
            .to_string(),
    })
}

/// One configuration per NormFactor name; the same name with different settings is refused.
fn dedupe(
    parameters: Vec<Map<String, Value>>,
    top: &XmlFile,
) -> Result<Vec<Map<String, Value>>, ImportError> {
    let mut unique: Vec<Map<String, Value>> = Vec::new();
    for config in parameters {
        match unique.iter().find(|u| u["name"] == config["name"]) {
            Some(first) if *first != config => {
                return Err(ImportError::new(
                    &top.path,
                    format!(
                        "NormFactor {} is declared with different settings ({} and {})",
                        config["name"],
                        Value::Object(first.clone()),
                        Value::Object(config.clone())
                    ),
                ))
            }
            Some(_) => {}
            None => unique.push(config),
        }
    }
    Ok(unique)
}
