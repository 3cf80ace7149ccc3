//! [`WgpuBatch`]: batched −ln L and gradient of a HistFactory model on a wgpu adapter.
//!
//! A [`Session`] (device, pipeline, model tables) is made once per model, adapter and
//! precision and shared by every clone; each clone has its own launch buffers. A call packs the
//! parameter vectors and the distinct datasets as double-float pairs (hi = the f32 nearest the
//! f64 value, lo = the f32 nearest the rest), dispatches one workgroup per problem in launches
//! of at most [`Session::chunk`] problems, and reads back per problem either the finished value
//! and gradient or, for [`Precision::HostReduced`], the per-bin terms and gradient term slots,
//! which are summed here in f64. Data generation (Asimov data, toys: the CPU's Philox bits) and
//! the one-off fits around an ensemble run on the host in f64.

use crate::adapter::{as_bytes, staging_buffer, storage_buffer as storage, Backend, Gpu};
use crate::{Precision, Result};
use histfit_compute::flat::{HostTables, KIND_GAUSS, KIND_NONE, KIND_POISSON};
use histfit_compute::{
    check_batch, BatchEvaluator, ComputeError, CpuEvaluator, Dataset, Evaluator, ParameterSpace,
};
use histfit_model::Model;
use std::sync::{Arc, Mutex};

const SHADER: &str = include_str!("histfit.wgsl");
const DOUBLE_FLOAT: &str = include_str!("df.wgsl");

/// Problems per launch at most.
pub const MAX_LAUNCH: usize = 4096;

/// The constants the kernel shares with Rust, written as WGSL declarations ahead of its source.
/// Every problem's empty bins continue on [`histfit_compute::EMPTY_BIN_WALL`]: a dataset's own
/// `empty_bin_wall` is not read here (the wider walls of a fit's first descents, see
/// `SOFT_EMPTY_BIN_WALLS`, then evaluate the same −ln L, and those descents only restart
/// L-BFGS-B on this evaluator; the minimum is the one the wall defines either way).
fn shared_header() -> String {
    let mut h = String::new();
    for c in histfit_model::InterpCode::ALL {
        h += &format!("const {}: i32 = {};\n", c.macro_name(), c.id());
    }
    for (name, v) in [
        ("KIND_NONE", KIND_NONE),
        ("KIND_GAUSS", KIND_GAUSS),
        ("KIND_POISSON", KIND_POISSON),
    ] {
        h += &format!("const {name}: i32 = {v};\n");
    }
    h += &format!(
        "const EMPTY_BIN_WALL: f32 = {:e};\n",
        histfit_compute::EMPTY_BIN_WALL
    );
    h
}

/// An f64 as a double-float pair (hi, lo) of f32.
fn split(v: f64, out: &mut Vec<f32>) {
    let hi = v as f32;
    out.push(hi);
    out.push(if hi.is_finite() {
        (v - hi as f64) as f32
    } else {
        0.0
    });
}

/// A parameter as a double-float pair: as [`split`], except that a nonzero value too small for a
/// normal f32 becomes ±`f32::MIN_POSITIVE`. The fit probes the two sides of a kink at α = ±1e-150,
/// where the model's value is that at 0 to the last bit and its slope the side's; in f32 that is
/// ±0 (or a subnormal a GPU may flush), which the kernel takes for the kink itself and answers
/// with the mean of the two slopes — so kinks were neither certified nor their other side
/// searched on this path (tHu, pyhf setting: a minimum 6.7e-6 higher, 1.2e-2 away in one
/// parameter). ±1.2e-38 keeps the side and moves no value an f32 can resolve.
fn split_param(v: f64, out: &mut Vec<f32>) {
    if v != 0.0 && ((v as f32).abs() < f32::MIN_POSITIVE) {
        out.push(f32::MIN_POSITIVE.copysign(v as f32));
        out.push(0.0);
    } else {
        split(v, out);
    }
}

