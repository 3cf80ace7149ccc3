//! `histfit._native`: the compiled part of the Python package `histfit`. A thin front end: it
//! parses arguments, calls `histfit-infer` (with the GIL released) and returns numbers, NumPy
//! arrays or the result documents the CLI writes (JSON), which `python/histfit` turns into
//! objects. No statistics live here.

use histfit_compute::HistFactoryData;
use histfit_compute::ParameterSpace;
use histfit_compute::{CpuEvaluator, Dataset, Evaluator};
use histfit_cuda::CudaYields;
use histfit_device::{AnyEval, AnyRunner, Device, Likelihood};
use histfit_infer::toys::{fit_toys_on, hypotest_toys_on, ToyRunner};
use histfit_infer::{AsymptoticCalculator, FitOptions, Starts, TestStat};
use histfit_model::{compile, InterpCode, Model, Settings, Workspace};
use histfit_wgpu::WgpuYields;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::{Arc, Mutex};

pyo3::create_exception!(
    _native,
    HistfitError,
    PyValueError,
    "Bad input: the message names the place and the rule."
);
pyo3::create_exception!(
    _native,
    DeviceError,
    PyRuntimeError,
    "The requested device is unavailable or failed (no GPU, out of memory, ...)."
);

fn bad<E: std::fmt::Display>(e: E) -> PyErr {
    HistfitError::new_err(e.to_string())
}

/// Maps an inference error: device failures become `DeviceError`, the rest `HistfitError`.
fn infer_err(e: histfit_infer::InferError) -> PyErr {
    match e {
        histfit_infer::InferError::Compute(c) => compute_err(c),
        other => HistfitError::new_err(other.to_string()),
    }
}

fn compute_err(e: histfit_compute::ComputeError) -> PyErr {
    match e {
        histfit_compute::ComputeError::Device(m) => DeviceError::new_err(m),
        other => HistfitError::new_err(other.to_string()),
    }
}

fn parse_device(s: &str) -> PyResult<Device> {
    s.parse::<Device>()
        .map_err(|e| HistfitError::new_err(format!("device: {e}")))
}

/// `likelihood`'s evaluator on `device` (for toy ensembles where `ensembles`).
fn evaluator_of(likelihood: &Likelihood, device: &str, ensembles: bool) -> PyResult<AnyEval> {
    opened(
        likelihood.evaluator(parse_device(device)?, ensembles),
        device,
    )
}

/// What the device says about how it was opened (a precision fallback) becomes a Python
/// `UserWarning`.
fn opened(eval: Result<AnyEval, histfit_device::DeviceError>, device: &str) -> PyResult<AnyEval> {
    let eval = eval.map_err(|e| DeviceError::new_err(e.to_string()))?;
    if let Some(w) = eval.warning() {
        warn(&format!("device {device}: {w}"))?;
    }
    Ok(eval)
}

/// A Python `UserWarning`.
fn warn(message: &str) -> PyResult<()> {
    let msg = std::ffi::CString::new(message).unwrap_or_default();
    Python::attach(|py| {
        PyErr::warn(
            py,
            &py.get_type::<pyo3::exceptions::PyUserWarning>(),
            &msg,
            1,
        )
    })
}

/// Runs `$body` with `$runner` bound to the toy runner of `$device` (CPU threads, or lockstep
/// batches on a CUDA device).
macro_rules! with_runner {
    ($model:expr, $device:expr, |$runner:ident| $body:expr) => {{
        let ev = evaluator_of(&$model, $device, true)?;
        let batcher = histfit_device::batcher(&ev);
        let $runner = AnyRunner::new(&ev, batcher.as_ref());
        $body.map_err(infer_err)
    }};
}

/// A parsed, validated pyhf workspace.
#[pyclass(module = "histfit._native", frozen)]
struct NativeWorkspace {
    ws: Workspace,
}

#[pymethods]
impl NativeWorkspace {
    /// Parses workspace JSON text (`source` names it in messages); with `patchset` (JSON text)
    /// and `patch` (a patch name) the patch is applied first, as for published signal grids.
    #[new]
    #[pyo3(signature = (text, source = "workspace", patchset = None, patch = None, force = false))]
    fn new(
        text: &str,
        source: &str,
        patchset: Option<&str>,
        patch: Option<&str>,
        force: bool,
    ) -> PyResult<Self> {
        let ws = match (patchset, patch) {
            (None, None) => Workspace::from_str(text, source).map_err(bad)?,
            (Some(ps), Some(name)) => {
                let mut v: serde_json::Value = serde_json::from_str(text)
                    .map_err(|e| bad(format!("{source}: invalid JSON: {e}")))?;
                let p: serde_json::Value = serde_json::from_str(ps)
                    .map_err(|e| bad(format!("patchset: invalid JSON: {e}")))?;
                if !force {
                    histfit_model::tools::check_patchset_digest(&v, &p, "patchset")
                        .map_err(|e| bad(e.to_string().replace("--force", "force=True")))?;
                }
                histfit_model::patch::apply_patchset(&mut v, &p, name, "patchset").map_err(bad)?;
                Workspace::from_value(&v).map_err(bad)?
            }
            _ => {
                return Err(bad(
                    "a patch needs both the patchset and the patch name".to_string()
                ))
            }
        };
        Ok(NativeWorkspace { ws })
    }

    /// Compiles a model: `measurement` (default: the first), `interp` ("smooth": normsys code4 /
    /// histosys code4p, or "pyhf": code1 / code0), optional per-type codes, how histosys
    /// variations follow input yields ("relative" or "absolute").
    #[pyo3(signature = (measurement = None, interp = "smooth", normsys = None, histosys = None, poi = None, yield_variations = "relative"))]
    fn model(
        &self,
        measurement: Option<&str>,
        interp: &str,
        normsys: Option<&str>,
        histosys: Option<&str>,
        poi: Option<&str>,
        yield_variations: &str,
    ) -> PyResult<NativeModel> {
        let variations = yield_variations
            .parse::<histfit_model::YieldVariations>()
            .map_err(bad)?;
        let mut s = match interp {
            "smooth" => Settings::smooth(),
            "pyhf" => Settings::pyhf_defaults(),
            other => {
                return Err(bad(format!(
                    "interp \"{other}\": expected \"smooth\" or \"pyhf\""
                )))
            }
        };
        if let Some(c) = normsys {
            s.normsys = c.parse::<InterpCode>().map_err(bad)?;
        }
        if let Some(c) = histosys {
            s.histosys = c.parse::<InterpCode>().map_err(bad)?;
        }
        s.yield_variations = variations;
        let model = match poi {
            None => compile(&self.ws, measurement, &s),
            Some(p) => {
                let mut ws = self.ws.clone();
                ws.set_poi(measurement, p).map_err(bad)?;
                compile(&ws, measurement, &s)
            }
        }
        .map_err(bad)?;
        Ok(NativeModel::new(Arc::new(model)))
    }
}

/// −2 ln L, its gradient with respect to the parameters, and with respect to the yields (`None`
/// when it was written to the device buffer of [`DeviceYields`]).
type ValueAndGrads<'py> = (
    f64,
    Bound<'py, PyArray1<f64>>,
    Option<Bound<'py, PyArray1<f64>>>,
);

/// Yields that live in GPU memory (PyTorch CUDA tensors): `device` ("cuda:N"), the inputs as
/// `(name, address, length)` of f64 arrays there, and the address of the f64 buffer the yield
/// gradient is written to (all inputs' bins in order). Passed wherever host yields are.
#[pyclass(module = "histfit._native", frozen)]
struct DeviceYields {
    device: String,
    inputs: Vec<(String, u64, usize)>,
    grad_out: u64,
}

#[pymethods]
impl DeviceYields {
    #[new]
    fn new(device: String, inputs: Vec<(String, u64, usize)>, grad_out: u64) -> Self {
        DeviceYields {
            device,
            inputs,
            grad_out,
        }
    }
}

