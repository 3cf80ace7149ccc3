//! A plot style file (`histfit plot --style FILE`, `style=` in Python): what a physicist sets
//! per figure before publishing it — axis labels and units, a logarithmic y axis, each
//! sample's colour, legend label and place in the stack, an experiment label — for the whole
//! figure and per region (a channel of `yields` and `distributions` plots). JSON:
//!
//! ```json
//! {
//!   "experiment": "ATLAS", "status": "Internal", "text": "√s = 13 TeV, 139 fb⁻¹",
//!   "title": "Post-fit yields",
//!   "x_label": "m_T2", "x_unit": "GeV", "y_label": "Events", "log_y": true,
//!   "samples": {"ttbar": {"color": "#1f77b4", "label": "tt̄"}, "Wjets": {"color": "#ff7f0e"}},
//!   "order": ["Wjets", "ttbar"],
//!   "regions": {"SR_1": {"title": "Signal region 1", "log_y": false, "x_label": "bin"}}
//! }
//! ```
//!
//! Every key is optional; an unknown key is an error naming it (a misspelt key silently ignored
//! would leave a figure the user believes styled), and a region or sample name the document
//! does not have is a warning ([`Style::unmatched`]: one file serves every plot of an analysis). `order` lists the stacked samples of `yields` plots from the bottom up; samples it does not name follow in the model's order, the signal last. A region's
//! keys override the figure's for that region's panels. A logarithmic axis draws log₁₀ of the
//! values with ticks at powers of ten (so the SVG/PNG and matplotlib figures stay one figure);
//! values ≤ 0 sit at the axis floor, half the smallest positive value drawn.

use crate::figure::{Color, Element, Figure, Panel, BLACK};
use crate::PlotError;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A style file's content (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Style {
    /// Experiment name, drawn in bold italics' place as the first words of the label.
    pub experiment: Option<String>,
    /// Words after the experiment name ("Internal", "Preliminary").
    pub status: Option<String>,
    /// A second line under the experiment label (energy, luminosity, selection).
    pub text: Option<String>,
    /// The figure's title.
    pub title: Option<String>,
    pub x_label: Option<String>,
    /// Appended to the x label in brackets: "m_T2 [GeV]".
    pub x_unit: Option<String>,
    pub y_label: Option<String>,
    pub log_y: Option<bool>,
    /// Per sample name: its colour and legend label.
    #[serde(default)]
    pub samples: BTreeMap<String, SampleStyle>,
    /// Stack order, bottom first.
    #[serde(default)]
    pub order: Vec<String>,
    /// Per region (channel) name: overrides for its panels.
    #[serde(default)]
    pub regions: BTreeMap<String, RegionStyle>,
}

/// One region's overrides.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionStyle {
    pub title: Option<String>,
    pub x_label: Option<String>,
    pub x_unit: Option<String>,
    pub y_label: Option<String>,
    pub log_y: Option<bool>,
}

/// One sample's colour ("#rrggbb" or "#rrggbbaa") and legend label.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleStyle {
    pub color: Option<String>,
    pub label: Option<String>,
}

impl Style {
    /// A style from its JSON document; errors name the key and the rule.
    pub fn from_value(v: &serde_json::Value) -> Result<Style, PlotError> {
        let style: Style =
            serde_json::from_value(v.clone()).map_err(|e| style_error(e.to_string()))?;
        for (name, s) in &style.samples {
            if let Some(c) = &s.color {
                parse_color(c).map_err(|rule| {
                    style_error(format!("samples.{name}.color: \"{c}\": {rule}"))
                })?;
            }
        }
        Ok(style)
    }

    /// The region, sample and `order` names the style gives that the document does not have,
    /// one warning each: a misspelt name changes nothing, which its user should hear about,
    /// but one style file serves every plot of an analysis (sample names for `yields`,
    /// components for `distributions`), so it is not an error. The labels every plot draws
    /// (`data`, `fit`, `total uncertainty`) are names too. Only `yields` and `distributions`
    /// documents have regions and samples.
    pub fn unmatched(&self, kind: &str, doc: &serde_json::Value) -> Vec<String> {
        if !crate::REGION_KINDS.contains(&kind) {
            return Vec::new();
        }
        let regions = crate::regions(kind, doc).unwrap_or_default();
        let channels = doc["channels"].as_array().map_or(&[][..], Vec::as_slice);
        let mut samples: Vec<String> = channels
            .iter()
            .flat_map(|ch| {
                let list = if kind == "yields" {
                    &ch["samples"]
                } else {
                    &ch["components"]
                };
                list.as_array()
                    .map_or(&[][..], Vec::as_slice)
                    .iter()
                    .filter_map(|s| s["name"].as_str().map(str::to_string))
            })
            .collect();
        samples.sort();
        samples.dedup();
        let fixed = ["data", "fit", "total uncertainty"];
        let known = |n: &String| samples.contains(n) || fixed.contains(&n.as_str());
        let say = |what: &str, name: &str, have: &[String]| {
            format!(
                "style: {what} \"{name}\" matches nothing in this {kind} document (it has {})",
                if have.is_empty() {
                    "none".into()
                } else {
                    have.join(", ")
                }
            )
        };
        let mut out = Vec::new();
        for r in self.regions.keys().filter(|r| !regions.contains(r)) {
            out.push(say("region", r, &regions));
        }
        for n in self.samples.keys().filter(|n| !known(n)) {
            out.push(say("sample", n, &samples));
        }
        for n in self.order.iter().filter(|n| !known(n)) {
            out.push(say("order entry", n, &samples));
        }
        out
    }

