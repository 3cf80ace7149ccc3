//! The CPU f64 evaluator: one pass over the sample tables for the expected rates, a second pass
//! for the gradient by reverse accumulation (∂NLL/∂λ_b pushed back through each modifier).
//! Evaluation is single-threaded and in a fixed order, so results are bit-identical however many
//! evaluators run in parallel; parallelism lives one level up (many fits at once).
//!
//! At construction the evaluator derives, from the model's tables, a sample-blocked copy of the
//! additive histosys coefficients (per sample: bin-major, entry-minor), so the per-bin sums over a
//! sample's many histosys entries are long contiguous dot products rather than many 3–6-bin loops.

use crate::{ComputeError, Dataset, Evaluator, Result};
use histfit_model::interp::{additive_weights, multiplicative_value};
use histfit_model::{Constraint, InterpCode, Model};
use std::sync::Arc;

/// Evaluates a shared [`Model`] on the CPU. Cheap to clone (the model is shared); holds scratch.
#[derive(Debug, Clone)]
pub struct CpuEvaluator {
    model: Arc<Model>,
    /// Per sample-bin: nominal + histosys deltas.
    base: Vec<f64>,
    /// Per sample-bin: product of bin factors.
    binfac: Vec<f64>,
    /// Per sample: product of sample factors.
    sample_fac: Vec<f64>,
    /// Expected main counts.
    lam: Vec<f64>,
    /// ∂NLL/∂λ per main bin.
    dlam: Vec<f64>,
    /// Scratch: prefix products of one sample's factors.
    prefix: Vec<f64>,
    /// Per normsys entry: κ and dκ/dα from the forward pass.
    kappa: Vec<(f64, f64)>,
    /// Code-4 normsys entries sorted by parameter: groups (parameter, start, end), the six
    /// polynomial coefficients as columns, the entry each sorted position came from, and scratch
    /// for κ, dκ/dα in sorted order (the loop over a group is elementwise, so it vectorises).
    norm_groups: Vec<(u32, u32, u32)>,
    norm_cols: [Vec<f64>; 6],
    norm_from: Vec<u32>,
    norm_v: Vec<f64>,
    norm_d: Vec<f64>,
    /// Parameters driving histosys entries; per parameter the additive weights w(α), dw/dα.
    histo_pars: Vec<u32>,
    histo_w: Vec<[f64; 8]>,
    /// Sample-blocked additive histosys coefficients: for sample s with `ne` entries and `nb`
    /// bins, row b of the inner pair (k = 0, 1) at `hs_offset[s] + b·2ne + 2e + k`, then the rows
    /// of the outer pair (k = 2, 3) at `hs_offset[s] + nb·2ne + b·2ne + 2e + (k − 2)`: each bin's
    /// Δ is one contiguous dot product with the interleaved weights.
    hs_offset: Vec<usize>,
    hs_coef: Vec<f64>,
    /// Scratch: per entry of the current sample, interleaved weights (inner pairs, then outer
    /// pairs), and accumulated sums in the same layout.
    hs_w: Vec<f64>,
    hs_acc: Vec<f64>,
    /// Per sample: some histosys parameter lies beyond |α| = 1 (outer coefficients in use).
    hs_outside: Vec<bool>,
    /// Some histosys parameter lies beyond |α| = 1 in this evaluation.
    any_outside: bool,
    /// Per bin of the current sample: ∂NLL/∂(nominal + Δ).
    gbase: Vec<f64>,
}

