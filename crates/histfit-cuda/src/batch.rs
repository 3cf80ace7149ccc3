//! [`CudaBatch`]: the batched NLL+gradient evaluator on one CUDA device.
//!
//! A [`Session`] (context, kernels, model tables) is created once per model and device and shared
//! by every clone; each clone has its own stream, launch buffers and dataset cache, so clones can
//! evaluate concurrently (the ranking runs its refits in parallel that way).
//!
//! Datasets stay on the device: each call looks every dataset up by content (hash, then an exact
//! comparison with the host mirror) and uploads only those not seen before. Parameters go up and
//! values and gradients come down once per call. Large batches are split into launches of at most
//! [`MAX_LAUNCH`] problems, so scratch memory stays bounded.

use crate::device::Gpu;
use crate::kernels::Kernels;
use crate::layout::{DeviceTables, HostTables};
use crate::split::{Peer, SplitPlan};
use crate::{driver, CudaError, Result};
use cudarc::driver::{
    CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use histfit_compute::HistFactoryData;
use histfit_compute::{check_batch, BatchEvaluator, ComputeError, Dataset, ParameterSpace};
use histfit_model::Model;
use std::collections::HashMap;
use std::sync::Arc;

/// Threads per block of the likelihood kernel (one block per problem); `HISTFIT_CUDA_THREADS`
/// lowers it for tuning (a power of two from 32; the kernel's launch bounds allow 256 at most).
pub const THREADS: u32 = 256;

fn threads() -> u32 {
    static T: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *T.get_or_init(|| {
        std::env::var("HISTFIT_CUDA_THREADS")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|t| (32..=THREADS).contains(t) && t.is_power_of_two())
            .unwrap_or(THREADS)
    })
}
/// Threads per block of the wide kernel, used for launches of at most [`wide_max`] problems
/// (a single fit's evaluations: one block's latency is the whole launch, so more threads per
/// problem shorten it). `HISTFIT_CUDA_WIDE_THREADS` sets it (a power of two, 256 to 1024).
pub const WIDE_THREADS: u32 = 1024;

fn wide_threads() -> u32 {
    static T: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *T.get_or_init(|| {
        std::env::var("HISTFIT_CUDA_WIDE_THREADS")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|t| (256..=WIDE_THREADS).contains(t) && t.is_power_of_two())
            .unwrap_or(WIDE_THREADS)
    })
}

/// Launches of up to this many problems use the wide kernel (`HISTFIT_CUDA_WIDE_MAX`; 0: never).
fn wide_max() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("HISTFIT_CUDA_WIDE_MAX")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(16)
    })
}

/// Problems per launch.
pub const MAX_LAUNCH: usize = 4096;
/// Distinct datasets kept on the device before the cache starts over.
const MAX_CACHED: usize = 1 << 17;

/// Everything one model needs on one device, shared by all clones of a [`CudaBatch`].
#[derive(Debug)]
pub struct Session {
    pub gpu: Gpu,
    pub kernels: Kernels,
    pub tables: DeviceTables,
    pub model: Arc<Model>,
    /// The model's parameters as inference sees them.
    pub space: ParameterSpace,
    /// The host evaluator whose rates toys are drawn from: the device's rates agree with the
    /// CPU's only to rounding, and a Poisson draw can turn on the last bit, so the device's
    /// generator samples the CPU's rates and its toys are the CPU's, bit for bit.
    pub host_rates: std::sync::Mutex<histfit_compute::CpuEvaluator>,
    /// A problem's scratch lives in shared memory (it fits the device's per-block limit), not
    /// in global memory.
    pub shared_scratch: bool,
}

impl Session {
    /// Opens device `ordinal`, loads the kernels and uploads `model`.
    pub fn new(model: Arc<Model>, ordinal: usize) -> Result<Arc<Session>> {
        histfit_compute::flat::check(&model).map_err(CudaError::TooLarge)?;
        let tables = HostTables::new(&model);
        Session::with_tables(model, ordinal, tables)
    }

    /// [`Session::new`] for a model whose yields will be inputs: its tables carry the nominal
    /// yields that histosys deltas held relative to the inputs are scaled against.
    pub fn for_input_yields(model: Arc<Model>, ordinal: usize) -> Result<Arc<Session>> {
        histfit_compute::flat::check(&model).map_err(CudaError::TooLarge)?;
        let tables = HostTables::for_input_yields(&model);
        Session::with_tables(model, ordinal, tables)
    }

