//! The figures of the plot kinds read from one command's document each (see the crate docs); the
//! exclusion contour has its own module.

use crate::figure::*;
use crate::{field, list_field, number, numbers, PlotError};
use serde_json::Value;

/// The pull axis. Written without θ̂: a combining circumflex is drawn beside its letter, not
/// over it, by the SVG/PNG renderer.
const PULL_AXIS: &str = "pull (θ − θ₀) / σ₀ at the best fit";

fn text(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

fn array<'a>(v: &'a Value, what: &str) -> Result<&'a Vec<Value>, PlotError> {
    v.as_array()
        .ok_or_else(|| PlotError::Document(format!("{what}: expected a list")))
}

/// CLs against the POI (`histfit limit --json`): the evaluations of the limit search (or of its
/// `--scan`), sorted by μ; the ±2σ and ±1σ bands of the expected CLs, its median (dashed), the
/// observed CLs (with markers), the line CLs = α and the limits marked.
pub fn brazil(doc: &Value) -> Result<Figure, PlotError> {
    const CMD: &str = "histfit limit";
    let evals = list_field(doc, "evaluations", "brazil", CMD)?;
    let alpha = number(field(doc, "alpha", "brazil", CMD)?, "alpha")?;
    let poi = doc.get("poi").map(text).unwrap_or_else(|| "μ".into());
    let mut rows = Vec::new();
    for (i, e) in evals.iter().enumerate() {
        let place = format!("evaluations[{i}]");
        let exp = numbers(&e["cls_exp"], &format!("{place}.cls_exp"))?;
        if exp.len() != 5 {
            return Err(PlotError::Document(format!(
                "{place}.cls_exp: expected 5 values (−2σ … +2σ), got {}",
                exp.len()
            )));
        }
        // The search for the expected limits evaluates no observed CLs (null there).
        let obs = match &e["cls_obs"] {
            Value::Null => None,
            v => Some(number(v, &format!("{place}.cls_obs"))?),
        };
        rows.push((number(&e["mu"], &format!("{place}.mu"))?, obs, exp));
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    rows.dedup_by(|a, b| a.0 == b.0);
    if rows.len() < 2 {
        return Err(PlotError::Document(
            "evaluations: a Brazil band needs at least two values of the POI".into(),
        ));
    }
    let mu: Vec<f64> = rows.iter().map(|r| r.0).collect();
    let exp = |k: usize| rows.iter().map(|r| r.2[k]).collect::<Vec<f64>>();
    let x = span(mu.iter().copied(), 0.0);
    let mut panel = Panel::new("", Axis::new(poi.clone(), x), Axis::new("CLs", (0.0, 1.05)));
    panel.elements = vec![
        Element::Band {
            label: Some("expected ±2σ".into()),
            xs: mu.clone(),
            lo: exp(0),
            hi: exp(4),
            color: YELLOW_BAND,
        },
        Element::Band {
            label: Some("expected ±1σ".into()),
            xs: mu.clone(),
            lo: exp(1),
            hi: exp(3),
            color: GREEN_BAND,
        },
        Element::Line {
            label: Some("expected".into()),
            xs: mu.clone(),
            ys: exp(2),
            color: BLACK,
            width: 2,
            dashed: true,
            markers: false,
        },
        Element::Line {
            label: Some("observed".into()),
            xs: rows.iter().filter(|r| r.1.is_some()).map(|r| r.0).collect(),
            ys: rows.iter().filter_map(|r| r.1).collect(),
            color: BLACK,
            width: 2,
            dashed: false,
            markers: true,
        },
        hline(x, alpha, RED, false, Some(format!("α = {alpha}"))),
    ];
    let y = (0.0, 1.05);
    if let Some(obs) = doc.get("obs").and_then(Value::as_f64) {
        panel.elements.push(vline(y, obs, RED, true, None));
        panel.elements.push(Element::Text {
            x: obs,
            y: 0.98,
            text: format!(" observed {obs:.4}"),
            size: 13,
            color: RED,
        });
    }
    if let Some(med) = doc
        .get("exp")
        .and_then(|e| e.get(2))
        .and_then(Value::as_f64)
    {
        panel.elements.push(vline(y, med, GREY, true, None));
        panel.elements.push(Element::Text {
            x: med,
            y: 0.90,
            text: format!(" expected {med:.4}"),
            size: 13,
            color: GREY,
        });
    }
    Ok(Figure::single("Upper limit (CLs)", panel, 800, 600))
}

/// The profile likelihood scan (`histfit scan --json`): 2ΔNLL against μ, with the 1σ and 2σ
/// lines (2ΔNLL = 1, 4) and the best fit marked.
pub fn scan(doc: &Value) -> Result<Figure, PlotError> {
    const CMD: &str = "histfit scan";
    let points = list_field(doc, "points", "scan", CMD)?;
    let mut xy = Vec::new();
    for (i, p) in points.iter().enumerate() {
        xy.push((
            number(&p["mu"], &format!("points[{i}].mu"))?,
            number(
                &p["delta_twice_nll"],
                &format!("points[{i}].delta_twice_nll"),
            )?,
        ));
    }
    xy.sort_by(|a, b| a.0.total_cmp(&b.0));
    let poi = doc.get("poi").map(text).unwrap_or_else(|| "μ".into());
    let x = span(xy.iter().map(|p| p.0), 0.0);
    let y = (0.0, xy.iter().map(|p| p.1).fold(5.0, f64::max) * 1.05);
    let mut panel = Panel::new("", Axis::new(poi, x), Axis::new("2ΔNLL = −2 ln λ", y));
    panel.elements = vec![
        hline(x, 1.0, GREY, true, Some("1σ".into())),
        hline(x, 4.0, GREY, true, Some("2σ".into())),
        Element::Line {
            label: Some("profile likelihood".into()),
            xs: xy.iter().map(|p| p.0).collect(),
            ys: xy.iter().map(|p| p.1).collect(),
            color: BLUE,
            width: 2,
            dashed: false,
            markers: true,
        },
    ];
    if let Some(mu_hat) = doc.get("mu_hat").and_then(Value::as_f64) {
        panel.elements.push(vline(
            y,
            mu_hat,
            RED,
            true,
            Some(format!("best fit {mu_hat:.4}")),
        ));
    }
    Ok(Figure::single("Profile likelihood scan", panel, 800, 600))
}

/// The constrained parameters of a fit (`histfit fit --json`): pull (θ̂ − θ₀)/σ₀ with the
/// constraint σ̂/σ₀ as its bar (none where the fit did not compute it), against the ±1σ and
/// ±2σ bands; `top` keeps the largest pulls.
pub fn pulls(doc: &Value, top: Option<usize>) -> Result<Figure, PlotError> {
    let params = array(
        field(doc, "parameters", "pulls", "histfit fit")?,
        "parameters",
    )?;
    let mut rows: Vec<(String, f64, f64)> = Vec::new();
    for (i, p) in params.iter().enumerate() {
        // A parameter the fit held (lumi fixed at its nominal value) has no pull to show.
        if p["fixed"] == true {
            continue;
        }
        if let (Some(pull), Some(c)) = (p.get("pull"), p.get("constraint")) {
            // A constraint not computed (null: above the dense-Hessian limit only the POI's
            // uncertainty is) draws the pull without a bar.
            let c = if c.is_null() {
                0.0
            } else {
                number(c, &format!("parameters[{i}].constraint"))?
            };
            rows.push((
                text(&p["name"]),
                number(pull, &format!("parameters[{i}].pull"))?,
                c,
            ));
        }
    }
    if rows.is_empty() {
        return Err(PlotError::Document(
            "parameters: no constrained parameter has a pull".into(),
        ));
    }
    if let Some(n) = top {
        rows.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
        rows.truncate(n);
    }
    let n = rows.len();
    // The first parameter at the top.
    let ypos = |i: usize| (n - 1 - i) as f64;
    let y = (-0.7, n as f64 - 0.3);
    let reach = rows.iter().map(|r| r.1.abs() + r.2).fold(2.5, f64::max);
    let x = (-reach * 1.1, reach * 1.1);
    let mut y_axis = Axis::new("", y);
    y_axis.ticks = Some(
        rows.iter()
            .enumerate()
            .map(|(i, r)| (ypos(i), r.0.clone()))
            .collect(),
    );
    let mut panel = Panel::new("", Axis::new(PULL_AXIS, x), y_axis);
    panel.elements = vec![
        Element::Rects {
            label: Some("±2σ".into()),
            rects: vec![[-2.0, 2.0, y.0, y.1]],
            color: YELLOW_BAND,
        },
        Element::Rects {
            label: Some("±1σ".into()),
            rects: vec![[-1.0, 1.0, y.0, y.1]],
            color: GREEN_BAND,
        },
        vline(y, 0.0, GREY, true, None),
        Element::Points {
            label: Some("pull ± constraint".into()),
            xs: rows.iter().map(|r| r.1).collect(),
            ys: (0..n).map(ypos).collect(),
            x_err: Some(rows.iter().map(|r| (r.2, r.2)).collect()),
            y_err: None,
            color: BLACK,
        },
    ];
    let height = (120 + 22 * n as u32).max(400);
    Ok(Figure::single("Pulls and constraints", panel, 900, height))
}

/// The ranking (`histfit ranking --json`): the `top` parameters by post-fit impact on the POI,
/// pre-fit impacts (light) and post-fit impacts (dark) of ±1σ, and each parameter's pull with its
/// constraint on a second x axis.
pub fn ranking(doc: &Value, top: usize) -> Result<Figure, PlotError> {
    let entries = array(
        field(doc, "entries", "ranking", "histfit ranking")?,
        "entries",
    )?;
    let mut rows = Vec::new();
    for (i, e) in entries.iter().take(top).enumerate() {
        let get = |k: &str| number(&e[k], &format!("entries[{i}].{k}"));
        rows.push((
            text(&e["name"]),
            [
                get("impact_prefit_up")?,
                get("impact_prefit_down")?,
                get("impact_postfit_up")?,
                get("impact_postfit_down")?,
            ],
            e.get("pull").and_then(Value::as_f64),
            e.get("constraint").and_then(Value::as_f64),
        ));
    }
    if rows.is_empty() {
        return Err(PlotError::Document("entries: nothing to rank".into()));
    }
    let n = rows.len();
    let ypos = |i: usize| (n - 1 - i) as f64;
    let y = (-0.7, n as f64 - 0.3);
    let reach = rows
        .iter()
        .flat_map(|r| r.1.iter().map(|v| v.abs()))
        .fold(1e-12, f64::max)
        * 1.15;
    let poi = doc.get("poi").map(text).unwrap_or_else(|| "μ".into());
    let mut y_axis = Axis::new("", y);
    y_axis.ticks = Some(
        rows.iter()
            .enumerate()
            .map(|(i, r)| (ypos(i), r.0.clone()))
            .collect(),
    );
    let mut panel = Panel::new("", Axis::new(format!("Δ{poi}"), (-reach, reach)), y_axis);
    let bars = |k: usize, half: f64| -> Vec<[f64; 4]> {
        rows.iter()
            .enumerate()
            .map(|(i, r)| {
                let (lo, hi) = (r.1[k].min(0.0), r.1[k].max(0.0));
                [lo, hi, ypos(i) - half, ypos(i) + half]
            })
            .collect()
    };
    // Pre-fit impacts wide and light, post-fit ones narrow and dark.
    let impacts = [
        (
            "pre-fit impact, θ at +1σ (pre-fit σ)",
            0.38,
            BLUE.with_alpha(0.25),
        ),
        (
            "pre-fit impact, θ at −1σ (pre-fit σ)",
            0.38,
            RED.with_alpha(0.25),
        ),
        ("post-fit impact, θ at +1σ (post-fit σ)", 0.25, BLUE),
        ("post-fit impact, θ at −1σ (post-fit σ)", 0.25, RED),
    ];
    panel.elements = impacts
        .iter()
        .enumerate()
        .map(|(k, &(label, half, color))| Element::Rects {
            label: Some(label.into()),
            rects: bars(k, half),
            color,
        })
        .collect();
    panel.elements.push(vline(y, 0.0, GREY, false, None));
    // The pulls on their own x axis beside the impacts, row for row (unconstrained parameters,
    // such as normfactors, have none).
    let pulls: Vec<(usize, f64, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r.2?, r.3?)))
        .collect();
    let reach = pulls.iter().map(|p| p.1.abs() + p.2).fold(2.0, f64::max) * 1.1;
    let mut blank = Axis::new("", y);
    blank.ticks = Some((0..n).map(|i| (ypos(i), String::new())).collect());
    let mut pull_panel = Panel::new("pulls", Axis::new(PULL_AXIS, (-reach, reach)), blank);
    pull_panel.legend = false;
    pull_panel.elements = vec![
        Element::Rects {
            label: None,
            rects: vec![[-2.0, 2.0, y.0, y.1]],
            color: YELLOW_BAND.with_alpha(0.35),
        },
        Element::Rects {
            label: None,
            rects: vec![[-1.0, 1.0, y.0, y.1]],
            color: GREEN_BAND.with_alpha(0.35),
        },
        vline(y, 0.0, GREY, true, None),
        Element::Points {
            label: Some("pull ± constraint".into()),
            xs: pulls.iter().map(|p| p.1).collect(),
            ys: pulls.iter().map(|p| ypos(p.0)).collect(),
            x_err: Some(pulls.iter().map(|p| (p.2, p.2)).collect()),
            y_err: None,
            color: BLACK,
        },
    ];
    // The legend in a row of its own above the bars, where it hides none of them.
    let legend = Panel::legend_only(
        panel
            .elements
            .iter()
            .filter_map(|e| match e {
                Element::Rects {
                    label: Some(l),
                    color,
                    ..
                } => Some(Element::Rects {
                    label: Some(l.clone()),
                    rects: Vec::new(),
                    color: *color,
                }),
                _ => None,
            })
            .collect(),
    );
    panel.legend = false;
    let bars = (60 + 26 * n as u32).max(300);
    const LEGEND: u32 = 110;
    Ok(Figure {
        width: 1200,
        height: bars + LEGEND + 40,
        title: format!("Impact on {poi}"),
        column_weights: vec![0.74, 0.26],
        row_weights: vec![LEGEND as f64, bars as f64],
        panels: vec![legend, panel, Panel::empty(), pull_panel],
        font_scale: 1.0,
    })
}

