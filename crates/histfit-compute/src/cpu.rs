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
    /// Per sample-bin: the nominal yields (the model's, or replaced with [`set_yields`]).
    ///
    /// [`set_yields`]: crate::YieldEvaluator::set_yields
    nominal: Vec<f64>,
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
    /// Per scale factor of each sample: the product of the sample's scale factors before it.
    /// With the suffix products of the reverse pass this gives ∂F/∂(factor) without a division
    /// (a normfactor may well be zero).
    sf_prefix: Vec<f64>,
    /// Per sample: the product N of its normsys factors κ (F = scale factors · N).
    sample_norm: Vec<f64>,
    /// Normsys entries sorted by parameter ("positions"): groups (parameter, start, end), the
    /// six code-4 polynomial coefficients (as columns), the entry each position came from, each
    /// entry's position, each position's sample, and per position κ, dκ/dα and dκ/dα / κ from
    /// the forward pass. Sorted by parameter, the code-4 loop over a group is elementwise and
    /// vectorises.
    ///
    /// ∂F/∂α of an entry is F·(dκ/dα)/κ: no prefix and suffix products along each sample's
    /// long chain of κ (serial multiplications, latency-bound), only a product per sample and a
    /// weighted sum per parameter. A sample whose N is zero (some κ = 0, possible with code 0)
    /// takes the exact product of the other factors instead.
    norm_groups: Vec<(u32, u32, u32)>,
    norm_cols: [Vec<f64>; 6],
    norm_from: Vec<u32>,
    norm_pos: Vec<u32>,
    norm_sample: Vec<u32>,
    norm_v: Vec<f64>,
    norm_d: Vec<f64>,
    norm_r: Vec<f64>,
    /// Per sample: ∂NLL/∂F · F, or 0 where N is zero (the exact path).
    sample_wf: Vec<f64>,
    /// Per sample: ∂NLL/∂F (F: the product of the sample's factors).
    sample_w: Vec<f64>,
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
    /// The CPU has AVX2 and FMA: the hot loops run their fused build.
    fused: bool,
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
        let mut norm_pos = vec![0u32; norm_from.len()];
        for (pos, &e) in norm_from.iter().enumerate() {
            norm_pos[e as usize] = pos as u32;
        }
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
            nominal: model.nominal.clone(),
            base: vec![0.0; n_sb],
            binfac: vec![0.0; n_sb],
            sample_fac: vec![0.0; model.samples.len()],
            lam: vec![0.0; model.n_main],
            dlam: vec![0.0; model.n_main],
            sf_prefix: vec![0.0; model.scale_factors.len()],
            sample_norm: vec![0.0; model.samples.len()],
            sample_wf: vec![0.0; model.samples.len()],
            norm_groups,
            norm_cols,
            norm_v: vec![0.0; norm_from.len()],
            norm_d: vec![0.0; norm_from.len()],
            norm_r: vec![0.0; norm_from.len()],
            norm_sample: norm_from
                .iter()
                .map(|&e| {
                    let e = e as usize;
                    model
                        .samples
                        .iter()
                        .position(|smp| {
                            (smp.normsys.0 as usize..smp.normsys.1 as usize).contains(&e)
                        })
                        .expect("every normsys entry belongs to a sample")
                        as u32
                })
                .collect(),
            norm_pos,
            norm_from,
            sample_w: vec![0.0; model.samples.len()],
            histo_pars: unique(&mut model.histosys.iter().map(|e| e.par)),
            histo_w: vec![[0.0; 8]; model.n_params()],
            hs_offset,
            hs_coef,
            hs_w: vec![0.0; 4 * max_ne],
            hs_acc: vec![0.0; 4 * max_ne],
            hs_outside: vec![false; model.samples.len()],
            any_outside: false,
            fused: cpu_has_fma(),
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

    /// κ and dκ/dα of every normsys entry, in sorted positions.
    #[inline(always)]
    fn normsys_factors<M: Madd>(&mut self, p: &[f64]) {
        let m = &*self.model;
        let code4 = m.settings.normsys == InterpCode::Code4;
        for &(par, start, end) in &self.norm_groups {
            let a = p[par as usize];
            let (s0, s1) = (start as usize, end as usize);
            if code4 && a.abs() < 1.0 {
                let (a2, a3) = (a * a, a * a * a);
                let (a4, a5, a6) = (a2 * a2, a2 * a3, a3 * a3);
                let pw = [a, a2, a3, a4, a5, a6];
                let dpw = [1.0, 2.0 * a, 3.0 * a2, 4.0 * a3, 5.0 * a4, 6.0 * a5];
                let (v, d) = (&mut self.norm_v[s0..s1], &mut self.norm_d[s0..s1]);
                let r = &mut self.norm_r[s0..s1];
                let n = v.len();
                let (d, r) = (&mut d[..n], &mut r[..n]);
                // Equal lengths stated once, so the loop needs no bounds checks and vectorises.
                let c: [&[f64]; 6] = std::array::from_fn(|k| &self.norm_cols[k][s0..s0 + n]);
                for i in 0..n {
                    let mut vi = c[0][i] * pw[0];
                    let mut di = c[0][i];
                    for k in 1..6 {
                        vi = M::madd(c[k][i], pw[k], vi);
                        di = M::madd(c[k][i], dpw[k], di);
                    }
                    v[i] = 1.0 + vi;
                    d[i] = di;
                    r[i] = di / (1.0 + vi);
                }
            } else {
                for pos in s0..s1 {
                    let (v, d) = m.normsys[self.norm_from[pos] as usize].factor(a);
                    self.norm_v[pos] = v;
                    self.norm_d[pos] = d;
                    self.norm_r[pos] = d / v;
                }
            }
        }
    }

    /// Forward pass: fills `base`, `binfac`, `sample_fac` and `lam`.
    fn forward(&mut self, p: &[f64]) {
        #[cfg(target_arch = "x86_64")]
        if self.fused {
            // SAFETY: `fused` is set only where the CPU reports AVX2 and FMA.
            return unsafe { self.forward_fused(p) };
        }
        self.forward_with::<Plain>(p)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn forward_fused(&mut self, p: &[f64]) {
        self.forward_with::<Fused>(p)
    }

    #[inline(always)]
    fn forward_with<M: Madd>(&mut self, p: &[f64]) {
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
        self.normsys_factors::<M>(p);
        let m = &*self.model;
        // Sample factors: the scale factors' prefix products, and the product of the normsys κ
        // in four independent chains.
        for (s, smp) in m.samples.iter().enumerate() {
            let (sf0, sf1) = (smp.scale_factors.0 as usize, smp.scale_factors.1 as usize);
            let mut f = 1.0;
            for (pre, &par) in self.sf_prefix[sf0..sf1]
                .iter_mut()
                .zip(&m.scale_factors[sf0..sf1])
            {
                *pre = f;
                f *= p[par as usize];
            }
            let pos = &self.norm_pos[smp.normsys.0 as usize..smp.normsys.1 as usize];
            let n = product_at(&self.norm_v, pos);
            self.sample_norm[s] = n;
            self.sample_fac[s] = f * n;
        }
        for (s, smp) in m.samples.iter().enumerate() {
            let f = self.sample_fac[s];
            let (nb, sb0) = (smp.n_bins, smp.sb_start);
            let entries = &m.histosys[smp.histosys.0 as usize..smp.histosys.1 as usize];
            let ne = entries.len();
            let base = &mut self.base[sb0..sb0 + nb];
            base.copy_from_slice(&self.nominal[sb0..sb0 + nb]);
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
                M::matvec_add(inner, rows_in, base);
                if outside {
                    M::matvec_add(outer, rows_out, base);
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

    /// ∂(−ln L)/∂λ_b per main bin, after a forward pass.
    fn fill_dlam(&mut self, data: &Dataset) {
        for ((d, &l), &n) in self.dlam.iter_mut().zip(&self.lam).zip(&data.main) {
            *d = if n > 0.0 { 1.0 - n / l } else { 1.0 };
        }
    }

    /// Reverse pass: gradient of the NLL given a completed forward pass.
    fn backward(&mut self, p: &[f64], data: &Dataset, grad: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        if self.fused {
            // SAFETY: as in `forward`.
            return unsafe { self.backward_fused(p, data, grad) };
        }
        self.backward_with::<Plain>(p, data, grad)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn backward_fused(&mut self, p: &[f64], data: &Dataset, grad: &mut [f64]) {
        self.backward_with::<Fused>(p, data, grad)
    }

    #[inline(always)]
    fn backward_with<M: Madd>(&mut self, p: &[f64], data: &Dataset, grad: &mut [f64]) {
        self.fill_dlam(data);
        let m = &*self.model;
        grad.iter_mut().for_each(|g| *g = 0.0);
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
                let coef = &self.hs_coef[self.hs_offset[s]..self.hs_offset[s] + 4 * ne * nb];
                for h in 0..halves {
                    let acc_h = &mut acc[h * 2 * ne..(h + 1) * 2 * ne];
                    let rows = &coef[h * 2 * ne * nb..(h + 1) * 2 * ne * nb];
                    M::column_sums(&self.gbase[..nb], rows, acc_h);
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
            self.sample_w[s] = w_sample;
        }
        // Sample factors. Scale factors: ∂F/∂xₖ = N · (product of those before xₖ) · (product
        // of those after). Normsys: ∂F/∂α = F · (dκ/dα)/κ, summed per parameter below.
        for (s, smp) in m.samples.iter().enumerate() {
            let w = self.sample_w[s];
            let (sf0, sf1) = (smp.scale_factors.0 as usize, smp.scale_factors.1 as usize);
            let n = self.sample_norm[s];
            let mut suffix = 1.0;
            for (&par, &pre) in m.scale_factors[sf0..sf1]
                .iter()
                .zip(&self.sf_prefix[sf0..sf1])
                .rev()
            {
                grad[par as usize] += w * pre * suffix * n;
                suffix *= p[par as usize];
            }
            if n != 0.0 {
                self.sample_wf[s] = w * self.sample_fac[s];
            } else {
                self.sample_wf[s] = 0.0;
                // Some κ is zero: (dκ/dα)/κ is not defined, so multiply out the others.
                let pos = &self.norm_pos[smp.normsys.0 as usize..smp.normsys.1 as usize];
                for (i, &q) in pos.iter().enumerate() {
                    let others: f64 = pos
                        .iter()
                        .enumerate()
                        .filter(|&(j, _)| j != i)
                        .map(|(_, &o)| self.norm_v[o as usize])
                        .product();
                    let par = m.normsys[self.norm_from[q as usize] as usize].par;
                    grad[par as usize] += w * suffix * others * self.norm_d[q as usize];
                }
                // Out of the per-parameter sums below (0 · ∞ would be NaN there).
                for &q in pos {
                    self.norm_r[q as usize] = 0.0;
                }
            }
        }
        // Normsys: one sum per parameter over its (sorted, contiguous) entries; no scattered
        // read-modify-writes of a parameter shared by many samples.
        for &(par, start, end) in &self.norm_groups {
            let (s0, s1) = (start as usize, end as usize);
            grad[par as usize] += weighted_sum_at::<M>(
                &self.norm_r[s0..s1],
                &self.norm_sample[s0..s1],
                &self.sample_wf,
            );
        }
    }
}

/// Π v[i] over the indices `at`, in four independent chains.
#[inline(always)]
fn product_at(v: &[f64], at: &[u32]) -> f64 {
    let mut acc = [1.0; 4];
    let c = at.chunks_exact(4);
    let rest = c.remainder();
    for q in c {
        for l in 0..4 {
            acc[l] *= v[q[l] as usize];
        }
    }
    for &q in rest {
        acc[0] *= v[q as usize];
    }
    (acc[0] * acc[1]) * (acc[2] * acc[3])
}

/// Σ r[i]·w[at[i]], in four independent chains.
#[inline(always)]
fn weighted_sum_at<M: Madd>(r: &[f64], at: &[u32], w: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let n = r.len().min(at.len());
    let (r, at) = (&r[..n], &at[..n]);
    let (cr, ca) = (r.chunks_exact(4), at.chunks_exact(4));
    let (rr, ra) = (cr.remainder(), ca.remainder());
    for (x, q) in cr.zip(ca) {
        for l in 0..4 {
            acc[l] = M::madd(x[l], w[q[l] as usize], acc[l]);
        }
    }
    for (x, &q) in rr.iter().zip(ra) {
        acc[0] = M::madd(*x, w[q as usize], acc[0]);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// Multiply-add, fused (one rounding, one instruction on CPUs with FMA) or plain (two
/// roundings; a fused one without hardware FMA would be a slow library call). The hot loops are
/// written once, generic over this, and compiled twice: with AVX2+FMA enabled, chosen at run
/// time where the CPU has them, and for the baseline target. On one machine the choice never
/// changes, so results stay bit-identical across evaluators and threads.
trait Madd: Sized {
    fn madd(a: f64, b: f64, c: f64) -> f64;
    /// out[r] += dot(x, row r of `rows`) (rows of `x.len()` values), each sum as [`dot`] forms it.
    #[inline(always)]
    fn matvec_add(x: &[f64], rows: &[f64], out: &mut [f64]) {
        for (o, row) in out.iter_mut().zip(rows.chunks_exact(x.len().max(1))) {
            *o += dot::<Self>(x, row);
        }
    }
    /// See [`column_sums`].
    #[inline(always)]
    fn column_sums(g: &[f64], rows: &[f64], out: &mut [f64]) {
        column_sums::<Self>(g, rows, out)
    }
}

struct Plain;
impl Madd for Plain {
    #[inline(always)]
    fn madd(a: f64, b: f64, c: f64) -> f64 {
        a * b + c
    }
}

struct Fused;
impl Madd for Fused {
    #[inline(always)]
    fn madd(a: f64, b: f64, c: f64) -> f64 {
        a.mul_add(b, c)
    }
    // The generic loops compile to two 2-wide chains of dependent multiply-adds (latency-
    // bound); written with 4-wide vectors, four rows or sixteen columns at a time keep four
    // independent chains in flight. Same operations in the same order as the generic code.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn matvec_add(x: &[f64], rows: &[f64], out: &mut [f64]) {
        // SAFETY: `Fused` runs only inside the AVX2+FMA builds, chosen where the CPU has both.
        unsafe { avx::matvec_add(x, rows, out) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn column_sums(g: &[f64], rows: &[f64], out: &mut [f64]) {
        // SAFETY: as above.
        unsafe { avx::column_sums(g, rows, out) }
    }
}

/// AVX2+FMA forms of the two hot loops of the histosys terms.
#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::*;

    /// The four lanes of `v`.
    #[inline(always)]
    unsafe fn lanes(v: __m256d) -> [f64; 4] {
        let mut a = [0.0; 4];
        _mm256_storeu_pd(a.as_mut_ptr(), v);
        a
    }

    /// `super::dot` for `x` against `k` rows at `r[..k]` (each `x.len()` long): lane l of
    /// each accumulator sums the products at j ≡ l (mod 4) in order, the tail goes to lane 0,
    /// then (l0 + l1) + (l2 + l3).
    #[inline(always)]
    unsafe fn dots<const K: usize>(x: &[f64], r: [*const f64; K]) -> [f64; K] {
        let n = x.len();
        let full = n / 4 * 4;
        let mut acc = [_mm256_setzero_pd(); K];
        let mut j = 0;
        while j < full {
            let xv = _mm256_loadu_pd(x.as_ptr().add(j));
            for k in 0..K {
                acc[k] = _mm256_fmadd_pd(xv, _mm256_loadu_pd(r[k].add(j)), acc[k]);
            }
            j += 4;
        }
        let mut out = [0.0; K];
        for k in 0..K {
            let mut a = lanes(acc[k]);
            for jj in full..n {
                a[0] = x[jj].mul_add(*r[k].add(jj), a[0]);
            }
            out[k] = (a[0] + a[1]) + (a[2] + a[3]);
        }
        out
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn matvec_add(x: &[f64], rows: &[f64], out: &mut [f64]) {
        let n = x.len();
        assert!(rows.len() >= out.len() * n);
        let p = rows.as_ptr();
        let mut b = 0;
        while b + 4 <= out.len() {
            let d = dots::<4>(x, std::array::from_fn(|k| p.add((b + k) * n)));
            for k in 0..4 {
                out[b + k] += d[k];
            }
            b += 4;
        }
        while b < out.len() {
            out[b] += dots::<1>(x, [p.add(b * n)])[0];
            b += 1;
        }
    }

    /// `super::column_sums`: out[j] = Σ_b g[b]·rows[b][j], each column summed over b in order.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn column_sums(g: &[f64], rows: &[f64], out: &mut [f64]) {
        let len = out.len();
        assert!(rows.len() >= g.len() * len);
        let p = rows.as_ptr();
        let mut j = 0;
        while j + 16 <= len {
            let mut a = [_mm256_setzero_pd(); 4];
            for (b, &gb) in g.iter().enumerate() {
                let gv = _mm256_set1_pd(gb);
                for (q, aq) in a.iter_mut().enumerate() {
                    *aq = _mm256_fmadd_pd(gv, _mm256_loadu_pd(p.add(b * len + j + 4 * q)), *aq);
                }
            }
            for (q, aq) in a.iter().enumerate() {
                _mm256_storeu_pd(out.as_mut_ptr().add(j + 4 * q), *aq);
            }
            j += 16;
        }
        while j + 4 <= len {
            let mut a = _mm256_setzero_pd();
            for (b, &gb) in g.iter().enumerate() {
                a = _mm256_fmadd_pd(_mm256_set1_pd(gb), _mm256_loadu_pd(p.add(b * len + j)), a);
            }
            _mm256_storeu_pd(out.as_mut_ptr().add(j), a);
            j += 4;
        }
        for (jj, o) in out.iter_mut().enumerate().skip(j) {
            let mut a = 0.0;
            for (b, &gb) in g.iter().enumerate() {
                a = gb.mul_add(*p.add(b * len + jj), a);
            }
            *o = a;
        }
    }
}

/// Whether this CPU runs the fused (AVX2+FMA) build of the hot loops.
fn cpu_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Dot product with four independent partial sums (lets the compiler keep several in flight).
#[inline(always)]
fn dot<M: Madd>(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..4 {
            acc[l] = M::madd(x[l], y[l], acc[l]);
        }
    }
    for (x, y) in ra.iter().zip(rb) {
        acc[0] = M::madd(*x, *y, acc[0]);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// out[j] = Σ_b g[b]·rows[b][j] for `rows` holding `g.len()` rows of `out.len()` values. Four
/// columns at a time with the partial sums in registers: the rows are read once and nothing is
/// stored until a column is complete.
#[inline(always)]
fn column_sums<M: Madd>(g: &[f64], rows: &[f64], out: &mut [f64]) {
    let len = out.len();
    let rows = &rows[..g.len() * len];
    let mut j = 0;
    while j + 4 <= len {
        let mut a = [0.0; 4];
        for (b, &gb) in g.iter().enumerate() {
            let r = &rows[b * len + j..b * len + j + 4];
            for l in 0..4 {
                a[l] = M::madd(gb, r[l], a[l]);
            }
        }
        out[j..j + 4].copy_from_slice(&a);
        j += 4;
    }
    for (jj, o) in out.iter_mut().enumerate().skip(j) {
        let mut a = 0.0;
        for (b, &gb) in g.iter().enumerate() {
            a = M::madd(gb, rows[b * len + jj], a);
        }
        *o = a;
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
        check_host(data)?;
        self.forward(params);
        Ok(self.value(params, data))
    }

    fn nll_grad(&mut self, params: &[f64], data: &Dataset, grad: &mut [f64]) -> Result<f64> {
        self.check(params)?;
        check_host(data)?;
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

/// A dataset kept in a device's memory cannot be evaluated here.
fn check_host(data: &Dataset) -> Result<()> {
    match data.resident {
        None => Ok(()),
        Some(_) => Err(ComputeError::InvalidData {
            place: "dataset".into(),
            rule: "its counts live in a GPU evaluator's memory; only that evaluator can use it"
                .into(),
        }),
    }
}

/// Yields of whole samples as inputs (the differentiable-analysis use: a network produces a
/// signal histogram). Supported for samples whose modifiers scale them (normfactor, lumi, normsys,
/// shapefactor): a histosys, staterror or shapesys on the sample was compiled from its nominal
/// yields (interpolation coefficients, constraint widths), so replacing them is refused.
impl crate::YieldEvaluator for CpuEvaluator {
    fn set_yields(&mut self, sample: usize, yields: &[f64]) -> Result<()> {
        let smp = crate::yields::input_sample(&self.model, sample)?.clone();
        let m = self.model.clone();
        let place = || crate::yields::yields_place(&m, &smp);
        if yields.len() != smp.n_bins {
            return Err(ComputeError::InvalidData {
                place: place(),
                rule: format!("expected {} bins, got {}", smp.n_bins, yields.len()),
            });
        }
        if let Some(v) = yields.iter().find(|v| !v.is_finite()) {
            return Err(ComputeError::InvalidData {
                place: place(),
                rule: format!("yields must be finite numbers, got {v}"),
            });
        }
        // The same rule as for a workspace: no bin may expect a negative total at the nominal
        // point (its rate would be negative for every parameter value near it).
        let mut total = vec![0.0; m.n_main];
        for (sb, &b) in m.sb_bin.iter().enumerate() {
            let in_sample = (smp.sb_start..smp.sb_start + smp.n_bins).contains(&sb);
            total[b as usize] += if in_sample {
                yields[sb - smp.sb_start]
            } else {
                self.nominal[sb]
            };
        }
        for k in 0..smp.n_bins {
            let b = smp.bin_start + k;
            if total[b] < 0.0 {
                return Err(ComputeError::InvalidData {
                    place: format!("{} bin {k}", place()),
                    rule: format!(
                        "the bin's total nominal yield would be negative ({})",
                        total[b]
                    ),
                });
            }
        }
        self.nominal[smp.sb_start..smp.sb_start + smp.n_bins].copy_from_slice(yields);
        Ok(())
    }

    fn reset_yields(&mut self) {
        self.nominal.copy_from_slice(&self.model.nominal);
    }
}

impl CpuEvaluator {
    /// Adds `term(main bin, sample-bin, sample factor)` to `out` for every bin of the input
    /// `samples`, in order (bins concatenated).
    fn add_per_input_bin(
        &self,
        samples: &[usize],
        out: &mut [f64],
        term: impl Fn(usize, usize, f64) -> f64,
    ) {
        let mut at = 0;
        for &s in samples {
            let l = &self.model.samples[s];
            let f = self.sample_fac[s];
            for k in 0..l.n_bins {
                out[at] += term(l.bin_start + k, l.sb_start + k, f);
                at += 1;
            }
        }
    }
}

/// Yield gradients from one forward pass per parameter point (no reverse pass, nothing per
/// sample): λ_b = Σ yields·(bin factors)·(sample factor) for these samples, so ∂(−ln L)/∂y =
/// ∂(−ln L)/∂λ_b · binfac · F, NaN where −ln L is not finite (as for the parameter gradient).
impl crate::YieldGradient for CpuEvaluator {
    fn model_arc(&self) -> Arc<Model> {
        self.model.clone()
    }

    fn asimov(&mut self, at: &[f64]) -> Result<Dataset> {
        let full = crate::expected_data(self, at)?;
        Dataset::new(&self.model.clone(), &full)
    }

    fn yield_grad_sum(
        &mut self,
        samples: &[usize],
        g: &crate::YieldGradTerms,
    ) -> Result<Option<Vec<f64>>> {
        crate::yields::check_inputs(&self.model, samples)?;
        let width = samples.iter().map(|&s| self.model.samples[s].n_bins).sum();
        let mut out = vec![0.0; width];
        for &(c, params) in g.terms {
            self.check(params)?;
            check_host(g.data)?;
            self.forward(params);
            let finite = self.value(params, g.data).is_finite();
            self.fill_dlam(g.data);
            self.add_per_input_bin(samples, &mut out, |b, sb, f| {
                let dl = if finite { self.dlam[b] } else { f64::NAN };
                c * (dl * self.binfac[sb] * f)
            });
        }
        if let Some(a) = g.asimov {
            let mut rates = Vec::with_capacity(2);
            for params in [a.free, a.cond] {
                self.check(params)?;
                self.forward(params);
                rates.push(self.lam.clone());
            }
            self.check(a.at)?;
            self.forward(a.at);
            let (lf, lc) = (&rates[0], &rates[1]);
            self.add_per_input_bin(samples, &mut out, |b, sb, f| {
                if lf[b] > 0.0 && lc[b] > 0.0 {
                    a.coef * (lf[b] / lc[b]).ln() * (self.binfac[sb] * f)
                } else {
                    0.0
                }
            });
        }
        Ok(Some(out))
    }
}

/// The CPU evaluator as a (sequential) batch evaluator: the reference the device batches are
/// tested against, and a way to exercise the lockstep drivers on machines without a GPU.
impl crate::BatchEvaluator for CpuEvaluator {
    fn model(&self) -> &Model {
        &self.model
    }

    fn nll_grad_batch(
        &mut self,
        params: &[f64],
        data: &[&Dataset],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> Result<()> {
        let n = self.model.n_params();
        crate::check_batch(&self.model, params, data, nll, grad)?;
        for (k, d) in data.iter().enumerate() {
            nll[k] = self.nll_grad(
                &params[k * n..(k + 1) * n],
                d,
                &mut grad[k * n..(k + 1) * n],
            )?;
        }
        Ok(())
    }

    fn expected_main_batch(&mut self, params: &[f64], out: &mut [f64]) -> Result<()> {
        let (n, m) = (self.model.n_params(), self.model.n_main);
        if n == 0 || !params.len().is_multiple_of(n) || out.len() != params.len() / n * m {
            return Err(ComputeError::Length {
                what: "expected data",
                expected: params.len() / n.max(1) * m,
                got: out.len(),
            });
        }
        for (p, o) in params.chunks_exact(n).zip(out.chunks_exact_mut(m)) {
            self.expected_main(p, o)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use histfit_testutil::{load, off_init_point, settings, WORKSPACES};

    /// The fused (AVX2+FMA) and plain builds of the hot loops agree to rounding on every shipped
    /// workspace and setting (only one of them runs on a given machine in production).
    #[test]
    fn fused_and_plain_arithmetic_agree() {
        for name in WORKSPACES {
            for setting in ["smooth", "pyhf"] {
                let (model, _) = load(name, settings(setting));
                // This crate's own `Dataset` (the test helpers link a second copy of the crate).
                let data = Dataset::observed(&model);
                let p = off_init_point(&model);
                let mut plain = CpuEvaluator::new(model.clone());
                plain.fused = false;
                let mut fused = CpuEvaluator::new(model.clone());
                fused.fused = cpu_has_fma();
                let (mut g1, mut g2) = (vec![0.0; p.len()], vec![0.0; p.len()]);
                let v1 = plain.nll_grad(&p, &data, &mut g1).unwrap();
                let v2 = fused.nll_grad(&p, &data, &mut g2).unwrap();
                assert!(
                    (v1 - v2).abs() <= 1e-12 * v1.abs().max(1.0),
                    "{name}/{setting}: {v1} vs {v2}"
                );
                for (i, (a, b)) in g1.iter().zip(&g2).enumerate() {
                    let scale = a.abs().max(b.abs()).max(1.0);
                    assert!(
                        (a - b).abs() <= 1e-10 * scale,
                        "{name}/{setting} grad[{i}]: {a} vs {b}"
                    );
                }
            }
        }
    }
}