    fn with_tables(model: Arc<Model>, ordinal: usize, host: HostTables) -> Result<Arc<Session>> {
        let clock = crate::timing::Clock::start();
        let gpu = Gpu::open(ordinal)?;
        let opened = clock.lap();
        let kernels = Kernels::load(&gpu)?;
        let loaded = clock.lap();
        let stream = gpu.ctx.default_stream();
        let tables = DeviceTables::upload(host, &stream)?;
        clock.report(|| {
            format!(
                "cuda:{ordinal} opened: context {opened:.3} s, kernels {loaded:.3} s, tables {:.3} s",
                clock.lap()
            )
        });
        let bytes = (tables.host.scratch_len + threads().max(256) as usize) * 8;
        let limit = gpu
            .ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )
            .unwrap_or(0) as usize;
        // Global scratch measured faster for workspace_tHu on the H100 (more blocks resident per
        // SM); shared scratch stays selectable for experiments.
        let wanted =
            std::env::var("HISTFIT_CUDA_SCRATCH").as_deref() == Ok("shared") && bytes <= limit;
        let shared_scratch = wanted
            && kernels
                .nll_grad_batch
                .set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes as i32,
                )
                .is_ok();
        Ok(Arc::new(Session {
            gpu,
            kernels,
            tables,
            space: histfit_compute::histfactory::parameter_space(&model),
            host_rates: std::sync::Mutex::new(histfit_compute::CpuEvaluator::new(model.clone())),
            model,
            shared_scratch,
        }))
    }

    /// Dynamic shared memory per block of the likelihood kernel run with `threads` threads
    /// (reductions need 256 doubles at least).
    pub fn shared_bytes(&self, threads: u32) -> u32 {
        let doubles = threads.max(256) as usize
            + if self.shared_scratch {
                self.tables.host.scratch_len
            } else {
                0
            };
        (doubles * 8) as u32
    }

    pub fn row_len(&self) -> usize {
        self.model.n_main + self.model.n_aux()
    }
}

/// Launch buffers for up to `cap` problems.
#[derive(Debug)]
struct Buffers {
    cap: usize,
    params: CudaSlice<f64>,
    index: CudaSlice<i32>,
    nll: CudaSlice<f64>,
    grad: CudaSlice<f64>,
    lam: CudaSlice<f64>,
    /// Allocated when a launch first asks for it (yields as inputs only).
    sbfac: Option<CudaSlice<f64>>,
    scratch: CudaSlice<f64>,
    /// Page-locked staging for parameters (up) and gradients (down): DMA at full PCIe speed
    /// instead of the driver's bounce buffers.
    pin_params: PinnedHostSlice<f64>,
    pin_grad: PinnedHostSlice<f64>,
    /// Values come down page-locked too, so both downloads are asynchronous and one
    /// synchronisation ends the call (a pageable download blocks on its own).
    pin_nll: PinnedHostSlice<f64>,
    /// The dataset indices on the device (a fit's evaluations repeat them: not sent again).
    index_sent: Vec<i32>,
    /// Each problem's empty-bin wall ([`Dataset::empty_bin_wall`]), sent (like the indices)
    /// when it changes; launches where every problem has the default pass none.
    walls: CudaSlice<f64>,
    walls_sent: Vec<f64>,
}

/// Datasets resident on the device, found by content.
#[derive(Debug, Default)]
struct DataCache {
    /// Host mirror, `row_len` values per dataset.
    rows: Vec<f64>,
    by_hash: HashMap<u64, Vec<u32>>,
    dev: Option<CudaSlice<f64>>,
    /// Rows the device buffer holds (capacity) and has received.
    dev_cap: usize,
    dev_rows: usize,
    /// Datasets met through `Arc`: pointer → row (the clone kept here pins the contents).
    by_arc: HashMap<usize, (Arc<Dataset>, u32)>,
}

/// Page-locked host memory (plain, not write-combined: the host reads the gradients back).
fn pinned(session: &Session, n: usize) -> Result<PinnedHostSlice<f64>> {
    // SAFETY: the memory is only used as a staging area for f64 copies.
    unsafe { session.gpu.ctx.alloc_pinned_with_flags::<f64>(n.max(1), 0) }
        .map_err(driver("cuMemHostAlloc"))
}

