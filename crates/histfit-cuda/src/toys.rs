//! Toys generated on the device: the same Philox4x32-10 streams and samplers as
//! `histfit_compute::rng`, ported line for line to `histfit.cu`, so toy `i` of seed `s` is
//! bit-identical on the CPU and the GPU.

use crate::batch::Session;
use crate::layout::KIND_GAUSS;
use crate::{driver, Result};
use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use histfit_model::{Constraint, Model};

/// What the generator needs besides the expected main counts, per auxiliary datum: the
/// constraint kind, the centre (θ for a Gaussian, θ·τ for a Poisson constraint) and σ.
pub(crate) struct AuxInputs {
    pub kind: Vec<i32>,
    pub center: Vec<f64>,
    pub sigma: Vec<f64>,
}

impl AuxInputs {
    pub fn new(m: &Model, params: &[f64]) -> AuxInputs {
        let n_aux = m.n_aux();
        let mut a = AuxInputs {
            kind: Vec::with_capacity(n_aux),
            center: Vec::with_capacity(n_aux),
            sigma: Vec::with_capacity(n_aux),
        };
        for &p in &m.aux_params {
            let (kind, center, sigma) = match m.parameters[p].constraint {
                Constraint::Gauss { sigma: s } => (KIND_GAUSS, params[p], s),
                Constraint::Poisson { tau } => (crate::layout::KIND_POISSON, params[p] * tau, 0.0),
                Constraint::None => (crate::layout::KIND_NONE, 0.0, 0.0),
            };
            a.kind.push(kind);
            a.center.push(center);
            a.sigma.push(sigma);
        }
        a
    }
}

/// Toys `first .. first + count` of `seed`, generated at `params` whose expected main counts are
/// `expected_main` (computed by the caller, so the CPU and GPU sample the same rates). Returns
/// `count` rows of main bins followed by auxiliary data.
pub fn generate(
    session: &Session,
    expected_main: &[f64],
    params: &[f64],
    seed: u64,
    first: u64,
    count: usize,
) -> Result<Vec<f64>> {
    let m: &Model = &session.model;
    let stream = session.gpu.ctx.default_stream();
    let (n_main, n_aux) = (m.n_main, m.n_aux());
    let AuxInputs {
        kind,
        center,
        sigma,
    } = AuxInputs::new(m, params);
    let pad = |v: Vec<f64>| if v.is_empty() { vec![0.0] } else { v };
    let lam_d = stream
        .clone_htod(&pad(expected_main.to_vec()))
        .map_err(driver("upload of toy rates"))?;
    let kind_d = stream
        .clone_htod(&if kind.is_empty() { vec![0] } else { kind })
        .map_err(driver("upload of toy constraints"))?;
    let center_d = stream
        .clone_htod(&pad(center))
        .map_err(driver("upload of toy constraints"))?;
    let sigma_d = stream
        .clone_htod(&pad(sigma))
        .map_err(driver("upload of toy constraints"))?;
    let row = n_main + n_aux;
    let mut out_d = stream
        .alloc_zeros::<f64>((count * row).max(1))
        .map_err(driver("cuMemAlloc (toys)"))?;
    if count > 0 {
        let threads = 128u32;
        let cfg = LaunchConfig {
            grid_dim: ((count as u32).div_ceil(threads), 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let (c, nm, na) = (count as i32, n_main as i32, n_aux as i32);
        let p_lam = lam_d.device_ptr(&stream).0;
        let p_kind = kind_d.device_ptr(&stream).0;
        let p_center = center_d.device_ptr(&stream).0;
        let p_sigma = sigma_d.device_ptr(&stream).0;
        let p_out = out_d.device_ptr_mut(&stream).0;
        let mut l = stream.launch_builder(&session.kernels.generate_toys);
        l.arg(&seed)
            .arg(&first)
            .arg(&c)
            .arg(&nm)
            .arg(&na)
            .arg(&p_lam)
            .arg(&p_kind)
            .arg(&p_center)
            .arg(&p_sigma)
            .arg(&p_out);
        // SAFETY: arguments match `generate_toys`; `out` holds count × row values.
        unsafe { l.launch(cfg) }.map_err(driver("launch of generate_toys"))?;
    }
    let mut out = stream
        .clone_dtoh(&out_d)
        .map_err(driver("download of toys"))?;
    stream.synchronize().map_err(driver("generate_toys"))?;
    out.truncate(count * row);
    Ok(out)
}
