//! Events drawn from a channel's density at θ — what toys are made of — by acceptance and
//! rejection under a piecewise-constant envelope: the observables' box is cut into cells, each
//! cell's envelope is the largest density found on a grid of points in it times a margin, a
//! candidate picks its cell by the envelope's mass and its place in the cell uniformly, and is
//! kept with probability f(x)/envelope. The density is the graph's own (the same definition
//! the fit evaluates), so no PDF needs a sampler of its own. Where a kept candidate's density
//! exceeds its cell's envelope (a spike between grid points) the envelope was wrong: the draw
//! starts again on a grid four times finer, from the same random numbers, so the result is
//! still a pure function of (θ, seed, toy, channel).

use crate::program::Program;
use histfit_seam::rng::ToyStream;

/// The margin over the largest density found in a cell.
const MARGIN: f64 = 1.3;

/// Points per cell and dimension at which the envelope looks for the largest density.
const PROBES: usize = 5;

/// The most probe points an envelope evaluates (cells × probes per cell: a histogram's narrow
/// bins ask for fine grids; 2²⁴ points are 128 MB a column).
const MAX_POINTS: f64 = (1u64 << 24) as f64;

/// Candidates evaluated together (the draw does not depend on it).
const BATCH: usize = 4096;

/// Why events could not be drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum SampleError {
    /// The density is zero or not finite everywhere the envelope looked.
    NoMass,
    /// The envelope stayed below the density on the finest grid tried.
    Envelope,
}

/// Draws `n` events of the density `program` evaluates (its event term is the log of a
/// function proportional to the density), over the box `domains` (one per observable, in the
/// order of `columns`: graph column ids). Returns one column per observable.
pub fn draw(
    program: &Program,
    params: &[f64],
    columns: &[usize],
    domains: &[(f64, f64)],
    n: usize,
    rng: &ToyStream,
) -> Result<Vec<Vec<f64>>, SampleError> {
    let d = domains.len();
    let mut per_dim: usize = match d {
        1 => 1024,
        2 => 64,
        3 => 16,
        _ => 6,
    };
    // A histogram's bin narrower than the probes' spacing could hold mass no probe sees (and
    // no candidate would ever be proposed there): probes at most its narrowest bin apart, so
    // that every bin holds one and every cell's height covers the bins it overlaps.
    for (k, &(lo, hi)) in domains.iter().enumerate() {
        if let Some(w) = program.narrowest_bin(columns[k], lo, hi) {
            let need = ((hi - lo) / (w * (PROBES - 1) as f64)).ceil();
            if need.is_finite() && need > per_dim as f64 {
                per_dim = need.min(1e9) as usize;
            }
        }
    }
    let points = |per_dim: usize| (per_dim as f64 * PROBES as f64).powi(d as i32);
    if points(per_dim) > MAX_POINTS {
        return Err(SampleError::Envelope);
    }
    for _ in 0..3 {
        if points(per_dim) > MAX_POINTS {
            break;
        }
        let env = Envelope::new(program, params, columns, domains, per_dim);
        match env.draw(program, params, columns, n, rng.clone()) {
            Err(SampleError::Envelope) => per_dim *= 4,
            r => return r,
        }
    }
    Err(SampleError::Envelope)
}

/// The piecewise-constant envelope over a grid of cells.
struct Envelope<'a> {
    domains: &'a [(f64, f64)],
    per_dim: usize,
    /// The envelope's height in each cell (row-major over dimensions).
    height: Vec<f64>,
    /// Cumulative envelope mass over the cells, normalised to end at 1.
    cumulative: Vec<f64>,
    n_columns: usize,
}

impl<'a> Envelope<'a> {
    fn new(
        program: &Program,
        params: &[f64],
        columns: &[usize],
        domains: &'a [(f64, f64)],
        per_dim: usize,
    ) -> Envelope<'a> {
        let d = domains.len();
        let cells = per_dim.pow(d as u32);
        let probes = PROBES.pow(d as u32);
        let n_columns = columns.iter().max().map_or(0, |m| m + 1);
        // Every probe point of every cell, evaluated in one pass.
        let mut points = vec![Vec::with_capacity(cells * probes); n_columns];
        for cell in 0..cells {
            for probe in 0..probes {
                let (mut c, mut p) = (cell, probe);
                for (k, &(lo, hi)) in domains.iter().enumerate() {
                    let (ci, pi) = (c % per_dim, p % PROBES);
                    c /= per_dim;
                    p /= PROBES;
                    let w = (hi - lo) / per_dim as f64;
                    let x = lo + w * (ci as f64 + pi as f64 / (PROBES - 1) as f64);
                    points[columns[k]].push(x.min(hi));
                }
            }
        }
        let slices: Vec<&[f64]> = points.iter().map(|v| &v[..]).collect();
        let logs = program.event_values(params, &slices);
        let height: Vec<f64> = logs
            .chunks(probes)
            .map(|l| {
                let m = l
                    .iter()
                    .map(|v| v.exp())
                    .filter(|f| f.is_finite())
                    .fold(0.0, f64::max);
                m * MARGIN
            })
            .collect();
        let mut cumulative = Vec::with_capacity(cells);
        let mut acc = 0.0;
        for h in &height {
            acc += h;
            cumulative.push(acc);
        }
        if acc > 0.0 {
            cumulative.iter_mut().for_each(|c| *c /= acc);
        }
        Envelope {
            domains,
            per_dim,
            height,
            cumulative,
            n_columns,
        }
    }

    fn draw(
        &self,
        program: &Program,
        params: &[f64],
        columns: &[usize],
        n: usize,
        mut rng: ToyStream,
    ) -> Result<Vec<Vec<f64>>, SampleError> {
        let d = self.domains.len();
        let mut out = vec![Vec::with_capacity(n); d];
        if n == 0 {
            return Ok(out);
        }
        if self
            .cumulative
            .last()
            .is_none_or(|&c| c.is_nan() || c <= 0.0)
        {
            return Err(SampleError::NoMass);
        }
        let mut kept = 0;
        while kept < n {
            // A batch of candidates: cell, place and acceptance number each, in that order.
            let mut points = vec![Vec::with_capacity(BATCH); self.n_columns];
            let mut cells = Vec::with_capacity(BATCH);
            let mut accept = Vec::with_capacity(BATCH);
            for _ in 0..BATCH {
                let u = rng.uniform();
                let cell = self
                    .cumulative
                    .partition_point(|&c| c < u)
                    .min(self.cumulative.len() - 1);
                let mut c = cell;
                for (k, &(lo, hi)) in self.domains.iter().enumerate() {
                    let ci = c % self.per_dim;
                    c /= self.per_dim;
                    let w = (hi - lo) / self.per_dim as f64;
                    points[columns[k]].push(lo + w * (ci as f64 + rng.uniform()));
                }
                cells.push(cell);
                accept.push(rng.uniform());
            }
            let slices: Vec<&[f64]> = points.iter().map(|v| &v[..]).collect();
            let logs = program.event_values(params, &slices);
            for (j, l) in logs.iter().enumerate() {
                let f = l.exp();
                let h = self.height[cells[j]];
                if f > h {
                    return Err(SampleError::Envelope);
                }
                if accept[j] * h < f {
                    for (k, col) in out.iter_mut().enumerate() {
                        col.push(points[columns[k]][j]);
                    }
                    kept += 1;
                    if kept == n {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }
}