fn hash_row(main: &[f64], aux: &[f64]) -> u64 {
    let mut h: u64 = 0;
    for v in main.iter().chain(aux) {
        h = (h.rotate_left(5) ^ v.to_bits()).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h
}

/// What a launch writes besides −ln L.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Outputs {
    pub grad: bool,
    /// Expected main counts.
    pub lam: bool,
    /// ∂λ/∂(nominal yield) of every sample-bin (yields as inputs).
    pub sbfac: bool,
}

pub(crate) const GRAD: Outputs = Outputs {
    grad: true,
    lam: false,
    sbfac: false,
};

/// The batched CUDA evaluator of one model.
#[derive(Debug)]
pub struct CudaBatch {
    session: Arc<Session>,
    stream: Arc<CudaStream>,
    bufs: Option<Buffers>,
    cache: DataCache,
    host_index: Vec<i32>,
    /// The resolved problems' empty-bin walls, one per entry of `host_index`.
    host_walls: Vec<f64>,
    /// A dataset whose main counts were made on the device (key, row): see
    /// [`Dataset::resident`].
    resident: Option<(u64, CudaSlice<f64>)>,
    /// The resolved problems read the resident row, not the cache.
    use_resident: bool,
    /// The last uploaded launch has a problem whose wall is not the default (the kernel then
    /// reads `Buffers::walls`).
    walls_on: bool,
    /// The same model on further devices (or the same one again), opened in the background
    /// ([`CudaBatch::for_ensembles`]): resident toy ensembles are split over this session and
    /// these ([`crate::split`]).
    pub(crate) peers: Vec<Peer>,
    /// How (`None`: [`SplitPlan::from_env`] at each ensemble).
    pub(crate) split: Option<SplitPlan>,
    /// The buffers of descents run on the device ([`crate::descents`]), kept between launches.
    pub(crate) runs: Option<Box<crate::descents::RunBuffers>>,
}

impl Clone for CudaBatch {
    fn clone(&self) -> Self {
        let ctx = &self.session.gpu.ctx;
        CudaBatch {
            session: self.session.clone(),
            stream: ctx.new_stream().unwrap_or_else(|_| ctx.default_stream()),
            bufs: None,
            cache: DataCache::default(),
            host_index: Vec::new(),
            host_walls: Vec::new(),
            resident: None,
            use_resident: false,
            walls_on: false,
            peers: self.peers.clone(),
            split: self.split,
            runs: None,
        }
    }
}

impl CudaBatch {
    /// Opens device `ordinal` and uploads `model`.
    pub fn new(model: Arc<Model>, ordinal: usize) -> Result<CudaBatch> {
        let session = Session::new(model, ordinal)?;
        Ok(CudaBatch::from_session(session))
    }

    pub fn from_session(session: Arc<Session>) -> CudaBatch {
        let stream = session.gpu.ctx.default_stream();
        CudaBatch {
            session,
            stream,
            bufs: None,
            cache: DataCache::default(),
            host_index: Vec::new(),
            host_walls: Vec::new(),
            resident: None,
            use_resident: false,
            walls_on: false,
            peers: Vec::new(),
            split: None,
            runs: None,
        }
    }

    /// An evaluator on `ordinals[0]` with the same model on the rest (an ordinal may repeat),
    /// over which resident toy ensembles are split ([`crate::split`]). Every ordinal is checked
    /// now; the others are opened in the background when the first ensemble starts (each
    /// context costs a few tenths of a second, and most commands fit no ensemble).
    pub fn on_devices(model: Arc<Model>, ordinals: &[usize]) -> Result<CudaBatch> {
        CudaBatch::on_devices_opening(model, ordinals, false)
    }

    /// [`CudaBatch::on_devices`] for a caller that will fit toy ensembles: the other devices
    /// start opening at once, beside the first. A context, its kernels and tables cost
    /// 0.15–0.25 s, which an ensemble that started them only when it began waited for (tHu's
    /// 100 000 toys fit in 1.4 s on two GPUs where they took 1.5 s; BENCHMARKS.md, issue 24).
    /// An error opening one is told to the first ensemble that needs it.
    pub fn for_ensembles(model: Arc<Model>, ordinals: &[usize]) -> Result<CudaBatch> {
        CudaBatch::on_devices_opening(model, ordinals, true)
    }

