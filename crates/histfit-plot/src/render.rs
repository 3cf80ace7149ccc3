//! Draws a [`Figure`] with plotters, as SVG text or a PNG file. The font (DejaVu Sans) is embedded
//! in the binary and registered once, so nothing depends on the system's fonts or a display.

use crate::figure::{Color, Element, Figure, Panel};
use crate::PlotError;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::Color as _;
use std::path::Path;
use std::sync::OnceLock;

const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

fn register_font() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if !ok {
        return Err(PlotError::Render("the embedded font does not load".into()));
    }
    Ok(())
}

/// The figure as an SVG document.
pub fn svg(figure: &Figure) -> Result<String, PlotError> {
    register_font()?;
    let mut text = String::new();
    {
        let root =
            SVGBackend::with_string(&mut text, (figure.width, figure.height)).into_drawing_area();
        draw(&root, figure)?;
        root.present().map_err(err)?;
    }
    Ok(text)
}

/// The figure written as a PNG file.
pub fn png(figure: &Figure, path: &Path) -> Result<(), PlotError> {
    register_font()?;
    let root = BitMapBackend::new(path, (figure.width, figure.height)).into_drawing_area();
    draw(&root, figure)?;
    root.present().map_err(err)
}

fn err(e: impl std::fmt::Display) -> PlotError {
    PlotError::Render(e.to_string())
}

fn rgba(c: Color) -> RGBAColor {
    RGBColor(c.rgb[0], c.rgb[1], c.rgb[2]).mix(c.alpha)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    figure: &Figure,
) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(err)?;
    let px = Scale(figure.font_scale);
    let root = if figure.title.is_empty() {
        root.clone()
    } else {
        root.titled(&figure.title, (FAMILY, px.of(22)))
            .map_err(err)?
    };
    let rows = figure.row_weights.len();
    for (c, column) in split(&root, &figure.column_weights, false)
        .iter()
        .enumerate()
    {
        for (r, area) in split(column, &figure.row_weights, true).iter().enumerate() {
            if let Some(panel) = figure.panels.get(c * rows + r).filter(|p| p.visible) {
                draw_panel(area, panel, px)?;
            }
        }
    }
    Ok(())
}

/// Font sizes and the room kept for text, in pixels at the figure's font scale.
#[derive(Clone, Copy)]
struct Scale(f64);

impl Scale {
    fn of(self, v: u32) -> u32 {
        ((v as f64 * self.0).round() as u32).max(1)
    }
}

/// Splits an area into parts sized by `weights`, top to bottom or left to right.
fn split<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    weights: &[f64],
    vertical: bool,
) -> Vec<DrawingArea<DB, Shift>> {
    let total: f64 = weights.iter().sum();
    let (w, h) = area.dim_in_pixel();
    let length = if vertical { h } else { w } as f64;
    let mut parts = Vec::new();
    let mut rest = area.clone();
    for (i, weight) in weights.iter().enumerate() {
        if i + 1 == weights.len() {
            parts.push(rest.clone());
            break;
        }
        let at = (length * weight / total) as u32;
        let (a, b) = if vertical {
            rest.split_vertically(at)
        } else {
            rest.split_horizontally(at)
        };
        parts.push(a);
        rest = b;
    }
    parts
}

