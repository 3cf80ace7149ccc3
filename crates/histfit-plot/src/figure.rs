//! What a plot draws, as data: panels with their axes and the elements drawn in them, in data
//! coordinates. Each plot kind builds a [`Figure`] from a result document; `crate::render` draws
//! any figure with plotters, and Python draws the same figure (serialised as JSON) with
//! matplotlib. Tests read a figure's values back against the document it came from.

use serde::Serialize;

/// An RGB colour with an opacity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Color {
    pub rgb: [u8; 3],
    pub alpha: f64,
}

impl Color {
    pub const fn rgb(r: u8, g: u8, b: u8) -> Color {
        Color {
            rgb: [r, g, b],
            alpha: 1.0,
        }
    }
    pub const fn with_alpha(self, alpha: f64) -> Color {
        Color {
            rgb: self.rgb,
            alpha,
        }
    }
}

pub const BLACK: Color = Color::rgb(0, 0, 0);
pub const RED: Color = Color::rgb(200, 30, 30);
pub const BLUE: Color = Color::rgb(31, 90, 180);
pub const GREY: Color = Color::rgb(120, 120, 120);
/// The ±1σ and ±2σ bands of expected results, as the experiments draw them.
pub const GREEN_BAND: Color = Color::rgb(0, 200, 0);
pub const YELLOW_BAND: Color = Color::rgb(255, 220, 0);

/// Colours of stacked samples, the first twenty in a figure: ten strong hues, then ten lighter
/// or darker ones that stay apart from them.
pub const PALETTE: [Color; 20] = [
    Color::rgb(78, 121, 167),
    Color::rgb(242, 142, 43),
    Color::rgb(89, 161, 79),
    Color::rgb(225, 87, 89),
    Color::rgb(118, 183, 178),
    Color::rgb(237, 201, 72),
    Color::rgb(176, 122, 161),
    Color::rgb(255, 157, 167),
    Color::rgb(156, 117, 95),
    Color::rgb(186, 176, 172),
    Color::rgb(31, 60, 110),
    Color::rgb(140, 70, 10),
    Color::rgb(30, 90, 30),
    Color::rgb(120, 20, 40),
    Color::rgb(40, 110, 110),
    Color::rgb(150, 130, 20),
    Color::rgb(90, 40, 110),
    Color::rgb(170, 220, 130),
    Color::rgb(200, 200, 255),
    Color::rgb(60, 60, 60),
];

/// The colour of the `k`-th distinct sample of a figure: [`PALETTE`], then hues a golden angle
/// apart at alternating lightness, so that no two samples of one figure share a colour.
pub fn sample_color(k: usize) -> Color {
    if let Some(c) = PALETTE.get(k) {
        return *c;
    }
    let j = k - PALETTE.len();
    let hue = (j as f64 * 137.507_764) % 360.0;
    let light = [0.45, 0.65, 0.30][j % 3];
    hsl(hue, 0.65, light)
}

/// An opaque colour from hue (degrees), saturation and lightness in [0, 1].
fn hsl(h: f64, s: f64, l: f64) -> Color {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let x = c * (1.0 - ((h / 60.0) % 2.0 - 1.0).abs());
    let (r, g, b) = match (h / 60.0) as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let to = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    Color::rgb(to(r), to(g), to(b))
}

/// One thing drawn in a panel, in data coordinates.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Element {
    /// A polyline (with a marker at each point if `markers`).
    Line {
        label: Option<String>,
        xs: Vec<f64>,
        ys: Vec<f64>,
        color: Color,
        width: u32,
        dashed: bool,
        markers: bool,
    },
    /// The region between two curves over the same x values.
    Band {
        label: Option<String>,
        xs: Vec<f64>,
        lo: Vec<f64>,
        hi: Vec<f64>,
        color: Color,
    },
    /// Filled rectangles (bars, impact bars, heat-map cells).
    Rects {
        label: Option<String>,
        rects: Vec<[f64; 4]>,
        color: Color,
    },
    /// Heat-map cells, each with its own colour: `[x0, x1, y0, y1]` and a value in [-1, 1]
    /// mapped blue – white – red.
    Cells {
        rects: Vec<[f64; 4]>,
        values: Vec<f64>,
    },
    /// Points with optional asymmetric error bars (`x ± (lo, hi)`).
    Points {
        label: Option<String>,
        xs: Vec<f64>,
        ys: Vec<f64>,
        x_err: Option<Vec<(f64, f64)>>,
        y_err: Option<Vec<(f64, f64)>>,
        color: Color,
    },
    /// Filled polygons (pieces of a contour band).
    Polygons {
        label: Option<String>,
        polygons: Vec<Vec<(f64, f64)>>,
        color: Color,
    },
    /// Line segments (pieces of a contour line).
    Segments {
        label: Option<String>,
        segments: Vec<[(f64, f64); 2]>,
        color: Color,
        width: u32,
        dashed: bool,
    },
    /// A text label at a point.
    Text {
        x: f64,
        y: f64,
        text: String,
        size: u32,
        color: Color,
    },
}