    fn on_devices_opening(model: Arc<Model>, ordinals: &[usize], now: bool) -> Result<CudaBatch> {
        let (&first, rest) = ordinals
            .split_first()
            .ok_or_else(|| CudaError::Unavailable("no CUDA device".into()))?;
        let count = crate::device::count()?;
        if let Some(&n) = ordinals.iter().find(|&&n| n >= count) {
            return Err(CudaError::Unavailable(format!(
                "no CUDA device with ordinal {n} (the driver reports {count} device(s))"
            )));
        }
        let peers: Vec<Peer> = rest.iter().map(|&n| Peer::new(model.clone(), n)).collect();
        if now {
            for p in &peers {
                p.start();
            }
        }
        let mut batch = CudaBatch::new(model.clone(), first)?;
        batch.peers = peers;
        Ok(batch)
    }

    /// This evaluator with its ensembles split as `plan` says, whatever the environment.
    pub fn with_split(mut self, plan: SplitPlan) -> CudaBatch {
        self.split = Some(plan);
        self
    }

    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    fn buffers(&mut self, b: usize) -> Result<&mut Buffers> {
        let need = b.clamp(1, MAX_LAUNCH);
        if self.bufs.as_ref().is_none_or(|x| x.cap < need) {
            let cap = need.next_power_of_two().min(MAX_LAUNCH).max(need);
            let m = &self.session.model;
            let s = &self.stream;
            let alloc = |n: usize| -> Result<CudaSlice<f64>> {
                s.alloc_zeros::<f64>(n.max(1)).map_err(|e| {
                    let bytes = n * 8;
                    match driver("cuMemAlloc")(e) {
                        CudaError::OutOfMemory(msg) => CudaError::OutOfMemory(format!(
                            "{bytes} bytes for a batch of {cap} problems: {msg}"
                        )),
                        other => other,
                    }
                })
            };
            self.bufs = Some(Buffers {
                cap,
                params: alloc(cap * m.n_params())?,
                index: s.alloc_zeros::<i32>(cap).map_err(driver("cuMemAlloc"))?,
                nll: alloc(cap)?,
                grad: alloc(cap * m.n_params())?,
                lam: alloc(cap * m.n_main)?,
                sbfac: None,
                scratch: alloc(if self.session.shared_scratch {
                    1
                } else {
                    cap * self.session.tables.host.scratch_len
                })?,
                pin_params: pinned(&self.session, cap * m.n_params())?,
                pin_grad: pinned(&self.session, cap * m.n_params())?,
                pin_nll: pinned(&self.session, cap)?,
                index_sent: Vec::new(),
                walls: alloc(cap)?,
                walls_sent: Vec::new(),
            });
        }
        Ok(self.bufs.as_mut().expect("allocated above"))
    }

    /// A batch on the resident dataset: every problem must read it.
    fn resolve_resident(&mut self, data: &[&Dataset]) -> Result<()> {
        let mine = self.resident.as_ref().map(|r| r.0);
        if data
            .iter()
            .any(|d| d.resident.is_none() || d.resident != mine)
        {
            return Err(CudaError::Driver {
                call: "dataset lookup".into(),
                message: "a dataset kept in device memory can only be evaluated, alone in its \
                          batch, by the evaluator that made it"
                    .into(),
            });
        }
        self.host_index.clear();
        self.host_index.resize(data.len(), 0);
        self.set_walls(data.iter().map(|d| d.empty_bin_wall));
        self.use_resident = true;
        Ok(())
    }

    /// The device row of the resident dataset, now under `key` (allocated on first use; a new
    /// key retires the datasets made under the old one, which are then refused rather than read
    /// with the new counts). Its main counts are written on the device, its auxiliary data by
    /// the caller.
    pub(crate) fn resident_row(&mut self, key: u64) -> Result<&mut CudaSlice<f64>> {
        if self.resident.is_none() {
            let row = self
                .stream
                .alloc_zeros::<f64>(self.session.row_len().max(1))
                .map_err(driver("cuMemAlloc (resident dataset)"))?;
            self.resident = Some((key, row));
        }
        let r = self.resident.as_mut().expect("set above");
        r.0 = key;
        Ok(&mut r.1)
    }