/// Yields as a caller gives them: host arrays by name, or buffers in device memory.
#[derive(FromPyObject)]
enum YieldSource<'py> {
    Device(PyRef<'py, DeviceYields>),
    Host(Vec<(String, PyReadonlyArray1<'py, f64>)>),
}

/// [`YieldSource`] resolved against the model, ready to be used without the GIL.
enum YieldInputs {
    /// Per input sample, its yields.
    Host(Vec<(usize, Vec<f64>)>),
    /// Host yields for the fits on a wgpu adapter (the f32 path; yield gradients from its f64
    /// host evaluator).
    Wgpu(Device, Vec<(usize, Vec<f64>)>),
    Device {
        ordinal: usize,
        inputs: Vec<(String, u64, usize)>,
        grad_out: u64,
    },
}

/// Runs `$body` with `$ev` the evaluator holding the yields of `$inputs` (the CPU evaluator for
/// host yields, the CUDA one for yields in its memory) and `$idx` the input samples: one
/// statistic, whichever device the yields are on.
macro_rules! with_yields {
    ($s:expr, $inputs:expr, |$ev:ident, $idx:ident| $body:expr) => {
        match $inputs {
            YieldInputs::Host(v) => $s
                .with_yields_cpu(|$ev| {
                    let $idx = &histfit_infer::differentiable::set_yields($ev, v)?;
                    $body
                })
                .map_err(infer_err),
            YieldInputs::Wgpu(device, v) => $s.with_yields_wgpu(device, |$ev| {
                let $idx = &histfit_infer::differentiable::set_yields($ev, v)?;
                $body
            }),
            YieldInputs::Device {
                ordinal,
                inputs,
                grad_out,
            } => $s.with_device_yields(*ordinal, inputs, *grad_out, |$ev, $idx| $body),
        }
    };
}

/// A compiled model.
#[pyclass(module = "histfit._native", frozen)]
struct NativeModel {
    model: Arc<Model>,
    /// A CPU evaluator kept between calls (likelihood evaluations in a loop).
    cpu: Mutex<Option<CpuEvaluator>>,
    /// A second one for yields given as inputs (its samples' yields change from call to call).
    yields_cpu: Mutex<Option<CpuEvaluator>>,
    /// The GPU evaluator for yields given in device memory (PyTorch CUDA tensors).
    yields_cuda: Mutex<Option<CudaYields>>,
    /// The wgpu evaluator for host yields fitted on an adapter, with the device it was opened
    /// for.
    yields_wgpu: Mutex<Option<(Device, WgpuYields)>>,
}

impl NativeModel {
    fn new(model: Arc<Model>) -> NativeModel {
        NativeModel {
            model,
            cpu: Mutex::new(None),
            yields_cpu: Mutex::new(None),
            yields_cuda: Mutex::new(None),
            yields_wgpu: Mutex::new(None),
        }
    }

    fn dataset(&self, data: Option<PyReadonlyArray1<'_, f64>>) -> PyResult<Dataset> {
        match data {
            None => Ok(Dataset::observed(&self.model)),
            Some(d) => Dataset::new(&self.model, d.as_slice().map_err(bad)?).map_err(compute_err),
        }
    }

    fn params(&self, pars: &PyReadonlyArray1<'_, f64>) -> PyResult<Vec<f64>> {
        params_of(self.model.n_params(), pars)
    }

    /// Where each `(name, length)` input goes: `(sample, offset in the input, bins)`. A name
    /// alone takes every sample of that name (yields concatenated in channel order),
    /// "channel/sample" one of them.
    fn yield_layout(
        &self,
        inputs: &[(String, usize)],
    ) -> PyResult<Vec<Vec<(usize, usize, usize)>>> {
        let m = &self.model;
        let mut out = Vec::new();
        for (key, len) in inputs {
            let (chan, name) = match key.split_once('/') {
                Some((c, n)) => (Some(c), n),
                None => (None, key.as_str()),
            };
            let idx: Vec<usize> = m
                .samples
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    s.name == name && chan.is_none_or(|c| m.channels[s.channel].name == c)
                })
                .map(|(i, _)| i)
                .collect();
            if idx.is_empty() {
                return Err(bad(format!("yields: no sample \"{key}\" in the model")));
            }
            let total: usize = idx.iter().map(|&i| m.samples[i].n_bins).sum();
            if *len != total {
                return Err(bad(format!(
                    "yields of \"{key}\": expected {total} bins (its channels together), got {len}"
                )));
            }
            let mut at = 0;
            let mut parts = Vec::new();
            for i in idx {
                let nb = m.samples[i].n_bins;
                parts.push((i, at, nb));
                at += nb;
            }
            out.push(parts);
        }
        Ok(out)
    }

    /// The inputs of a call, host or device, checked against the model, for the evaluator of
    /// `device` (`None`: the CPU for host yields, the CUDA device that holds yields in its
    /// memory; a wgpu device fits host yields on that adapter).
    fn yield_inputs(&self, source: YieldSource<'_>, device: Option<&str>) -> PyResult<YieldInputs> {
        let device = device.map(parse_device).transpose()?;
        match (source, device) {
            (YieldSource::Host(v), Some(d @ Device::Wgpu { .. })) => {
                Ok(YieldInputs::Wgpu(d, self.host_yields(v)?))
            }
            (_, Some(d @ (Device::Cuda(_) | Device::CudaSplit(_) | Device::CudaAll)))
            | (YieldSource::Device(_), Some(d)) => Err(bad(format!(
                "device {d}: input yields are fitted on the CPU, a wgpu adapter (host yields), or \
                 the CUDA device whose memory holds them (PyTorch CUDA tensors, no device named)"
            ))),
            (source, _) => self.yield_inputs_of(source),
        }
    }

    /// The inputs of `source` where it decides the evaluator: host yields for the CPU, yields
    /// in CUDA memory for their device.
    fn yield_inputs_of(&self, source: YieldSource<'_>) -> PyResult<YieldInputs> {
        match source {
            YieldSource::Host(v) => Ok(YieldInputs::Host(self.host_yields(v)?)),
            YieldSource::Device(d) => {
                let ordinal = match parse_device(&d.device)? {
                    Device::Cuda(n) => n,
                    Device::Cpu | Device::CudaSplit(_) | Device::CudaAll | Device::Wgpu { .. } => {
                        return Err(bad(format!(
                            "yields in device memory: expected a CUDA device (cuda:N, the one they live on), got {}",
                            d.device
                        )))
                    }
                };
                Ok(YieldInputs::Device {
                    ordinal,
                    inputs: d.inputs.clone(),
                    grad_out: d.grad_out,
                })
            }
        }
    }

    /// Host inputs split into the model's samples (see [`Self::yield_layout`]).
    fn host_yields(
        &self,
        inputs: Vec<(String, PyReadonlyArray1<'_, f64>)>,
    ) -> PyResult<Vec<(usize, Vec<f64>)>> {
        let mut arrays = Vec::new();
        let mut keys = Vec::new();
        for (key, arr) in &inputs {
            let y = arr.as_slice().map_err(bad)?;
            keys.push((key.clone(), y.len()));
            arrays.push(y);
        }
        let layout = self.yield_layout(&keys)?;
        Ok(layout
            .iter()
            .zip(arrays)
            .flat_map(|(parts, y)| {
                parts
                    .iter()
                    .map(move |&(s, at, n)| (s, y[at..at + n].to_vec()))
            })
            .collect())
    }

    /// Device inputs `(name, address, length)` (f64 arrays in GPU memory) and the gradient's
    /// destination, set on the CUDA yields evaluator of device `ordinal`; then `f` with it and
    /// the input samples.
    fn with_device_yields<T>(
        &self,
        ordinal: usize,
        inputs: &[(String, u64, usize)],
        grad_out: u64,
        f: impl FnOnce(&mut CudaYields, &[usize]) -> histfit_infer::Result<T>,
    ) -> PyResult<T> {
        let keys: Vec<(String, usize)> = inputs.iter().map(|i| (i.0.clone(), i.2)).collect();
        let layout = self.yield_layout(&keys)?;
        let mut g = self.yields_cuda.lock().unwrap_or_else(|p| p.into_inner());
        if g.as_ref().is_none_or(|e| e.ordinal() != ordinal) {
            *g = Some(
                CudaYields::new(self.model.clone(), ordinal)
                    .map_err(|e| DeviceError::new_err(e.to_string()))?,
            );
        }
        let ev = g.as_mut().expect("set above");
        let parts: Vec<(usize, u64, usize)> = layout
            .iter()
            .zip(inputs)
            .flat_map(|(parts, (_, ptr, _))| {
                parts
                    .iter()
                    .map(move |&(s, at, n)| (s, ptr + 8 * at as u64, n))
            })
            .collect();
        let idx: Vec<usize> = parts.iter().map(|p| p.0).collect();
        // SAFETY: the caller (histfit.torch) keeps the tensors alive and synchronised for the
        // whole call; the evaluator checks that each range is device memory of its GPU.
        unsafe { ev.set_yields_device(&parts) }.map_err(compute_err)?;
        let total: usize = inputs.iter().map(|i| i.2).sum();
        // SAFETY: as above, for the gradient buffer.
        unsafe { ev.set_grad_output(grad_out, total) }
            .map_err(|e| DeviceError::new_err(e.to_string()))?;
        f(ev, &idx).map_err(infer_err)
    }

    /// The previous call's fits as starting points: both or neither.
    fn warm_starts(
        &self,
        free: Option<PyReadonlyArray1<'_, f64>>,
        cond: Option<PyReadonlyArray1<'_, f64>>,
    ) -> PyResult<Option<(Vec<f64>, Vec<f64>)>> {
        match (free, cond) {
            (Some(a), Some(b)) => Ok(Some((self.params(&a)?, self.params(&b)?))),
            (None, None) => Ok(None),
            _ => Err(bad(
                "warm starts need both the free and the conditional point",
            )),
        }
    }

    /// Runs `f` on the wgpu evaluator of `device`, opened on first use (and again for another
    /// device); a precision fallback becomes a `UserWarning`, as for [`open`].
    fn with_yields_wgpu<T>(
        &self,
        device: &Device,
        f: impl FnOnce(&mut WgpuYields) -> histfit_infer::Result<T>,
    ) -> PyResult<T> {
        let mut g = self.yields_wgpu.lock().unwrap_or_else(|p| p.into_inner());
        if g.as_ref().is_none_or(|(d, _)| d != device) {
            let Device::Wgpu {
                backend,
                adapter,
                precision,
            } = device.clone()
            else {
                return Err(bad(format!("device {device}: not a wgpu device")));
            };
            let ev = WgpuYields::new(self.model.clone(), backend, adapter, precision)
                .map_err(|e| DeviceError::new_err(e.to_string()))?;
            if let Some(w) = ev.batch().session().warning.clone() {
                warn(&format!("device {device}: {w}"))?;
            }
            *g = Some((device.clone(), ev));
        }
        let (_, ev) = g.as_mut().expect("set above");
        f(ev).map_err(infer_err)
    }

    fn with_yields_cpu<T>(&self, f: impl FnOnce(&mut CpuEvaluator) -> T) -> T {
        let mut g = self.yields_cpu.lock().unwrap_or_else(|p| p.into_inner());
        f(g.get_or_insert_with(|| CpuEvaluator::new(self.model.clone())))
    }

    fn with_cpu<T>(&self, f: impl FnOnce(&mut CpuEvaluator) -> T) -> T {
        let mut g = self.cpu.lock().unwrap_or_else(|p| p.into_inner());
        f(g.get_or_insert_with(|| CpuEvaluator::new(self.model.clone())))
    }
}

#[pymethods]
impl NativeModel {
    /// What the compiler or reader warned of or chose (empty bins, the analysis an HS3
    /// document opened, …).
    fn notes(&self) -> Vec<String> {
        self.model.warnings.clone()
    }

    #[getter]
    fn par_names(&self) -> Vec<String> {
        self.model.par_names()
    }
    #[getter]
    fn poi_index(&self) -> Option<usize> {
        self.model.poi
    }
    #[getter]
    fn n_main(&self) -> usize {
        self.model.n_main
    }
    fn suggested_init<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.model.init().into_pyarray(py)
    }
    fn suggested_bounds(&self) -> Vec<(f64, f64)> {
        self.model.bounds()
    }
    fn fixed(&self) -> Vec<bool> {
        self.model.fixed()
    }
    /// The channels in data order: (name, bins, sample names).
    fn channels(&self) -> Vec<(String, usize, Vec<String>)> {
        self.model
            .channels
            .iter()
            .map(|c| (c.name.clone(), c.n_bins, c.samples.clone()))
            .collect()
    }
    /// The parameter sets in parameter order: (name, modifier type, first index, length).
    fn parameter_sets(&self) -> Vec<(String, String, usize, usize)> {
        self.model
            .sets
            .iter()
            .map(|s| (s.name.clone(), s.kind.to_string(), s.start, s.len))
            .collect()
    }
    /// Per parameter, the centre and width of its constraint (pulls are measured in them), or
    /// `None` for a free parameter.
    fn constraints(&self) -> Vec<Option<(f64, f64)>> {
        histfit_compute::histfactory::parameter_space(&self.model)
            .priors
            .iter()
            .map(|p| p.centre_width())
            .collect()
    }
    /// Observed data (main bins, then auxiliary data): pyhf's `workspace.data(model)`.
    fn observed<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.model.observed.clone().into_pyarray(py)
    }
    #[pyo3(signature = (pars, include_aux = true))]
    fn expected_data<'py>(
        &self,
        py: Python<'py>,
        pars: PyReadonlyArray1<'_, f64>,
        include_aux: bool,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let p = self.params(&pars)?;
        let out = py
            .detach(|| {
                self.with_cpu(|ev| {
                    if include_aux {
                        histfit_compute::expected_data(ev, &self.model, &p)
                    } else {
                        let mut v = vec![0.0; self.model.n_main];
                        ev.expected_main(&p, &mut v).map(|_| v)
                    }
                })
            })
            .map_err(compute_err)?;
        Ok(out.into_pyarray(py))
    }
    /// Toy dataset `index` of `seed` generated at `pars` (pyhf's layout, auxiliary data
    /// included): the same draws as the toy ensembles (`fit_toys`) on every device.
    fn toy_data<'py>(
        &self,
        py: Python<'py>,
        pars: PyReadonlyArray1<'_, f64>,
        seed: u64,
        index: u64,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let p = self.params(&pars)?;
        let out = py
            .detach(|| {
                self.with_cpu(|ev| {
                    let toy = ev.toys(&p, seed, index..index + 1)?.pop().expect("one toy");
                    Ok(toy
                        .main
                        .iter()
                        .chain(&toy.aux)
                        .copied()
                        .collect::<Vec<f64>>())
                })
            })
            .map_err(compute_err)?;
        Ok(out.into_pyarray(py))
    }
    /// −2 ln L and its gradient.
    fn twice_nll_and_grad<'py>(
        &self,
        py: Python<'py>,
        pars: PyReadonlyArray1<'_, f64>,
        data: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<(f64, Bound<'py, PyArray1<f64>>)> {
        let p = self.params(&pars)?;
        let d = self.dataset(Some(data))?;
        let (v, g) = py
            .detach(|| self.with_cpu(|ev| twice_nll_grad(ev, &p, &d)))
            .map_err(compute_err)?;
        Ok((v, g.into_pyarray(py)))
    }
    /// −2 ln L at `pars` with the given samples' yields, its gradient with respect to the
    /// parameters, and with respect to the yields (one array per input, in order).
    #[pyo3(signature = (pars, data, yields, device = None))]
    fn twice_nll_and_grad_yields<'py>(
        &self,
        py: Python<'py>,
        pars: PyReadonlyArray1<'_, f64>,
        data: PyReadonlyArray1<'_, f64>,
        yields: YieldSource<'_>,
        device: Option<&str>,
    ) -> PyResult<ValueAndGrads<'py>> {
        let p = self.params(&pars)?;
        let d = self.dataset(Some(data))?;
        let inputs = self.yield_inputs(yields, device)?;
        let (v, g, gy) = py.detach(|| {
            with_yields!(self, &inputs, |ev, idx| {
                histfit_infer::differentiable::twice_nll_yields(ev, &p, &d, idx)
            })
        })?;
        Ok((v, g.into_pyarray(py), gy.map(|y| y.into_pyarray(py))))
    }

    /// Profiled q0 (`discovery`) or one-sided qμ at the given yields, with its gradient with
    /// respect to them (JSON: q, grad, mu_hat, fits' best-fit points for warm starts).
    #[pyo3(signature = (yields, data, mu = 0.0, discovery = true, warm_free = None, warm_cond = None, edm = None, device = None))]
    #[allow(clippy::too_many_arguments)]
    fn profiled_statistic(
        &self,
        py: Python<'_>,
        yields: YieldSource<'_>,
        data: PyReadonlyArray1<'_, f64>,
        mu: f64,
        discovery: bool,
        warm_free: Option<PyReadonlyArray1<'_, f64>>,
        warm_cond: Option<PyReadonlyArray1<'_, f64>>,
        edm: Option<f64>,
        device: Option<&str>,
    ) -> PyResult<String> {
        let d = self.dataset(Some(data))?;
        let inputs = self.yield_inputs(yields, device)?;
        let warm = self.warm_starts(warm_free, warm_cond)?;
        let r = py.detach(|| {
            with_yields!(self, &inputs, |ev, idx| {
                histfit_infer::differentiable::profiled_statistic(
                    ev,
                    &d,
                    idx,
                    mu,
                    discovery,
                    warm.as_ref().map(|(a, b)| (a.as_slice(), b.as_slice())),
                    edm,
                )
            })
        })?;
        to_json(&r)
    }

    /// Expected discovery significance: q0 on the Asimov dataset of μ = 1 built from the given
    /// yields, with its gradient (including the dataset's dependence on the yields). JSON.
    #[pyo3(signature = (yields, warm_free = None, warm_cond = None, edm = None, device = None))]
    fn expected_q0(
        &self,
        py: Python<'_>,
        yields: YieldSource<'_>,
        warm_free: Option<PyReadonlyArray1<'_, f64>>,
        warm_cond: Option<PyReadonlyArray1<'_, f64>>,
        edm: Option<f64>,
        device: Option<&str>,
    ) -> PyResult<String> {
        let inputs = self.yield_inputs(yields, device)?;
        let warm = self.warm_starts(warm_free, warm_cond)?;
        let r = py.detach(|| {
            with_yields!(self, &inputs, |ev, idx| {
                histfit_infer::differentiable::expected_q0(
                    ev,
                    idx,
                    warm.as_ref().map(|(a, b)| (a.as_slice(), b.as_slice())),
                    edm,
                )
            })
        })?;
        to_json(&r)
    }

    /// −2 ln L.
    fn twice_nll(
        &self,
        py: Python<'_>,
        pars: PyReadonlyArray1<'_, f64>,
        data: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<f64> {
        let p = self.params(&pars)?;
        let d = self.dataset(Some(data))?;
        let v = py
            .detach(|| self.with_cpu(|ev| ev.nll(&p, &d)))
            .map_err(compute_err)?;
        Ok(2.0 * v)
    }
}