/// An axis: its range, its label, and, for a category axis, the label of each tick.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    pub label: String,
    pub range: (f64, f64),
    pub ticks: Option<Vec<(f64, String)>>,
    /// Tick labels written vertically (long category names on an x axis).
    pub vertical_labels: bool,
}

impl Axis {
    pub fn new(label: impl Into<String>, range: (f64, f64)) -> Axis {
        Axis {
            label: label.into(),
            range: widen(range),
            ticks: None,
            vertical_labels: false,
        }
    }
}

/// A range with some room, never empty.
fn widen((lo, hi): (f64, f64)) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    if hi > lo {
        (lo, hi)
    } else {
        let d = lo.abs().max(1.0) * 0.5;
        (lo - d, hi + d)
    }
}

/// The range of `values` with a margin of `pad` × its width on each side.
pub fn span(values: impl IntoIterator<Item = f64>, pad: f64) -> (f64, f64) {
    let (lo, hi) = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        return (0.0, 1.0);
    }
    let d = (hi - lo).max(1e-12) * pad;
    (lo - d, hi + d)
}

/// One set of axes and what is drawn in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Panel {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub elements: Vec<Element>,
    pub legend: bool,
    /// False for a place left empty in a grid of panels.
    pub visible: bool,
    /// False for a panel that is only a legend (of a figure's panels): no axes, its elements
    /// drawn only as legend entries.
    pub axes: bool,
    /// Drawn against the panel above it with no gap (a ratio panel under its distribution,
    /// sharing its x axis): no top margin and no title.
    pub attached: bool,
    /// The region (channel) the panel shows, where it shows one: what a style's `regions`
    /// entries match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

impl Panel {
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Panel {
        Panel {
            title: title.into(),
            x,
            y,
            elements: Vec::new(),
            legend: true,
            visible: true,
            axes: true,
            attached: false,
            region: None,
        }
    }

    /// A panel that shows only the legend of `elements` (each drawn nowhere else in it).
    pub fn legend_only(elements: Vec<Element>) -> Panel {
        Panel {
            elements,
            axes: false,
            ..Panel::new("", Axis::new("", (0.0, 1.0)), Axis::new("", (0.0, 1.0)))
        }
    }

    /// An empty place in a grid of panels.
    pub fn empty() -> Panel {
        Panel {
            visible: false,
            ..Panel::new("", Axis::new("", (0.0, 1.0)), Axis::new("", (0.0, 1.0)))
        }
    }
}

/// A figure: panels in columns (widths by `column_weights`), each column split into rows by
/// `row_weights`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    pub width: u32,
    pub height: u32,
    pub title: String,
    pub column_weights: Vec<f64>,
    pub row_weights: Vec<f64>,
    /// Row-major: column 0's rows, then column 1's, … (`columns × row_weights.len()`).
    pub panels: Vec<Panel>,
    /// Factor on every font size (and the room kept for labels): 1 at the size a kind picks,
    /// growing with `--size` so that text keeps its share of a larger picture.
    pub font_scale: f64,
}

impl Figure {
    /// A figure of one panel.
    pub fn single(title: impl Into<String>, panel: Panel, width: u32, height: u32) -> Figure {
        Figure {
            width,
            height,
            title: title.into(),
            column_weights: vec![1.0],
            row_weights: vec![1.0],
            panels: vec![panel],
            font_scale: 1.0,
        }
    }
}

/// A horizontal line across a panel's x range.
pub fn hline(x: (f64, f64), y: f64, color: Color, dashed: bool, label: Option<String>) -> Element {
    Element::Line {
        label,
        xs: vec![x.0, x.1],
        ys: vec![y, y],
        color,
        width: 1,
        dashed,
        markers: false,
    }
}

/// A vertical line across a panel's y range.
pub fn vline(y: (f64, f64), x: f64, color: Color, dashed: bool, label: Option<String>) -> Element {
    Element::Line {
        label,
        xs: vec![x, x],
        ys: vec![y.0, y.1],
        color,
        width: 1,
        dashed,
        markers: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No two samples of a figure share a colour; the first 20 (the palette) and the first 40
    /// are far apart to the eye (the sum of the channels' differences), and up to 200 never
    /// equal.
    #[test]
    fn sample_colours_do_not_repeat_within_a_figure() {
        let colours: Vec<[u8; 3]> = (0..200).map(|k| sample_color(k).rgb).collect();
        let distance = |a: &[u8; 3], b: &[u8; 3]| -> i32 {
            a.iter()
                .zip(b)
                .map(|(x, y)| (*x as i32 - *y as i32).abs())
                .sum()
        };
        for (i, a) in colours.iter().enumerate() {
            for (j, b) in colours.iter().enumerate().skip(i + 1) {
                let d = distance(a, b);
                let least = match j {
                    0..20 => 50,
                    20..40 => 24,
                    _ => 1,
                };
                assert!(
                    d >= least,
                    "samples {i} and {j}: {a:?} and {b:?} differ by {d}"
                );
            }
        }
    }
}