    /// Device rows of `data` shared through `Arc` (found by pointer; new ones uploaded).
    fn resolve_shared(&mut self, data: &[Arc<Dataset>]) -> Result<()> {
        self.use_resident = false;
        if data.iter().any(|d| d.resident.is_some()) {
            let refs: Vec<&Dataset> = data.iter().map(|d| &**d).collect();
            return self.resolve_resident(&refs);
        }
        let row_len = self.session.row_len();
        let c = &mut self.cache;
        if c.rows.len() / row_len.max(1) + data.len() > MAX_CACHED {
            *c = DataCache::default();
        }
        self.host_index.clear();
        for d in data {
            let key = Arc::as_ptr(d) as usize;
            let slot = match c.by_arc.get(&key) {
                Some((_, s)) => *s,
                None => {
                    let s = (c.rows.len() / row_len.max(1)) as u32;
                    c.rows.extend_from_slice(&d.main);
                    c.rows.extend_from_slice(&d.aux);
                    c.by_arc.insert(key, (d.clone(), s));
                    s
                }
            };
            self.host_index.push(slot as i32);
        }
        self.set_walls(data.iter().map(|d| d.empty_bin_wall));
        self.upload_new_rows()
    }

    /// The device rows of `data` (see [`Self::resolve_shared`]): each dataset's row index and
    /// empty-bin wall, the rows counted from [`Self::data_base`].
    pub(crate) fn resolve_rows(&mut self, data: &[Arc<Dataset>]) -> Result<(Vec<i32>, Vec<f64>)> {
        self.resolve_shared(data)?;
        Ok((self.host_index.clone(), self.host_walls.clone()))
    }

    /// Each resolved problem's empty-bin wall, in the order of `host_index`.
    fn set_walls(&mut self, walls: impl Iterator<Item = f64>) {
        self.host_walls.clear();
        self.host_walls.extend(walls);
    }

    /// Device rows of `data` (found by content; new ones uploaded).
    fn resolve(&mut self, data: &[&Dataset]) -> Result<()> {
        self.use_resident = false;
        if data.iter().any(|d| d.resident.is_some()) {
            return self.resolve_resident(data);
        }
        let row_len = self.session.row_len();
        let c = &mut self.cache;
        if c.rows.len() / row_len.max(1) + data.len() > MAX_CACHED {
            *c = DataCache::default();
        }
        self.host_index.clear();
        // Within one call every reference is alive and immutable: a dataset equal by address to
        // the previous problem's (a scan, a batch of points on one dataset) reuses its row.
        let mut last: Option<(*const Dataset, u32)> = None;
        for d in data {
            if let Some((ptr, slot)) = last {
                if std::ptr::eq(ptr, *d) {
                    self.host_index.push(slot as i32);
                    continue;
                }
            }
            let h = hash_row(&d.main, &d.aux);
            let found = c.by_hash.get(&h).and_then(|slots| {
                slots.iter().copied().find(|&s| {
                    let r = &c.rows[s as usize * row_len..(s as usize + 1) * row_len];
                    r[..d.main.len()] == d.main[..] && r[d.main.len()..] == d.aux[..]
                })
            });
            let slot = match found {
                Some(s) => s,
                None => {
                    let s = (c.rows.len() / row_len.max(1)) as u32;
                    c.rows.extend_from_slice(&d.main);
                    c.rows.extend_from_slice(&d.aux);
                    c.by_hash.entry(h).or_default().push(s);
                    s
                }
            };
            self.host_index.push(slot as i32);
            last = Some((*d as *const Dataset, slot));
        }
        self.set_walls(data.iter().map(|d| d.empty_bin_wall));
        self.upload_new_rows()
    }

    /// Sends the mirror's rows the device has not received yet.
    fn upload_new_rows(&mut self) -> Result<()> {
        let row_len = self.session.row_len();
        let c = &mut self.cache;
        let n_rows = c.rows.len() / row_len.max(1);
        if n_rows > c.dev_cap {
            let cap = n_rows.next_power_of_two().max(64);
            let mut dev = self
                .stream
                .alloc_zeros::<f64>(cap * row_len.max(1))
                .map_err(driver("cuMemAlloc (datasets)"))?;
            self.stream
                .memcpy_htod(&c.rows[..], &mut dev)
                .map_err(driver("upload of datasets"))?;
            c.dev = Some(dev);
            c.dev_cap = cap;
            c.dev_rows = n_rows;
        } else if n_rows > c.dev_rows {
            let dev = c.dev.as_mut().expect("capacity implies a buffer");
            let mut view = dev.slice_mut(c.dev_rows * row_len..n_rows * row_len);
            self.stream
                .memcpy_htod(&c.rows[c.dev_rows * row_len..], &mut view)
                .map_err(driver("upload of datasets"))?;
            c.dev_rows = n_rows;
        }
        Ok(())
    }

