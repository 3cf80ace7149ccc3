//! A likelihood as a value, whatever its kind: a binned HistFactory model or an event-level
//! one. Front ends open it from a file (the format detected from the document), then ask it for
//! its parameter space, its observed data, the header of result documents, and an evaluator on
//! a device — the same calls for every kind.

use crate::mixed::Mixed;
use crate::{AnyEval, Device, DeviceError, HostEval};
use histfit_compute::HistFactoryData;
use histfit_compute::{Dataset, Evaluator, ParameterSpace};
use histfit_model::Model;
use histfit_unbinned::UnbinnedModel;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// An opened likelihood.
#[derive(Debug, Clone)]
pub enum Likelihood {
    /// A binned HistFactory model (pyhf JSON, XML + ROOT).
    HistFactory(Arc<Model>),
    /// An event-level model (HS3).
    Events(Arc<UnbinnedModel>),
    /// Binned and event-level channels in one likelihood (HS3).
    Mixed(Arc<Mixed>),
}

/// A binned model with parameters and their covariance (row-major): [`Likelihood::binned_view`].
pub type BinnedView = (Arc<Model>, Vec<f64>, Vec<f64>);

/// Why a document could not be opened.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OpenError {
    #[error("{0}")]
    Hs3(#[from] histfit_unbinned::Hs3Error),
    #[error("{what} needs a binned (HistFactory) model; this is {kind}")]
    NotBinned { what: String, kind: &'static str },
    #[error("{0}")]
    Mixed(String),
}

impl Likelihood {
    /// Opens the likelihood an HS3 document describes: binned HistFactory channels
    /// (`histfactory_dist`, as ROOT exports a HistFactory workspace) as histfit's binned model,
    /// event-level distributions as an event-level model.
    pub fn from_hs3(
        doc: &Value,
        choice: &histfit_unbinned::Choice,
    ) -> Result<Likelihood, OpenError> {
        use histfit_unbinned::hs3_histfactory::{open_document, Opened};
        Ok(match open_document(doc, choice)? {
            Opened::Binned(m) => Likelihood::HistFactory(Arc::new(m)),
            Opened::Events(m) => Likelihood::Events(Arc::new(m)),
            Opened::Mixed {
                binned,
                events,
                poi,
            } => Likelihood::Mixed(Arc::new(
                Mixed::new(Arc::new(binned), events, poi.as_deref()).map_err(OpenError::Mixed)?,
            )),
        })
    }

    /// The binned model of an HS3 document's likelihood where its distributions are all
    /// `histfactory_dist` channels; `None` (nothing opened, no event read) where they are not.
    pub fn binned_from_hs3(
        doc: &Value,
        choice: &histfit_unbinned::Choice,
    ) -> Result<Option<Likelihood>, OpenError> {
        Ok(histfit_unbinned::hs3_histfactory::open_binned(doc, choice)?
            .map(|m| Likelihood::HistFactory(Arc::new(m))))
    }

    /// Makes `name` (or none, for "none") the parameter of interest: a scalar parameter (not a
    /// component of a binned model's per-bin set).
    pub fn set_poi(&mut self, name: &str) -> Result<(), String> {
        let space = self.space();
        let poi = match name {
            "none" => None,
            n => Some(space.index(n).ok_or_else(|| {
                let some: Vec<&str> = space.names.iter().take(12).map(String::as_str).collect();
                let more = space.names.len().saturating_sub(some.len());
                let more = if more > 0 {
                    format!(", and {more} more")
                } else {
                    String::new()
                };
                format!(
                    "\"{n}\": not a parameter of the model ({}{more})",
                    some.join(", ")
                )
            })?),
        };
        // A binned model's parameters come first in a mixed likelihood's space.
        let binned = match self {
            Likelihood::HistFactory(m) => Some(&**m),
            Likelihood::Mixed(m) => Some(&**m.binned_model()),
            Likelihood::Events(_) => None,
        };
        if let (Some(m), Some(k)) = (binned, poi) {
            if let Some(set) = m.parameters.get(k).map(|p| &m.sets[p.set]) {
                if set.len > 1 || matches!(set.kind, "staterror" | "shapesys" | "shapefactor") {
                    return Err(format!(
                        "\"{name}\": a component of the per-bin set \"{}\", not a scalar parameter",
                        set.name
                    ));
                }
            }
        }
        match self {
            Likelihood::HistFactory(m) => Arc::make_mut(m).poi = poi,
            Likelihood::Events(m) => Arc::make_mut(m).space.poi = poi,
            Likelihood::Mixed(m) => Arc::make_mut(m).set_poi(poi),
        }
        Ok(())
    }

    pub fn space(&self) -> ParameterSpace {
        match self {
            Likelihood::HistFactory(m) => histfit_compute::histfactory::parameter_space(m),
            Likelihood::Events(m) => m.space.clone(),
            Likelihood::Mixed(m) => m.space().clone(),
        }
    }

    /// The observed data.
    pub fn observed(&self) -> Dataset {
        match self {
            Likelihood::HistFactory(m) => Dataset::observed(m),
            Likelihood::Events(m) => m.observed_dataset(),
            Likelihood::Mixed(m) => m.observed(),
        }
    }

    /// What the reader assumed or chose, for the user to see.
    pub fn notes(&self) -> Vec<String> {
        match self {
            Likelihood::HistFactory(m) => m.warnings.clone(),
            Likelihood::Events(m) => m.notes.clone(),
            Likelihood::Mixed(m) => {
                let mut notes = m.binned_model().warnings.clone();
                for n in &m.events_model().notes {
                    if !notes.contains(n) {
                        notes.push(n.clone());
                    }
                }
                notes
            }
        }
    }

    /// The POI value at which a discovery test's expected figures (q0's alternative) are
    /// computed unless asked (`--expected-at`), with a note where it is a fallback. `None`:
    /// pyhf's rule, 1 — the POI is a binned model's parameter, a signal strength. An
    /// event-level POI is often a yield, where 1 would be the significance of one signal event:
    /// its value in the document where positive, else 1 with a note naming the option.
    pub fn discovery_alternative(&self) -> (Option<f64>, Option<String>) {
        let space = self.space();
        let Some(poi) = space.poi else {
            return (None, None);
        };
        let binned = match self {
            Likelihood::HistFactory(_) => true,
            Likelihood::Events(_) => false,
            Likelihood::Mixed(m) => m.is_binned(poi),
        };
        let value = space.init[poi];
        match binned || (value > 0.0 && value.is_finite()) {
            true => ((!binned).then_some(value), None),
            false => (
                None,
                Some(format!(
                    "the POI \"{}\" is {value} in the document: the expected discovery figures are those of POI = 1 (--expected-at sets the signal)",
                    space.names[poi]
                )),
            ),
        }
    }

    /// How many starts a fit makes unless asked: the basin search where there are binned
    /// HistFactory channels (their likelihoods are often multimodal), one start for an
    /// event-level model (as RooFit and iminuit fit them; `--starts N` asks for more).
    pub fn default_starts(&self) -> histfit_infer::Starts {
        match self {
            Likelihood::HistFactory(_) | Likelihood::Mixed(_) => histfit_infer::Starts::Auto,
            Likelihood::Events(_) => histfit_infer::Starts::Count(0),
        }
    }

    /// The naive, SumW2 and sandwich uncertainties (`histfit_unbinned::weighted`) of the
    /// converged fit `r` to `data`; `None` where no event carries a weight (or there are no
    /// events) or the fit did not converge (there is no minimum to take them at). Not for an
    /// Asimov dataset: its weights are expected counts, not event weights.
    pub fn weighted_uncertainties(
        &self,
        data: &Dataset,
        r: &histfit_infer::FitResult,
    ) -> Option<histfit_compute::Result<histfit_unbinned::weighted::WeightedUncertainties>> {
        let events = data.events.as_deref()?;
        if events.channels.iter().all(|t| t.weights.is_none()) || !r.converged {
            return None;
        }
        let free: Vec<usize> = (0..r.fixed.len()).filter(|&i| !r.fixed[i]).collect();
        Some(match self {
            Likelihood::Events(m) => histfit_unbinned::weighted::weighted_uncertainties(
                &mut (**m).clone(),
                data,
                &r.bestfit,
                &free,
            ),
            Likelihood::Mixed(m) => (**m)
                .clone()
                .weighted_uncertainties(data, &r.bestfit, &free),
            Likelihood::HistFactory(_) => return None,
        })
    }

    /// The event-level model (of a mixed likelihood: its event-level part) and its parameters at
    /// this likelihood's parameters `params`; `None` for a binned model.
    pub fn events_view(&self, params: &[f64]) -> Option<(&UnbinnedModel, Vec<f64>)> {
        match self {
            Likelihood::Events(m) => Some((m, params.to_vec())),
            Likelihood::Mixed(m) => Some((m.events_model(), m.events_params(params))),
            Likelihood::HistFactory(_) => None,
        }
    }

    /// The binned model (of a mixed likelihood: its binned part) with its parameters and their
    /// covariance (row-major) at this likelihood's `params` and `cov`; an error naming `what`
    /// for an event-level model.
    pub fn binned_view(
        &self,
        what: &str,
        params: &[f64],
        cov: &[f64],
    ) -> Result<BinnedView, OpenError> {
        match self {
            Likelihood::Mixed(m) => {
                let (p, c) = m.binned_view(params, cov);
                Ok((m.binned_model().clone(), p, c))
            }
            _ => Ok((self.binned(what)?.clone(), params.to_vec(), cov.to_vec())),
        }
    }

    /// The binned model, or an error naming what needed one.
    pub fn binned(&self, what: &str) -> Result<&Arc<Model>, OpenError> {
        match self {
            Likelihood::HistFactory(m) => Ok(m),
            Likelihood::Events(_) => Err(OpenError::NotBinned {
                what: what.into(),
                kind: "an event-level model",
            }),
            Likelihood::Mixed(_) => Err(OpenError::NotBinned {
                what: what.into(),
                kind: "a likelihood with event-level channels as well as binned ones",
            }),
        }
    }

    /// The header of a result document: where the likelihood came from and how it was built.
    pub fn header(&self, source: &str) -> Map<String, Value> {
        let v = match self {
            Likelihood::HistFactory(m) => json!({
                "workspace": source,
                "measurement": m.measurement,
                "interpolation": {"normsys": m.settings.normsys.name(), "histosys": m.settings.histosys.name()},
                "poi": m.poi_name(),
            }),
            Likelihood::Events(m) => json!({
                "model": source,
                "format": "hs3",
                "likelihood": event_channels(m),
                "poi": m.space.poi_name(),
            }),
            Likelihood::Mixed(m) => {
                let b = m.binned_model();
                json!({
                    "model": source,
                    "format": "hs3",
                    "binned": {
                        "channels": b.channels.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
                        "interpolation": {"normsys": b.settings.normsys.name(), "histosys": b.settings.histosys.name()},
                    },
                    "likelihood": event_channels(m.events_model()),
                    "poi": m.space().poi_name(),
                })
            }
        };
        match v {
            Value::Object(o) => o,
            _ => unreachable!("a header is an object"),
        }
    }

    /// An evaluator on `device` (made for toy ensembles where `ensembles`).
    pub fn evaluator(&self, device: Device, ensembles: bool) -> Result<AnyEval, DeviceError> {
        match self {
            Likelihood::HistFactory(m) => match ensembles {
                true => AnyEval::for_ensembles(m.clone(), device),
                false => AnyEval::new(m.clone(), device),
            },
            Likelihood::Events(m) => on_host(device, "event-level models", || {
                HostEval::new((**m).clone())
            }),
            Likelihood::Mixed(m) => {
                on_host(device, "likelihoods with event-level channels", || {
                    HostEval::new((**m).clone())
                })
            }
        }
    }
}

/// A host evaluator where the device is the CPU; an error naming the device otherwise.
fn on_host(
    device: Device,
    kind: &str,
    make: impl FnOnce() -> HostEval,
) -> Result<AnyEval, DeviceError> {
    match device {
        Device::Cpu => Ok(AnyEval::Host(make())),
        other => Err(DeviceError::Unsupported(format!(
            "{kind} run on the CPU so far, not on {other}"
        ))),
    }
}

/// The event-level channels of a result document's header.
fn event_channels(m: &UnbinnedModel) -> Vec<Value> {
    m.channels
        .iter()
        .map(|c| json!({"distribution": c.name, "data": c.data, "extended": c.extended}))
        .collect()
}

/// Top-level keys of a JSON object, its values skipped unparsed.
struct TopKeys(Vec<String>);

impl<'de> serde::Deserialize<'de> for TopKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TopKeys, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = TopKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<TopKeys, A::Error> {
                let mut keys = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    m.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(k);
                }
                Ok(TopKeys(keys))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// What a first look at a model file found.
#[derive(Debug)]
pub enum Sniffed {
    /// An HS3 document, parsed.
    Hs3(Value),
    /// Not HS3 (or not readable as JSON: the pyhf reader says what is wrong), with its text
    /// where it could be read (so that it is read once, and a pipe can be read at all).
    Other(Option<String>),
}

/// The format of the JSON file at `path`, from its top-level keys (values skipped unparsed):
/// an HS3 document is parsed here, once.
pub fn sniff(path: &str) -> Sniffed {
    let Some(text) = read_model_text(path) else {
        return Sniffed::Other(None);
    };
    let hs3 = serde_json::from_str::<TopKeys>(&text).is_ok_and(|k| {
        k.0.iter().any(|k| k == "distributions") && !k.0.iter().any(|k| k == "channels")
    });
    match hs3.then(|| serde_json::from_str::<Value>(&text)) {
        Some(Ok(doc)) => Sniffed::Hs3(doc),
        _ => Sniffed::Other(Some(text)),
    }
}

/// The text of a model file: `-` is standard input, a name ending in `.gz` is gunzipped (as
/// HEPData ships likelihoods); `None` where it cannot be read as UTF-8 text (the reader that
/// follows names the file and the reason).
pub fn read_model_text(path: &str) -> Option<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    if path == "-" {
        std::io::stdin().read_to_end(&mut bytes).ok()?;
    } else {
        bytes = std::fs::read(path).ok()?;
    }
    if path.ends_with(".gz") || bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .ok()?;
        bytes = out;
    }
    String::from_utf8(bytes).ok()
}