/// Integer tables concatenated, with each table's offset.
fn pack_ints(t: &HostTables) -> (Vec<i32>, Vec<(&'static str, u32)>) {
    let tables: [(&str, &[i32]); 20] = [
        ("O_SMP", &t.smp),
        ("O_SB_SAMPLE", &t.sb_sample),
        ("O_SB_BIN", &t.sb_bin),
        ("O_BF_OFF", &t.bf_off),
        ("O_BF_PAR", &t.bf_par),
        ("O_SF_PAR", &t.sf_par),
        ("O_SF_SAMPLE", &t.sf_sample),
        ("O_NS_PAR", &t.ns_par),
        ("O_NS_CODE", &t.ns_code),
        ("O_NS_SAMPLE", &t.ns_sample),
        ("O_HS_PAR", &t.hs_par),
        ("O_HS_CODE", &t.hs_code),
        ("O_HS_SAMPLE", &t.hs_sample),
        ("O_HS_ROW", &t.hs_row),
        ("O_BIN_OFF", &t.bin_off),
        ("O_BIN_SB", &t.bin_sb),
        ("O_AUX_PAR", &t.aux_par),
        ("O_AUX_KIND", &t.aux_kind),
        ("O_TERM_OFF", &t.term_off),
        ("O_TERM_IDX", &t.term_idx),
    ];
    let mut all = Vec::new();
    let mut offsets = Vec::new();
    for (name, v) in tables {
        offsets.push((name, all.len() as u32));
        all.extend_from_slice(v);
    }
    offsets.push(("O_ZERO", all.len() as u32));
    all.push(0); // the kernel's opaque zero (and never empty)
    (all, offsets)
}

/// Real tables concatenated as double-float pairs, with each table's offset (in pairs).
fn pack_reals(t: &HostTables) -> (Vec<f32>, Vec<(&'static str, u32)>) {
    let tables: [(&str, &[f64]); 5] = [
        ("O_NOMINAL", &t.nominal),
        ("O_NS_COEF", &t.ns_coef),
        ("O_HS_COEF", &t.hs_coef),
        ("O_HS_POLY", &t.hs_poly),
        ("O_AUX_CONST", &t.aux_const),
    ];
    let mut all = Vec::new();
    let mut offsets = Vec::new();
    for (name, v) in tables {
        offsets.push((name, (all.len() / 2) as u32));
        for &x in v {
            split(x, &mut all);
        }
    }
    split(0.0, &mut all);
    (all, offsets)
}

/// The strategy a session runs, whether its double-float products use the fused fma, and a
/// warning where it is not the one asked for, from what was asked (`None`: the default) and the
/// probe of the adapter's compiler (`Err`: double-float is not exact there, with the errors).
/// The default falls back to compensated sums with a warning; double-float asked for by name on
/// such an adapter is an error.
fn choose_precision(
    asked: Option<Precision>,
    probe: std::result::Result<bool, String>,
    adapter: &str,
) -> std::result::Result<(Precision, bool, Option<String>), String> {
    match (asked, probe) {
        (Some(p), _) if p != Precision::DoubleFloat => Ok((p, true, None)),
        (_, Ok(fused)) => Ok((Precision::DoubleFloat, fused, None)),
        (None, Err(errors)) => Ok((
            Precision::Compensated,
            true,
            Some(format!(
                "wgpu adapter {adapter}: its shader compiler does not keep double-float \
                 arithmetic exact (errors {errors}); using compensated f32 sums, whose −ln L is \
                 good to about 1e-3 and gradient to 1e-2 (double-float: 1e-4 and 1e-3)"
            )),
        )),
        (Some(_), Err(errors)) => Err(format!(
            "its shader compiler does not keep double-float arithmetic exact (errors {errors}); \
             name another precision after the device (+compensated or +host-reduced, as in \
             `--gpu wgpu+compensated` or Python `device=\"wgpu+compensated\"`) or leave it to \
             the default, which falls back to compensated sums"
        )),
    }
}

/// Everything one model needs on one adapter, shared by all clones of a [`WgpuBatch`].
#[derive(Debug)]
pub struct Session {
    pub gpu: Gpu,
    pub precision: Precision,
    /// Why the precision is not the one asked for (the default's fallback), to show the user.
    pub warning: Option<String>,
    pub model: Arc<Model>,
    pub space: ParameterSpace,
    tables: HostTables,
    pipeline: wgpu::ComputePipeline,
    ints: wgpu::Buffer,
    reals: wgpu::Buffer,
    /// Where each real table starts in `reals`, in double-float pairs.
    real_offsets: Vec<(&'static str, u32)>,
    /// Samples whose rows hold input yields ([`Session::set_yields`]), to restore on reset.
    dirty: Mutex<Vec<usize>>,
    /// Scratch slots (double-float pairs) and output slots (f32) per problem.
    scratch_len: usize,
    out_len: usize,
    /// Problems per launch (bounded by the adapter's largest storage binding).
    pub chunk: usize,
    /// The host evaluator: data generation and the one-off fits around an ensemble in f64.
    host: Mutex<CpuEvaluator>,
}

impl Session {
    /// Opens the adapter, compiles the kernel for `model` and uploads the model's tables.
    /// `precision`: `None` for the default, double-float, which falls back to compensated f32
    /// sums with a [warning](Session::warning) where the adapter's compiler does not keep
    /// double-float exact; asked for by name, such an adapter is an error.
    pub fn new(
        model: Arc<Model>,
        backend: Backend,
        index: Option<usize>,
        precision: Option<Precision>,
    ) -> Result<Arc<Session>> {
        let gpu = Gpu::open(backend, index)?;
        histfit_compute::flat::check(&model).map_err(|rule| crate::WgpuError::Limits {
            adapter: gpu.info.name.clone(),
            rule,
        })?;
        // Double-float products: with the adapter's fma where it is fused, else split.
        let probe = match precision {
            None | Some(Precision::DoubleFloat) => crate::probe::fused_fma(&gpu)?,
            Some(_) => Ok(true),
        };
        let (precision, fused, warning) =
            choose_precision(precision, probe, &gpu.info.name).map_err(|e| gpu.error(e))?;
        let tables = HostTables::new(&model);
        let (ints, int_offsets) = pack_ints(&tables);
        let (reals, real_offsets) = pack_reals(&tables);
        let [n_params, n_main, n_aux, n_samples, n_sb, n_ns, n_sf, n_hs, _, n_terms] =
            tables.dims.map(|d| d as usize);
        let scratch_len = tables.scratch_len;
        let out_len = 1 + (n_main + n_aux + n_terms).max(2 + 2 * n_params);
        let max_binding = gpu.limits.max_storage_buffer_binding_size as usize;
        let per_problem = (scratch_len * 8).max(out_len * 4).max(n_params * 8);
        let chunk = MAX_LAUNCH
            .min(max_binding / per_problem.max(1))
            .min(gpu.limits.max_compute_workgroups_per_dimension as usize);
        if chunk == 0 || ints.len() * 4 > max_binding || reals.len() * 4 > max_binding {
            return Err(crate::WgpuError::Limits {
                adapter: gpu.info.name.clone(),
                rule: format!(
                    "the model needs storage bindings of {} bytes, the adapter allows {max_binding}",
                    per_problem.max(ints.len() * 4).max(reals.len() * 4)
                ),
            });
        }
        let mut constants: Vec<(String, f64)> = vec![
            ("STRATEGY".into(), precision.code() as f64),
            ("DF_FMA".into(), if fused { 1.0 } else { 0.0 }),
            ("SCRATCH".into(), scratch_len as f64),
            ("OUT_LEN".into(), out_len as f64),
        ];
        for (name, v) in [
            ("N_PARAMS", n_params),
            ("N_MAIN", n_main),
            ("N_AUX", n_aux),
            ("N_SAMPLES", n_samples),
            ("N_SB", n_sb),
            ("N_NS", n_ns),
            ("N_SF", n_sf),
            ("N_HS", n_hs),
            ("N_TERMS", n_terms),
        ] {
            constants.push((name.into(), v as f64));
        }
        for (name, o) in int_offsets.iter().chain(&real_offsets) {
            constants.push(((*name).into(), *o as f64));
        }
        let device = &gpu.device;
        let source = format!("{}\n{DOUBLE_FLOAT}\n{SHADER}", shared_header());
        let (pipeline, ints_buf, reals_buf) = gpu.checked("compiling the kernel", || {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("histfit.wgsl"),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            let constants: Vec<(&str, f64)> =
                constants.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("nll_grad"),
                layout: None,
                module: &module,
                entry_point: Some("nll_grad"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            });
            let ints_buf = storage(device, "model ints", (ints.len() * 4) as u64);
            gpu.queue.write_buffer(&ints_buf, 0, as_bytes(&ints));
            let reals_buf = storage(device, "model reals", (reals.len() * 4) as u64);
            gpu.queue.write_buffer(&reals_buf, 0, as_bytes(&reals));
            (pipeline, ints_buf, reals_buf)
        })?;
        Ok(Arc::new(Session {
            space: histfit_compute::histfactory::parameter_space(&model),
            host: Mutex::new(CpuEvaluator::new(model.clone())),
            gpu,
            precision,
            warning,
            model,
            tables,
            pipeline,
            ints: ints_buf,
            reals: reals_buf,
            real_offsets,
            dirty: Mutex::new(Vec::new()),
            scratch_len,
            out_len,
            chunk,
        }))
    }

    pub(crate) fn host(&self) -> std::sync::MutexGuard<'_, CpuEvaluator> {
        self.host.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Byte offset of element `at` of real table `name` in the `reals` buffer.
    fn real_offset(&self, name: &str, at: usize) -> u64 {
        let start = self
            .real_offsets
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, o)| o)
            .expect("a real table of pack_reals");
        (start as u64 + at as u64) * 8
    }

    /// Input yields for `sample` (the differentiable layer): checked and set on the host
    /// evaluator first (the CPU's rules), then written into this session's tables — the
    /// sample's nominal row and its histosys rows, whose deltas the CPU evaluator scales per bin
    /// by y/nominal₀ under relative variations (`hs_scale`): every coefficient of an additive
    /// code, the nominal of a multiplicative one (its up/down ratios stay). Every clone of the
    /// session sees them, so a session taking input yields serves one caller at a time
    /// ([`crate::WgpuYields`] owns its own).
    pub fn set_yields(&self, sample: usize, yields: &[f64]) -> histfit_compute::Result<()> {
        use histfit_compute::YieldEvaluator;
        self.host().set_yields(sample, yields)?;
        self.write_sample(sample, yields);
        let mut dirty = self.dirty.lock().unwrap_or_else(|p| p.into_inner());
        if !dirty.contains(&sample) {
            dirty.push(sample);
        }
        Ok(())
    }

    /// Writes `yields` as `sample`'s nominal row and its histosys rows scaled to them.
    fn write_sample(&self, sample: usize, yields: &[f64]) {
        let m = &*self.model;
        let smp = &m.samples[sample];
        let mut pairs = Vec::with_capacity(2 * yields.len());
        for &y in yields {
            split(y, &mut pairs);
        }
        let queue = &self.gpu.queue;
        queue.write_buffer(
            &self.reals,
            self.real_offset("O_NOMINAL", smp.sb_start),
            as_bytes(&pairs),
        );
        if smp.histosys.1 == smp.histosys.0 {
            return;
        }
        let relative = m.settings.yield_variations == histfit_model::YieldVariations::Relative;
        let multiplicative = m.settings.histosys.is_multiplicative();
        let scale: Vec<f64> = (0..smp.n_bins)
            .map(|b| {
                let nominal = m.nominal[smp.sb_start + b];
                if relative && nominal != 0.0 {
                    yields[b] / nominal
                } else {
                    1.0
                }
            })
            .collect();
        for entry in &m.histosys[smp.histosys.0 as usize..smp.histosys.1 as usize] {
            let row = entry.coef_start as usize;
            pairs.clear();
            for (b, f) in scale.iter().enumerate() {
                for (k, c) in m.histosys_coef[row + b].into_iter().enumerate() {
                    split(
                        if k == 0 || !multiplicative { c * f } else { c },
                        &mut pairs,
                    );
                }
            }
            queue.write_buffer(
                &self.reals,
                self.real_offset("O_HS_COEF", 4 * row),
                as_bytes(&pairs),
            );
        }
    }

    /// Every sample's yields back to the model's, on the host evaluator and in the tables (the
    /// rows of the samples that took input yields).
    pub fn reset_yields(&self) {
        use histfit_compute::YieldEvaluator;
        self.host().reset_yields();
        let m = self.model.clone();
        for s in std::mem::take(&mut *self.dirty.lock().unwrap_or_else(|p| p.into_inner())) {
            let smp = &m.samples[s];
            self.write_sample(s, &m.nominal[smp.sb_start..smp.sb_start + smp.n_bins]);
        }
    }
}