    /// One launch over problems `range` (params and data rows already resolved).
    fn launch(
        &mut self,
        params: &[f64],
        range: std::ops::Range<usize>,
        outs: Outputs,
    ) -> Result<()> {
        let n_params = self.session.model.n_params();
        let b = range.len();
        let stream = self.stream.clone();
        let index_host: Vec<i32> = self.host_index[range.clone()].to_vec();
        // The problems' walls where one is not the default (most launches: nothing copied or
        // sent).
        let walls = &self.host_walls[range.clone()];
        let walls = walls
            .iter()
            .any(|w| w.to_bits() != histfit_compute::EMPTY_BIN_WALL.to_bits())
            .then(|| walls.to_vec());
        self.walls_on = walls.is_some();
        let n_sb = self.session.model.nominal.len();
        let bufs = self.buffers(b)?;
        if outs.sbfac && bufs.sbfac.is_none() {
            let sbfac = stream
                .alloc_zeros::<f64>((bufs.cap * n_sb).max(1))
                .map_err(driver("cuMemAlloc (sample-bin factors)"))?;
            bufs.sbfac = Some(sbfac);
        }
        let src = &params[range.start * n_params..range.end * n_params];
        {
            // The previous copy from this staging buffer has completed (every call synchronises).
            let pin = bufs
                .pin_params
                .as_mut_slice()
                .map_err(driver("staging of parameters"))?;
            pin[..src.len()].copy_from_slice(src);
        }
        {
            let mut dst = bufs.params.slice_mut(0..src.len());
            let pin = bufs
                .pin_params
                .as_slice()
                .map_err(driver("staging of parameters"))?;
            stream
                .memcpy_htod(&pin[..src.len()], &mut dst)
                .map_err(driver("upload of parameters"))?;
        }
        if bufs.index_sent != index_host {
            stream
                .memcpy_htod(&index_host[..], &mut bufs.index)
                .map_err(driver("upload of dataset indices"))?;
            bufs.index_sent = index_host;
        }
        if let Some(walls) = walls {
            if bufs.walls_sent != walls {
                stream
                    .memcpy_htod(&walls[..], &mut bufs.walls)
                    .map_err(driver("upload of empty-bin walls"))?;
                bufs.walls_sent = walls;
            }
        }
        self.launch_resident(b, outs)
    }
}

impl CudaBatch {
    /// The device address of the resolved datasets' rows (`host_index` counts rows from it).
    pub(crate) fn data_base(&self) -> u64 {
        let stream = &self.stream;
        if self.use_resident {
            self.resident.as_ref().map(|r| r.1.device_ptr(stream).0)
        } else {
            self.cache.dev.as_ref().map(|d| d.device_ptr(stream).0)
        }
        .unwrap_or(0)
    }

    /// Launches the kernel on the parameters and dataset indices already uploaded for `b`
    /// problems, writing `outs` besides −ln L.
    fn launch_resident(&mut self, b: usize, outs: Outputs) -> Result<()> {
        let session = self.session.clone();
        let stream = self.stream.clone();
        let scratch_len = session.tables.host.scratch_len as i64;
        let data_ptr = self.data_base();
        let walls_on = self.walls_on;
        let bufs = self.bufs.as_mut().expect("an upload allocated the buffers");
        let ptrs = [
            bufs.params.device_ptr(&stream).0,
            bufs.index.device_ptr(&stream).0,
            if walls_on {
                bufs.walls.device_ptr(&stream).0
            } else {
                0
            },
            data_ptr,
            bufs.nll.device_ptr_mut(&stream).0,
            if outs.grad {
                bufs.grad.device_ptr_mut(&stream).0
            } else {
                0
            },
            if outs.lam {
                bufs.lam.device_ptr_mut(&stream).0
            } else {
                0
            },
            match (outs.sbfac, &mut bufs.sbfac) {
                (true, Some(sbfac)) => sbfac.device_ptr_mut(&stream).0,
                _ => 0,
            },
            if session.shared_scratch {
                0
            } else {
                bufs.scratch.device_ptr_mut(&stream).0
            },
        ];
        let n = b as i32;
        // Shared scratch is sized and enabled for the narrow kernel only.
        let wide = b <= wide_max() && !session.shared_scratch;
        let (func, t) = if wide {
            (&session.kernels.nll_grad_wide, wide_threads())
        } else {
            (&session.kernels.nll_grad_batch, threads())
        };
        let cfg = LaunchConfig {
            grid_dim: (b as u32, 1, 1),
            block_dim: (t, 1, 1),
            shared_mem_bytes: session.shared_bytes(t),
        };
        let mut l = stream.launch_builder(func);
        l.arg(&session.tables.arg).arg(&n);
        for p in &ptrs {
            l.arg(p);
        }
        l.arg(&scratch_len);
        // SAFETY: the arguments match the kernel's signature (params, index, walls, data, nll, grad,
        // lam, sbfac, scratch); every pointer is null or a live allocation of at least the size the
        // kernel indexes (b problems).
        unsafe { l.launch(cfg) }.map_err(driver("launch of the likelihood kernel"))?;
        Ok(())
    }