/// The correlation matrix of a fit (`histfit fit --json`), pruned to the `top` parameters with
/// the largest off-diagonal correlations (the POI always kept, held parameters dropped).
pub fn correlation(doc: &Value, top: usize) -> Result<Figure, PlotError> {
    const CMD: &str = "histfit fit";
    let params = list_field(doc, "parameters", "correlation", CMD)?;
    let matrix = array(
        field(doc, "correlation", "correlation", CMD)?,
        "correlation",
    )?;
    let rows: Vec<Vec<f64>> = matrix
        .iter()
        .enumerate()
        .map(|(i, r)| numbers(r, &format!("correlation[{i}]")))
        .collect::<Result<_, _>>()?;
    let n = rows.len();
    if params.len() != n || rows.iter().any(|r| r.len() != n) {
        return Err(PlotError::Document(format!(
            "correlation: a {n}×{n} matrix for {} parameters",
            params.len()
        )));
    }
    let poi = doc
        .get("poi_index")
        .and_then(Value::as_u64)
        .map(|p| p as usize);
    let free: Vec<usize> = (0..n)
        .filter(|&i| params[i]["fixed"] != Value::Bool(true))
        .collect();
    let strength = |i: usize| {
        free.iter()
            .filter(|&&j| j != i)
            .map(|&j| rows[i][j].abs())
            .fold(0.0, f64::max)
    };
    let mut keep = free.clone();
    keep.sort_by(|&a, &b| {
        (Some(b) == poi)
            .cmp(&(Some(a) == poi))
            .then(strength(b).total_cmp(&strength(a)))
    });
    keep.truncate(top.max(1));
    keep.sort_unstable();
    let k = keep.len();
    let names: Vec<String> = keep.iter().map(|&i| text(&params[i]["name"])).collect();
    let mut rects = Vec::new();
    let mut values = Vec::new();
    let mut labels = Vec::new();
    for (a, &i) in keep.iter().enumerate() {
        for (b, &j) in keep.iter().enumerate() {
            // Row a from the top, column b from the left.
            let y = (k - 1 - a) as f64;
            rects.push([b as f64 - 0.5, b as f64 + 0.5, y - 0.5, y + 0.5]);
            values.push(rows[i][j]);
            // Each cell's value written in it while the cells are large enough to hold it.
            if k <= 30 {
                labels.push(Element::Text {
                    x: b as f64 - 0.3,
                    y: y + 0.15,
                    text: format!("{:.2}", rows[i][j]),
                    size: if k <= 20 { 11 } else { 9 },
                    color: BLACK,
                });
            }
        }
    }
    let mut x = Axis::new("", (-0.5, k as f64 - 0.5));
    x.ticks = Some(
        names
            .iter()
            .enumerate()
            .map(|(b, n)| (b as f64, n.clone()))
            .collect(),
    );
    x.vertical_labels = true;
    let mut y = Axis::new("", (-0.5, k as f64 - 0.5));
    y.ticks = Some(
        names
            .iter()
            .enumerate()
            .map(|(a, n)| ((k - 1 - a) as f64, n.clone()))
            .collect(),
    );
    let mut panel = Panel::new("", x, y);
    panel.elements.push(Element::Cells { rects, values });
    panel.elements.extend(labels);
    panel.legend = false;
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0) as u32;
    let side = (200 + 40 * k as u32).clamp(500, 1600) + 7 * longest;
    const BAR: u32 = 170;
    Ok(Figure {
        width: side + BAR,
        height: side,
        title: "Correlations (fit)".into(),
        column_weights: vec![side as f64, BAR as f64],
        row_weights: vec![1.0],
        panels: vec![panel, colour_bar(longest as usize)],
        font_scale: 1.0,
    })
}