/// A clone's launch buffers, grown as calls need.
#[derive(Debug)]
struct Buffers {
    params: wgpu::Buffer,
    data: wgpu::Buffer,
    index: wgpu::Buffer,
    scratch: wgpu::Buffer,
    outs: wgpu::Buffer,
    staging: wgpu::Buffer,
    /// Capacities: problems (params, index, scratch, outs) and data pairs.
    problems: usize,
    data_pairs: usize,
}

/// The batched evaluator on one wgpu adapter.
#[derive(Debug)]
pub struct WgpuBatch {
    session: Arc<Session>,
    bufs: Option<Buffers>,
}

impl Clone for WgpuBatch {
    /// The same session (device, pipeline, model), its own launch buffers.
    fn clone(&self) -> Self {
        WgpuBatch {
            session: self.session.clone(),
            bufs: None,
        }
    }
}

impl WgpuBatch {
    /// Opens adapter `index` of `backend` (`None`: the first discrete GPU) for `model`, with
    /// `precision` (`None`: the default, as [`Session::new`] says).
    pub fn new(
        model: Arc<Model>,
        backend: Backend,
        index: Option<usize>,
        precision: Option<Precision>,
    ) -> Result<WgpuBatch> {
        Ok(WgpuBatch {
            session: Session::new(model, backend, index, precision)?,
            bufs: None,
        })
    }

    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Grows the launch buffers to hold `problems` problems and `data_pairs` data values.
    fn ensure_buffers(&mut self, problems: usize, data_pairs: usize) {
        let s = &self.session;
        let fits = self
            .bufs
            .as_ref()
            .is_some_and(|b| b.problems >= problems && b.data_pairs >= data_pairs);
        if !fits {
            let (problems, data_pairs) = match &self.bufs {
                Some(b) => (problems.max(b.problems), data_pairs.max(b.data_pairs)),
                None => (problems, data_pairs),
            };
            let d = &s.gpu.device;
            let p = s.model.n_params();
            let outs = (problems * s.out_len * 4) as u64;
            self.bufs = Some(Buffers {
                params: storage(d, "params", (problems * p * 8) as u64),
                data: storage(d, "data", (data_pairs * 8) as u64),
                index: storage(d, "data index", (problems * 4) as u64),
                scratch: storage(d, "scratch", (problems * s.scratch_len * 8) as u64),
                outs: storage(d, "outputs", outs),
                staging: staging_buffer(d, outs),
                problems,
                data_pairs,
            });
        }
    }