/// An event-level likelihood (an HS3 document): what `histfit.open` gives for one.
#[pyclass(module = "histfit._native", frozen)]
struct NativeEvents {
    likelihood: Likelihood,
    /// A CPU evaluator kept between calls (likelihood evaluations in a loop).
    cpu: Mutex<Option<AnyEval>>,
    /// The events fitted in place of the observed ones (the Asimov dataset: [`Self::asimov`]).
    data: Option<Dataset>,
}

impl NativeEvents {
    /// The events its requests fit: the observed, or the dataset it was made with.
    fn observed(&self) -> Dataset {
        self.data
            .clone()
            .unwrap_or_else(|| self.likelihood.observed())
    }

    /// The event-level model (of a mixed likelihood: its event-level part).
    fn model(&self) -> &histfit_unbinned::UnbinnedModel {
        match &self.likelihood {
            Likelihood::Events(m) => m,
            Likelihood::Mixed(m) => m.events_model(),
            Likelihood::HistFactory(_) => unreachable!("NativeEvents holds an event-level model"),
        }
    }

    /// The parameters of the whole likelihood.
    fn space(&self) -> ParameterSpace {
        self.likelihood.space()
    }

    fn with_cpu<T>(&self, f: impl FnOnce(&mut AnyEval) -> T) -> PyResult<T> {
        let mut g = self.cpu.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(
                self.likelihood
                    .evaluator(Device::Cpu, false)
                    .map_err(|e| DeviceError::new_err(e.to_string()))?,
            );
        }
        Ok(f(g.as_mut().expect("opened above")))
    }
}

