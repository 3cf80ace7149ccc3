//! The CPU f64 evaluator: one pass over the sample tables for the expected rates, a second pass
//! for the gradient by reverse accumulation (∂NLL/∂λ_b pushed back through each modifier).
//! Evaluation is single-threaded and in a fixed order, so results are bit-identical however many
//! evaluators run in parallel; parallelism lives one level up (many fits at once).
//!
//! At construction the evaluator derives, from the model's tables, a sample-blocked copy of the
//! additive histosys coefficients (per sample: bin-major, entry-minor), so the per-bin sums over a
//! sample's many histosys entries are long contiguous dot products rather than many 3–6-bin loops.

use crate::HistFactoryData;
use crate::{ComputeError, Dataset, Evaluator, ParameterSpace, Result};
use histfit_model::interp::{additive_weights, multiplicative_value};
use histfit_model::{Constraint, InterpCode, Model, YieldVariations};
use std::sync::Arc;

mod gather;
mod kernels;

use gather::Gather;
use kernels::{cpu_has_fma, Fused, Madd, Plain, Weights};

/// Evaluates a shared [`Model`] on the CPU. Cheap to clone (the model is shared); holds scratch.
#[derive(Debug, Clone)]
pub struct CpuEvaluator {
    model: Arc<Model>,
    /// The model's parameters as inference sees them (shared by the clones of a toy ensemble).
    space: Arc<ParameterSpace>,
    /// Per sample-bin: the nominal yields (the model's, or replaced with [`set_yields`]).
    ///
    /// [`set_yields`]: crate::YieldEvaluator::set_yields
    nominal: Vec<f64>,
    /// Per sample-bin: the factor on its histosys deltas — 1, or input / workspace nominal for
    /// a sample whose input yields hold their variations relative ([`YieldVariations`]). The
    /// additive blocks in `hs_coef` are stored already scaled.
    ///
    /// [`YieldVariations`]: histfit_model::YieldVariations
    hs_scale: Vec<f64>,
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
    /// Scratch for [`products_of_others`].
    others: Vec<f64>,
    /// Per sample: the product N of its normsys factors κ (F = scale factors · N).
    sample_norm: Vec<f64>,
    /// Normsys entries sorted by parameter ("positions"): groups (parameter, start, end), the
    /// six code-4 polynomial coefficients (in blocks of four positions: the four c₀, then the four
    /// c₁, …, so the polynomial reads one stream, not six), the entry each position came from, each
    /// entry's position, each position's sample, and per position κ and dκ/dα / κ from the
    /// forward pass. Each group is padded to whole 4-wide vectors with positions of no entry
    /// ([`NO_ENTRY`]: κ = 1, no gradient). Sorted by parameter, the code-4 loop over a group is elementwise and
    /// vectorises.
    ///
    /// ∂F/∂α of an entry is F·(dκ/dα)/κ: no prefix and suffix products along each sample's
    /// long chain of κ (serial multiplications, latency-bound), only a product per sample and a
    /// weighted sum per parameter. A sample whose N is zero (some κ = 0, possible with code 0)
    /// takes the exact product of the other factors instead.
    norm_groups: Vec<(u32, u32, u32)>,
    norm_coef: Vec<f64>,
    /// Per position of a multiplicative code (1 or 4), ln(hi) and −ln(lo): κ = exp(α·ln hi)
    /// for α > 0, exp(α·(−ln lo)) for α < 0 (code 4 beyond |α| = 1), and (dκ/dα)/κ is that
    /// logarithm. Zero at padding (κ = 1).
    norm_ln: [Vec<f64>; 2],
    norm_from: Vec<u32>,
    norm_pos: Gather,
    norm_sample: Gather,
    norm_v: Vec<f64>,
    norm_r: Vec<f64>,
    /// Per sample: ∂NLL/∂F · F, or 0 where N is zero (the exact path).
    sample_wf: Vec<f64>,
    /// Sample-bins whose only bin factor is one parameter, grouped by it: groups (parameter,
    /// start, end) into `bf_sbs`; per sample-bin the gradient term of that factor.
    bf_groups: Vec<(u32, u32, u32)>,
    bf_sbs: Gather,
    bf_t: Vec<f64>,
    /// Per sample-bin its single bin factor's parameter (0 where it has none or several), and
    /// per sample whether every bin has exactly one (the common case: staterror or shapesys
    /// alone), so that its bins gather their factors without walking the general table.
    bf_one: Gather,
    bf_all_one: Vec<bool>,
    /// Per histosys entry (model order) its parameter.
    hs_par: Gather,
    /// The auxiliary constraints, by kind: (parameter, auxiliary datum, σ) for Gaussian ones and
    /// (parameter, auxiliary datum, τ) for Poisson ones, so the constraint loops read compact
    /// tables instead of each parameter's description.
    gauss: Vec<(usize, usize, f64)>,
    poisson: Vec<(usize, usize, f64)>,
    /// Per sample: ∂NLL/∂F (F: the product of the sample's factors).
    sample_w: Vec<f64>,
    /// Parameters driving histosys entries; per parameter the additive weights w(α), dw/dα.
    histo_pars: Vec<u32>,
    histo_w: Vec<[f64; 8]>,
    /// Per parameter (reverse pass): Σ over its histosys entries of ∂NLL/∂Δ against each
    /// coefficient (inner pair, outer pair); its gradient is these against dw/dα.
    hs_sums: Vec<[f64; 4]>,
    /// Sample-blocked additive histosys coefficients: for sample s with `ne` entries and `nb`
    /// bins, a block of `nb` rows of L = `row_len(ne)` values (2ne rounded up to whole 4-wide
    /// vectors, the rest zero) for the inner pair of each entry (k = 0, 1 at columns 2e + k),
    /// at `hs_offset[s]`, then a block for the outer pair (k = 2, 3) at `hs_offset[s] + nb·L`.
    /// Blocks are chunk-major (see [`kernels`]): each bin's Δ is a dot product with the
    /// interleaved weights, all bins of a sample in one pass.
    hs_offset: Vec<usize>,
    hs_coef: Vec<f64>,
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
        let mut hs_len = 0;
        let mut max_ne = 0;
        for smp in &model.samples {
            hs_offset.push(hs_len);
            let ne = (smp.histosys.1 - smp.histosys.0) as usize;
            max_ne = max_ne.max(ne);
            hs_len += 2 * row_len(ne) * smp.n_bins;
        }
        let mut hs_coef = vec![0.0; hs_len];
        let hs_scale = vec![1.0; n_sb];
        for s in 0..model.samples.len() {
            fill_histosys_block(&model, s, &hs_scale, &mut hs_coef[hs_offset[s]..]);
        }
        // Normsys positions: entries sorted by parameter, each parameter's group padded with
        // neutral positions (κ = 1, no gradient) to whole 4-wide vectors.
        let mut order: Vec<u32> = (0..model.normsys.len() as u32).collect();
        order.sort_by_key(|&e| (model.normsys[e as usize].par, e));
        let mut norm_from: Vec<u32> = Vec::with_capacity(order.len());
        let mut norm_groups: Vec<(u32, u32, u32)> = Vec::new();
        for (i, &e) in order.iter().enumerate() {
            let par = model.normsys[e as usize].par;
            if i == 0 || model.normsys[order[i - 1] as usize].par != par {
                let start = norm_from.len() as u32;
                norm_groups.push((par, start, start));
            }
            norm_from.push(e);
            let g = norm_groups.last_mut().expect("a group was opened");
            g.2 = norm_from.len() as u32;
            let last = order.get(i + 1).map(|&n| model.normsys[n as usize].par) != Some(par);
            if last {
                while !norm_from.len().is_multiple_of(4) {
                    norm_from.push(NO_ENTRY);
                }
                g.2 = norm_from.len() as u32;
            }
        }
        let n_pos = norm_from.len();
        let mut norm_pos = vec![0u32; model.normsys.len()];
        let mut norm_coef: Vec<f64> = vec![0.0; 6 * n_pos];
        let mut norm_ln: [Vec<f64>; 2] = std::array::from_fn(|_| vec![0.0; n_pos]);
        let mut norm_sample = vec![0u32; n_pos];
        let mut sample_of = vec![0u32; model.normsys.len()];
        for (s, smp) in model.samples.iter().enumerate() {
            for e in smp.normsys.0..smp.normsys.1 {
                sample_of[e as usize] = s as u32;
            }
        }
        for (pos, &e) in norm_from.iter().enumerate() {
            if e != NO_ENTRY {
                norm_pos[e as usize] = pos as u32;
                norm_sample[pos] = sample_of[e as usize];
                let entry = &model.normsys[e as usize];
                if entry.code.is_multiplicative() {
                    norm_ln[0][pos] = entry.coef[0];
                    norm_ln[1][pos] = -entry.coef[1];
                }
                for k in 0..6 {
                    norm_coef[(pos / 4) * 24 + k * 4 + pos % 4] =
                        model.normsys[e as usize].coef[2 + k];
                }
            }
        }
        let mut single: Vec<(u32, u32)> = (0..n_sb)
            .filter(|&sb| model.bin_factor_offsets[sb + 1] - model.bin_factor_offsets[sb] == 1)
            .map(|sb| {
                (
                    model.bin_factors[model.bin_factor_offsets[sb] as usize],
                    sb as u32,
                )
            })
            .collect();
        single.sort_unstable();
        let mut bf_groups: Vec<(u32, u32, u32)> = Vec::new();
        for (i, &(par, _)) in single.iter().enumerate() {
            match bf_groups.last_mut() {
                Some(g) if g.0 == par => g.2 = i as u32 + 1,
                _ => bf_groups.push((par, i as u32, i as u32 + 1)),
            }
        }
        let n_bf = |sb: usize| model.bin_factor_offsets[sb + 1] - model.bin_factor_offsets[sb];
        let bf_one = (0..n_sb)
            .map(|sb| match n_bf(sb) {
                1 => model.bin_factors[model.bin_factor_offsets[sb] as usize],
                _ => 0,
            })
            .collect();
        let (mut gauss, mut poisson) = (Vec::new(), Vec::new());
        for (k, &par) in model.aux_params.iter().enumerate() {
            match model.parameters[par].constraint {
                Constraint::Gauss { sigma } => gauss.push((par, k, sigma)),
                Constraint::Poisson { tau } => poisson.push((par, k, tau)),
                Constraint::None => {}
            }
        }
        CpuEvaluator {
            gauss,
            poisson,
            // Index 0 marks "no single factor": a model without parameters has no such bins.
            bf_one: Gather::new(bf_one, model.n_params().max(1)),
            bf_all_one: model
                .samples
                .iter()
                .map(|smp| (smp.sb_start..smp.sb_start + smp.n_bins).all(|sb| n_bf(sb) == 1))
                .collect(),
            hs_par: Gather::new(
                model.histosys.iter().map(|e| e.par).collect(),
                model.n_params(),
            ),
            bf_groups,
            bf_sbs: Gather::new(single.iter().map(|&(_, sb)| sb).collect(), n_sb),
            bf_t: vec![0.0; n_sb],
            nominal: model.nominal.clone(),
            hs_scale,
            base: vec![0.0; n_sb],
            binfac: vec![0.0; n_sb],
            sample_fac: vec![0.0; model.samples.len()],
            lam: vec![0.0; model.n_main],
            dlam: vec![0.0; model.n_main],
            sf_prefix: vec![0.0; model.scale_factors.len()],
            others: Vec::new(),
            sample_norm: vec![0.0; model.samples.len()],
            sample_wf: vec![0.0; model.samples.len()],
            norm_groups,
            norm_coef,
            norm_ln,
            norm_v: vec![0.0; n_pos],
            norm_r: vec![0.0; n_pos],
            norm_sample: Gather::new(norm_sample, model.samples.len()),
            norm_pos: Gather::new(norm_pos, n_pos),
            norm_from,
            sample_w: vec![0.0; model.samples.len()],
            histo_pars: unique(&mut model.histosys.iter().map(|e| e.par)),
            histo_w: vec![[0.0; 8]; model.n_params()],
            hs_sums: vec![[0.0; 4]; model.n_params()],
            hs_offset,
            hs_coef,
            hs_outside: vec![false; model.samples.len()],
            any_outside: false,
            fused: cpu_has_fma(),
            gbase: vec![0.0; model.samples.iter().map(|s| s.n_bins).max().unwrap_or(0)],
            space: Arc::new(crate::histfactory::parameter_space(&model)),
            model,
        }
    }

    pub fn shared_model(&self) -> &Arc<Model> {
        &self.model
    }

    /// The expected yield of every sample-bin at `params` (the model's sample order, bins
    /// concatenated): (nominal + histosys shifts) × bin factors × sample factors.
    pub fn sample_yields(&mut self, params: &[f64]) -> Result<Vec<f64>> {
        self.check(params)?;
        self.forward(params);
        let mut out = Vec::with_capacity(self.base.len());
        for (s, smp) in self.model.samples.iter().enumerate() {
            let f = self.sample_fac[s];
            for sb in smp.sb_start..smp.sb_start + smp.n_bins {
                out.push(self.base[sb] * self.binfac[sb] * f);
            }
        }
        Ok(out)
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

    /// κ and (dκ/dα)/κ of every normsys entry, in sorted positions.
    #[inline(always)]
    fn normsys_factors<M: Madd>(&mut self, p: &[f64]) {
        let m = &*self.model;
        let code4 = m.settings.normsys == InterpCode::Code4;
        let code1 = m.settings.normsys == InterpCode::Code1;
        for &(par, start, end) in &self.norm_groups {
            let a = p[par as usize];
            let (s0, s1) = (start as usize, end as usize);
            if code4 && a.abs() < 1.0 {
                let (a2, a3) = (a * a, a * a * a);
                let (a4, a5, a6) = (a2 * a2, a2 * a3, a3 * a3);
                let pw = [a, a2, a3, a4, a5, a6];
                let dpw = [1.0, 2.0 * a, 3.0 * a2, 4.0 * a3, 5.0 * a4, 6.0 * a5];
                let c = &self.norm_coef[6 * s0..6 * s1];
                M::code4_poly(
                    c,
                    &pw,
                    &dpw,
                    &mut self.norm_v[s0..s1],
                    &mut self.norm_r[s0..s1],
                );
            } else if (code4 && a.abs() >= 1.0) || (code1 && a != 0.0) {
                // The exponential branch: hi^α or lo^(−α).
                let ln = &self.norm_ln[if a > 0.0 { 0 } else { 1 }][s0..s1];
                M::exp_factors(ln, a, &mut self.norm_v[s0..s1], &mut self.norm_r[s0..s1]);
            } else {
                for pos in s0..s1 {
                    let (v, d) = match self.norm_from[pos] {
                        NO_ENTRY => (1.0, 0.0),
                        e => m.normsys[e as usize].factor(a),
                    };
                    self.norm_v[pos] = v;
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
            let n = self
                .norm_pos
                .at(smp.normsys.0 as usize..smp.normsys.1 as usize)
                .product(&self.norm_v);
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
                // Per bin: Σₑ Σₖ wₖ[e]·cₖ[e, b], the weights read in place.
                let len = row_len(ne);
                let pars = self
                    .hs_par
                    .at(smp.histosys.0 as usize..smp.histosys.1 as usize);
                // Outer weights are non-zero only for parameters beyond |α| = 1 (rare).
                let outside = self.any_outside
                    && entries.iter().any(|e| {
                        let w = &self.histo_w[e.par as usize];
                        w[2] != 0.0 || w[3] != 0.0
                    });
                self.hs_outside[s] = outside;
                let coef = &self.hs_coef[self.hs_offset[s]..self.hs_offset[s] + 2 * len * nb];
                let (rows_in, rows_out) = coef.split_at(len * nb);
                M::matvec_add(Weights::new(&self.histo_w, pars, 0), rows_in, base);
                if outside {
                    M::matvec_add(Weights::new(&self.histo_w, pars, 2), rows_out, base);
                }
            } else {
                for e in entries {
                    let a = p[e.par as usize];
                    for (b, out) in base.iter_mut().enumerate() {
                        let r = e.coef_start as usize + b;
                        let c = &m.histosys_coef[r];
                        let k = mult_row(e.code, c, &m.histosys_poly[r], a).0;
                        *out += c[0] * (k - 1.0) * self.hs_scale[sb0 + b];
                    }
                }
            }
            let binfac = &mut self.binfac[sb0..sb0 + nb];
            if self.bf_all_one[s] {
                self.bf_one.at(sb0..sb0 + nb).gather(p, binfac);
            } else {
                for (k, bf) in binfac.iter_mut().enumerate() {
                    let sbi = sb0 + k;
                    *bf = m.bin_factors[m.bin_factor_offsets[sbi] as usize
                        ..m.bin_factor_offsets[sbi + 1] as usize]
                        .iter()
                        .map(|&par| p[par as usize])
                        .product();
                }
            }
            let lam = &mut self.lam[smp.bin_start..smp.bin_start + nb];
            for ((l, &b), &bf) in lam.iter_mut().zip(&self.base[sb0..sb0 + nb]).zip(&*binfac) {
                *l += b * bf * f;
            }
        }
    }

    /// −ln L from `lam` and the constraints.
    fn value(&self, p: &[f64], data: &Dataset) -> f64 {
        let mut nll = 0.0;
        for (&l, &n) in self.lam.iter().zip(&data.main) {
            // Relative to the saturated value (see `Dataset::constant`).
            match crate::poisson_term(l, n, data.empty_bin_wall) {
                Some((v, _)) => nll += v,
                None => return f64::INFINITY,
            }
        }
        for &(par, k, sigma) in &self.gauss {
            let z = (p[par] - data.aux[k]) / sigma;
            nll += 0.5 * z * z;
        }
        for &(par, k, tau) in &self.poisson {
            let (rate, aux) = (p[par] * tau, data.aux[k]);
            if rate < 0.0 || (rate == 0.0 && aux > 0.0) {
                return f64::INFINITY;
            }
            nll += crate::poisson_constraint(p[par], tau, aux).0;
        }
        nll + data.constant
    }

    /// ∂(−ln L)/∂λ_b per main bin, after a forward pass.
    fn fill_dlam(&mut self, data: &Dataset) {
        for ((d, &l), &n) in self.dlam.iter_mut().zip(&self.lam).zip(&data.main) {
            *d = crate::poisson_term(l, n, data.empty_bin_wall).map_or(f64::NAN, |t| t.1);
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
        for &(par, k, sigma) in &self.gauss {
            grad[par] += (p[par] - data.aux[k]) / (sigma * sigma);
        }
        for &(par, k, tau) in &self.poisson {
            grad[par] += crate::poisson_constraint(p[par], tau, data.aux[k]).1;
        }
        let additive = !m.settings.histosys.is_multiplicative();
        if additive {
            for &par in &self.histo_pars {
                self.hs_sums[par as usize] = [0.0; 4];
            }
        }
        for (s, smp) in m.samples.iter().enumerate() {
            let f = self.sample_fac[s];
            let (nb, sb0) = (smp.n_bins, smp.sb_start);
            // ∂NLL/∂(sample factor product) = Σ_b dλ_b · base · binfac, and bin factors (a
            // single one, as staterror and shapesys give, summed per parameter below).
            let mut w_sample = 0.0;
            let dlam = &self.dlam[smp.bin_start..smp.bin_start + nb];
            let base = &self.base[sb0..sb0 + nb];
            let binfac = &self.binfac[sb0..sb0 + nb];
            for (((g, &dl), &b), &bf) in self.gbase[..nb].iter_mut().zip(dlam).zip(base).zip(binfac)
            {
                w_sample += dl * b * bf;
                *g = dl * bf * f;
            }
            if self.bf_all_one[s] {
                for ((t, &dl), &b) in self.bf_t[sb0..sb0 + nb].iter_mut().zip(dlam).zip(base) {
                    *t = dl * b * f;
                }
            } else {
                for (k, (&dl, &b)) in dlam.iter().zip(base).enumerate() {
                    let sbi = sb0 + k;
                    let pars = &m.bin_factors[m.bin_factor_offsets[sbi] as usize
                        ..m.bin_factor_offsets[sbi + 1] as usize];
                    match pars.len() {
                        0 => {}
                        1 => self.bf_t[sbi] = dl * b * f,
                        _ => {
                            let others = products_of_others(
                                pars.len(),
                                |i| p[pars[i] as usize],
                                &mut self.others,
                            );
                            for (&pi, &o) in pars.iter().zip(others) {
                                grad[pi as usize] += dl * b * f * o;
                            }
                        }
                    }
                }
            }
            // Histosys: ∂NLL/∂base_b = dλ_b · binfac_b · f (`gbase`).
            let entries = &m.histosys[smp.histosys.0 as usize..smp.histosys.1 as usize];
            let ne = entries.len();
            if additive && ne > 0 {
                let outside = self.hs_outside[s];
                // Σ_b G_b (dw·c_b) = Σ_k dwₖ · (Σ_b G_b cₖ[·, b]): accumulate per entry.
                let len = row_len(ne);
                let coef = &self.hs_coef[self.hs_offset[s]..self.hs_offset[s] + 2 * len * nb];
                let (rows_in, rows_out) = coef.split_at(len * nb);
                let pars = self
                    .hs_par
                    .at(smp.histosys.0 as usize..smp.histosys.1 as usize);
                let g = &self.gbase[..nb];
                M::column_sums_into(g, rows_in, pars, &mut self.hs_sums, 0);
                if outside {
                    M::column_sums_into(g, rows_out, pars, &mut self.hs_sums, 2);
                }
            } else {
                for e in entries {
                    let a = p[e.par as usize];
                    let mut g = 0.0;
                    for b in 0..nb {
                        let r = e.coef_start as usize + b;
                        let c = &m.histosys_coef[r];
                        let dk = mult_row(e.code, c, &m.histosys_poly[r], a).1;
                        g += self.gbase[b] * c[0] * dk * self.hs_scale[sb0 + b];
                    }
                    grad[e.par as usize] += g;
                }
            }
            self.sample_w[s] = w_sample;
        }
        if additive {
            for &par in &self.histo_pars {
                let (w, t) = (&self.histo_w[par as usize], &self.hs_sums[par as usize]);
                grad[par as usize] += (w[4] * t[0] + w[5] * t[1]) + (w[6] * t[2] + w[7] * t[3]);
            }
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
                let pos = &self.norm_pos.idx[smp.normsys.0 as usize..smp.normsys.1 as usize];
                let others = products_of_others(
                    pos.len(),
                    |i| self.norm_v[pos[i] as usize],
                    &mut self.others,
                );
                for (&q, &others) in pos.iter().zip(others.iter()) {
                    let entry = &m.normsys[self.norm_from[q as usize] as usize];
                    let d = entry.factor(p[entry.par as usize]).1;
                    grad[entry.par as usize] += w * suffix * others * d;
                }
                // Out of the per-parameter sums below (0 · ∞ would be NaN there).
                for &q in pos {
                    self.norm_r[q as usize] = 0.0;
                }
            }
        }
        // Single bin factors and normsys: one sum per parameter over its (sorted, contiguous)
        // entries; no scattered read-modify-writes of a parameter shared by many samples.
        for &(par, start, end) in &self.bf_groups {
            let (s0, s1) = (start as usize, end as usize);
            grad[par as usize] += self.bf_sbs.at(s0..s1).sum(&self.bf_t);
        }
        for &(par, start, end) in &self.norm_groups {
            let (s0, s1) = (start as usize, end as usize);
            grad[par as usize] += self
                .norm_sample
                .at(s0..s1)
                .weighted_sum::<M>(&self.norm_r[s0..s1], &self.sample_wf);
        }
    }
}

/// A normsys position that holds no entry (padding of a parameter's group).
const NO_ENTRY: u32 = u32::MAX;

/// Writes sample `s`'s blocked additive histosys coefficients (see `hs_coef`) into `out`, each
/// bin's scaled by `scale[sample-bin]`; nothing for multiplicative codes (read from the model).
fn fill_histosys_block(model: &Model, s: usize, scale: &[f64], out: &mut [f64]) {
    if model.settings.histosys.is_multiplicative() {
        return;
    }
    let smp = &model.samples[s];
    let entries = &model.histosys[smp.histosys.0 as usize..smp.histosys.1 as usize];
    let (nb, len) = (smp.n_bins, row_len(entries.len()));
    for (e, entry) in entries.iter().enumerate() {
        for b in 0..nb {
            let c = model.histosys_coef[entry.coef_start as usize + b];
            let f = scale[smp.sb_start + b];
            for k in 0..4 {
                let half = if k < 2 { 0 } else { nb * len };
                let col = 2 * e + k % 2;
                out[half + ((col / 4) * nb + b) * 4 + col % 4] = c[k] * f;
            }
        }
    }
}

/// Row length of a sample's blocked histosys coefficients with `ne` entries: the 2·ne
/// interleaved values rounded up to whole 4-wide vectors.
fn row_len(ne: usize) -> usize {
    (2 * ne).next_multiple_of(4)
}

#[inline]
fn mult_row(code: InterpCode, c: &[f64; 4], poly: &[f64; 6], a: f64) -> (f64, f64) {
    let c8 = [
        c[1], c[2], poly[0], poly[1], poly[2], poly[3], poly[4], poly[5],
    ];
    multiplicative_value(code, &c8, a)
}

impl Evaluator for CpuEvaluator {
    fn space(&self) -> &ParameterSpace {
        &self.space
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

    fn asimov(&mut self, params: &[f64]) -> Result<Dataset> {
        let mut lam = vec![0.0; self.model.n_main];
        self.expected_main(params, &mut lam)?;
        crate::histfactory::asimov(&self.model, lam, params)
    }

    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> Result<Vec<Dataset>> {
        let mut lam = vec![0.0; self.model.n_main];
        self.expected_main(params, &mut lam)?;
        crate::histfactory::toys(&self.model, &lam, params, seed, indices)
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
/// signal histogram), for every sample: see [`crate::yields::input_sample`] for what follows the
/// input; histosys deltas are rescaled per bin here when held relative.
impl crate::YieldEvaluator for CpuEvaluator {
    fn check_inputs(&self, inputs: &[usize]) -> Result<()> {
        crate::yields::check_inputs(&self.model, inputs)
    }

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
        if smp.histosys.1 > smp.histosys.0 {
            let relative = m.settings.yield_variations == YieldVariations::Relative;
            for (k, &y) in yields.iter().enumerate() {
                let nominal = m.nominal[smp.sb_start + k];
                self.hs_scale[smp.sb_start + k] = if relative && nominal != 0.0 {
                    y / nominal
                } else {
                    1.0
                };
            }
            let out = &mut self.hs_coef[self.hs_offset[sample]..];
            fill_histosys_block(&m, sample, &self.hs_scale, out);
        }
        Ok(())
    }

    fn reset_yields(&mut self) {
        self.nominal.copy_from_slice(&self.model.nominal);
        let m = self.model.clone();
        for (s, smp) in m.samples.iter().enumerate() {
            let scale = &mut self.hs_scale[smp.sb_start..smp.sb_start + smp.n_bins];
            if scale.iter().any(|&f| f != 1.0) {
                scale.fill(1.0);
                fill_histosys_block(
                    &m,
                    s,
                    &self.hs_scale,
                    &mut self.hs_coef[self.hs_offset[s]..],
                );
            }
        }
    }
}

impl CpuEvaluator {
    /// Per sample-bin of the input `samples` (1 elsewhere): ∂(nominal + Δ)/∂y at `p`. Under
    /// relative variations a bin's deltas are y·Δ₀(p)/nominal₀, so the slope is 1 + Δ₀/nominal₀;
    /// under absolute ones (and where nominal₀ is zero) it is 1.
    fn base_slopes(&self, samples: &[usize], p: &[f64]) -> Vec<f64> {
        let m = &*self.model;
        let mut slope = vec![1.0; m.nominal.len()];
        if m.settings.yield_variations != YieldVariations::Relative {
            return slope;
        }
        for &s in samples {
            let smp = &m.samples[s];
            for e in &m.histosys[smp.histosys.0 as usize..smp.histosys.1 as usize] {
                let a = p[e.par as usize];
                let additive = (!m.settings.histosys.is_multiplicative())
                    .then(|| additive_weights(m.settings.histosys, a).0);
                for b in 0..smp.n_bins {
                    let (sb, r) = (smp.sb_start + b, e.coef_start as usize + b);
                    let nominal = m.nominal[sb];
                    if nominal == 0.0 {
                        continue;
                    }
                    let c = &m.histosys_coef[r];
                    let delta = match additive {
                        Some(w) => (w[0] * c[0] + w[1] * c[1]) + (w[2] * c[2] + w[3] * c[3]),
                        None => c[0] * (mult_row(e.code, c, &m.histosys_poly[r], a).0 - 1.0),
                    };
                    slope[sb] += delta / nominal;
                }
            }
        }
        slope
    }

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
    fn inputs_asimov(&mut self, at: &[f64]) -> Result<Dataset> {
        let model = self.model.clone();
        let full = crate::expected_data(self, &model, at)?;
        Dataset::new(&model, &full)
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
            let slope = self.base_slopes(samples, params);
            self.add_per_input_bin(samples, &mut out, |b, sb, f| {
                let dl = if finite { self.dlam[b] } else { f64::NAN };
                c * (dl * self.binfac[sb] * f * slope[sb])
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
            let slope = self.base_slopes(samples, a.at);
            let (lf, lc) = (&rates[0], &rates[1]);
            self.add_per_input_bin(samples, &mut out, |b, sb, f| {
                if lf[b] > 0.0 && lc[b] > 0.0 {
                    a.coef * (lf[b] / lc[b]).ln() * (self.binfac[sb] * f * slope[sb])
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
    fn space(&self) -> &ParameterSpace {
        &self.space
    }

    fn asimov(&mut self, params: &[f64]) -> Result<Dataset> {
        Evaluator::asimov(self, params)
    }

    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> Result<Vec<Dataset>> {
        Evaluator::toys(self, params, seed, indices)
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

/// For each of the `k` values, the product of all the others, in `buf`: a prefix product forward and
/// a suffix product backward, O(k) and exact where some value is zero (dividing the whole
/// product would give 0/0). The product over the others of each, in turn, is O(k²): 577
/// shapefactors on the bins of one sample made one gradient take half a second
/// (structured-timeout-f4b5e57e).
fn products_of_others(k: usize, value: impl Fn(usize) -> f64, buf: &mut Vec<f64>) -> &[f64] {
    buf.clear();
    let mut prefix = 1.0;
    for i in 0..k {
        buf.push(prefix);
        prefix *= value(i);
    }
    let mut suffix = 1.0;
    for i in (0..k).rev() {
        buf[i] *= suffix;
        suffix *= value(i);
    }
    buf
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

    /// The product of the others for each value, zeros included, as the direct O(k²) product.
    #[test]
    fn products_of_others_match_the_direct_products() {
        let mut buf = Vec::new();
        for v in [
            vec![],
            vec![3.0],
            vec![2.0, 0.0, 5.0],
            vec![0.0, 0.0, 1.5, 2.0],
            vec![0.5, 2.0, 4.0, 8.0, 0.25],
        ] {
            let got = products_of_others(v.len(), |i| v[i], &mut buf).to_vec();
            for (i, g) in got.iter().enumerate() {
                let want: f64 = (0..v.len()).filter(|&j| j != i).map(|j| v[j]).product();
                assert_eq!(*g, want, "{v:?} [{i}]");
            }
        }
    }
}
