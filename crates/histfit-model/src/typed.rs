//! The workspace read straight from JSON text into the types of [`crate::spec`], without the
//! `serde_json::Value` tree in between: serde fills the vectors as it reads, so a 2.3 MB
//! workspace costs a few milliseconds instead of the tree's allocation, walk and drop.
//!
//! It applies the same rules as [`crate::spec`]'s walk but says nothing about where a rule
//! broke: on any failure (a schema violation, a number out of range, a duplicate key, which the
//! walk takes as the last value) the caller reads the text again with the walk, which either
//! accepts it or names the place and the rule. So this reader may refuse more than the walk,
//! never less, and what it accepts it reads exactly as the walk does (the fuzz invariant
//! `histfit_testutil::inputs::typed_reads_as_the_walk` and `tests` below hold it to that). Keys
//! it does not know send the text to the walk: serde_json skips an ignored value without checking
//! its numbers' range, its escapes or its depth, which the walk's `Value` does check.

use crate::spec::{
    check_number, Channel, Measurement, Modifier, ModifierData, Observation, ParameterConfig,
    Sample, Workspace,
};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// The workspace, or `None` where the walk ([`Workspace::from_value`]) must decide (and
/// explain). Callers use [`crate::workspace_from_text`], [`crate::workspace_from_file`] or
/// [`Workspace::from_str`], which fall
/// back to the walk; this is public for the fuzz invariant that compares the two.
pub fn read(text: &str) -> Option<Workspace> {
    let raw: Obj<RawWorkspace> = serde_json::from_str(text).ok()?;
    raw.0.into_workspace()
}

/// A struct read from a JSON object only. serde's derived structs also take an array of their
/// fields in order (`["c", [...]]` for a channel), which the walk refuses; reading each one
/// through [`MapOnly`] makes an array an error here too.
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(MapOnly(d)).map(Obj)
    }
}

/// A deserializer that reads a struct as a map (and everything else as its inner one does).
struct MapOnly<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for MapOnly<D> {
    type Error = D::Error;
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(visitor)
    }
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(visitor)
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// A number that obeys [`check_number`].
struct Num(f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let x = f64::deserialize(d)?;
        check_number(x).map(Num).map_err(de::Error::custom)
    }
}

/// An array of such numbers, read into a `Vec<f64>` directly.
struct Nums(Vec<f64>);