/// Opens the binned HistFactory likelihood of an HS3 document (`histfactory_dist` channels, as
/// ROOT exports a HistFactory workspace) as a binned model; `None` where its likelihood is
/// event-level.
#[pyfunction]
#[pyo3(signature = (text, source, likelihood = None, analysis = None, poi = None))]
fn open_hs3_binned(
    text: &str,
    source: &str,
    likelihood: Option<String>,
    analysis: Option<String>,
    poi: Option<String>,
) -> PyResult<Option<NativeModel>> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("{source}: not JSON: {e}")))?;
    let choice = histfit_unbinned::Choice {
        analysis,
        likelihood,
        ..Default::default()
    };
    let Some(mut l) =
        Likelihood::binned_from_hs3(&doc, &choice).map_err(|e| bad(format!("{source}: {e}")))?
    else {
        return Ok(None);
    };
    if let Some(poi) = poi {
        l.set_poi(&poi).map_err(|e| bad(format!("poi {e}")))?;
    }
    match l {
        Likelihood::HistFactory(m) => Ok(Some(NativeModel::new(m))),
        Likelihood::Events(_) | Likelihood::Mixed(_) => Ok(None),
    }
}

/// The events of one dataset given from Python: its name, the axes' names and columns, and
/// optional weights.
type GivenEvents<'py> = (
    String,
    Vec<String>,
    Vec<PyReadonlyArray1<'py, f64>>,
    Option<PyReadonlyArray1<'py, f64>>,
);

