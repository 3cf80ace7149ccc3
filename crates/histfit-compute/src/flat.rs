//! The compiled HistFactory model as GPU kernels read it: flat integer and real tables built
//! once on the host from [`Model`] and uploaded once per device session. Every GPU backend
//! (CUDA f64, wgpu f32) walks these same tables, so they agree on the model by construction.
//!
//! Besides the model's own tables this adds what a thread-per-item GPU pass needs: the sample
//! of every sample-bin and modifier entry, the sample-bins of every main bin, and per parameter
//! the list of gradient "term" slots it sums (so the reverse pass needs no atomics and its result
//! does not depend on scheduling).

use histfit_model::{Constraint, Model};

/// Constraint kinds of the `aux_kind` table (`histfit.cu` gets them as compiler definitions, the
/// WGSL shader as constants written into its source).
pub const KIND_NONE: i32 = 0;
pub const KIND_GAUSS: i32 = 1;
pub const KIND_POISSON: i32 = 2;

/// Host copy of every table (the same names as the `Tables` struct of the kernel).
#[derive(Debug, Clone, Default)]
pub struct HostTables {
    pub dims: [i32; 10],
    pub smp: Vec<i32>,
    pub nominal: Vec<f64>,
    pub sb_sample: Vec<i32>,
    pub sb_bin: Vec<i32>,
    pub bf_off: Vec<i32>,
    pub bf_par: Vec<i32>,
    pub sf_par: Vec<i32>,
    pub sf_sample: Vec<i32>,
    pub ns_par: Vec<i32>,
    pub ns_code: Vec<i32>,
    pub ns_sample: Vec<i32>,
    pub ns_coef: Vec<f64>,
    pub hs_par: Vec<i32>,
    pub hs_code: Vec<i32>,
    pub hs_sample: Vec<i32>,
    pub hs_row: Vec<i32>,
    pub hs_coef: Vec<f64>,
    pub hs_poly: Vec<f64>,
    pub bin_off: Vec<i32>,
    pub bin_sb: Vec<i32>,
    pub aux_par: Vec<i32>,
    pub aux_kind: Vec<i32>,
    pub aux_const: Vec<f64>,
    pub term_off: Vec<i32>,
    pub term_idx: Vec<i32>,
    /// Per sample-bin: the workspace's nominal yield where the sample's histosys deltas follow
    /// input yields (`YieldVariations::Relative`: scaled by y/nominal₀), 0 elsewhere — and 0
    /// everywhere in the tables of evaluators whose yields are never inputs
    /// ([`HostTables::for_input_yields`] fills it), which then pay no division for it.
    pub nominal0: Vec<f64>,
    /// Doubles of scratch one problem needs.
    pub scratch_len: usize,
}

/// Whether `m`'s tables fit the 32-bit indices of the device kernels: every count the tables
/// index (parameters, bins, sample-bins, gradient term slots, histosys coefficients) below 2³¹.
/// Checked before [`HostTables::new`], so that a model too large for a GPU is one clear error
/// and never the panic of [`i`].
pub fn check(m: &Model) -> Result<(), String> {
    let n_terms = m.n_aux()
        + m.normsys.len()
        + m.scale_factors.len()
        + m.histosys.len()
        + m.bin_factors.len();
    // The widest rows: six polynomial coefficients per histosys row (`hs_poly + 6 r`).
    let coefs = 6 * m.histosys_coef.len().max(m.histosys_poly.len());
    for (what, n) in [
        ("parameters", m.n_params()),
        ("bins", m.n_main),
        ("sample-bins", m.nominal.len()),
        ("gradient terms", n_terms),
        ("histosys coefficients", coefs),
    ] {
        if i32::try_from(n).is_err() {
            return Err(format!(
                "{n} {what}: the GPU kernels index their tables with 32-bit integers (at most {})",
                i32::MAX
            ));
        }
    }
    Ok(())
}

/// An index into a device table; [`check`] has made sure it fits.
fn i(v: impl TryInto<i32>) -> i32 {
    v.try_into()
        .unwrap_or_else(|_| panic!("model table index exceeds i32 (flat::check not called)"))
}

impl HostTables {
    /// The tables of a model whose yields will be inputs (see `nominal0`).
    pub fn for_input_yields(m: &Model) -> HostTables {
        let mut t = HostTables::new(m);
        if m.settings.yield_variations == histfit_model::YieldVariations::Relative {
            for smp in m.samples.iter().filter(|s| s.histosys.1 > s.histosys.0) {
                let bins = smp.sb_start..smp.sb_start + smp.n_bins;
                t.nominal0[bins.clone()].copy_from_slice(&m.nominal[bins]);
            }
        }
        t
    }