    /// One launch over the problems `params` × `data` (at most [`MAX_LAUNCH`]) whose outputs
    /// stay on the device, read through [`CudaBatch::outputs_on_device`].
    pub(crate) fn launch_on_device(
        &mut self,
        params: &[f64],
        data: &[&Dataset],
        outs: Outputs,
    ) -> Result<()> {
        debug_assert!(data.len() <= MAX_LAUNCH);
        self.resolve(data)?;
        self.launch(params, 0..data.len(), outs)
    }

    /// Device addresses of the last launch's expected counts, sample-bin factors (rows of
    /// `n_main` and `n_sb` values per problem) and its first problem's main data.
    pub(crate) fn outputs_on_device(&self) -> (u64, u64, u64) {
        let stream = &self.stream;
        let bufs = self.bufs.as_ref().expect("a launch allocated the buffers");
        let row = self.host_index.first().copied().unwrap_or(0) as u64;
        (
            bufs.lam.device_ptr(stream).0,
            bufs.sbfac.as_ref().map_or(0, |s| s.device_ptr(stream).0),
            self.data_base() + row * self.session.row_len() as u64 * 8,
        )
    }

    /// For benchmarks: seconds per launch of the likelihood kernel alone (parameters and data
    /// already on the device, nothing copied back), averaged over `reps` launches.
    pub fn time_kernel(&mut self, params: &[f64], data: &[&Dataset], reps: usize) -> Result<f64> {
        let b = data.len().min(MAX_LAUNCH);
        self.resolve(&data[..b])?;
        self.launch(params, 0..b, GRAD)?;
        self.stream.synchronize().map_err(driver("benchmark"))?;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            self.launch_resident(b, GRAD)?;
        }
        self.stream.synchronize().map_err(driver("benchmark"))?;
        Ok(t.elapsed().as_secs_f64() / reps.max(1) as f64)
    }

    /// Launches over the problems whose dataset rows `host_index` holds; values without the
    /// datasets' constants.
    fn evaluate_resolved(
        &mut self,
        params: &[f64],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> histfit_compute::Result<()> {
        let n_params = self.session.model.n_params();
        let b = self.host_index.len();
        let mut start = 0;
        while start < b {
            let end = (start + MAX_LAUNCH).min(b);
            self.launch(params, start..end, GRAD)?;
            let stream = self.stream.clone();
            let len = (end - start) * n_params;
            let bufs = self.bufs.as_mut().expect("launch allocated buffers");
            {
                let pin = bufs
                    .pin_nll
                    .as_mut_slice()
                    .map_err(driver("staging of values"))
                    .map_err(ComputeError::from)?;
                stream
                    .memcpy_dtoh(&bufs.nll.slice(0..end - start), &mut pin[..end - start])
                    .map_err(driver("download of values"))
                    .map_err(ComputeError::from)?;
            }
            {
                let pin = bufs
                    .pin_grad
                    .as_mut_slice()
                    .map_err(driver("staging of gradients"))
                    .map_err(ComputeError::from)?;
                stream
                    .memcpy_dtoh(&bufs.grad.slice(0..len), &mut pin[..len])
                    .map_err(driver("download of gradients"))
                    .map_err(ComputeError::from)?;
            }
            stream
                .synchronize()
                .map_err(driver("nll_grad_batch"))
                .map_err(ComputeError::from)?;
            let pin = bufs
                .pin_grad
                .as_slice()
                .map_err(driver("staging of gradients"))
                .map_err(ComputeError::from)?;
            grad[start * n_params..end * n_params].copy_from_slice(&pin[..len]);
            let pin = bufs
                .pin_nll
                .as_slice()
                .map_err(driver("staging of values"))
                .map_err(ComputeError::from)?;
            nll[start..end].copy_from_slice(&pin[..end - start]);
            start = end;
        }
        Ok(())
    }
}