/// Opens the event-level likelihood of an HS3 document (JSON text; `source` names it in
/// messages, `directory` is where files it names lie), with events given as arrays for datasets
/// by name in place of the document's, and the parameter of interest replaced (`"none"`: none).
#[pyfunction]
#[pyo3(signature = (text, source, directory = None, likelihood = None, analysis = None, poi = None, events = Vec::new()))]
fn open_events(
    text: &str,
    source: &str,
    directory: Option<std::path::PathBuf>,
    likelihood: Option<String>,
    analysis: Option<String>,
    poi: Option<String>,
    events: Vec<GivenEvents<'_>>,
) -> PyResult<NativeEvents> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("{source}: not JSON: {e}")))?;
    let events = events
        .into_iter()
        .map(|(name, names, columns, weights)| {
            let columns = columns
                .iter()
                .map(|c| c.as_slice().map(<[f64]>::to_vec).map_err(bad))
                .collect::<PyResult<Vec<_>>>()?;
            let weights = match weights {
                Some(w) => Some(w.as_slice().map_err(bad)?.to_vec()),
                None => None,
            };
            Ok((
                name,
                histfit_compute::EventTable {
                    names,
                    columns,
                    weights,
                },
            ))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let choice = histfit_unbinned::Choice {
        analysis,
        likelihood,
        directory,
        events,
    };
    // Event-level channels, or event-level and binned ones in one likelihood.
    let mut likelihood =
        Likelihood::from_hs3(&doc, &choice).map_err(|e| bad(format!("{source}: {e}")))?;
    if let Likelihood::HistFactory(_) = likelihood {
        return Err(bad(format!(
            "{source}: a binned likelihood (histfactory_dist channels): open it as a binned model"
        )));
    }
    if let Some(poi) = poi {
        likelihood
            .set_poi(&poi)
            .map_err(|e| bad(format!("poi {e}")))?;
    }
    Ok(NativeEvents {
        likelihood,
        cpu: Mutex::new(None),
        data: None,
    })
}

#[pymethods]
impl NativeEvents {
    #[getter]
    fn par_names(&self) -> Vec<String> {
        self.space().names
    }
    #[getter]
    fn poi_index(&self) -> Option<usize> {
        self.space().poi
    }
    fn suggested_init<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.space().init.into_pyarray(py)
    }
    fn suggested_bounds(&self) -> Vec<(f64, f64)> {
        self.space().bounds
    }
    fn fixed(&self) -> Vec<bool> {
        self.space().fixed
    }
    /// Per parameter, the centre and width of its constraint where the likelihood knows one (a
    /// binned channel's modifier, an auxiliary Gaussian of fixed width), else `None`.
    fn constraints(&self) -> Vec<Option<(f64, f64)>> {
        self.space()
            .priors
            .iter()
            .map(|p| p.centre_width())
            .collect()
    }
    /// What the reader assumed or chose (the likelihood it picked, events dropped, …).
    fn notes(&self) -> Vec<String> {
        self.likelihood.notes()
    }
    /// The same model holding its Asimov dataset at `pars` (the expected events on a fine grid
    /// of each observable as weighted events, the global observables at their constraints'
    /// means): what its requests then fit.
    fn asimov(&self, py: Python<'_>, pars: PyReadonlyArray1<'_, f64>) -> PyResult<NativeEvents> {
        let p = params_of(self.space().len(), &pars)?;
        let data = py
            .detach(|| self.with_cpu(|ev| ev.asimov(&p)))?
            .map_err(compute_err)?;
        Ok(NativeEvents {
            likelihood: self.likelihood.clone(),
            cpu: Mutex::new(None),
            data: Some(data),
        })
    }
    /// The events its requests fit (the observed, or the Asimov dataset it holds): per channel
    /// (distribution, dataset), its axes' names, columns and weights.
    #[allow(clippy::type_complexity)]
    fn events<'py>(
        &self,
        py: Python<'py>,
    ) -> Vec<(
        String,
        String,
        Vec<String>,
        Vec<Bound<'py, PyArray1<f64>>>,
        Option<Bound<'py, PyArray1<f64>>>,
    )> {
        let m = self.model();
        let data = self.observed();
        let events = data.events.clone().unwrap_or_else(|| m.observed.clone());
        m.channels
            .iter()
            .zip(&events.channels)
            .map(|(c, t)| {
                (
                    c.name.clone(),
                    c.data.clone(),
                    t.names.clone(),
                    t.columns
                        .iter()
                        .map(|col| col.clone().into_pyarray(py))
                        .collect(),
                    t.weights.clone().map(|w| w.into_pyarray(py)),
                )
            })
            .collect()
    }
    /// −2 ln L at `pars` on the observed events, and its gradient.
    fn twice_nll_and_grad<'py>(
        &self,
        py: Python<'py>,
        pars: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<(f64, Bound<'py, PyArray1<f64>>)> {
        let space = self.space();
        let p = params_of(space.names.len(), &pars)?;
        let d = self.observed();
        let (v, g) = py
            .detach(|| self.with_cpu(|ev| twice_nll_grad(ev, &p, &d)))?
            .map_err(compute_err)?;
        Ok((v, g.into_pyarray(py)))
    }
}

/// −2 ln L at `p` and its gradient, from an evaluator of either kind.
fn twice_nll_grad<E: Evaluator + ?Sized>(
    ev: &mut E,
    p: &[f64],
    d: &Dataset,
) -> histfit_compute::Result<(f64, Vec<f64>)> {
    let mut g = vec![0.0; p.len()];
    let v = ev.nll_grad(p, d, &mut g)?;
    Ok((2.0 * v, g.into_iter().map(|x| 2.0 * x).collect()))
}

/// A parameter vector of `n` values.
fn params_of(n: usize, pars: &PyReadonlyArray1<'_, f64>) -> PyResult<Vec<f64>> {
    let p = pars.as_slice().map_err(bad)?.to_vec();
    if p.len() != n {
        return Err(bad(format!(
            "parameters: expected {n} values, got {}",
            p.len()
        )));
    }
    Ok(p)
}

/// A model of either kind, as the inference functions take it.
#[derive(FromPyObject)]
enum AnyModel<'py> {
    Binned(PyRef<'py, NativeModel>),
    Events(PyRef<'py, NativeEvents>),
}

impl AnyModel<'_> {
    fn likelihood(&self) -> Likelihood {
        match self {
            AnyModel::Binned(m) => Likelihood::HistFactory(m.model.clone()),
            AnyModel::Events(m) => m.likelihood.clone(),
        }
    }

    fn space(&self) -> ParameterSpace {
        self.likelihood().space()
    }

    /// The data: the observed, or (binned models) the given counts; event-level models take
    /// their events at `histfit.open`.
    fn dataset(&self, data: Option<PyReadonlyArray1<'_, f64>>) -> PyResult<Dataset> {
        match (self, data) {
            (AnyModel::Binned(m), d) => m.dataset(d),
            (AnyModel::Events(m), None) => Ok(m.observed()),
            (AnyModel::Events(_), Some(_)) => Err(bad(
                "data: an event-level model fits the events it was opened with (give NumPy events to histfit.open(..., events=...))",
            )),
        }
    }

    fn params(&self, pars: &PyReadonlyArray1<'_, f64>) -> PyResult<Vec<f64>> {
        params_of(self.space().names.len(), pars)
    }

    /// The model's evaluator on `device` (for toy ensembles where `ensembles`).
    fn evaluator(&self, device: &str, ensembles: bool) -> PyResult<AnyEval> {
        evaluator_of(&self.likelihood(), device, ensembles)
    }

    /// The fit options of a request (see [`fit_options_with_bounds`]), with the kind's default
    /// starts ([`Likelihood::default_starts`], as the CLI's).
    fn fit_options(
        &self,
        init: Option<PyReadonlyArray1<'_, f64>>,
        fix: Vec<(usize, f64)>,
        bounds: Option<Vec<(f64, f64)>>,
    ) -> PyResult<FitOptions> {
        let mut o = fit_options_with_bounds(self.space(), init, fix, bounds)?;
        o.starts = self.default_starts();
        Ok(o)
    }

    fn default_starts(&self) -> Starts {
        self.likelihood().default_starts()
    }

    /// The binned model, or an error naming what needed one.
    fn binned(&self, what: &str) -> PyResult<Arc<Model>> {
        match self {
            AnyModel::Binned(m) => Ok(m.model.clone()),
            AnyModel::Events(_) => Err(bad(format!(
                "{what} needs a binned (HistFactory) model; this is an event-level model"
            ))),
        }
    }
}