impl CpuEvaluator {
    pub fn new(model: Arc<Model>) -> CpuEvaluator {
        let n_sb = model.nominal.len();
        let unique = |it: &mut dyn Iterator<Item = u32>| {
            let mut v: Vec<u32> = it.collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let mut hs_offset = Vec::with_capacity(model.samples.len());
        let mut hs_coef = Vec::new();
        let mut max_ne = 0;
        for smp in &model.samples {
            hs_offset.push(hs_coef.len());
            let entries = &model.histosys[smp.histosys.0 as usize..smp.histosys.1 as usize];
            let (ne, nb) = (entries.len(), smp.n_bins);
            max_ne = max_ne.max(ne);
            let start = hs_coef.len();
            hs_coef.resize(start + 4 * ne * nb, 0.0);
            if !model.settings.histosys.is_multiplicative() {
                for (e, entry) in entries.iter().enumerate() {
                    for b in 0..nb {
                        let c = model.histosys_coef[entry.coef_start as usize + b];
                        for k in 0..4 {
                            let half = if k < 2 { 0 } else { nb * 2 * ne };
                            hs_coef[start + half + b * 2 * ne + 2 * e + (k % 2)] = c[k];
                        }
                    }
                }
            }
        }
        let mut norm_from: Vec<u32> = (0..model.normsys.len() as u32).collect();
        norm_from.sort_by_key(|&e| (model.normsys[e as usize].par, e));
        let mut norm_groups: Vec<(u32, u32, u32)> = Vec::new();
        let mut norm_cols: [Vec<f64>; 6] = Default::default();
        for (pos, &e) in norm_from.iter().enumerate() {
            let entry = &model.normsys[e as usize];
            for (k, col) in norm_cols.iter_mut().enumerate() {
                col.push(entry.coef[2 + k]);
            }
            match norm_groups.last_mut() {
                Some(g) if g.0 == entry.par => g.2 = pos as u32 + 1,
                _ => norm_groups.push((entry.par, pos as u32, pos as u32 + 1)),
            }
        }
        CpuEvaluator {
            base: vec![0.0; n_sb],
            binfac: vec![0.0; n_sb],
            sample_fac: vec![0.0; model.samples.len()],
            lam: vec![0.0; model.n_main],
            dlam: vec![0.0; model.n_main],
            prefix: vec![
                0.0;
                model
                    .samples
                    .iter()
                    .map(
                        |s| (s.scale_factors.1 - s.scale_factors.0 + s.normsys.1 - s.normsys.0)
                            as usize
                    )
                    .max()
                    .unwrap_or(0)
            ],
            kappa: vec![(1.0, 0.0); model.normsys.len()],
            norm_groups,
            norm_cols,
            norm_v: vec![0.0; norm_from.len()],
            norm_d: vec![0.0; norm_from.len()],
            norm_from,
            histo_pars: unique(&mut model.histosys.iter().map(|e| e.par)),
            histo_w: vec![[0.0; 8]; model.n_params()],
            hs_offset,
            hs_coef,
            hs_w: vec![0.0; 4 * max_ne],
            hs_acc: vec![0.0; 4 * max_ne],
            hs_outside: vec![false; model.samples.len()],
            any_outside: false,
            gbase: vec![0.0; model.samples.iter().map(|s| s.n_bins).max().unwrap_or(0)],
            model,
        }
    }

    pub fn shared_model(&self) -> &Arc<Model> {
        &self.model
    }

    fn check(&self, params: &[f64]) -> Result<()> {
        if params.len() != self.model.n_params() {
            return Err(ComputeError::Length {
                what: "parameters",
                expected: self.model.n_params(),
                got: params.len(),
            });
        }
        Ok(())
    }

    /// κ and dκ/dα of every normsys entry.
    fn normsys_factors(&mut self, p: &[f64]) {
        let m = &*self.model;
        if m.settings.normsys != InterpCode::Code4 {
            for (e, k) in m.normsys.iter().zip(self.kappa.iter_mut()) {
                *k = e.factor(p[e.par as usize]);
            }
            return;
        }
        for &(par, start, end) in &self.norm_groups {
            let a = p[par as usize];
            let (s0, s1) = (start as usize, end as usize);
            if a.abs() < 1.0 {
                let (a2, a3) = (a * a, a * a * a);
                let (a4, a5, a6) = (a2 * a2, a2 * a3, a3 * a3);
                let pw = [a, a2, a3, a4, a5, a6];
                let dpw = [1.0, 2.0 * a, 3.0 * a2, 4.0 * a3, 5.0 * a4, 6.0 * a5];
                let c = &self.norm_cols;
                let (c0, c1, c2) = (&c[0][s0..s1], &c[1][s0..s1], &c[2][s0..s1]);
                let (c3, c4, c5) = (&c[3][s0..s1], &c[4][s0..s1], &c[5][s0..s1]);
                let (v, d) = (&mut self.norm_v[s0..s1], &mut self.norm_d[s0..s1]);
                for i in 0..v.len() {
                    v[i] = 1.0
                        + (c0[i] * pw[0]
                            + c1[i] * pw[1]
                            + c2[i] * pw[2]
                            + c3[i] * pw[3]
                            + c4[i] * pw[4]
                            + c5[i] * pw[5]);
                    d[i] = c0[i] * dpw[0]
                        + c1[i] * dpw[1]
                        + c2[i] * dpw[2]
                        + c3[i] * dpw[3]
                        + c4[i] * dpw[4]
                        + c5[i] * dpw[5];
                }
            } else {
                for pos in s0..s1 {
                    let (v, d) = m.normsys[self.norm_from[pos] as usize].factor(a);
                    self.norm_v[pos] = v;
                    self.norm_d[pos] = d;
                }
            }
        }
        for (pos, &e) in self.norm_from.iter().enumerate() {
            self.kappa[e as usize] = (self.norm_v[pos], self.norm_d[pos]);
        }
    }

    /// Forward pass: fills `base`, `binfac`, `sample_fac` and `lam`.
    fn forward(&mut self, p: &[f64]) {
        self.lam.iter_mut().for_each(|x| *x = 0.0);
        let additive = !self.model.settings.histosys.is_multiplicative();
        if additive {
            self.any_outside = false;
            for &par in &self.histo_pars {
                let (w, dw) = additive_weights(self.model.settings.histosys, p[par as usize]);
                self.histo_w[par as usize] = [w[0], w[1], w[2], w[3], dw[0], dw[1], dw[2], dw[3]];
                self.any_outside |= w[2] != 0.0 || w[3] != 0.0;
            }
        }
        self.normsys_factors(p);
        let m = &*self.model;
        for (s, smp) in m.samples.iter().enumerate() {
            let mut f = 1.0;
            for &par in &m.scale_factors[smp.scale_factors.0 as usize..smp.scale_factors.1 as usize]
            {
                f *= p[par as usize];
            }
            for k in &self.kappa[smp.normsys.0 as usize..smp.normsys.1 as usize] {
                f *= k.0;
            }
            self.sample_fac[s] = f;
            let (nb, sb0) = (smp.n_bins, smp.sb_start);
            let entries = &m.histosys[smp.histosys.0 as usize..smp.histosys.1 as usize];
            let ne = entries.len();
            let base = &mut self.base[sb0..sb0 + nb];
            base.copy_from_slice(&m.nominal[sb0..sb0 + nb]);
            if additive && ne > 0 {
                // Gather the entries' weights, then per bin: Σₑ Σₖ wₖ[e]·cₖ[e, b].
                let (inner, outer) = self.hs_w[..4 * ne].split_at_mut(2 * ne);
                for (pair, entry) in inner.chunks_exact_mut(2).zip(entries) {
                    let w = &self.histo_w[entry.par as usize];
                    pair[0] = w[0];
                    pair[1] = w[1];
                }
                // Outer weights are non-zero only for parameters beyond |α| = 1 (rare).
                let outside = self.any_outside
                    && entries.iter().any(|e| {
                        let w = &self.histo_w[e.par as usize];
                        w[2] != 0.0 || w[3] != 0.0
                    });
                if outside {
                    for (e, entry) in entries.iter().enumerate() {
                        let w = &self.histo_w[entry.par as usize];
                        outer[2 * e] = w[2];
                        outer[2 * e + 1] = w[3];
                    }
                }
                self.hs_outside[s] = outside;
                let coef = &self.hs_coef[self.hs_offset[s]..self.hs_offset[s] + 4 * ne * nb];
                let (rows_in, rows_out) = coef.split_at(2 * ne * nb);
                for (out, row) in base.iter_mut().zip(rows_in.chunks_exact(2 * ne)) {
                    *out += dot(inner, row);
                }
                if outside {
                    for (out, row) in base.iter_mut().zip(rows_out.chunks_exact(2 * ne)) {
                        *out += dot(outer, row);
                    }
                }
            } else {
                for e in entries {
                    let a = p[e.par as usize];
                    for (b, out) in base.iter_mut().enumerate() {
                        let r = e.coef_start as usize + b;
                        let c = &m.histosys_coef[r];
                        let k = mult_row(e.code, c, &m.histosys_poly[r], a).0;
                        *out += c[0] * (k - 1.0);
                    }
                }
            }
            for k in 0..nb {
                let sbi = sb0 + k;
                let mut bf = 1.0;
                for &par in &m.bin_factors
                    [m.bin_factor_offsets[sbi] as usize..m.bin_factor_offsets[sbi + 1] as usize]
                {
                    bf *= p[par as usize];
                }
                self.binfac[sbi] = bf;
                self.lam[smp.bin_start + k] += self.base[sbi] * bf * f;
            }
        }
    }

    /// −ln L from `lam` and the constraints.
    fn value(&self, p: &[f64], data: &Dataset) -> f64 {
        let m = &*self.model;
        let mut nll = 0.0;
        for (&l, &n) in self.lam.iter().zip(&data.main) {
            if l < 0.0 || (l == 0.0 && n > 0.0) || l.is_nan() {
                return f64::INFINITY;
            }
            // Relative to the saturated value (see `Dataset::constant`).
            nll += if n > 0.0 { l - n - n * (l / n).ln() } else { l };
        }
        for (k, &par) in m.aux_params.iter().enumerate() {
            let x = p[par];
            let aux = data.aux[k];
            match m.parameters[par].constraint {
                Constraint::Gauss { sigma } => {
                    let z = (x - aux) / sigma;
                    nll += 0.5 * z * z;
                }
                Constraint::Poisson { tau } => {
                    let rate = x * tau;
                    if rate < 0.0 || (rate == 0.0 && aux > 0.0) {
                        return f64::INFINITY;
                    }
                    nll += if aux > 0.0 {
                        rate - aux - aux * (rate / aux).ln()
                    } else {
                        rate
                    };
                }
                Constraint::None => {}
            }
        }
        nll + data.constant
    }

    /// Reverse pass: gradient of the NLL given a completed forward pass.
    fn backward(&mut self, p: &[f64], data: &Dataset, grad: &mut [f64]) {
        let m = &*self.model;
        grad.iter_mut().for_each(|g| *g = 0.0);
        for ((d, &l), &n) in self.dlam.iter_mut().zip(&self.lam).zip(&data.main) {
            *d = if n > 0.0 { 1.0 - n / l } else { 1.0 };
        }
        for (k, &par) in m.aux_params.iter().enumerate() {
            let x = p[par];
            let aux = data.aux[k];
            grad[par] += match m.parameters[par].constraint {
                Constraint::Gauss { sigma } => (x - aux) / (sigma * sigma),
                Constraint::Poisson { tau } => {
                    if aux > 0.0 {
                        tau - aux / x
                    } else {
                        tau
                    }
                }
                Constraint::None => 0.0,
            };
        }
        let additive = !m.settings.histosys.is_multiplicative();
        for (s, smp) in m.samples.iter().enumerate() {
            let f = self.sample_fac[s];
            let (nb, sb0) = (smp.n_bins, smp.sb_start);
            // ∂NLL/∂(sample factor product) = Σ_b dλ_b · base · binfac, and bin factors.
            let mut w_sample = 0.0;
            for k in 0..nb {
                let sbi = sb0 + k;
                let dl = self.dlam[smp.bin_start + k];
                let base = self.base[sbi];
                let bf = self.binfac[sbi];
                w_sample += dl * base * bf;
                self.gbase[k] = dl * bf;
                let pars = &m.bin_factors
                    [m.bin_factor_offsets[sbi] as usize..m.bin_factor_offsets[sbi + 1] as usize];
                match pars.len() {
                    0 => {}
                    1 => grad[pars[0] as usize] += dl * base * f,
                    _ => {
                        for (i, &pi) in pars.iter().enumerate() {
                            let others: f64 = pars
                                .iter()
                                .enumerate()
                                .filter(|(j, _)| *j != i)
                                .map(|(_, &q)| p[q as usize])
                                .product();
                            grad[pi as usize] += dl * base * f * others;
                        }
                    }
                }
            }
            // Histosys: ∂NLL/∂base_b = dλ_b · binfac_b · f.
            let entries = &m.histosys[smp.histosys.0 as usize..smp.histosys.1 as usize];
            let ne = entries.len();
            if additive && ne > 0 {
                let outside = self.hs_outside[s];
                // Σ_b G_b (dw·c_b) = Σ_k dwₖ · (Σ_b G_b cₖ[·, b]): accumulate per entry.
                let halves = if outside { 2 } else { 1 };
                let acc = &mut self.hs_acc[..2 * ne * halves];
                acc.iter_mut().for_each(|a| *a = 0.0);
                let coef = &self.hs_coef[self.hs_offset[s]..self.hs_offset[s] + 4 * ne * nb];
                for h in 0..halves {
                    let acc_h = &mut acc[h * 2 * ne..(h + 1) * 2 * ne];
                    let rows = &coef[h * 2 * ne * nb..(h + 1) * 2 * ne * nb];
                    accumulate_rows(&self.gbase[..nb], rows, acc_h);
                }
                let (acc_in, acc_out) = acc.split_at(2 * ne);
                for (pair, entry) in acc_in.chunks_exact(2).zip(entries) {
                    let w = &self.histo_w[entry.par as usize];
                    grad[entry.par as usize] += (w[4] * pair[0] + w[5] * pair[1]) * f;
                }
                if outside {
                    for (pair, entry) in acc_out.chunks_exact(2).zip(entries) {
                        let w = &self.histo_w[entry.par as usize];
                        grad[entry.par as usize] += (w[6] * pair[0] + w[7] * pair[1]) * f;
                    }
                }
            } else {
                for e in entries {
                    let a = p[e.par as usize];
                    let mut g = 0.0;
                    for b in 0..nb {
                        let r = e.coef_start as usize + b;
                        let c = &m.histosys_coef[r];
                        let dk = mult_row(e.code, c, &m.histosys_poly[r], a).1;
                        g += self.gbase[b] * c[0] * dk;
                    }
                    grad[e.par as usize] += g * f;
                }
            }
            // Sample factors: ∂F/∂xₖ = F·xₖ'/xₖ while F ≠ 0 (then no factor is 0); otherwise
            // the product rule with prefix/suffix products, which needs no division.
            let sf = &m.scale_factors[smp.scale_factors.0 as usize..smp.scale_factors.1 as usize];
            let nsr = smp.normsys.0 as usize..smp.normsys.1 as usize;
            let kappa = &self.kappa[nsr.clone()];
            if f != 0.0 && f.is_finite() {
                let wf = w_sample * f;
                for (e, &(v, d)) in m.normsys[nsr].iter().zip(kappa) {
                    grad[e.par as usize] += wf * d / v;
                }
                for &par in sf {
                    grad[par as usize] += wf / p[par as usize];
                }
                continue;
            }
            let nsf = sf.len();
            let prefix = &mut self.prefix[..nsf + kappa.len()];
            let mut acc = 1.0;
            for (i, &par) in sf.iter().enumerate() {
                prefix[i] = acc;
                acc *= p[par as usize];
            }
            for (i, &(v, _)) in kappa.iter().enumerate() {
                prefix[nsf + i] = acc;
                acc *= v;
            }
            let mut suffix = 1.0;
            for ((e, &(v, d)), &pre) in m.normsys[nsr].iter().zip(kappa).zip(&prefix[nsf..]).rev() {
                grad[e.par as usize] += w_sample * pre * suffix * d;
                suffix *= v;
            }
            for (i, &par) in sf.iter().enumerate().rev() {
                grad[par as usize] += w_sample * prefix[i] * suffix;
                suffix *= p[par as usize];
            }
        }
    }
}

/// Dot product with four independent partial sums (lets the compiler keep several in flight).
#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..4 {
            acc[l] += x[l] * y[l];
        }
    }
    for (x, y) in ra.iter().zip(rb) {
        acc[0] += x * y;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// acc += Σ_b g[b]·rows[b] for `rows` holding `g.len()` rows of `acc.len()` values. A separate
/// function so the compiler knows `acc` and `rows` do not overlap and vectorises the inner loop.
#[inline(never)]
fn accumulate_rows(g: &[f64], rows: &[f64], acc: &mut [f64]) {
    for (gb, row) in g.iter().zip(rows.chunks_exact(acc.len())) {
        for (a, c) in acc.iter_mut().zip(row) {
            *a += gb * c;
        }
    }
}

#[inline]
fn mult_row(code: InterpCode, c: &[f64; 4], poly: &[f64; 6], a: f64) -> (f64, f64) {
    let c8 = [
        c[1], c[2], poly[0], poly[1], poly[2], poly[3], poly[4], poly[5],
    ];
    multiplicative_value(code, &c8, a)
}

impl Evaluator for CpuEvaluator {
    fn model(&self) -> &Model {
        &self.model
    }

    fn nll(&mut self, params: &[f64], data: &Dataset) -> Result<f64> {
        self.check(params)?;
        self.forward(params);
        Ok(self.value(params, data))
    }

    fn nll_grad(&mut self, params: &[f64], data: &Dataset, grad: &mut [f64]) -> Result<f64> {
        self.check(params)?;
        if grad.len() != params.len() {
            return Err(ComputeError::Length {
                what: "gradient",
                expected: params.len(),
                got: grad.len(),
            });
        }
        self.forward(params);
        let v = self.value(params, data);
        if v.is_finite() {
            self.backward(params, data, grad);
        } else {
            grad.iter_mut().for_each(|g| *g = f64::NAN);
        }
        Ok(v)
    }

    fn expected_main(&mut self, params: &[f64], out: &mut [f64]) -> Result<()> {
        self.check(params)?;
        if out.len() != self.model.n_main {
            return Err(ComputeError::Length {
                what: "expected data",
                expected: self.model.n_main,
                got: out.len(),
            });
        }
        self.forward(params);
        out.copy_from_slice(&self.lam);
        Ok(())
    }
}