impl BatchEvaluator for CudaBatch {
    fn space(&self) -> &ParameterSpace {
        &self.session.space
    }

    fn asimov(&mut self, params: &[f64]) -> histfit_compute::Result<Dataset> {
        let mut lam = vec![0.0; self.session.model.n_main];
        self.expected_main_batch(params, &mut lam)?;
        histfit_compute::histfactory::asimov(&self.session.model, lam, params)
    }

    /// Drawn by the device's Philox kernel ([`crate::toys::generate`]) from the host's rates
    /// ([`Session::host_rates`]): the CPU's bits.
    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        histfit_compute::rng::check_generation_params(params)?;
        let mut lam = vec![0.0; self.session.model.n_main];
        histfit_compute::Evaluator::expected_main(
            &mut *self
                .session
                .host_rates
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
            params,
            &mut lam,
        )?;
        let m = &self.session.model;
        let count = (indices.end - indices.start) as usize;
        let rows = crate::toys::generate(&self.session, &lam, params, seed, indices.start, count)?;
        let row = m.n_main + m.n_aux();
        rows.chunks(row.max(1))
            .take(count)
            .map(|r| Dataset::from_parts(m, r[..m.n_main].to_vec(), r[m.n_main..].to_vec()))
            .collect()
    }

    fn resident_fits(&mut self) -> Option<&mut dyn histfit_compute::ResidentFits> {
        Some(self)
    }

    fn offers_descents(&self) -> bool {
        true
    }

    fn finishes_descents(&self) -> bool {
        true
    }

    fn descents_batch(
        &mut self,
        reqs: &[histfit_compute::DescentRequest],
        data: &[Arc<Dataset>],
    ) -> histfit_compute::Result<Vec<histfit_compute::Descent>> {
        self.run_descents(reqs, data)
    }

    fn host_evaluator(&self) -> Option<Box<dyn histfit_compute::Evaluator + Send>> {
        let cpu = self
            .session
            .host_rates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Some(Box::new(cpu))
    }

    fn nll_grad_batch(
        &mut self,
        params: &[f64],
        data: &[&Dataset],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> histfit_compute::Result<()> {
        check_batch(&self.session.model, params, data, nll, grad)?;
        self.resolve(data)?;
        self.evaluate_resolved(params, nll, grad)?;
        for (v, d) in nll.iter_mut().zip(data) {
            *v += d.constant;
        }
        Ok(())
    }

    fn nll_grad_batch_shared(
        &mut self,
        params: &[f64],
        data: &[Arc<Dataset>],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> histfit_compute::Result<()> {
        let refs: Vec<&Dataset> = data.iter().map(|d| &**d).collect();
        check_batch(&self.session.model, params, &refs, nll, grad)?;
        self.resolve_shared(data)?;
        self.evaluate_resolved(params, nll, grad)?;
        for (v, d) in nll.iter_mut().zip(data) {
            *v += d.constant;
        }
        Ok(())
    }

    fn expected_main_batch(
        &mut self,
        params: &[f64],
        out: &mut [f64],
    ) -> histfit_compute::Result<()> {
        let m = self.session.model.clone();
        let n = m.n_params();
        if !params.len().is_multiple_of(n.max(1)) || out.len() != params.len() / n.max(1) * m.n_main
        {
            return Err(ComputeError::Length {
                what: "expected data",
                expected: params.len() / n.max(1) * m.n_main,
                got: out.len(),
            });
        }
        let b = params.len() / n.max(1);
        // The kernel needs some dataset to evaluate against: the observed one.
        let obs = Dataset::observed(&m);
        let data = vec![&obs; b];
        self.resolve(&data)?;
        let mut start = 0;
        while start < b {
            let end = (start + MAX_LAUNCH).min(b);
            let outs = Outputs {
                lam: true,
                ..Default::default()
            };
            self.launch(params, start..end, outs)?;
            let stream = self.stream.clone();
            let bufs = self.bufs.as_ref().expect("launch allocated buffers");
            stream
                .memcpy_dtoh(
                    &bufs.lam.slice(0..(end - start) * m.n_main),
                    &mut out[start * m.n_main..end * m.n_main],
                )
                .map_err(driver("download of expected data"))
                .map_err(ComputeError::from)?;
            stream
                .synchronize()
                .map_err(driver("expected_main_batch"))
                .map_err(ComputeError::from)?;
            start = end;
        }
        Ok(())
    }
}