    /// The colour the style gives sample `name`, if any (checked when read).
    pub fn color(&self, name: &str) -> Option<Color> {
        let c = self.samples.get(name)?.color.as_deref()?;
        parse_color(c).ok()
    }

    /// Where sample `name` goes in the stack: its place in `order`, or after all of them.
    pub fn rank(&self, name: &str) -> usize {
        self.order
            .iter()
            .position(|n| n == name)
            .unwrap_or(self.order.len())
    }

    /// The style applied to a built figure: titles, labels, units, log axes, sample colours
    /// and labels, the experiment label. Panels of a region take its overrides.
    pub fn apply(&self, fig: &mut Figure) -> Result<(), PlotError> {
        if let Some(t) = &self.title {
            fig.title = t.clone();
        }
        let n = fig.panels.len();
        for i in 0..n {
            let p = &fig.panels[i];
            if !p.visible || !p.axes || p.attached {
                continue;
            }
            let region = p.region.as_ref().and_then(|r| self.regions.get(r));
            let pick = |own: Option<&Option<String>>, all: &Option<String>| {
                own.and_then(|o| o.clone()).or_else(|| all.clone())
            };
            let x_label = pick(region.map(|r| &r.x_label), &self.x_label);
            let x_unit = pick(region.map(|r| &r.x_unit), &self.x_unit);
            let y_label = pick(region.map(|r| &r.y_label), &self.y_label);
            let log_y = region.and_then(|r| r.log_y).or(self.log_y).unwrap_or(false);
            // The x axis drawn is the last panel attached under this one (a ratio panel).
            let mut bottom = i;
            while bottom + 1 < n && fig.panels[bottom + 1].attached {
                bottom += 1;
            }
            if x_label.is_some() || x_unit.is_some() {
                let axis = &mut fig.panels[bottom].x;
                let base = x_label.unwrap_or_else(|| axis.label.clone());
                axis.label = match &x_unit {
                    Some(u) => format!("{base} [{u}]"),
                    None => base,
                };
            }
            let p = &mut fig.panels[i];
            if let Some(t) = region.and_then(|r| r.title.clone()) {
                p.title = t;
            }
            match (y_label, &x_unit) {
                (Some(l), _) => p.y.label = l,
                // "events / 2.5" (a bin width) takes the unit too.
                (None, Some(u)) if p.y.label.starts_with("events / ") => {
                    p.y.label = format!("{} {u}", p.y.label)
                }
                _ => {}
            }
            if log_y {
                log_axis(p)?;
            }
            self.label(p);
            if log_y {
                // Ticks over the final range, the label's room included.
                p.y.ticks = Some(log_ticks(p.y.range));
            }
        }
        for p in &mut fig.panels {
            for e in &mut p.elements {
                self.restyle(e);
            }
        }
        Ok(())
    }

    /// A sample's element recoloured and relabelled.
    fn restyle(&self, e: &mut Element) {
        let (label, color) = match e {
            Element::Rects { label, color, .. }
            | Element::Band { label, color, .. }
            | Element::Line { label, color, .. }
            | Element::Points { label, color, .. } => (label, color),
            _ => return,
        };
        let Some(name) = label.clone() else { return };
        let Some(s) = self.samples.get(&name) else {
            return;
        };
        if let Some(c) = self.color(&name) {
            *color = c;
        }
        if let Some(l) = &s.label {
            *label = Some(l.clone());
        }
    }