    /// One launch of at most `chunk` problems: writes −ln L without the datasets' constants and
    /// the gradients.
    fn launch(
        &mut self,
        params: &[f64],
        data: &[&Dataset],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> Result<()> {
        let s = self.session.clone();
        let (b, n) = (data.len(), s.model.n_params());
        let row_len = s.model.n_main + s.model.n_aux();
        // Distinct datasets (by address: a fit's problems share theirs) as double-float rows.
        let mut rows: Vec<f32> = Vec::new();
        let mut index: Vec<u32> = Vec::with_capacity(b);
        let mut seen: Vec<*const Dataset> = Vec::new();
        for d in data {
            let ptr: *const Dataset = *d;
            let k = match seen.iter().position(|&q| q == ptr) {
                Some(k) => k,
                None => {
                    for &v in d.main.iter().chain(&d.aux) {
                        split(v, &mut rows);
                    }
                    seen.push(ptr);
                    seen.len() - 1
                }
            };
            index.push(k as u32);
        }
        let mut packed = Vec::with_capacity(b * n * 2);
        for &v in params {
            split_param(v, &mut packed);
        }
        let gpu = &s.gpu;
        // Allocation failures are caught here (and forget the buffers), not left to poison the
        // session's device.
        if let Err(e) = gpu.checked("allocating launch buffers", || {
            self.ensure_buffers(b, seen.len() * row_len)
        }) {
            self.bufs = None;
            return Err(e);
        }
        let bufs = self.bufs.as_ref().expect("buffers were just made");
        let out_bytes = (b * s.out_len * 4) as u64;
        gpu.checked("evaluating the likelihood", || {
            gpu.queue.write_buffer(&bufs.params, 0, as_bytes(&packed));
            gpu.queue.write_buffer(&bufs.data, 0, as_bytes(&rows));
            gpu.queue.write_buffer(&bufs.index, 0, as_bytes(&index));
            let layout = s.pipeline.get_bind_group_layout(0);
            let buffers = [
                &s.ints,
                &s.reals,
                &bufs.params,
                &bufs.data,
                &bufs.index,
                &bufs.scratch,
                &bufs.outs,
            ];
            let entries: Vec<wgpu::BindGroupEntry> = buffers
                .iter()
                .enumerate()
                .map(|(k, buf)| wgpu::BindGroupEntry {
                    binding: k as u32,
                    resource: buf.as_entire_binding(),
                })
                .collect();
            let group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("nll_grad"),
                layout: &layout,
                entries: &entries,
            });
            let mut enc = gpu
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                pass.set_pipeline(&s.pipeline);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(b as u32, 1, 1);
            }
            enc.copy_buffer_to_buffer(&bufs.outs, 0, &bufs.staging, 0, out_bytes);
            gpu.queue.submit([enc.finish()]);
        })?;
        let out = gpu.read_back(&bufs.staging, out_bytes)?;
        finish(&s, &out, nll, grad);
        Ok(())
    }
}