    pub fn new(m: &Model) -> HostTables {
        let n_sb = m.nominal.len();
        let (n_ns, n_sf, n_hs, n_bf) = (
            m.normsys.len(),
            m.scale_factors.len(),
            m.histosys.len(),
            m.bin_factors.len(),
        );
        let n_aux = m.n_aux();
        let n_terms = n_aux + n_ns + n_sf + n_hs + n_bf;
        let mut t = HostTables {
            dims: [
                i(m.n_params()),
                i(m.n_main),
                i(n_aux),
                i(m.samples.len()),
                i(n_sb),
                i(n_ns),
                i(n_sf),
                i(n_hs),
                i(n_bf),
                i(n_terms),
            ],
            nominal: m.nominal.clone(),
            nominal0: vec![0.0; n_sb],
            sb_sample: vec![0; n_sb],
            sb_bin: m.sb_bin.iter().map(|&b| i(b)).collect(),
            bf_off: m.bin_factor_offsets.iter().map(|&o| i(o)).collect(),
            bf_par: m.bin_factors.iter().map(|&p| i(p)).collect(),
            sf_par: m.scale_factors.iter().map(|&p| i(p)).collect(),
            sf_sample: vec![0; n_sf],
            ns_par: m.normsys.iter().map(|e| i(e.par)).collect(),
            ns_code: m.normsys.iter().map(|e| e.code.id()).collect(),
            ns_sample: vec![0; n_ns],
            ns_coef: m.normsys.iter().flat_map(|e| e.coef).collect(),
            hs_par: m.histosys.iter().map(|e| i(e.par)).collect(),
            hs_code: m.histosys.iter().map(|e| e.code.id()).collect(),
            hs_sample: vec![0; n_hs],
            hs_row: m.histosys.iter().map(|e| i(e.coef_start)).collect(),
            hs_coef: m.histosys_coef.iter().flatten().copied().collect(),
            hs_poly: m.histosys_poly.iter().flatten().copied().collect(),
            aux_par: m.aux_params.iter().map(|&p| i(p)).collect(),
            ..Default::default()
        };
        for (s, smp) in m.samples.iter().enumerate() {
            t.smp.extend([
                i(smp.bin_start),
                i(smp.n_bins),
                i(smp.sb_start),
                i(smp.scale_factors.0),
                i(smp.scale_factors.1),
                i(smp.normsys.0),
                i(smp.normsys.1),
                i(smp.histosys.0),
                i(smp.histosys.1),
            ]);
            t.sb_sample[smp.sb_start..smp.sb_start + smp.n_bins].fill(i(s));
            for j in smp.scale_factors.0..smp.scale_factors.1 {
                t.sf_sample[j as usize] = i(s);
            }
            for e in smp.normsys.0..smp.normsys.1 {
                t.ns_sample[e as usize] = i(s);
            }
            for e in smp.histosys.0..smp.histosys.1 {
                t.hs_sample[e as usize] = i(s);
            }
        }
        // Sample-bins of each main bin, in sample-bin order.
        let mut per_bin: Vec<Vec<i32>> = vec![Vec::new(); m.n_main];
        for (sb, &b) in m.sb_bin.iter().enumerate() {
            per_bin[b as usize].push(i(sb));
        }
        t.bin_off.push(0);
        for list in per_bin {
            t.bin_sb.extend(list);
            t.bin_off.push(i(t.bin_sb.len()));
        }
        for &p in &m.aux_params {
            match m.parameters[p].constraint {
                Constraint::Gauss { sigma } => {
                    t.aux_kind.push(KIND_GAUSS);
                    t.aux_const.push(sigma);
                }
                Constraint::Poisson { tau } => {
                    t.aux_kind.push(KIND_POISSON);
                    t.aux_const.push(tau);
                }
                Constraint::None => {
                    t.aux_kind.push(KIND_NONE);
                    t.aux_const.push(0.0);
                }
            }
        }
        // Gradient term slots: [aux][normsys][scale factors][histosys][bin factors].
        let mut owner: Vec<i32> = Vec::with_capacity(n_terms);
        owner.extend(t.aux_par.iter());
        owner.extend(t.ns_par.iter());
        owner.extend(t.sf_par.iter());
        owner.extend(t.hs_par.iter());
        owner.extend(t.bf_par.iter());
        let mut per_par: Vec<Vec<i32>> = vec![Vec::new(); m.n_params()];
        for (slot, &p) in owner.iter().enumerate() {
            per_par[p as usize].push(i(slot));
        }
        t.term_off.push(0);
        for list in per_par {
            t.term_idx.extend(list);
            t.term_off.push(i(t.term_idx.len()));
        }
        let s = m.samples.len();
        t.scratch_len =
            m.n_params() + 2 * n_ns + s + 3 * n_sb + 2 * m.n_main + s + n_terms + m.n_main + n_aux;
        t
    }
}