    /// The experiment label (and its second line) at the panel's top left, with room made
    /// for it above what is drawn.
    fn label(&self, p: &mut Panel) {
        let first = match (&self.experiment, &self.status) {
            (None, None) => None,
            (e, s) => Some(
                [e.as_deref(), s.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
        };
        let lines: Vec<(String, u32)> = first
            .map(|t| (t, 16))
            .into_iter()
            .chain(self.text.clone().map(|t| (t, 12)))
            .collect();
        if lines.is_empty() {
            return;
        }
        let (x0, x1) = p.x.range;
        let (y0, y1) = p.y.range;
        // Room above the highest thing drawn: the labels take the top fifth.
        let top = y0 + (y1 - y0) * 1.25;
        p.y.range = (y0, top);
        let h = top - y0;
        for (k, (text, size)) in lines.into_iter().enumerate() {
            p.elements.push(Element::Text {
                x: x0 + 0.03 * (x1 - x0),
                y: top - (0.05 + 0.07 * k as f64) * h,
                text,
                size,
                color: BLACK,
            });
        }
    }
}

fn style_error(rule: impl std::fmt::Display) -> PlotError {
    PlotError::Document(format!("style: {rule}"))
}

/// "#rrggbb" or "#rrggbbaa".
pub fn parse_color(s: &str) -> Result<Color, String> {
    let hex = s.strip_prefix('#').ok_or("expected #rrggbb or #rrggbbaa")?;
    if !(hex.len() == 6 || hex.len() == 8) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("expected #rrggbb or #rrggbbaa (hexadecimal digits)".into());
    }
    let byte = |k: usize| u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).unwrap_or(0);
    let alpha = if hex.len() == 8 {
        byte(3) as f64 / 255.0
    } else {
        1.0
    };
    Ok(Color::rgb(byte(0), byte(1), byte(2)).with_alpha(alpha))
}

/// The panel's y axis made logarithmic: every y value v drawn at log₁₀ max(v, floor), ticks at
/// the powers of ten. A category axis (names on ticks) cannot be.
fn log_axis(p: &mut Panel) -> Result<(), PlotError> {
    if p.y.ticks.is_some() {
        return Err(style_error(format!(
            "log_y: the y axis of \"{}\" is not numeric",
            p.title
        )));
    }
    let mut least = f64::INFINITY;
    let mut most = f64::NEG_INFINITY;
    let mut see = |v: f64| {
        if v > 0.0 && v.is_finite() {
            least = least.min(v);
            most = most.max(v);
        }
    };
    for e in &p.elements {
        match e {
            Element::Line { ys, .. } | Element::Points { ys, .. } => {
                ys.iter().for_each(|&v| see(v))
            }
            Element::Band { lo, hi, .. } => lo.iter().chain(hi).for_each(|&v| see(v)),
            Element::Rects { rects, .. } => rects.iter().for_each(|r| {
                see(r[2]);
                see(r[3])
            }),
            Element::Segments { segments, .. } => {
                segments.iter().flatten().for_each(|&(_, y)| see(y))
            }
            Element::Polygons { polygons, .. } => {
                polygons.iter().flatten().for_each(|&(_, y)| see(y))
            }
            _ => {}
        }
    }
    if !least.is_finite() {
        least = 0.1;
        most = 1.0;
    }
    let floor = 0.5 * least;
    let log = move |v: f64| v.max(floor).log10();
    for e in &mut p.elements {
        match e {
            Element::Line { ys, .. } => ys.iter_mut().for_each(|v| *v = log(*v)),
            Element::Points { ys, y_err, .. } => {
                if let Some(err) = y_err {
                    for (y, (lo, hi)) in ys.iter().zip(err.iter_mut()) {
                        let c = log(*y);
                        *lo = c - log(*y - *lo);
                        *hi = log(*y + *hi) - c;
                    }
                }
                ys.iter_mut().for_each(|v| *v = log(*v));
            }
            Element::Band { lo, hi, .. } => lo
                .iter_mut()
                .chain(hi.iter_mut())
                .for_each(|v| *v = log(*v)),
            Element::Rects { rects, .. } => rects.iter_mut().for_each(|r| {
                r[2] = log(r[2]);
                r[3] = log(r[3]);
            }),
            Element::Text { y, .. } => *y = log(*y),
            Element::Segments { segments, .. } => segments
                .iter_mut()
                .flatten()
                .for_each(|(_, y)| *y = log(*y)),
            Element::Polygons { polygons, .. } => polygons
                .iter_mut()
                .flatten()
                .for_each(|(_, y)| *y = log(*y)),
            Element::Cells { .. } => {}
        }
    }
    // Half a decade of room above the highest value (as the linear axes keep a quarter).
    let (lo, hi) = (floor.log10(), most.log10() + 0.5);
    p.y.range = (lo, hi);
    p.y.ticks = Some(log_ticks(p.y.range));
    Ok(())
}

/// Ticks at the powers of ten within a range of log₁₀ values.
fn log_ticks((lo, hi): (f64, f64)) -> Vec<(f64, String)> {
    (lo.ceil() as i32..=hi.floor() as i32)
        .map(|k| (k as f64, power_of_ten(k)))
        .collect()
}

