//! A density made from simulated events: their weights histogrammed over one observable, each
//! event's weight morphed by nuisance parameters through its own up and down variations
//! (per-event weight systematics, HS3 extension `histfit_template_dist`).
//!
//! With the nominal weight w_i and the varied weights u_i, d_i of systematic s, the template's
//! content in bin b at θ is Σ_{i∈b} [w_i + Δ_s(α_s; u_i − w_i, w_i − d_i) summed over s] — each
//! event's weight interpolated, the deltas added as HistFactory adds a histosys's. Both
//! interpolations are linear in the per-event deltas, Δ(α) = c_up(α) δ_up + c_down(α) δ_down:
//! - code 0 (piecewise linear): c_up = max(α, 0), c_down = min(α, 0);
//! - code 4p (polynomial inside |α| ≤ 1, linear outside): inside, c_up = α/2 + p(α)/16 and
//!   c_down = α/2 − p(α)/16 with p(α) = α²(15 − 10α² + 3α⁴), so that Δ meets the lines at ±1
//!   with equal value, slope and curvature 0; outside, as code 0.
//!
//! so the sum over a bin's events is the same interpolation of the bin's summed deltas, and the
//! density per event is a few table lookups: h(x) = n(x) + Σ_s c_up,s U_s(x) + c_down,s D_s(x),
//! each table holding its bin's sum over the bin's width, normalised by the sum of the bins'
//! contents. A bin whose content the variations push below 0 counts as 0: the density is never negative, and
//! −ln L is infinite, not undefined, where an event sits in an emptied bin. The graph holds it
//! all, so gradients, toys and plots follow.

use crate::graph::{Graph, Id, Table};

/// How a systematic's weights are interpolated between its ±1σ variations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interpolation {
    /// Piecewise linear (HistFactory's code 0).
    Code0,
    /// Polynomial inside ±1, linear outside (code 4p).
    Code4p,
}

impl Interpolation {
    pub fn parse(name: &str) -> Option<Interpolation> {
        match name {
            "code0" | "0" => Some(Interpolation::Code0),
            "code4p" | "4p" => Some(Interpolation::Code4p),
            _ => None,
        }
    }

    /// The coefficients (c_up, c_down) of the two summed deltas at α, as nodes.
    pub fn coefficients(self, g: &mut Graph, alpha: Id) -> (Id, Id) {
        let zero = g.constant(0.0);
        let up_line = g.max(alpha, zero);
        let down_line = g.min(alpha, zero);
        match self {
            Interpolation::Code0 => (up_line, down_line),
            Interpolation::Code4p => {
                // p(α) = α²(15 + α²(3α² − 10)).
                let a2 = g.powi(alpha, 2);
                let t = g.scale(a2, 3.0);
                let ten = g.constant(10.0);
                let t = g.sub(t, ten);
                let t = g.mul(a2, t);
                let fifteen = g.constant(15.0);
                let t = g.add(t, fifteen);
                let p = g.mul(a2, t);
                let half = g.scale(alpha, 0.5);
                let p16 = g.scale(p, 1.0 / 16.0);
                let inner_up = g.add(half, p16);
                let inner_down = g.sub(half, p16);
                // |α| ≤ 1 inside: 1 − |α| ≥ 0 selects the polynomial.
                let abs = g.abs(alpha);
                let one = g.constant(1.0);
                let inside = g.sub(one, abs);
                (
                    g.select(inside, inner_up, up_line),
                    g.select(inside, inner_down, down_line),
                )
            }
        }
    }
}

/// One systematic: its parameter's node, its interpolation, and each event's varied weights.
pub struct Systematic<'a> {
    pub alpha: Id,
    pub interpolation: Interpolation,
    pub up: &'a [f64],
    pub down: &'a [f64],
}

/// The summed weights per bin of events `x` (weights `w`) between `edges`; events outside the
/// edges are left out and counted.
pub fn bin_sums(edges: &[f64], x: &[f64], w: &dyn Fn(usize) -> f64) -> (Vec<f64>, usize) {
    let n = edges.len() - 1;
    let mut sums = vec![0.0; n];
    let mut outside = 0;
    for (i, &xi) in x.iter().enumerate() {
        if !(xi >= edges[0] && xi <= edges[n]) {
            outside += 1;
            continue;
        }
        // The bin holding xi: the last edge ≤ xi (the last bin closed).
        let b = edges.partition_point(|&e| e <= xi).clamp(1, n) - 1;
        sums[b] += w(i);
    }
    (sums, outside)
}

/// What [`build`] made: ln f per event, and the morphed total Σ content (the template's yield).
pub struct Template {
    pub log_density: Id,
    pub total: Id,
}