/// The fit options of a request: starting point, fixed parameters (checked against the bounds
/// in force) and replacement bounds for every parameter.
fn fit_options_with_bounds(
    mut space: ParameterSpace,
    init: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    bounds: Option<Vec<(f64, f64)>>,
) -> PyResult<FitOptions> {
    let mut o = FitOptions::default();
    let n = space.names.len();
    if let Some(b) = bounds {
        if b.len() != n {
            return Err(bad(format!(
                "bounds: expected {} (lower, upper) pairs, got {}",
                n,
                b.len()
            )));
        }
        if let Some((i, (lo, hi))) = b
            .iter()
            .enumerate()
            .find(|(_, (lo, hi))| !(lo.is_finite() && hi.is_finite() && lo < hi))
        {
            return Err(bad(format!(
                "bounds of \"{}\": ({lo}, {hi}) is not an interval",
                space.names[i]
            )));
        }
        space.bounds = b.clone();
        o.bounds = Some(b);
    }
    if let Some(i) = init {
        let v = i.as_slice().map_err(bad)?.to_vec();
        if v.len() != n {
            return Err(bad(format!("init: expected {} values, got {}", n, v.len())));
        }
        o.init = Some(v);
    }
    for (i, v) in fix {
        if i >= n {
            return Err(bad(format!("fixed parameter index {i} out of range")));
        }
        histfit_infer::check_fixed_value(&space, i, v).map_err(infer_err)?;
        o.fix.push((i, v));
    }
    Ok(o)
}

/// Ensembles are held in memory whole: refuse sizes that cannot be (shard larger ones).
fn check_n_toys(n: u64) -> PyResult<()> {
    const MAX: u64 = 100_000_000;
    if n > MAX {
        return Err(bad(format!(
            "n_toys = {n}: at most {MAX} per call (run larger ensembles in parts)"
        )));
    }
    Ok(())
}

fn to_json<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

fn test_stat(s: &str) -> PyResult<TestStat> {
    s.parse::<TestStat>().map_err(bad)
}

/// Maximum likelihood fit; returns the result document (JSON).
#[pyfunction]
#[pyo3(signature = (model, data = None, init = None, fix = Vec::new(), uncertainties = true, device = "cpu", starts = None, bounds = None, max_hessian_parameters = None))]
#[allow(clippy::too_many_arguments)]
fn fit(
    py: Python<'_>,
    model: AnyModel<'_>,
    data: Option<PyReadonlyArray1<'_, f64>>,
    init: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    uncertainties: bool,
    device: &str,
    starts: Option<usize>,
    bounds: Option<Vec<(f64, f64)>>,
    max_hessian_parameters: Option<usize>,
) -> PyResult<String> {
    let d = model.dataset(data)?;
    let mut o = model.fit_options(init, fix, bounds)?;
    o.uncertainties = uncertainties;
    o.max_dense_parameters = max_hessian_parameters;
    o.starts = starts.map_or(model.default_starts(), Starts::Count);
    let mut ev = model.evaluator(device, false)?;
    let r = py
        .detach(|| histfit_infer::fit(&mut ev, &d, &o))
        .map_err(infer_err)?;
    let mut doc = serde_json::to_value(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    // Weighted events (not an Asimov dataset's expected counts): the three estimates.
    if let (AnyModel::Events(m), true) = (&model, uncertainties) {
        if m.data.is_none() {
            let likelihood = model.likelihood();
            match py.detach(|| likelihood.weighted_uncertainties(&d, &r)) {
                Some(Ok(w)) => doc["weighted_uncertainties"] = serde_json::json!(w),
                Some(Err(e)) => {
                    doc["weighted_uncertainties_error"] = serde_json::json!(e.to_string())
                }
                None => {}
            }
        }
    }
    to_json(&doc)
}

fn workspace_value(text: &str) -> PyResult<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("workspace: invalid JSON: {e}")))?;
    Workspace::from_value(&v).map_err(bad)?;
    Ok(v)
}

/// Two workspaces (JSON text) combined as pyhf combines them; JSON text.
#[pyfunction]
#[pyo3(signature = (left, right, join = "none", merge_channels = false))]
fn workspace_combine(
    left: &str,
    right: &str,
    join: &str,
    merge_channels: bool,
) -> PyResult<String> {
    let join: histfit_model::tools::Join = join.parse().map_err(bad)?;
    let w = histfit_model::tools::combine(
        &workspace_value(left)?,
        &workspace_value(right)?,
        join,
        merge_channels,
    )
    .map_err(bad)?;
    to_json(&w)
}

/// pyhf's digest (SHA-256 hex) of a workspace given as JSON text.
#[pyfunction]
fn workspace_digest(text: &str) -> PyResult<String> {
    Ok(histfit_model::tools::digest(&workspace_value(text)?))
}

/// A HistFactory XML configuration imported as pyhf's xml2json does: (workspace JSON text,
/// warnings). `mounts`: (host, mount) pairs.
#[pyfunction]
#[pyo3(signature = (config, basedir, mounts))]
fn xml2json(
    config: &str,
    basedir: &str,
    mounts: Vec<(String, String)>,
) -> PyResult<(String, Vec<String>)> {
    let mounts: Vec<histfit_import::Mount> = mounts
        .into_iter()
        .map(|(host, mount)| histfit_import::Mount {
            host: host.into(),
            mount: mount.into(),
        })
        .collect();
    let imported = histfit_import::xml2json(
        std::path::Path::new(config),
        std::path::Path::new(basedir),
        &mounts,
    )
    .map_err(|e| HistfitError::new_err(e.to_string()))?;
    Ok((to_json(&imported.workspace)?, imported.warnings))
}

/// The figure of plot `kind` drawn from a result document (JSON text): JSON text of its panels,
/// axes and elements, which `histfit.plot` draws with matplotlib.
/// `style`: a style file's content (JSON text; `histfit_plot::style`); `region`: one channel of
/// a yields or distributions document.
#[pyfunction]
#[pyo3(signature = (kind, document, top = None, style = None, region = None))]
fn plot_figure(
    kind: &str,
    document: &str,
    top: Option<usize>,
    style: Option<&str>,
    region: Option<String>,
) -> PyResult<String> {
    let doc: serde_json::Value = serde_json::from_str(document)
        .map_err(|e| HistfitError::new_err(format!("document: malformed JSON: {e}")))?;
    let style = match style {
        None => None,
        Some(text) => {
            let v: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| HistfitError::new_err(format!("style: malformed JSON: {e}")))?;
            Some(
                histfit_plot::Style::from_value(&v)
                    .map_err(|e| HistfitError::new_err(e.to_string()))?,
            )
        }
    };
    let warnings = style
        .as_ref()
        .map_or_else(Vec::new, |s| s.unmatched(kind, &doc));
    let opts = histfit_plot::Options {
        top,
        size: None,
        style,
        region,
    };
    let figure = histfit_plot::figure(kind, &doc, &opts)
        .map_err(|e| HistfitError::new_err(e.to_string()))?;
    let mut v = serde_json::to_value(&figure).map_err(|e| HistfitError::new_err(e.to_string()))?;
    if !warnings.is_empty() {
        v["warnings"] = serde_json::json!(warnings);
    }
    to_json(&v)
}

/// The workspace (JSON text) sorted as pyhf sorts it; JSON text.
#[pyfunction]
fn workspace_sorted(text: &str) -> PyResult<String> {
    to_json(&histfit_model::tools::sorted(&workspace_value(text)?))
}

/// The workspace (JSON text) pruned and renamed; `prune`: kind → names, `rename`: kind →
/// {old: new}, kinds channels, samples, modifiers, modifier_types (prune only), measurements.
#[pyfunction]
fn workspace_prune_and_rename(
    text: &str,
    prune: std::collections::HashMap<String, Vec<String>>,
    rename: std::collections::HashMap<String, std::collections::HashMap<String, String>>,
) -> PyResult<String> {
    let v = workspace_value(text)?;
    for k in prune.keys().chain(rename.keys()) {
        if ![
            "channels",
            "samples",
            "modifiers",
            "modifier_types",
            "measurements",
        ]
        .contains(&k.as_str())
        {
            return Err(bad(format!("unknown kind \"{k}\" to prune or rename")));
        }
    }
    let p = |k: &str| prune.get(k).cloned().unwrap_or_default();
    let r = |k: &str| rename.get(k).cloned().unwrap_or_default();
    let e = histfit_model::tools::Edits {
        prune_channels: p("channels"),
        prune_samples: p("samples"),
        prune_modifiers: p("modifiers"),
        prune_modifier_types: p("modifier_types"),
        prune_measurements: p("measurements"),
        rename_channels: r("channels"),
        rename_samples: r("samples"),
        rename_modifiers: r("modifiers"),
        rename_measurements: r("measurements"),
    };
    to_json(&histfit_model::tools::prune_and_rename(&v, &e).map_err(bad)?)
}