/// 10^k as a tick label: 0.01, 0.1, 1, 10, 100, then 10³, 10⁴, … (and 10⁻³ below).
fn power_of_ten(k: i32) -> String {
    match k {
        -2 => "0.01".into(),
        -1 => "0.1".into(),
        0 => "1".into(),
        1 => "10".into(),
        2 => "100".into(),
        _ => {
            const SUP: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
            let digits: String = k
                .unsigned_abs()
                .to_string()
                .chars()
                .map(|c| SUP[c.to_digit(10).unwrap_or(0) as usize])
                .collect();
            format!("10{}{digits}", if k < 0 { "⁻" } else { "" })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::Axis;
    use serde_json::json;

    #[test]
    fn unknown_keys_and_bad_colours_are_named() {
        let e = Style::from_value(&json!({"log-y": true})).unwrap_err();
        assert!(e.to_string().contains("unknown field `log-y`"), "{e}");
        let e = Style::from_value(&json!({"samples": {"tt": {"colour": "#000000"}}})).unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
        let e = Style::from_value(&json!({"samples": {"tt": {"color": "red"}}})).unwrap_err();
        assert!(e.to_string().contains("samples.tt.color"), "{e}");
        let e = Style::from_value(&json!({"regions": {"SR": {"logy": true}}})).unwrap_err();
        assert!(e.to_string().contains("logy"), "{e}");
        assert!(Style::from_value(&json!([])).is_err());
    }

    #[test]
    fn colours_parse() {
        assert_eq!(parse_color("#ff8000").unwrap(), Color::rgb(255, 128, 0));
        assert_eq!(
            parse_color("#00000080").unwrap(),
            Color::rgb(0, 0, 0).with_alpha(128.0 / 255.0)
        );
        assert!(parse_color("#ff80").is_err() && parse_color("ff8000").is_err());
    }

    /// A log axis draws log₁₀ of each value, error bars included, with ticks at powers of ten;
    /// zero sits at the floor.
    #[test]
    fn log_axis_draws_logarithms() {
        let mut p = Panel::new("SR", Axis::new("x", (0.0, 2.0)), Axis::new("y", (0.0, 1e3)));
        p.elements.push(Element::Points {
            label: Some("data".into()),
            xs: vec![0.5, 1.5],
            ys: vec![100.0, 0.0],
            x_err: None,
            y_err: Some(vec![(10.0, 10.0), (0.0, 1.0)]),
            color: BLACK,
        });
        p.elements.push(Element::Rects {
            label: Some("tt".into()),
            rects: vec![[0.0, 1.0, 0.0, 1.0]],
            color: BLACK,
        });
        log_axis(&mut p).unwrap();
        let Element::Points { ys, y_err, .. } = &p.elements[0] else {
            panic!()
        };
        assert!((ys[0] - 2.0).abs() < 1e-12);
        let (lo, hi) = y_err.as_ref().unwrap()[0];
        assert!((lo - (2.0 - 90f64.log10())).abs() < 1e-12);
        assert!((hi - (110f64.log10() - 2.0)).abs() < 1e-12);
        // The floor: half the smallest positive value drawn (1 → 0.5).
        assert!((ys[1] - 0.5f64.log10()).abs() < 1e-12);
        assert!((p.y.range.0 - 0.5f64.log10()).abs() < 1e-12);
        let ticks = p.y.ticks.as_ref().unwrap();
        assert_eq!(ticks[0], (0.0, "1".into()));
        assert_eq!(ticks.last().unwrap().1, "100");
        assert_eq!(power_of_ten(4), "10⁴");
        // Contour lines and bands move with the axis.
        let mut c = Panel::new("", Axis::new("x", (0.0, 1.0)), Axis::new("y", (1.0, 100.0)));
        c.elements.push(Element::Segments {
            label: None,
            segments: vec![[(0.0, 10.0), (1.0, 100.0)]],
            color: BLACK,
            width: 1,
            dashed: false,
        });
        c.elements.push(Element::Polygons {
            label: None,
            polygons: vec![vec![(0.0, 1.0), (1.0, 10.0), (0.5, 100.0)]],
            color: BLACK,
        });
        log_axis(&mut c).unwrap();
        let Element::Segments { segments, .. } = &c.elements[0] else {
            panic!()
        };
        assert_eq!(segments[0], [(0.0, 1.0), (1.0, 2.0)]);
        let Element::Polygons { polygons, .. } = &c.elements[1] else {
            panic!()
        };
        assert_eq!(polygons[0], vec![(0.0, 0.0), (1.0, 1.0), (0.5, 2.0)]);
        assert_eq!(power_of_ten(-3), "10⁻³");
    }
}