/// The template's nodes over observable node `x`, from the nominal bin sums and each systematic's
/// per-event weights (binned here). `nominal` holds one sum per bin (`edges.len() − 1`).
pub fn build(
    g: &mut Graph,
    x: Id,
    events: &[f64],
    edges: &[f64],
    nominal: &[f64],
    weight: &dyn Fn(usize) -> f64,
    systematics: &[Systematic],
) -> Template {
    let width: Vec<f64> = edges.windows(2).map(|e| e[1] - e[0]).collect();
    let per_width =
        |sums: &[f64]| -> Vec<f64> { sums.iter().zip(&width).map(|(s, w)| s / w).collect() };
    let lookup = |g: &mut Graph, sums: &[f64]| -> Id {
        let t = g.table(Table::new(edges.to_vec(), per_width(sums)));
        g.hist(x, t)
    };
    let mut shape = vec![lookup(g, nominal)];
    // Each bin's content as nodes: its nominal sum plus each coefficient times its delta.
    let mut content: Vec<Vec<Id>> = nominal.iter().map(|&s| vec![g.constant(s)]).collect();
    for s in systematics {
        let (up, _) = bin_sums(edges, events, &|i| s.up[i] - weight(i));
        let (down, _) = bin_sums(edges, events, &|i| weight(i) - s.down[i]);
        let (c_up, c_down) = s.interpolation.coefficients(g, s.alpha);
        for (c, sums) in [(c_up, &up), (c_down, &down)] {
            if sums.iter().all(|v| *v == 0.0) {
                continue;
            }
            let h = lookup(g, sums);
            shape.push(g.mul(c, h));
            for (b, &d) in sums.iter().enumerate() {
                if d != 0.0 {
                    let term = g.scale(c, d);
                    content[b].push(term);
                }
            }
        }
    }
    // A content the variations push below 0 is 0 (the density cannot be negative): events in
    // such a bin make −ln L infinite there, which a fit steps back from.
    let zero = g.constant(0.0);
    let h = g.sum(&shape);
    let h = g.max(h, zero);
    let clamped: Vec<Id> = content
        .iter()
        .map(|terms| {
            let c = g.sum(terms);
            g.max(c, zero)
        })
        .collect();
    let n = g.sum(&clamped);
    let (lh, ln) = (g.log(h), g.log(n));
    Template {
        log_density: g.sub(lh, ln),
        total: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(g: &Graph, id: Id, alpha: f64) -> f64 {
        g.value(id, &[alpha], &[])
    }

    /// Code 4p meets the lines at ±1 with the same value, slope and (zero) curvature, and is 0
    /// at 0; code 0 is the two lines.
    #[test]
    fn interpolations_join_their_lines() {
        let mut g = Graph::new();
        let a = g.param(0);
        let (u4, d4) = Interpolation::Code4p.coefficients(&mut g, a);
        let (u0, d0) = Interpolation::Code0.coefficients(&mut g, a);
        for (id, line) in [(u4, u0), (d4, d0)] {
            assert_eq!(value(&g, id, 0.0), 0.0);
            for s in [-1.0, 1.0] {
                let at = |t: f64| value(&g, id, s + t);
                let l = |t: f64| value(&g, line, s + t);
                assert!((at(0.0) - l(0.0)).abs() < 1e-15);
                let h = 1e-4;
                let slope_in = (at(-s * h) - at(0.0)) / (-s * h);
                let slope_out = (l(s * h) - l(0.0)) / (s * h);
                assert!((slope_in - slope_out).abs() < 1e-3, "slope at {s}");
                let curv = (at(-2.0 * s * h) - 2.0 * at(-s * h) + at(0.0)) / (h * h);
                assert!(curv.abs() < 1e-3, "curvature at {s}: {curv}");
            }
            assert_eq!(value(&g, id, 2.5), value(&g, line, 2.5));
            assert_eq!(value(&g, id, -3.0), value(&g, line, -3.0));
        }
        // Inside, the sum c_up + c_down is α (the symmetric part) and the difference p(α)/8.
        let x = 0.37_f64;
        let p = x * x * (15.0 - 10.0 * x * x + 3.0 * x.powi(4));
        assert!((value(&g, u4, x) + value(&g, d4, x) - x).abs() < 1e-15);
        assert!((value(&g, u4, x) - value(&g, d4, x) - p / 8.0).abs() < 1e-15);
    }

    #[test]
    fn events_binned_by_their_edges() {
        let edges = [0.0, 1.0, 3.0, 4.0];
        let x = [0.0, 0.5, 1.0, 2.9, 4.0, 4.5, -0.1, f64::NAN];
        let (s, out) = bin_sums(&edges, &x, &|i| (i + 1) as f64);
        assert_eq!(s, vec![3.0, 7.0, 5.0]);
        assert_eq!(out, 3);
    }
}