impl<'de> Deserialize<'de> for Nums {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Nums;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of numbers")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Nums, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(Num(x)) = seq.next_element()? {
                    v.push(x);
                }
                Ok(Nums(v))
            }
        }
        d.deserialize_seq(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkspace {
    channels: Vec<Obj<RawChannel>>,
    observations: Vec<Obj<RawObservation>>,
    measurements: Vec<Obj<RawMeasurement>>,
    #[serde(default)]
    version: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChannel {
    name: String,
    samples: Vec<Obj<RawSample>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSample {
    name: String,
    data: Nums,
    modifiers: Vec<Obj<RawModifier>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModifier {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: RawData,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawObservation {
    name: String,
    data: Nums,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMeasurement {
    name: String,
    config: Obj<RawConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    poi: Option<String>,
    #[serde(default)]
    parameters: Option<Vec<Obj<RawParameterConfig>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParameterConfig {
    name: String,
    #[serde(default)]
    inits: Option<Nums>,
    #[serde(default)]
    bounds: Option<Vec<[Num; 2]>>,
    #[serde(default)]
    fixed: Option<bool>,
    #[serde(default)]
    auxdata: Option<Nums>,
    #[serde(default)]
    sigmas: Option<Nums>,
    #[serde(default)]
    factors: Option<Nums>,
}

/// A modifier's `data` in the shapes the known types use; anything else is `Other` (ignored by
/// the types without data, refused by the others).
#[derive(Default)]
enum RawData {
    #[default]
    Null,
    Array(Vec<f64>),
    Object {
        hi: Option<f64>,
        lo: Option<f64>,
        hi_data: Option<Vec<f64>>,
        lo_data: Option<Vec<f64>>,
    },
    Other,
}

impl<'de> Deserialize<'de> for RawData {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawData;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("modifier data")
            }
            fn visit_unit<E: de::Error>(self) -> Result<RawData, E> {
                Ok(RawData::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<RawData, E> {
                Ok(RawData::Null)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<RawData, E> {
                Ok(RawData::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<RawData, E> {
                Ok(RawData::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<RawData, E> {
                Ok(RawData::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<RawData, E> {
                Ok(RawData::Other)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<RawData, E> {
                Ok(RawData::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RawData, A::Error> {
                // An array of anything but valid numbers is an error here, and the walk decides.
                Nums::deserialize(de::value::SeqAccessDeserializer::new(seq))
                    .map(|n| RawData::Array(n.0))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawData, A::Error> {
                let (mut hi, mut lo, mut hi_data, mut lo_data) = (None, None, None, None);
                // Later keys replace earlier ones, as in the walk's object.
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "hi" => hi = Some(map.next_value::<Num>()?.0),
                        "lo" => lo = Some(map.next_value::<Num>()?.0),
                        "hi_data" => hi_data = Some(map.next_value::<Nums>()?.0),
                        "lo_data" => lo_data = Some(map.next_value::<Nums>()?.0),
                        // serde_json skips an unknown value without checking its numbers'
                        // range, its escapes or its depth, which the walk checks: refused here.
                        other => return Err(de::Error::unknown_field(other, &[])),
                    }
                }
                Ok(RawData::Object {
                    hi,
                    lo,
                    hi_data,
                    lo_data,
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl RawWorkspace {
    fn into_workspace(self) -> Option<Workspace> {
        let channels = self
            .channels
            .into_iter()
            .map(|Obj(c)| {
                let samples = c
                    .samples
                    .into_iter()
                    .map(|Obj(s)| {
                        Some(Sample {
                            name: s.name,
                            data: s.data.0,
                            modifiers: s
                                .modifiers
                                .into_iter()
                                .map(|Obj(m)| m.into_modifier())
                                .collect::<Option<_>>()?,
                        })
                    })
                    .collect::<Option<Vec<_>>>()?;
                (!samples.is_empty()).then_some(Channel {
                    name: c.name,
                    samples,
                })
            })
            .collect::<Option<_>>()?;
        let observations = self
            .observations
            .into_iter()
            .map(|Obj(o)| Observation {
                name: o.name,
                data: o.data.0,
            })
            .collect();
        let measurements = self
            .measurements
            .into_iter()
            .map(|Obj(m)| {
                Some(Measurement {
                    name: m.name,
                    poi: m.config.0.poi?,
                    parameters: m
                        .config
                        .0
                        .parameters
                        .unwrap_or_default()
                        .into_iter()
                        .map(|Obj(p)| p.into_config())
                        .collect::<Option<_>>()?,
                })
            })
            .collect::<Option<_>>()?;
        Some(Workspace {
            channels,
            observations,
            measurements,
            version: self.version,
        })
    }
}

impl RawModifier {
    fn into_modifier(self) -> Option<Modifier> {
        use crate::modifiers::*;
        let data = match (self.kind.as_str(), self.data) {
            (normfactor::NAME, _) => ModifierData::NormFactor,
            (shapefactor::NAME, _) => ModifierData::ShapeFactor,
            (lumi::NAME, _) => ModifierData::Lumi,
            (
                normsys::NAME,
                RawData::Object {
                    hi: Some(hi),
                    lo: Some(lo),
                    ..
                },
            ) => ModifierData::NormSys { hi, lo },
            (
                histosys::NAME,
                RawData::Object {
                    hi_data: Some(hi_data),
                    lo_data: Some(lo_data),
                    ..
                },
            ) => ModifierData::HistoSys { hi_data, lo_data },
            (staterror::NAME, RawData::Array(uncertainties)) => {
                ModifierData::StatError { uncertainties }
            }
            (shapesys::NAME, RawData::Array(uncertainties)) => {
                ModifierData::ShapeSys { uncertainties }
            }
            _ => return None,
        };
        Some(Modifier {
            name: self.name,
            data,
        })
    }
}

impl RawParameterConfig {
    fn into_config(self) -> Option<ParameterConfig> {
        let bounds = match self.bounds {
            None => None,
            Some(b) => Some(
                b.into_iter()
                    .map(|[lo, hi]| (lo.0 <= hi.0).then_some([lo.0, hi.0]))
                    .collect::<Option<_>>()?,
            ),
        };
        Some(ParameterConfig {
            name: self.name,
            inits: self.inits.map(|n| n.0),
            bounds,
            fixed: self.fixed,
            auxdata: self.auxdata.map(|n| n.0),
            sigmas: self.sigmas.map(|n| n.0),
            factors: self.factors.map(|n| n.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::Workspace;

    fn walk(text: &str) -> crate::Result<Workspace> {
        Workspace::from_value(&serde_json::from_str(text).unwrap())
    }

    /// Where the two readers could differ: what the typed one must refuse (so the walk names
    /// it) and what it must read as the walk does.
    #[test]
    fn edge_cases_are_refused_or_read_alike() {
        let ws = |modifier: &str, extra: &str| {
            format!(
                r#"{{"channels":[{{"name":"c","samples":[{{"name":"s","data":[1,2],"modifiers":[{modifier}]}}]}}],
                "observations":[{{"name":"c","data":[1,2]}}],
                "measurements":[{{"name":"m","config":{{"poi":"mu","parameters":[{extra}]}}}}]{}}}"#,
                ""
            )
        };
        let alike = [
            ws(r#"{"name":"mu","type":"normfactor"}"#, ""),
            ws(
                r#"{"name":"a","type":"normsys","data":{"hi":1.1,"lo":0.9,"hi":1.2}}"#,
                "",
            ),
            ws(
                r#"{"name":"a","type":"histosys","data":{"hi_data":[1,2],"lo_data":[-0,2e0]}}"#,
                "",
            ),
            ws(
                r#"{"name":"a","type":"staterror","data":[0.1,0.2]}"#,
                r#"{"name":"mu","bounds":[[0,5]],"fixed":null,"inits":null}"#,
            ),
        ];
        for text in &alike {
            assert_eq!(
                super::read(text).as_ref(),
                walk(text).as_ref().ok(),
                "{text}"
            );
        }
        // Refused here (an array of numbers or nothing), read by the walk (data ignored).
        for text in [
            ws(r#"{"name":"mu","type":"normfactor","data":[1,"a"]}"#, ""),
            ws(
                r#"{"name":"mu","type":"normfactor","data":{"x":[true]}}"#,
                "",
            ),
        ] {
            assert!(
                super::read(&text).is_none() && walk(&text).is_ok(),
                "{text}"
            );
        }
        let refused = [
            ws(r#"{"name":"a","type":"normsys","data":{"hi":1.1}}"#, ""),
            ws(r#"{"name":"a","type":"staterror","data":[1e-320,1]}"#, ""),
            ws(r#"{"name":"a","type":"staterror","data":[1e200,1]}"#, ""),
            ws(r#"{"name":"a","type":"what","data":null}"#, ""),
            ws(r#"{"name":"mu","type":"normfactor"}"#, r#"{"name":"mu","bounds":[[5,0]]}"#),
            ws(r#"{"name":"mu","type":"normfactor"}"#, r#"{"name":"mu","fixed":1}"#),
            r#"{"channels":[],"observations":[],"measurements":[{"name":"m","config":{"poi":null}}]}"#.to_string(),
            r#"{"channels":[{"name":"c","samples":[]}],"observations":[],"measurements":[]}"#.to_string(),
            r#"{"channels":[],"channels":[],"observations":[],"measurements":[]}"#.to_string(),
            // serde's derived structs would take these arrays of fields; the walk does not.
            r#"[[],[],[]]"#.to_string(),
            r#"{"channels":[["c",[["s",[1],[]]]]],"observations":[["c",[1]]],"measurements":[["m",["mu",[]]]]}"#.to_string(),
            ws(r#"["mu","normfactor",null]"#, ""),
            // Unknown keys whose values the walk refuses (out-of-range number, lone surrogate).
            ws(r#"{"name":"mu","type":"normfactor","x":1e400}"#, ""),
            ws(r#"{"name":"mu","type":"normfactor","x":"\udc00"}"#, ""),
            ws(r#"{"name":"a","type":"normsys","data":{"hi":1.1,"lo":0.9,"x":1e400}}"#, ""),
        ];
        for text in &refused {
            assert!(super::read(text).is_none(), "{text}");
        }
    }
}