/// The scale of the correlation cells' colours: −1 (blue) to +1 (red) in 100 steps, as tall as
/// the matrix beside it (its x axis keeps the room of the matrix's vertical names, blank).
fn colour_bar(longest_name: usize) -> Panel {
    const STEPS: usize = 100;
    let edge = |i: usize| -1.0 + 2.0 * i as f64 / STEPS as f64;
    let mut x = Axis::new("", (0.0, 1.0));
    x.ticks = Some(vec![(0.5, " ".repeat(longest_name.max(1)))]);
    x.vertical_labels = true;
    let mut bar = Panel::new("", x, Axis::new("correlation", (-1.0, 1.0)));
    bar.legend = false;
    bar.elements.push(Element::Cells {
        rects: (0..STEPS)
            .map(|i| [0.0, 1.0, edge(i), edge(i + 1)])
            .collect(),
        values: (0..STEPS).map(|i| 0.5 * (edge(i) + edge(i + 1))).collect(),
    });
    bar
}

/// Stacked yields per channel (`histfit yields [--postfit] --json`): samples stacked per bin, the
/// total's uncertainty band, the data with √n bars, and a data / prediction ratio panel.
pub fn yields(
    doc: &Value,
    full: &Value,
    style: Option<&crate::Style>,
) -> Result<Figure, PlotError> {
    let channels = array(
        field(doc, "channels", "yields", "histfit yields")?,
        "channels",
    )?;
    let postfit = doc.get("postfit").and_then(Value::as_bool).unwrap_or(false);
    // A sample's colour goes by its name, in the order names first appear over the channels of
    // the whole document (the model's order, so pre- and post-fit figures agree, and so do the
    // figures of its regions drawn one by one), and one legend names them all.
    let names = sample_names(array(&full["channels"], "channels")?)?;
    let color_of = |name: &str| sample_color(names.iter().position(|n| n == name).unwrap_or(0));
    // Channels in a grid of up to four columns; each channel a main and a ratio panel; the
    // legend in a column of its own beside them.
    let columns = channels.len().clamp(1, 4);
    let channel_rows = channels.len().div_ceil(columns).max(1);
    let mut grid: Vec<Panel> = (0..(columns + 1) * channel_rows * 2)
        .map(|_| Panel::empty())
        .collect();
    for (c, ch) in channels.iter().enumerate() {
        let place = format!("channels[{c}]");
        let name = text(&ch["name"]);
        let data = numbers(&ch["data"], &format!("{place}.data"))?;
        let total = numbers(&ch["total"]["yields"], &format!("{place}.total.yields"))?;
        let sigma = numbers(
            &ch["total"]["uncertainties"],
            &format!("{place}.total.uncertainties"),
        )?;
        let nb = total.len();
        if data.len() != nb || sigma.len() != nb {
            return Err(PlotError::Document(format!(
                "{place}: data, total and uncertainties of different lengths"
            )));
        }
        let samples = array(&ch["samples"], &format!("{place}.samples"))?;
        let mut stacked = vec![0.0; nb];
        let mut main = Vec::new();
        // The samples a style orders first, bottom up; then backgrounds in the model's order,
        // the signal (the samples the POI scales) on top of them.
        let mut order: Vec<(usize, &Value)> = samples.iter().enumerate().collect();
        order.sort_by_key(|(_, smp)| {
            let rank = style.map_or(0, |st| st.rank(smp["name"].as_str().unwrap_or("")));
            (rank, smp["signal"] == true)
        });
        for (s, smp) in order {
            let y = numbers(&smp["yields"], &format!("{place}.samples[{s}].yields"))?;
            if y.len() != nb {
                return Err(PlotError::Document(format!(
                    "{place}.samples[{s}].yields: {} bins where the channel has {nb}",
                    y.len()
                )));
            }
            let rects = (0..nb)
                .map(|b| {
                    let r = [b as f64, b as f64 + 1.0, stacked[b], stacked[b] + y[b]];
                    stacked[b] += y[b];
                    r
                })
                .collect();
            let name = text(&smp["name"]);
            main.push(Element::Rects {
                color: color_of(&name),
                label: Some(name),
                rects,
            });
        }
        // Step-shaped band: each bin's edges carry its value.
        let edges: Vec<f64> = (0..nb).flat_map(|b| [b as f64, b as f64 + 1.0]).collect();
        let step =
            |v: &dyn Fn(usize) -> f64| (0..nb).flat_map(|b| [v(b), v(b)]).collect::<Vec<f64>>();
        main.push(Element::Band {
            label: Some("total uncertainty".into()),
            xs: edges.clone(),
            lo: step(&|b| total[b] - sigma[b]),
            hi: step(&|b| total[b] + sigma[b]),
            color: GREY.with_alpha(0.45),
        });
        let centres: Vec<f64> = (0..nb).map(|b| b as f64 + 0.5).collect();
        main.push(Element::Points {
            label: Some("data".into()),
            xs: centres.clone(),
            ys: data.clone(),
            x_err: None,
            y_err: Some(
                data.iter()
                    .map(|n| (n.max(0.0).sqrt(), n.max(0.0).sqrt()))
                    .collect(),
            ),
            color: BLACK,
        });
        let top = (0..nb)
            .map(|b| (total[b] + sigma[b]).max(data[b] + data[b].max(0.0).sqrt()))
            .fold(0.0, f64::max);
        let x = (0.0, nb as f64);
        let mut bin_edges = Axis::new("", x);
        bin_edges.ticks = Some((0..=nb).map(|b| (b as f64, String::new())).collect());
        let mut panel = Panel::new(
            format!("{name} ({})", if postfit { "post-fit" } else { "pre-fit" }),
            bin_edges,
            Axis::new("events", (0.0, top * 1.25)),
        );
        panel.elements = main;
        panel.legend = false;
        panel.region = Some(name.clone());
        let ratio = |v: f64, b: usize| {
            if total[b] > 0.0 {
                v / total[b]
            } else {
                f64::NAN
            }
        };
        let r: Vec<f64> = (0..nb).map(|b| ratio(data[b], b)).collect();
        let r_err: Vec<(f64, f64)> = (0..nb)
            .map(|b| {
                let e = ratio(data[b].max(0.0).sqrt(), b);
                (e, e)
            })
            .collect();
        let band_lo = step(&|b| ratio(total[b] - sigma[b], b));
        let band_hi = step(&|b| ratio(total[b] + sigma[b], b));
        let reach = r
            .iter()
            .zip(&r_err)
            .map(|(v, e)| (v - 1.0).abs() + e.0)
            .chain(band_hi.iter().map(|v| (v - 1.0).abs()))
            .filter(|v| v.is_finite())
            .fold(0.2, f64::max)
            .min(2.0);
        let mut rx = Axis::new("bin", x);
        rx.ticks = Some((0..nb).map(|b| (b as f64 + 0.5, b.to_string())).collect());
        let mut ratio_panel = Panel::new(
            "",
            rx,
            Axis::new("data / pred.", (1.0 - reach * 1.1, 1.0 + reach * 1.1)),
        );
        ratio_panel.legend = false;
        ratio_panel.attached = true;
        ratio_panel.elements = vec![
            Element::Band {
                label: None,
                xs: edges,
                lo: band_lo,
                hi: band_hi,
                color: GREY.with_alpha(0.45),
            },
            hline(x, 1.0, GREY, true, None),
            Element::Points {
                label: None,
                xs: centres,
                ys: r,
                x_err: None,
                y_err: Some(r_err),
                color: BLACK,
            },
        ];
        // Panels are stored column by column, each column's rows top to bottom.
        let at = (c % columns) * channel_rows * 2 + (c / columns) * 2;
        grid[at] = panel;
        grid[at + 1] = ratio_panel;
    }
    if channels.is_empty() {
        return Err(PlotError::Document("channels: no channel to draw".into()));
    }
    let mut entries: Vec<Element> = names
        .iter()
        .enumerate()
        .map(|(k, n)| Element::Rects {
            label: Some(n.clone()),
            rects: Vec::new(),
            color: sample_color(k),
        })
        .collect();
    entries.push(Element::Rects {
        label: Some("total uncertainty".into()),
        rects: Vec::new(),
        color: GREY.with_alpha(0.45),
    });
    entries.push(Element::Points {
        label: Some("data".into()),
        xs: Vec::new(),
        ys: Vec::new(),
        x_err: None,
        y_err: None,
        color: BLACK,
    });
    let row_weights: Vec<f64> = (0..channel_rows).flat_map(|_| [0.7, 0.3]).collect();
    // The legend fills the places of its column top to bottom, 20 px an entry; the figure
    // grows until they hold every entry.
    let mut height = 620 * channel_rows as u32;
    let capacity = |height: u32| -> Vec<usize> {
        row_weights
            .iter()
            .map(|w| {
                ((height as f64 - 40.0) * w / channel_rows as f64 - 30.0).max(0.0) as usize / 20
            })
            .collect()
    };
    while capacity(height).iter().sum::<usize>() < entries.len() {
        height += 100;
    }
    let mut rest = entries.into_iter();
    for (r, fits) in capacity(height).into_iter().enumerate() {
        let part: Vec<Element> = rest.by_ref().take(fits).collect();
        if !part.is_empty() {
            grid[columns * channel_rows * 2 + r] = Panel::legend_only(part);
        }
    }
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let legend_width = (60 + 8 * longest).max(170) as u32;
    let mut column_weights = vec![1.0; columns];
    column_weights.push(legend_width as f64 / 520.0);
    Ok(Figure {
        width: 520 * columns as u32 + legend_width,
        height,
        title: format!("{} yields", if postfit { "Post-fit" } else { "Pre-fit" }),
        column_weights,
        row_weights,
        panels: grid,
        font_scale: 1.0,
    })
}

