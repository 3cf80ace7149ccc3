//! The CPU f64 evaluator: one pass over the sample tables for the expected rates, a second pass
//! for the gradient by reverse accumulation (∂NLL/∂λ_b pushed back through each modifier).
//! Evaluation is single-threaded and in a fixed order, so results are bit-identical however many
//! evaluators run in parallel; parallelism lives one level up (many fits at once).

use crate::{ComputeError, Dataset, Evaluator, Result};
use histfit_model::interp::{additive_weights, multiplicative_value};
use histfit_model::{Constraint, Model};
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
    /// Scratch for per-sample factor values (value, derivative, parameter).
    factors: Vec<(f64, f64, u32)>,
    prefix: Vec<f64>,
    /// Per normsys entry: κ and dκ/dα from the forward pass.
    kappa: Vec<(f64, f64)>,
    /// Parameters driving histosys entries, and per parameter the additive weights w(α) and
    /// dw/dα (computed once per evaluation, shared by every entry and bin of that parameter).
    histo_pars: Vec<u32>,
    histo_w: Vec<[f64; 8]>,
    /// Additive histosys coefficients split in two halves: inside |α| ≤ 1 (codes 4p, 2) and for
    /// code 0 only the first half has a non-zero weight, so the hot loop reads 16 bytes a row.
    coef_lo: Vec<[f64; 2]>,
    coef_hi: Vec<[f64; 2]>,
    /// Per bin of the current sample: ∂NLL/∂(nominal + Δ).
    gbase: Vec<f64>,
}