/// Tick label of a category axis: the label of the tick at `v`, if any.
fn category(ticks: &[(f64, String)], v: f64) -> String {
    ticks
        .iter()
        .find(|(t, _)| (t - v).abs() < 1e-6)
        .map(|(_, l)| l.clone())
        .unwrap_or_default()
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    px: Scale,
) -> Result<(), PlotError> {
    let longest = |ticks: &Option<Vec<(f64, String)>>| {
        ticks
            .as_ref()
            .map(|t| t.iter().map(|(_, l)| l.chars().count()).max().unwrap_or(0) as u32)
    };
    // An x axis with no label and no tick text belongs to a panel with another one attached
    // below (a distribution over its ratio): no room is kept for its text.
    let x_hidden = p.x.label.is_empty()
        && p.x
            .ticks
            .as_ref()
            .is_some_and(|t| t.iter().all(|(_, l)| l.is_empty()));
    let y_label_width = longest(&p.y.ticks).map_or(px.of(70), |n| px.of(30 + 7 * n));
    let x_label_height = match longest(&p.x.ticks) {
        _ if x_hidden => px.of(6),
        Some(n) if p.x.vertical_labels => px.of(30 + 7 * n),
        _ => px.of(45),
    };
    let mut builder = ChartBuilder::on(area);
    builder.margin(px.of(12));
    if p.attached {
        builder.margin_top(0);
    }
    if x_hidden {
        builder.margin_bottom(0);
    }
    if p.axes {
        if !p.title.is_empty() && !p.attached {
            builder.caption(&p.title, (FAMILY, px.of(16)));
        }
        builder
            .x_label_area_size(x_label_height.min(px.of(320)))
            .y_label_area_size(y_label_width.min(px.of(320)));
    }
    let mut chart = builder
        .build_cartesian_2d(p.x.range.0..p.x.range.1, p.y.range.0..p.y.range.1)
        .map_err(err)?;
    if p.axes {
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(&p.x.label)
            .y_desc(&p.y.label)
            .label_style((FAMILY, px.of(12)))
            .axis_desc_style((FAMILY, px.of(14)))
            .light_line_style(WHITE.mix(0.0));
        let x_ticks = p.x.ticks.clone();
        let y_ticks = p.y.ticks.clone();
        let vertical = p.x.vertical_labels;
        let fx = move |v: &f64| match &x_ticks {
            // plotters centres a rotated label on its tick: leading spaces as wide as the name
            // move the name below the axis.
            Some(t) if vertical => {
                let name = category(t, *v);
                format!("{}{name}", " ".repeat(2 * name.chars().count()))
            }
            Some(t) => category(t, *v),
            None => format_tick(*v),
        };
        let fy = move |v: &f64| match &y_ticks {
            Some(t) => category(t, *v),
            None => format_tick(*v),
        };
        if let Some(t) = &p.y.ticks {
            mesh.y_labels(t.len() * 4 + 1);
        }
        if let Some(t) = &p.x.ticks {
            mesh.x_labels(t.len() * 4 + 1);
        }
        if p.x.vertical_labels {
            // Anchored at the text's start, so each name hangs down from its tick.
            mesh.x_label_style(
                (FAMILY, px.of(12))
                    .into_font()
                    .transform(FontTransform::Rotate90),
            );
        }
        mesh.x_label_formatter(&fx).y_label_formatter(&fy);
        mesh.draw().map_err(err)?;
    }
    let mut labelled = false;
    macro_rules! draw_elements {
        ($chart:ident, $draw:ident, $elements:expr) => {
            for e in $elements {
                match e {
                    Element::Line {
                        label,
                        xs,
                        ys,
                        color,
                        width,
                        dashed,
                        markers,
                    } => {
                        let style = ShapeStyle::from(&rgba(*color)).stroke_width(*width);
                        let pts: Vec<(f64, f64)> =
                            xs.iter().copied().zip(ys.iter().copied()).collect();
                        let anno = if *dashed {
                            $chart
                                .$draw(DashedLineSeries::new(pts.clone(), 6, 4, style))
                                .map_err(err)?
                        } else {
                            $chart
                                .$draw(LineSeries::new(pts.clone(), style))
                                .map_err(err)?
                        };
                        if let Some(l) = label {
                            labelled = true;
                            anno.label(l.as_str()).legend(line_sample(*dashed, style));
                        }
                        if *markers {
                            $chart
                                .$draw(pts.iter().map(|&p| Circle::new(p, 3, style.filled())))
                                .map_err(err)?;
                        }
                    }
                    Element::Band {
                        label,
                        xs,
                        lo,
                        hi,
                        color,
                    } => {
                        let mut pts: Vec<(f64, f64)> =
                            xs.iter().copied().zip(lo.iter().copied()).collect();
                        pts.extend(xs.iter().copied().zip(hi.iter().copied()).rev());
                        let fill = rgba(*color).filled();
                        let anno = $chart
                            .$draw(std::iter::once(Polygon::new(pts, fill)))
                            .map_err(err)?;
                        if let Some(l) = label {
                            labelled = true;
                            anno.label(l.as_str()).legend(move |(x, y)| {
                                Rectangle::new([(x, y - 5), (x + 20, y + 5)], fill)
                            });
                        }
                    }
                    Element::Rects {
                        label,
                        rects,
                        color,
                    } => {
                        let fill = rgba(*color).filled();
                        let anno = $chart
                            .$draw(
                                rects
                                    .iter()
                                    .map(|r| Rectangle::new([(r[0], r[2]), (r[1], r[3])], fill)),
                            )
                            .map_err(err)?;
                        if let Some(l) = label {
                            labelled = true;
                            anno.label(l.as_str()).legend(move |(x, y)| {
                                Rectangle::new([(x, y - 5), (x + 20, y + 5)], fill)
                            });
                        }
                    }
                    Element::Cells { rects, values } => {
                        $chart
                            .$draw(rects.iter().zip(values).map(|(r, &v)| {
                                Rectangle::new([(r[0], r[2]), (r[1], r[3])], diverging(v).filled())
                            }))
                            .map_err(err)?;
                    }
                    Element::Points {
                        label,
                        xs,
                        ys,
                        x_err,
                        y_err,
                        color,
                    } => {
                        let style = ShapeStyle::from(&rgba(*color)).stroke_width(1);
                        let pts: Vec<(f64, f64)> =
                            xs.iter().copied().zip(ys.iter().copied()).collect();
                        let mut bars = Vec::new();
                        for (i, &(x, y)) in pts.iter().enumerate() {
                            if let Some(e) = y_err {
                                bars.push(vec![(x, y - e[i].0), (x, y + e[i].1)]);
                            }
                            if let Some(e) = x_err {
                                bars.push(vec![(x - e[i].0, y), (x + e[i].1, y)]);
                            }
                        }
                        $chart
                            .$draw(bars.into_iter().map(|b| PathElement::new(b, style)))
                            .map_err(err)?;
                        let anno = $chart
                            .$draw(pts.iter().map(|&p| Circle::new(p, 3, style.filled())))
                            .map_err(err)?;
                        if let Some(l) = label {
                            labelled = true;
                            anno.label(l.as_str())
                                .legend(move |(x, y)| Circle::new((x + 10, y), 3, style.filled()));
                        }
                    }
                    Element::Polygons {
                        label,
                        polygons,
                        color,
                    } => {
                        let fill = rgba(*color).filled();
                        let anno = $chart
                            .$draw(polygons.iter().map(|p| Polygon::new(p.clone(), fill)))
                            .map_err(err)?;
                        if let Some(l) = label {
                            labelled = true;
                            anno.label(l.as_str()).legend(move |(x, y)| {
                                Rectangle::new([(x, y - 5), (x + 20, y + 5)], fill)
                            });
                        }
                    }
                    Element::Segments {
                        label,
                        segments,
                        color,
                        width,
                        dashed,
                    } => {
                        let style = ShapeStyle::from(&rgba(*color)).stroke_width(*width);
                        let anno = if *dashed {
                            $chart
                                .$draw(
                                    segments
                                        .iter()
                                        .map(|s| DashedPathElement::new(s.to_vec(), 5, 3, style)),
                                )
                                .map_err(err)?
                        } else {
                            $chart
                                .$draw(segments.iter().map(|s| PathElement::new(s.to_vec(), style)))
                                .map_err(err)?
                        };
                        if let Some(l) = label {
                            labelled = true;
                            anno.label(l.as_str()).legend(line_sample(*dashed, style));
                        }
                    }
                    Element::Text {
                        x,
                        y,
                        text,
                        size,
                        color,
                    } => {
                        let font = (FAMILY, px.of(*size)).into_font().color(&rgba(*color));
                        $chart
                            .$draw(std::iter::once(plotters::element::Text::new(
                                text.clone(),
                                (*x, *y),
                                font,
                            )))
                            .map_err(err)?;
                    }
                }
            }
        };
    }
    macro_rules! legend {
        ($chart:ident, $position:expr) => {
            $chart
                .configure_series_labels()
                .label_font((FAMILY, px.of(12)))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position($position)
                .draw()
                .map_err(err)?
        };
    }
    draw_elements!(chart, draw_series, &p.elements);
    if labelled && p.legend {
        legend!(
            chart,
            if p.axes {
                SeriesLabelPosition::UpperRight
            } else {
                SeriesLabelPosition::UpperLeft
            }
        );
    }
    Ok(())
}