/// Values and gradients from the read-back outputs.
fn finish(s: &Session, out: &[f32], nll: &mut [f64], grad: &mut [f64]) {
    let n = s.model.n_params();
    let m = s.model.n_main + s.model.n_aux();
    let t = &s.tables;
    for (p, o) in out.chunks(s.out_len).take(nll.len()).enumerate() {
        let g = &mut grad[p * n..(p + 1) * n];
        if o[0] != 0.0 {
            nll[p] = f64::INFINITY;
            g.fill(f64::NAN);
            continue;
        }
        match s.precision {
            Precision::HostReduced => {
                nll[p] = o[1..1 + m].iter().map(|&v| v as f64).sum();
                let terms = &o[1 + m..];
                for (i, gi) in g.iter_mut().enumerate() {
                    let (a, b) = (t.term_off[i] as usize, t.term_off[i + 1] as usize);
                    *gi = t.term_idx[a..b]
                        .iter()
                        .map(|&k| terms[k as usize] as f64)
                        .sum();
                }
            }
            _ => {
                nll[p] = o[1] as f64 + o[2] as f64;
                for (gi, v) in g.iter_mut().zip(o[3..3 + 2 * n].chunks(2)) {
                    *gi = v[0] as f64 + v[1] as f64;
                }
            }
        }
    }
}

