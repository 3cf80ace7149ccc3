//! The exclusion contour of a signal grid (`histfit limit BKG.json --patchset PS --json`): the
//! grid's points (two patch values each) are triangulated (Delaunay, in coordinates scaled to the
//! unit square so unlike axes do not give slivers), ln(limit) is interpolated linearly on each
//! triangle, and the contour where the limit is 1 is traced triangle by triangle (marching
//! triangles) for the observed and the median expected limit. The ±1σ band is the region where
//! the expected −1σ limit is below 1 and the +1σ limit above it, each triangle clipped by those
//! two linear conditions.

use crate::figure::*;
use crate::{list_field, number, numbers, PlotError};
use serde_json::Value;

/// A grid point: its position and ln of each limit (observed, then the 5 expected).
struct Site {
    x: f64,
    y: f64,
    ln: [f64; 6],
}

pub fn figure(doc: &Value) -> Result<Figure, PlotError> {
    const CMD: &str = "histfit limit BKG.json --patchset PATCHSET.json";
    let points = list_field(doc, "points", "contour", CMD)?;
    let labels: Vec<String> = doc
        .get("labels")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    let mut sites = Vec::new();
    let mut failed = Vec::new();
    // Points whose limit lies above the POI's bound (≥ 1): not excluded, not an error.
    let mut above = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let place = format!("points[{i}]");
        let values = numbers(&p["values"], &format!("{place}.values"))?;
        if values.len() != 2 {
            return Err(PlotError::Document(format!(
                "{place}.values: a contour needs two patch values per point (got {})",
                values.len()
            )));
        }
        if p.get("error").is_some() {
            match p.get("limit_above").and_then(Value::as_f64) {
                Some(b) if b >= 1.0 => above.push((values[0], values[1])),
                _ => failed.push((values[0], values[1])),
            }
            continue;
        }
        let obs = number(&p["obs"], &format!("{place}.obs"))?;
        let exp = numbers(&p["exp"], &format!("{place}.exp"))?;
        let usable = |v: f64| v > 0.0 && v.is_finite();
        if exp.len() != 5 || !usable(obs) || !exp.iter().all(|&e| usable(e)) {
            return Err(PlotError::Document(format!(
                "{place}: expected a positive, finite observed limit and 5 such expected limits"
            )));
        }
        let ln = [
            obs.ln(),
            exp[0].ln(),
            exp[1].ln(),
            exp[2].ln(),
            exp[3].ln(),
            exp[4].ln(),
        ];
        sites.push(Site {
            x: values[0],
            y: values[1],
            ln,
        });
    }
    if sites.len() < 3 {
        return Err(PlotError::Document(
            "points: a contour needs at least three points with limits".into(),
        ));
    }
    let (x0, x1) = span(sites.iter().map(|s| s.x), 0.0);
    let (y0, y1) = span(sites.iter().map(|s| s.y), 0.0);
    let on_a_line = || {
        PlotError::Document(
            "points: the grid points lie on a line; a contour needs two varying patch values"
                .into(),
        )
    };
    if x1 <= x0 || y1 <= y0 {
        return Err(on_a_line());
    }
    let triangles = triangulate(&sites, (x0, x1), (y0, y1));
    if triangles.is_empty() {
        return Err(on_a_line());
    }
    let mut band = Vec::new();
    for t in &triangles {
        // Keep ln(exp −1σ) ≤ 0 and −ln(exp +1σ) ≤ 0.
        let poly: Vec<(f64, f64, [f64; 2])> = t
            .iter()
            .map(|&i| (sites[i].x, sites[i].y, [sites[i].ln[2], -sites[i].ln[4]]))
            .collect();
        let clipped = clip(clip(poly, 0), 1);
        if clipped.len() >= 3 {
            band.push(clipped.iter().map(|v| (v.0, v.1)).collect());
        }
    }
    let contour = |k: usize| -> Vec<[(f64, f64); 2]> {
        triangles
            .iter()
            .filter_map(|t| crossing(t.map(|i| (sites[i].x, sites[i].y, sites[i].ln[k]))))
            .collect()
    };
    let others = || failed.iter().chain(&above);
    let x = span(sites.iter().map(|s| s.x).chain(others().map(|f| f.0)), 0.03);
    let y = span(sites.iter().map(|s| s.y).chain(others().map(|f| f.1)), 0.03);
    let label = |i: usize| labels.get(i).cloned().unwrap_or_default();
    let mut panel = Panel::new("", Axis::new(label(0), x), Axis::new(label(1), y));
    panel.elements = vec![
        Element::Polygons {
            label: Some("expected ±1σ".into()),
            polygons: band,
            color: YELLOW_BAND.with_alpha(0.7),
        },
        Element::Segments {
            label: Some("expected limit = 1".into()),
            segments: contour(3),
            color: BLACK,
            width: 2,
            dashed: true,
        },
        Element::Segments {
            label: Some("observed limit = 1".into()),
            segments: contour(0),
            color: RED,
            width: 3,
            dashed: false,
        },
        Element::Points {
            label: Some("grid points".into()),
            xs: sites.iter().map(|s| s.x).collect(),
            ys: sites.iter().map(|s| s.y).collect(),
            x_err: None,
            y_err: None,
            color: GREY.with_alpha(0.6),
        },
    ];
    if !above.is_empty() {
        panel.elements.push(Element::Points {
            label: Some("limit above the POI bound (not excluded)".into()),
            xs: above.iter().map(|f| f.0).collect(),
            ys: above.iter().map(|f| f.1).collect(),
            x_err: None,
            y_err: None,
            color: BLUE.with_alpha(0.6),
        });
    }
    if !failed.is_empty() {
        panel.elements.push(Element::Points {
            label: Some("no limit (error)".into()),
            xs: failed.iter().map(|f| f.0).collect(),
            ys: failed.iter().map(|f| f.1).collect(),
            x_err: None,
            y_err: None,
            color: RED.with_alpha(0.6),
        });
    }
    Ok(Figure::single(
        "Exclusion contour (CLs, 95%)",
        panel,
        900,
        750,
    ))
}