/// A line's sample in the legend, drawn as the line is: dashed or solid.
fn line_sample(
    dashed: bool,
    style: ShapeStyle,
) -> impl Fn((i32, i32)) -> DashedPathElement<std::vec::IntoIter<(i32, i32)>, u32> {
    let (dash, gap) = if dashed { (5, 3) } else { (20, 0) };
    move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 20, y)], dash, gap, style)
}

/// Blue (−1) – white (0) – red (+1).
fn diverging(v: f64) -> RGBColor {
    let v = v.clamp(-1.0, 1.0);
    let mix = |a: u8, b: u8, t: f64| (a as f64 + (b as f64 - a as f64) * t).round() as u8;
    if v >= 0.0 {
        RGBColor(255, mix(255, 40, v), mix(255, 40, v))
    } else {
        RGBColor(mix(255, 40, -v), mix(255, 90, -v), 255)
    }
}

/// Tick labels without float noise (0.30000000000000004 → 0.3).
fn format_tick(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let s = format!("{:.6}", v);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.len() > 9 {
        format!("{v:.3e}")
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::{Axis, Panel, BLACK};

    /// The SVG of a panel holding one labelled line, drawn only in the legend (no points).
    fn legend_of_line(dashed: bool) -> String {
        let mut panel = Panel::new("", Axis::new("x", (0.0, 1.0)), Axis::new("y", (0.0, 1.0)));
        panel.elements.push(Element::Line {
            label: Some("expected".into()),
            xs: Vec::new(),
            ys: Vec::new(),
            color: BLACK,
            width: 2,
            dashed,
            markers: false,
        });
        svg(&Figure::single("", panel, 400, 300)).unwrap()
    }

    /// A dashed line's legend entry is dashed (issue 52, item 7: the Brazil plot's expected and
    /// observed were told apart nowhere in its legend): its 20 px sample drawn in pieces.
    #[test]
    fn dashed_lines_have_dashed_legend_samples() {
        let pieces = |svg: &str| svg.matches("<polyline").count() + svg.matches("<line").count();
        let solid = pieces(&legend_of_line(false));
        let dashed = pieces(&legend_of_line(true));
        assert!(dashed >= solid + 2, "solid {solid} pieces, dashed {dashed}");
    }
}