/// MINOS intervals of the parameters `which` (indices) around the fit (JSON list).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (model, which, data = None, fix = Vec::new(), device = "cpu", init = None, bounds = None))]
fn minos(
    py: Python<'_>,
    model: AnyModel<'_>,
    which: Vec<usize>,
    data: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    device: &str,
    init: Option<PyReadonlyArray1<'_, f64>>,
    bounds: Option<Vec<(f64, f64)>>,
) -> PyResult<String> {
    let d = model.dataset(data)?;
    let mut o = model.fit_options(init, fix, bounds)?;
    o.uncertainties = true;
    let mut ev = model.evaluator(device, false)?;
    let r = py
        .detach(|| {
            let nominal = histfit_infer::fit(&mut ev, &d, &o)?;
            histfit_infer::minos(&mut ev, &d, &nominal, &which, &o)
        })
        .map_err(infer_err)?;
    to_json(&r)
}

/// Pre-fit or post-fit yields per channel, sample and bin with propagated uncertainties (JSON).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (model, postfit = false, data = None, fix = Vec::new(), device = "cpu", init = None, bounds = None, max_hessian_parameters = None))]
fn yields(
    py: Python<'_>,
    model: AnyModel<'_>,
    postfit: bool,
    data: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    device: &str,
    init: Option<PyReadonlyArray1<'_, f64>>,
    bounds: Option<Vec<(f64, f64)>>,
    max_hessian_parameters: Option<usize>,
) -> PyResult<String> {
    let d = model.dataset(data)?;
    let mut o = model.fit_options(init, fix, bounds)?;
    o.max_dense_parameters = max_hessian_parameters;
    // A mixed likelihood's table is of its binned channels, at the whole likelihood's fit.
    let likelihood = model.likelihood();
    if let Likelihood::Events(_) = &likelihood {
        model.binned("yields")?;
    }
    let mut ev = model.evaluator(device, false)?;
    let e = py
        .detach(|| histfit_infer::parameter_estimate(&mut ev, &d, &o, postfit))
        .map_err(infer_err)?;
    let (m, params, covariance) = likelihood
        .binned_view("yields", &e.params, &e.covariance)
        .map_err(|e| bad(e.to_string()))?;
    let table = py
        .detach(|| {
            histfit_compute::histfactory::yields(
                &mut CpuEvaluator::new(m),
                &params,
                &covariance,
                &d.main,
            )
        })
        .map_err(compute_err)?;
    to_json(&table)
}

/// An event-level model's events histogrammed against the expected counts per bin, in total and
/// per component, with pulls (JSON: the document of `histfit distributions --json`).
#[pyfunction]
#[pyo3(signature = (model, bins = 50, prefit = false, fix = Vec::new(), init = None, bounds = None))]
fn distributions(
    py: Python<'_>,
    model: AnyModel<'_>,
    bins: usize,
    prefit: bool,
    fix: Vec<(usize, f64)>,
    init: Option<PyReadonlyArray1<'_, f64>>,
    bounds: Option<Vec<(f64, f64)>>,
) -> PyResult<String> {
    let likelihood = model.likelihood();
    if let Likelihood::HistFactory(_) = &likelihood {
        return Err(bad("distributions draws event-level models"));
    }
    if bins == 0 || bins > 100_000 {
        return Err(bad(format!("bins = {bins}: between 1 and 100 000")));
    }
    let o = model.fit_options(init, fix, bounds)?;
    let d = model.dataset(None)?;
    let mut ev = model.evaluator("cpu", false)?;
    let e = py
        .detach(|| histfit_infer::parameter_estimate(&mut ev, &d, &o, !prefit))
        .map_err(infer_err)?;
    let (events, at) = likelihood
        .events_view(&e.params)
        .expect("an event-level model (checked above)");
    let (channels, notes) =
        histfit_unbinned::histogram::histograms(events, &at, bins).map_err(bad)?;
    let channels: Vec<serde_json::Value> = channels.iter().map(|c| c.document()).collect();
    to_json(&serde_json::json!({
        "kind": "distributions", "postfit": !prefit, "par_names": likelihood.space().names,
        "parameters": e.params, "channels": channels, "notes": notes,
    }))
}

/// Goodness of fit against the saturated model (JSON).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (model, data = None, fix = Vec::new(), device = "cpu", init = None, bounds = None))]
fn goodness_of_fit(
    py: Python<'_>,
    model: AnyModel<'_>,
    data: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    device: &str,
    init: Option<PyReadonlyArray1<'_, f64>>,
    bounds: Option<Vec<(f64, f64)>>,
) -> PyResult<String> {
    let d = model.dataset(data)?;
    let o = model.fit_options(init, fix, bounds)?;
    let mut ev = model.evaluator(device, false)?;
    let r = py
        .detach(|| {
            let r = histfit_infer::fit(&mut ev, &d, &o)?;
            histfit_infer::goodness_of_fit(&mut ev, &d, &r)
        })
        .map_err(infer_err)?;
    to_json(&r)
}

/// Asymptotic hypothesis test at `mu` (JSON).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (model, mu, data = None, test_stat = "qtilde", device = "cpu", init = None, fix = Vec::new(), bounds = None, expected_at = None))]
fn hypotest(
    py: Python<'_>,
    model: AnyModel<'_>,
    mu: f64,
    data: Option<PyReadonlyArray1<'_, f64>>,
    test_stat: &str,
    device: &str,
    init: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    bounds: Option<Vec<(f64, f64)>>,
    expected_at: Option<f64>,
) -> PyResult<String> {
    let o = model.fit_options(init, fix, bounds)?;
    let d = model.dataset(data)?;
    let ts = self::test_stat(test_stat)?;
    // q0's expected figures at the model's signal hypothesis, as `significance`.
    let alternative = expected_at.or(model.likelihood().discovery_alternative().0);
    let mut ev = model.evaluator(device, false)?;
    let r = py
        .detach(|| {
            let calc = AsymptoticCalculator::new(&mut ev, d, ts, o.clone())?;
            match ts {
                TestStat::Q0 => calc.with_q0_alternative(alternative)?,
                _ => calc,
            }
            .hypotest(mu)
        })
        .map_err(infer_err)?;
    to_json(&r)
}

/// Observed and expected upper limits (JSON).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (model, data = None, alpha = 0.05, test_stat = "qtilde", device = "cpu", init = None, fix = Vec::new(), bounds = None))]
fn upper_limit(
    py: Python<'_>,
    model: AnyModel<'_>,
    data: Option<PyReadonlyArray1<'_, f64>>,
    alpha: f64,
    test_stat: &str,
    device: &str,
    init: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    bounds: Option<Vec<(f64, f64)>>,
) -> PyResult<String> {
    let o = model.fit_options(init, fix, bounds)?;
    let d = model.dataset(data)?;
    let ts = self::test_stat(test_stat)?;
    let mut ev = model.evaluator(device, false)?;
    let r = py
        .detach(|| {
            histfit_infer::upper_limit(
                &mut ev,
                &d,
                alpha,
                ts,
                &o,
                histfit_infer::limits::DEFAULT_RTOL,
            )
        })
        .map_err(infer_err)?;
    to_json(&r)
}

/// Profile likelihood scan of the POI (JSON).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (model, values, data = None, device = "cpu", init = None, fix = Vec::new(), bounds = None))]
fn profile_scan(
    py: Python<'_>,
    model: AnyModel<'_>,
    values: Vec<f64>,
    data: Option<PyReadonlyArray1<'_, f64>>,
    device: &str,
    init: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    bounds: Option<Vec<(f64, f64)>>,
) -> PyResult<String> {
    let o = model.fit_options(init, fix, bounds)?;
    let d = model.dataset(data)?;
    let mut ev = model.evaluator(device, false)?;
    let r = py
        .detach(|| histfit_infer::profile_scan(&mut ev, &d, &values, &o, &mut |_, _| {}))
        .map_err(infer_err)?;
    to_json(&r)
}