impl CpuEvaluator {
    pub fn new(model: Arc<Model>) -> CpuEvaluator {
        let n_sb = model.nominal.len();
        CpuEvaluator {
            base: vec![0.0; n_sb],
            binfac: vec![0.0; n_sb],
            sample_fac: vec![0.0; model.samples.len()],
            lam: vec![0.0; model.n_main],
            dlam: vec![0.0; model.n_main],
            factors: Vec::new(),
            prefix: Vec::new(),
            kappa: vec![(1.0, 0.0); model.normsys.len()],
            histo_pars: {
                let mut v: Vec<u32> = model.histosys.iter().map(|e| e.par).collect();
                v.sort_unstable();
                v.dedup();
                v
            },
            histo_w: vec![[0.0; 8]; model.n_params()],
            coef_lo: model.histosys_coef.iter().map(|c| [c[0], c[1]]).collect(),
            coef_hi: model.histosys_coef.iter().map(|c| [c[2], c[3]]).collect(),
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

    /// Forward pass: fills `base`, `binfac`, `sample_fac` and `lam`.
    fn forward(&mut self, p: &[f64]) {
        let m = &*self.model;
        self.lam.iter_mut().for_each(|x| *x = 0.0);
        let code = m.settings.histosys;
        if !code.is_multiplicative() {
            for &par in &self.histo_pars {
                let (w, dw) = additive_weights(code, p[par as usize]);
                self.histo_w[par as usize] = [w[0], w[1], w[2], w[3], dw[0], dw[1], dw[2], dw[3]];
            }
        }
        for (e, k) in m.normsys.iter().zip(self.kappa.iter_mut()) {
            *k = e.factor(p[e.par as usize]);
        }
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
            let sb = smp.sb_start..smp.sb_start + smp.n_bins;
            let base = &mut self.base[sb.clone()];
            base.copy_from_slice(&m.nominal[sb.clone()]);
            for e in &m.histosys[smp.histosys.0 as usize..smp.histosys.1 as usize] {
                let a = p[e.par as usize];
                let rows = e.coef_start as usize..e.coef_start as usize + smp.n_bins;
                if e.code.is_multiplicative() {
                    for (b, r) in base.iter_mut().zip(rows) {
                        let c = &m.histosys_coef[r];
                        let k = mult_row(e.code, c, &m.histosys_poly[r], a).0;
                        *b += c[0] * (k - 1.0);
                    }
                } else {
                    let w = &self.histo_w[e.par as usize];
                    for (b, c) in base.iter_mut().zip(&self.coef_lo[rows.clone()]) {
                        *b += w[0] * c[0] + w[1] * c[1];
                    }
                    if w[2] != 0.0 || w[3] != 0.0 {
                        for (b, c) in base.iter_mut().zip(&self.coef_hi[rows]) {
                            *b += w[2] * c[0] + w[3] * c[1];
                        }
                    }
                }
            }
            for (k, sbi) in sb.enumerate() {
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

    /// −ln L from `lam` and the constraints, without the data-only constant.
    fn value(&self, p: &[f64], data: &Dataset) -> f64 {
        let m = &*self.model;
        let mut nll = 0.0;
        for (&l, &n) in self.lam.iter().zip(&data.main) {
            if l < 0.0 || (l == 0.0 && n > 0.0) || l.is_nan() {
                return f64::INFINITY;
            }
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
        for (s, smp) in m.samples.iter().enumerate() {
            let f = self.sample_fac[s];
            // ∂NLL/∂(sample factor product): Σ_b dλ_b · base · binfac.
            let mut w_sample = 0.0;
            for k in 0..smp.n_bins {
                let sbi = smp.sb_start + k;
                let dl = self.dlam[smp.bin_start + k];
                let base = self.base[sbi];
                let bf = self.binfac[sbi];
                w_sample += dl * base * bf;
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
            // Histosys: ∂NLL/∂base_b = dλ_b · binfac_b · f (f applied once per entry below).
            for k in 0..smp.n_bins {
                self.gbase[k] = self.dlam[smp.bin_start + k] * self.binfac[smp.sb_start + k];
            }
            for e in &m.histosys[smp.histosys.0 as usize..smp.histosys.1 as usize] {
                let a = p[e.par as usize];
                let rows = e.coef_start as usize..e.coef_start as usize + smp.n_bins;
                let mut g = 0.0;
                if e.code.is_multiplicative() {
                    for (k, r) in rows.enumerate() {
                        let sbi = smp.sb_start + k;
                        let c = &m.histosys_coef[r];
                        let dk = mult_row(e.code, c, &m.histosys_poly[r], a).1;
                        g += self.dlam[smp.bin_start + k] * self.binfac[sbi] * c[0] * dk;
                    }
                } else {
                    // Σ_b G_b (dw·c_b) = dw · Σ_b G_b c_b
                    let w = &self.histo_w[e.par as usize];
                    let gbase = &self.gbase[..smp.n_bins];
                    let (mut a0, mut a1) = (0.0, 0.0);
                    for (gb, c) in gbase.iter().zip(&self.coef_lo[rows.clone()]) {
                        a0 += gb * c[0];
                        a1 += gb * c[1];
                    }
                    g = w[4] * a0 + w[5] * a1;
                    if w[6] != 0.0 || w[7] != 0.0 {
                        let (mut a2, mut a3) = (0.0, 0.0);
                        for (gb, c) in gbase.iter().zip(&self.coef_hi[rows]) {
                            a2 += gb * c[0];
                            a3 += gb * c[1];
                        }
                        g += w[6] * a2 + w[7] * a3;
                    }
                }
                grad[e.par as usize] += g * f;
            }
            // Sample factors: product rule with prefix/suffix products (robust to zero factors).
            self.factors.clear();
            for &par in &m.scale_factors[smp.scale_factors.0 as usize..smp.scale_factors.1 as usize]
            {
                self.factors.push((p[par as usize], 1.0, par));
            }
            let range = smp.normsys.0 as usize..smp.normsys.1 as usize;
            for (e, &(v, d)) in m.normsys[range.clone()].iter().zip(&self.kappa[range]) {
                self.factors.push((v, d, e.par));
            }
            let nf = self.factors.len();
            self.prefix.clear();
            let mut acc = 1.0;
            for &(v, _, _) in &self.factors {
                self.prefix.push(acc);
                acc *= v;
            }
            let mut suffix = 1.0;
            for i in (0..nf).rev() {
                let (v, d, par) = self.factors[i];
                grad[par as usize] += w_sample * self.prefix[i] * suffix * d;
                suffix *= v;
            }
        }
    }
}

#[inline]
fn mult_row(code: histfit_model::InterpCode, c: &[f64; 4], poly: &[f64; 6], a: f64) -> (f64, f64) {
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
