//! Issue 23's design question, measured: the likelihood and its gradient evaluated with one
//! thread per problem ("lane per toy": every lane of a warp walks the same table entry for its
//! own toy, the tables' loads shared by the warp, each toy's vectors laid out toy-fastest so
//! that the lanes' loads coalesce) against the kernels' present layout, one block of threads
//! per problem (`nll_grad_batch`, whose body `eval_point` is what the resident fits call).
//!
//! `cargo run --release -p histfit-device --example lane_bench -- WS SETTING N...`: `WS` a
//! fixture name (`HISTFIT_FIXTURES` points at the folder), `SETTING` smooth or pyhf, then the
//! numbers of problems (default 4096 16384 65536). Each problem is the model's initial point
//! moved a little (a different point per problem) against the observed data. Prints, per size,
//! the time of one launch and per evaluation for both layouts (the block layout at most
//! `MAX_LAUNCH` problems a launch, as the evaluator launches them), and the largest relative
//! difference between the two layouts' values and gradients (NaN where either is NaN). The lane
//! kernel takes a normsys entry's gradient as F/κ without `eval_point`'s fallback where F or κ
//! is zero or subnormal: a benchmark of points where neither is.

use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use histfit_compute::flat::HostTables;
use histfit_compute::{BatchEvaluator, Dataset};
use histfit_cuda::layout::DeviceTables;
use histfit_cuda::CudaBatch;
use histfit_testutil::{load, off_init_batch, settings};
use std::time::Instant;

/// The lane kernel; compiled after the part of histfit.cu that defines the interpolation
/// helpers (`normsys_factor`, `histo_row`) and `struct Tables` (everything before `fixed_sum`).
const LANE_SOURCE: &str = r#"
// One thread per problem; problem p's value i of a per-problem vector at v[i * n + p].
extern "C" __global__ void __launch_bounds__(128) lane_nll_grad(Tables tb, int n_problems,
        const double* __restrict__ X, const double* __restrict__ D, double* __restrict__ out_nll,
        double* __restrict__ G, double* __restrict__ scr, double wall) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n_problems) return;
    const long long n = n_problems;
    const int P = tb.n_params, M = tb.n_main, S = tb.n_samples, SB = tb.n_sb, NS = tb.n_ns;