/// Delaunay triangles of the sites, computed in coordinates scaled to the unit square.
fn triangulate(sites: &[Site], (x0, x1): (f64, f64), (y0, y1): (f64, f64)) -> Vec<[usize; 3]> {
    let pts: Vec<delaunator::Point> = sites
        .iter()
        .map(|s| delaunator::Point {
            x: (s.x - x0) / (x1 - x0),
            y: (s.y - y0) / (y1 - y0),
        })
        .collect();
    delaunator::triangulate(&pts)
        .triangles
        .chunks_exact(3)
        .map(|t| [t[0], t[1], t[2]])
        .collect()
}

/// Where the level 0 of a field, linear on the triangle, crosses it: a segment or nothing.
fn crossing(v: [(f64, f64, f64); 3]) -> Option<[(f64, f64); 2]> {
    let mut ends = Vec::with_capacity(2);
    for (a, b) in [(0, 1), (1, 2), (2, 0)] {
        let (p, q) = (v[a], v[b]);
        if (p.2 < 0.0) != (q.2 < 0.0) {
            let t = p.2 / (p.2 - q.2);
            ends.push((p.0 + t * (q.0 - p.0), p.1 + t * (q.1 - p.1)));
        }
    }
    (ends.len() == 2).then(|| [ends[0], ends[1]])
}

/// The part of a convex polygon where the `k`-th linear field is ≤ 0 (Sutherland–Hodgman).
fn clip(poly: Vec<(f64, f64, [f64; 2])>, k: usize) -> Vec<(f64, f64, [f64; 2])> {
    let mut out = Vec::new();
    for i in 0..poly.len() {
        let (p, q) = (poly[i], poly[(i + 1) % poly.len()]);
        let (pin, qin) = (p.2[k] <= 0.0, q.2[k] <= 0.0);
        if pin {
            out.push(p);
        }
        if pin != qin {
            let t = p.2[k] / (p.2[k] - q.2[k]);
            let lerp = |a: f64, b: f64| a + t * (b - a);
            out.push((
                lerp(p.0, q.0),
                lerp(p.1, q.1),
                [lerp(p.2[0], q.2[0]), lerp(p.2[1], q.2[1])],
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a plane field the traced contour lies on the exact level line, and the clipped band is
    /// exactly the strip between two level lines.
    #[test]
    fn contours_and_bands_of_a_linear_field_are_exact() {
        // ln(limit) = (x − 5)/10 for the observed; the band between x = 3 and x = 7.
        let mut points = Vec::new();
        for i in 0..11 {
            for j in 0..6 {
                let (x, y) = (i as f64, 100.0 * j as f64);
                let e = |c: f64| ((x - c) / 10.0).exp();
                points.push(serde_json::json!({
                    "values": [x, y], "obs": e(5.0),
                    "exp": [e(8.0), e(7.0), e(5.0), e(3.0), e(2.0)]
                }));
            }
        }
        let doc = serde_json::json!({"points": points, "labels": ["m1", "m2"]});
        let fig = figure(&doc).unwrap();
        let els = &fig.panels[0].elements;
        let Element::Segments { segments, .. } = &els[2] else {
            panic!()
        };
        assert!(!segments.is_empty());
        for s in segments {
            for p in s {
                assert!((p.0 - 5.0).abs() < 1e-9, "{p:?}");
            }
        }
        let Element::Polygons { polygons, .. } = &els[0] else {
            panic!()
        };
        let area: f64 = polygons
            .iter()
            .map(|p| {
                let n = p.len();
                0.5 * (0..n)
                    .map(|i| p[i].0 * p[(i + 1) % n].1 - p[(i + 1) % n].0 * p[i].1)
                    .sum::<f64>()
                    .abs()
            })
            .sum();
        // The strip 3 ≤ x ≤ 7 across y ∈ [0, 500].
        assert!((area - 4.0 * 500.0).abs() < 1e-6, "{area}");
    }
}