/// Discovery significance (JSON).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (model, data = None, device = "cpu", init = None, fix = Vec::new(), bounds = None, expected_at = None))]
fn significance(
    py: Python<'_>,
    model: AnyModel<'_>,
    data: Option<PyReadonlyArray1<'_, f64>>,
    device: &str,
    init: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    bounds: Option<Vec<(f64, f64)>>,
    expected_at: Option<f64>,
) -> PyResult<String> {
    let o = model.fit_options(init, fix, bounds)?;
    let d = model.dataset(data)?;
    let at = expected_at.or(model.likelihood().discovery_alternative().0);
    let mut ev = model.evaluator(device, false)?;
    let r = py
        .detach(|| histfit_infer::significance(&mut ev, &d, &o.clone(), at))
        .map_err(infer_err)?;
    to_json(&r)
}

/// Nuisance-parameter ranking (JSON).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (model, data = None, device = "cpu", init = None, fix = Vec::new(), bounds = None, max_hessian_parameters = None))]
fn ranking(
    py: Python<'_>,
    model: AnyModel<'_>,
    data: Option<PyReadonlyArray1<'_, f64>>,
    device: &str,
    init: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    bounds: Option<Vec<(f64, f64)>>,
    max_hessian_parameters: Option<usize>,
) -> PyResult<String> {
    let mut o = model.fit_options(init, fix, bounds)?;
    o.max_dense_parameters = max_hessian_parameters;
    let d = model.dataset(data)?;
    let ev = model.evaluator(device, false)?;
    let r = py
        .detach(|| histfit_infer::ranking(&ev, &d, &o, &|_, _| {}))
        .map_err(infer_err)?;
    to_json(&r)
}

/// Fits toys generated at `gen`, or (`gen` None) at the free fit of `data` (default: the
/// observed data) — the CLI's default too, both through histfit-infer's `generation_point`.
/// Returns the ensemble document (JSON): generating parameters, per-toy fits and summary.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (model, gen, n_toys, seed = 0, device = "cpu", data = None, init = None, fix = Vec::new(), bounds = None, starts = None))]
fn fit_toys(
    py: Python<'_>,
    model: AnyModel<'_>,
    gen: Option<PyReadonlyArray1<'_, f64>>,
    n_toys: u64,
    seed: u64,
    device: &str,
    data: Option<PyReadonlyArray1<'_, f64>>,
    init: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    bounds: Option<Vec<(f64, f64)>>,
    starts: Option<usize>,
) -> PyResult<String> {
    let o = model.fit_options(init, fix, bounds)?;
    // The asked starts are the toys' fits' (the generating point's fit is made without them:
    // the same toys either way).
    let toy_fits = FitOptions {
        starts: starts.map_or(model.default_starts(), Starts::Count),
        ..o.clone()
    };
    let at = match &gen {
        Some(g) => histfit_infer::GenPoint::Given(model.params(g)?),
        None => histfit_infer::GenPoint::FreeFit,
    };
    let d = model.dataset(data)?;
    check_n_toys(n_toys)?;
    let m = model.likelihood();
    let r = py.detach(|| -> PyResult<histfit_infer::ToyEnsemble> {
        with_runner!(m, device, |runner| {
            let gen = {
                let mut one = ToyRunner::single(&runner);
                histfit_infer::generation_point(&mut *one, &d, &at, &o).map_err(|e| {
                    histfit_infer::InferError::Request(format!(
                        "{e} (pass gen_params= to draw the toys elsewhere)"
                    ))
                })
            };
            gen.and_then(|g| {
                fit_toys_on(&runner, &g, seed, n_toys, 0..n_toys, &toy_fits, &|_, _| {}).map(
                    |toys| {
                        histfit_infer::ToyEnsemble::new(seed, n_toys, g, toys)
                            .with_starts(toy_fits.starts)
                    },
                )
            })
        })
    })?;
    to_json(&r)
}

/// Toy-based CLs at `mu` (JSON).
#[pyfunction]
#[pyo3(signature = (model, mu, n_toys, data = None, seed = 0, test_stat = "qtilde", device = "cpu", init = None, fix = Vec::new(), bounds = None, starts = None, expected_at = None))]
#[allow(clippy::too_many_arguments)]
fn hypotest_toys(
    py: Python<'_>,
    model: AnyModel<'_>,
    mu: f64,
    n_toys: u64,
    data: Option<PyReadonlyArray1<'_, f64>>,
    seed: u64,
    test_stat: &str,
    device: &str,
    init: Option<PyReadonlyArray1<'_, f64>>,
    fix: Vec<(usize, f64)>,
    bounds: Option<Vec<(f64, f64)>>,
    starts: Option<usize>,
    expected_at: Option<f64>,
) -> PyResult<String> {
    let mut o = model.fit_options(init, fix, bounds)?;
    o.starts = starts.map_or(model.default_starts(), Starts::Count);
    let d = model.dataset(data)?;
    let ts = self::test_stat(test_stat)?;
    check_n_toys(n_toys)?;
    let m = model.likelihood();
    // q0's second ensemble at the model's signal hypothesis, as `significance`.
    let alternative = expected_at.or(m.discovery_alternative().0);
    let r = py.detach(|| -> PyResult<histfit_infer::ToyHypotest> {
        with_runner!(m, device, |runner| hypotest_toys_on(
            &runner,
            &d,
            mu,
            ts,
            alternative,
            seed,
            n_toys,
            0..n_toys,
            &o,
            &|_, _| {}
        ))
    })?;
    to_json(&r)
}

/// The devices histfit can use: a JSON document with the CPU and CUDA devices (or why none).
#[pyfunction]
fn devices() -> PyResult<String> {
    to_json(&histfit_device::devices_document())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<NativeWorkspace>()?;
    m.add_class::<NativeModel>()?;
    m.add_class::<NativeEvents>()?;
    m.add_function(wrap_pyfunction!(open_events, m)?)?;
    m.add_function(wrap_pyfunction!(open_hs3_binned, m)?)?;
    m.add_class::<DeviceYields>()?;
    m.add_function(wrap_pyfunction!(fit, m)?)?;
    m.add_function(wrap_pyfunction!(minos, m)?)?;
    m.add_function(wrap_pyfunction!(yields, m)?)?;
    m.add_function(wrap_pyfunction!(distributions, m)?)?;
    m.add_function(wrap_pyfunction!(workspace_digest, m)?)?;
    m.add_function(wrap_pyfunction!(xml2json, m)?)?;
    m.add_function(wrap_pyfunction!(plot_figure, m)?)?;
    m.add_function(wrap_pyfunction!(workspace_combine, m)?)?;
    m.add_function(wrap_pyfunction!(workspace_sorted, m)?)?;
    m.add_function(wrap_pyfunction!(workspace_prune_and_rename, m)?)?;
    m.add_function(wrap_pyfunction!(goodness_of_fit, m)?)?;
    m.add_function(wrap_pyfunction!(hypotest, m)?)?;
    m.add_function(wrap_pyfunction!(upper_limit, m)?)?;
    m.add_function(wrap_pyfunction!(profile_scan, m)?)?;
    m.add_function(wrap_pyfunction!(significance, m)?)?;
    m.add_function(wrap_pyfunction!(ranking, m)?)?;
    m.add_function(wrap_pyfunction!(fit_toys, m)?)?;
    m.add_function(wrap_pyfunction!(hypotest_toys, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add("HistfitError", m.py().get_type::<HistfitError>())?;
    m.add("DeviceError", m.py().get_type::<DeviceError>())?;
    Ok(())
}