#define AT(v, i) (v)[(long long)(i) * n]
    const double* x = X + p;
    const double* dat = D + p;
    double* g = G + p;
    double* kv = scr + p;
    double* kd = kv + NS * n;
    double* F = kd + NS * n;
    double* base = F + S * n;
    double* binfac = base + SB * n;
    double* dlam = binfac + SB * n;
    double* wsamp = dlam + M * n;
    for (int i = 0; i < P; ++i) AT(g, i) = 0.0;
    for (int e = 0; e < NS; ++e) {
        const int code = tb.ns_code[e];
        const double a = AT(x, tb.ns_par[e]);
        double v, d;
        normsys_factor(code, tb.ns_coef + 8 * e, a, &v, &d);
        AT(kv, e) = v;
        AT(kd, e) = d;
    }
    for (int s = 0; s < S; ++s) {
        const int* sm = tb.smp + 9 * s;
        double f = 1.0;
        for (int j = sm[3]; j < sm[4]; ++j) f *= AT(x, tb.sf_par[j]);
        for (int e = sm[5]; e < sm[6]; ++e) f *= AT(kv, e);
        AT(F, s) = f;
    }
    for (int sb = 0; sb < SB; ++sb) {
        const int* sm = tb.smp + 9 * tb.sb_sample[sb];
        const int k = sb - sm[2];
        double b = tb.nominal[sb];
        const double scale = sm[8] > sm[7] ? hs_scale(tb, sb) : 1.0;
        for (int e = sm[7]; e < sm[8]; ++e) {
            const int r = tb.hs_row[e] + k;
            double dl, dd;
            histo_row(tb.hs_code[e], tb.hs_coef + 4 * r, tb.hs_poly + 6 * r, AT(x, tb.hs_par[e]), &dl, &dd);
            b += dl * scale;
        }
        AT(base, sb) = b;
        double bf = 1.0;
        for (int j = tb.bf_off[sb]; j < tb.bf_off[sb + 1]; ++j) bf *= AT(x, tb.bf_par[j]);
        AT(binfac, sb) = bf;
    }
    double nll = 0.0;
    bool invalid = false;
    for (int b = 0; b < M; ++b) {
        double l = 0.0;
        for (int j = tb.bin_off[b]; j < tb.bin_off[b + 1]; ++j) {
            const int sb = tb.bin_sb[j];
            l += AT(base, sb) * AT(binfac, sb) * AT(F, tb.sb_sample[sb]);
        }
        const double nb = AT(dat, b);
        double dl;
        if ((nb > 0.0 && !(l > 0.0)) || isnan(l)) {
            invalid = true;
            dl = 0.0;
        } else if (nb > 0.0) {
            nll += l - nb - nb * log(l / nb);
            dl = 1.0 - nb / l;
        } else if (l >= 0.0) {
            nll += l;
            dl = 1.0;
        } else {
            nll += l + l * l / (2.0 * wall);
            dl = 1.0 + l / wall;
        }
        AT(dlam, b) = dl;
    }
    for (int k = 0; k < tb.n_aux; ++k) {
        const int par = tb.aux_par[k];
        const double xv = AT(x, par), a = AT(dat, M + k), c = tb.aux_const[k];
        if (tb.aux_kind[k] == KIND_GAUSS) {
            const double z = (xv - a) / c;
            nll += 0.5 * z * z;
            AT(g, par) += (xv - a) / (c * c);
        } else if (tb.aux_kind[k] == KIND_POISSON) {
            const double rate = xv * c;
            if (rate < 0.0 || (rate == 0.0 && a > 0.0)) {
                invalid = true;
            } else {
                nll += a > 0.0 ? rate - a - a * log(rate / a) : rate;
                AT(g, par) += a > 0.0 ? c - a / xv : c;
            }
        }
    }
    out_nll[p] = invalid ? 1.0 / 0.0 : nll;
    // Reverse pass: ∂NLL/∂base without F is dlam·binfac (times the histosys factor), kept in
    // `base`'s place once wsamp has read base.
    for (int s = 0; s < S; ++s) {
        const int* sm = tb.smp + 9 * s;
        double w = 0.0;
        for (int k = 0; k < sm[1]; ++k) {
            const int sb = sm[2] + k;
            w += AT(dlam, sm[0] + k) * AT(base, sb) * AT(binfac, sb);
        }
        AT(wsamp, s) = w;
    }
    for (int sb = 0; sb < SB; ++sb) {
        const int s = tb.sb_sample[sb];
        const double dl = AT(dlam, tb.sb_bin[sb]);
        const int* sm = tb.smp + 9 * s;
        const double common = dl * AT(base, sb) * AT(F, s);
        const int j0 = tb.bf_off[sb], j1 = tb.bf_off[sb + 1];
        for (int j = j0; j < j1; ++j) {
            double others = 1.0;
            for (int q = j0; q < j1; ++q)
                if (q != j) others *= AT(x, tb.bf_par[q]);
            AT(g, tb.bf_par[j]) += common * others;
        }
        AT(base, sb) = dl * AT(binfac, sb) * (sm[8] > sm[7] ? hs_scale(tb, sb) : 1.0);
    }
    double* gb = base;
    for (int e = 0; e < NS; ++e) {
        const int s = tb.ns_sample[e];
        AT(g, tb.ns_par[e]) += AT(wsamp, s) * (AT(F, s) / AT(kv, e)) * AT(kd, e);
    }
    for (int j = 0; j < tb.n_sf; ++j) {
        const int s = tb.sf_sample[j];
        const int* sm = tb.smp + 9 * s;
        double others = 1.0;
        for (int q = sm[3]; q < sm[4]; ++q)
            if (q != j) others *= AT(x, tb.sf_par[q]);
        for (int q = sm[5]; q < sm[6]; ++q) others *= AT(kv, q);
        AT(g, tb.sf_par[j]) += AT(wsamp, s) * others;
    }
    for (int e = 0; e < tb.n_hs; ++e) {
        const int s = tb.hs_sample[e];
        const int* sm = tb.smp + 9 * s;
        const double a = AT(x, tb.hs_par[e]);
        const int code = tb.hs_code[e], r0 = tb.hs_row[e], nb = sm[1], sb0 = sm[2];
        double gs = 0.0;
        for (int k = 0; k < nb; ++k) {
            const int r = r0 + k;
            double dl, dd;
            histo_row(code, tb.hs_coef + 4 * r, tb.hs_poly + 6 * r, a, &dl, &dd);
            gs += AT(gb, sb0 + k) * dd;
        }
        AT(g, tb.hs_par[e]) += gs * AT(F, s);
    }