impl BatchEvaluator for WgpuBatch {
    fn space(&self) -> &ParameterSpace {
        &self.session.space
    }

    fn nll_grad_batch(
        &mut self,
        params: &[f64],
        data: &[&Dataset],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> histfit_compute::Result<()> {
        check_batch(&self.session.model, params, data, nll, grad)?;
        if data.iter().any(|d| d.resident.is_some()) {
            return Err(ComputeError::Unsupported(
                "data kept in another device's memory on a wgpu adapter",
            ));
        }
        let n = self.session.model.n_params();
        let chunk = self.session.chunk;
        for start in (0..data.len()).step_by(chunk) {
            let end = (start + chunk).min(data.len());
            self.launch(
                &params[start * n..end * n],
                &data[start..end],
                &mut nll[start..end],
                &mut grad[start * n..end * n],
            )?;
        }
        for (v, d) in nll.iter_mut().zip(data) {
            *v += d.constant;
        }
        Ok(())
    }

    /// From the host's f64 rates: Asimov data are data, made at full precision.
    fn asimov(&mut self, params: &[f64]) -> histfit_compute::Result<Dataset> {
        Evaluator::asimov(&mut *self.session.host(), params)
    }

    /// Drawn on the host (the CPU's Philox streams and bits).
    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        Evaluator::toys(&mut *self.session.host(), params, seed, indices)
    }

    fn expected_main_batch(
        &mut self,
        params: &[f64],
        out: &mut [f64],
    ) -> histfit_compute::Result<()> {
        let n = self.session.model.n_params();
        let m = self.session.model.n_main;
        let mut host = self.session.host();
        for (p, o) in params.chunks(n.max(1)).zip(out.chunks_mut(m.max(1))) {
            host.expected_main(p, o)?;
        }
        Ok(())
    }

    fn host_evaluator(&self) -> Option<Box<dyn Evaluator + Send>> {
        Some(Box::new(self.session.host().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::{choose_precision, Precision};

    /// The default falls back to compensated sums with a warning where the probe refuses
    /// double-float; asked for by name it is an error; other strategies skip the probe.
    #[test]
    fn precision_choice_and_fallback() {
        let broken = || Err("sum 3.1e-8".to_string());
        assert_eq!(
            choose_precision(None, Ok(false), "a"),
            Ok((Precision::DoubleFloat, false, None))
        );
        let (p, _, w) = choose_precision(None, broken(), "lavapipe").unwrap();
        assert_eq!(p, Precision::Compensated);
        let w = w.unwrap();
        assert!(
            w.contains("lavapipe") && w.contains("sum 3.1e-8") && w.contains("compensated"),
            "{w}"
        );
        let e = choose_precision(Some(Precision::DoubleFloat), broken(), "a").unwrap_err();
        assert!(e.contains("wgpu+compensated"), "{e}");
        for p in [Precision::Compensated, Precision::HostReduced] {
            assert_eq!(
                choose_precision(Some(p), broken(), "a"),
                Ok((p, true, None))
            );
        }
    }
}