/// The names of the samples over every channel of a yields document, each once, in the order
/// they first appear.
pub(crate) fn sample_names(channels: &[Value]) -> Result<Vec<String>, PlotError> {
    let mut names: Vec<String> = Vec::new();
    for (c, ch) in channels.iter().enumerate() {
        for smp in array(&ch["samples"], &format!("channels[{c}].samples"))? {
            let name = text(&smp["name"]);
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    Ok(names)
}

/// An event-level fit (`histfit distributions --json`): per channel, the events histogrammed
/// (points with √Σw² bars), the expected counts per bin in total (a solid step) and per
/// component (dashed steps), and the pulls (Σw − expected) / √(expected · Σw²/Σw) under it.
pub fn distributions(doc: &Value) -> Result<Figure, PlotError> {
    let channels = list_field(doc, "channels", "distributions", "histfit distributions")?;
    if channels.is_empty() {
        return Err(PlotError::Document("channels: no channel to draw".into()));
    }
    let postfit = doc.get("postfit").and_then(Value::as_bool).unwrap_or(true);
    let columns = channels.len().min(3);
    let rows = channels.len().div_ceil(columns);
    let mut grid: Vec<Panel> = (0..columns * rows * 2).map(|_| Panel::empty()).collect();
    for (c, ch) in channels.iter().enumerate() {
        let place = format!("channels[{c}]");
        let get = |key: &str| numbers(&ch[key], &format!("{place}.{key}"));
        let (edges, counts, errors, expected, pulls) = (
            get("edges")?,
            get("counts")?,
            get("errors")?,
            get("expected")?,
            get("pulls")?,
        );
        let nb = counts.len();
        if nb == 0
            || edges.len() != nb + 1
            || [errors.len(), expected.len(), pulls.len()] != [nb; 3]
        {
            return Err(PlotError::Document(format!(
                "{place}: {nb} bins need {} edges and as many errors, expected counts and pulls",
                nb + 1
            )));
        }
        let step_xs: Vec<f64> = (0..nb).flat_map(|b| [edges[b], edges[b + 1]]).collect();
        let step = |v: &[f64]| (0..nb).flat_map(|b| [v[b], v[b]]).collect::<Vec<f64>>();
        let mut main = Vec::new();
        let components = array(&ch["components"], &format!("{place}.components"))?;
        for (k, comp) in components.iter().enumerate() {
            let v = numbers(
                &comp["expected"],
                &format!("{place}.components[{k}].expected"),
            )?;
            if v.len() != nb {
                return Err(PlotError::Document(format!(
                    "{place}.components[{k}].expected: {} bins where the channel has {nb}",
                    v.len()
                )));
            }
            main.push(Element::Line {
                label: Some(text(&comp["name"])),
                xs: step_xs.clone(),
                ys: step(&v),
                color: sample_color(k + 1),
                width: 2,
                dashed: true,
                markers: false,
            });
        }
        main.push(Element::Line {
            label: Some("fit".into()),
            xs: step_xs.clone(),
            ys: step(&expected),
            color: sample_color(0),
            width: 2,
            dashed: false,
            markers: false,
        });
        let centres: Vec<f64> = (0..nb).map(|b| 0.5 * (edges[b] + edges[b + 1])).collect();
        main.push(Element::Points {
            label: Some("data".into()),
            xs: centres.clone(),
            ys: counts.clone(),
            x_err: None,
            y_err: Some(errors.iter().map(|e| (*e, *e)).collect()),
            color: BLACK,
        });
        let top = (0..nb)
            .map(|b| (counts[b] + errors[b]).max(expected[b]))
            .fold(0.0, f64::max);
        let x = (edges[0], edges[nb]);
        let observable = text(&ch["observable"]);
        let width = (edges[nb] - edges[0]) / nb as f64;
        let mut panel = Panel::new(
            format!(
                "{} ({})",
                text(&ch["name"]),
                if postfit { "post-fit" } else { "pre-fit" }
            ),
            Axis::new("", x),
            Axis::new(format!("events / {}", bin_width(width)), (0.0, top * 1.3)),
        );
        panel.elements = main;
        panel.region = Some(text(&ch["name"]));
        let reach = pulls
            .iter()
            .map(|p| p.abs())
            .filter(|p| p.is_finite())
            .fold(3.0, f64::max);
        let mut pull_panel = Panel::new(
            "",
            Axis::new(observable, x),
            Axis::new("pull", (-reach * 1.1, reach * 1.1)),
        );
        pull_panel.legend = false;
        pull_panel.attached = true;
        pull_panel.elements = vec![
            Element::Rects {
                label: None,
                rects: (0..nb)
                    .map(|b| [edges[b], edges[b + 1], pulls[b].min(0.0), pulls[b].max(0.0)])
                    .collect(),
                color: GREY,
            },
            hline(x, 0.0, BLACK, false, None),
            hline(x, 2.0, GREY, true, None),
            hline(x, -2.0, GREY, true, None),
        ];
        // Panels are stored column by column, each column's rows top to bottom.
        let at = (c % columns) * rows * 2 + (c / columns) * 2;
        grid[at] = panel;
        grid[at + 1] = pull_panel;
    }
    Ok(Figure {
        width: 560 * columns as u32,
        height: 560 * rows as u32,
        title: format!(
            "{} event distributions",
            if postfit { "Post-fit" } else { "Pre-fit" }
        ),
        column_weights: vec![1.0; columns],
        row_weights: (0..rows).flat_map(|_| [0.72, 0.28]).collect(),
        panels: grid,
        font_scale: 1.0,
    })
}

/// A bin width as an axis label writes it: four decimals at most, no trailing zeros.
fn bin_width(w: f64) -> String {
    let s = format!("{w:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