#undef AT
}
"#;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ws = args.first().map_or("workspace_tHu", |s| s.as_str());
    let setting = args.get(1).map_or("smooth", |s| s.as_str());
    let sizes: Vec<usize> = args.iter().skip(2).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![4096, 16384, 65536]
    } else {
        sizes
    };
    let (model, data) = load(ws, settings(setting));
    let np = model.n_params();
    let host = HostTables::new(&model);
    let (m, n_aux, n_ns, n_s, n_sb) = (
        model.n_main,
        host.dims[2] as usize,
        host.dims[5] as usize,
        host.dims[3] as usize,
        host.dims[4] as usize,
    );
    println!(
        "{ws} ({setting}): {np} parameters, {m} main bins, {n_aux} auxiliary, {n_s} samples, {n_sb} sample-bins, {n_ns} normsys entries"
    );
    let ctx = CudaContext::new(0).expect("a CUDA device");
    let stream = ctx.default_stream();
    let tables = DeviceTables::upload(host, &stream).expect("tables");
    let src = histfit_cuda::kernels::SOURCE;
    let cut = src
        .find("// Σ v[0..n) in an order")
        .expect("fixed_sum's comment in histfit.cu");
    let (major, minor) = ctx.compute_capability().expect("compute capability");
    let arch: &'static str = Box::leak(format!("sm_{major}{minor}").into_boxed_str());
    let ptx = histfit_cuda::kernels::compile(&format!("{}{LANE_SOURCE}", &src[..cut]), arch)
        .expect("the lane kernel compiles");
    let module = ctx.load_module(ptx).expect("module");
    let lane = module
        .load_function("lane_nll_grad")
        .expect("lane_nll_grad");
    let mut gpu = CudaBatch::new(model.clone(), 0).expect("GPU session");
    let row: Vec<f64> = data.main.iter().chain(&data.aux).copied().collect();
    let r = row.len();
    assert_eq!(r, m + n_aux, "the dataset's row");
    println!("| problems | block per problem: launch, per evaluation | lane per problem: launch, per evaluation | ratio | max rel. diff value / gradient |");
    println!("|---|---|---|---|---|");
    for &n in &sizes {
        let params = off_init_batch(&model, n);
        let refs: Vec<&Dataset> = vec![&data; n];
        // The present layout: the kernel alone over min(n, MAX_LAUNCH) problems a launch.
        let b = n.min(histfit_cuda::batch::MAX_LAUNCH);
        let reps = 20;
        let t_block = gpu
            .time_kernel(&params, &refs, reps)
            .expect("nll_grad_batch");
        let per_block = t_block / b as f64;
        let (mut nll_b, mut grad_b) = (vec![0.0; n], vec![0.0; n * np]);
        gpu.nll_grad_batch(&params, &refs, &mut nll_b, &mut grad_b)
            .expect("nll_grad_batch");
        // The lane layout: toy-fastest inputs.
        let mut xt = vec![0.0; n * np];
        for k in 0..n {
            for i in 0..np {
                xt[i * n + k] = params[k * np + i];
            }
        }
        let mut dt = vec![0.0; n * r];
        for k in 0..n {
            for (i, v) in row.iter().enumerate() {
                dt[i * n + k] = *v;
            }
        }
        let scratch_len = 2 * n_ns + n_s + 2 * n_sb + m + n_s;
        let x_d = stream.clone_htod(&xt).expect("upload");
        let d_d = stream.clone_htod(&dt).expect("upload");
        let mut nll_d = stream.alloc_zeros::<f64>(n).expect("alloc");
        let mut g_d = stream.alloc_zeros::<f64>(n * np).expect("alloc");
        let mut scr_d = stream.alloc_zeros::<f64>(n * scratch_len).expect("alloc");
        let wall = histfit_compute::EMPTY_BIN_WALL;
        let n_i = n as i32;
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(128) as u32, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let launch = |nll_d: &mut cudarc::driver::CudaSlice<f64>,
                      g_d: &mut cudarc::driver::CudaSlice<f64>,
                      scr_d: &mut cudarc::driver::CudaSlice<f64>| {
            let mut l = stream.launch_builder(&lane);
            l.arg(&tables.arg)
                .arg(&n_i)
                .arg(&x_d)
                .arg(&d_d)
                .arg(nll_d)
                .arg(g_d)
                .arg(scr_d)
                .arg(&wall);
            // SAFETY: the arguments match lane_nll_grad's; every buffer holds n problems'
            // values (inputs toy-fastest, scratch_len doubles of scratch per problem).
            unsafe { l.launch(cfg) }.expect("lane_nll_grad launch");
        };
        launch(&mut nll_d, &mut g_d, &mut scr_d);
        stream.synchronize().expect("sync");
        let t = Instant::now();
        for _ in 0..reps {
            launch(&mut nll_d, &mut g_d, &mut scr_d);
        }
        stream.synchronize().expect("sync");
        let t_lane = t.elapsed().as_secs_f64() / reps as f64;
        let per_lane = t_lane / n as f64;
        let nll_l = stream.clone_dtoh(&nll_d).expect("download");
        let g_l = stream.clone_dtoh(&g_d).expect("download");
        let rel = |a: f64, b: f64| (a - b).abs() / a.abs().max(b.abs()).max(1e-300);
        // A maximum that a NaN anywhere makes NaN (f64::max would drop it).
        let worst = |acc: f64, v: f64| {
            if acc.is_nan() || v.is_nan() {
                f64::NAN
            } else {
                acc.max(v)
            }
        };
        // (The block layout's values carry the dataset's constant; the lane kernel's do not.)
        let dv = (0..n)
            .map(|k| rel(nll_l[k] + data.constant, nll_b[k]))
            .fold(0.0, worst);
        // Gradients relative to the problem's largest component (a component that cancels
        // to near zero is compared at the gradient's scale).
        let mut dg: f64 = 0.0;
        for k in 0..n {
            let scale = (0..np)
                .map(|i| grad_b[k * np + i].abs())
                .fold(1e-300, worst);
            for i in 0..np {
                dg = worst(dg, (g_l[i * n + k] - grad_b[k * np + i]).abs() / scale);
            }
        }
        println!(
            "| {n} | {:.3} ms ({b} problems), {:.3} µs | {:.3} ms, {:.4} µs | {:.1}× | {dv:.1e} / {dg:.1e} |",
            t_block * 1e3,
            per_block * 1e6,
            t_lane * 1e3,
            per_lane * 1e6,
            per_block / per_lane
        );
    }
}
