//! The kernel source, compiled by NVRTC at first use and cached on disk.
//!
//! The cache key is a hash of the source, the compiler options and the GPU architecture, so a
//! changed kernel or a different GPU never picks up a stale PTX. The cache lives in
//! `$HISTFIT_KERNEL_CACHE`, else `$XDG_CACHE_HOME/histfit/kernels`, else
//! `~/.cache/histfit/kernels`; when none is writable the kernels are simply compiled each run.
//!
//! For kernel development only, `$HISTFIT_KERNEL_SOURCE` names a file compiled instead of the
//! built-in source, so that variants of a kernel can be timed on a lent GPU without rebuilding
//! the binary (the Rust side's launch arguments must still match it); a `.cubin` there is
//! loaded as it is (made without a GPU by the `kernel_ptx` example and `ptxas`), so a variant
//! costs no compile on the device. It is said on stderr, and such kernels are never cached.

use crate::device::Gpu;
use crate::{driver, CudaError, Result};
use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::{CompileOptions, Ptx};
use std::path::PathBuf;
use std::sync::Arc;

/// The CUDA source of every histfit kernel.
pub const SOURCE: &str = include_str!("../kernels/histfit.cu");

/// Options: no fused multiply-add contraction (the toy generator must round exactly as the CPU
/// does; the likelihood loses nothing measurable), IEEE division and square root.
fn options(arch: &'static str) -> CompileOptions {
    CompileOptions {
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        arch: Some(arch),
        // Line numbers in the PTX (no effect on the code) let Nsight Compute attribute time to
        // source lines.
        options: std::iter::once("--generate-line-info".to_string())
            .chain(shared_definitions())
            .collect(),
        ..Default::default()
    }
}

/// `source` compiled by NVRTC to PTX for `arch` (`sm_90`, …) with the options the kernels are
/// loaded with; needs NVRTC only, no GPU (the `kernel_ptx` example uses it to read a variant's
/// registers and spills with `ptxas -v`).
pub fn compile(source: &str, arch: &'static str) -> Result<Ptx> {
    compile_with(source.to_string(), options(arch))
}

fn compile_with(source: String, opts: CompileOptions) -> Result<Ptx> {
    cudarc::nvrtc::compile_ptx_with_opts(source, opts)
        .map_err(|e| CudaError::Compile(format!("{e:?}")))
}

/// The constants the kernels share with Rust, defined once there and passed as `-D` options:
/// the empty-bin continuation, the interpolation code numbers, the constraint kinds of the
/// tables, the resident fits' status codes, result width and launch bounds, and the toy
/// generator's Philox, ln 2,
/// stream and Poisson-switch constants. (Floats
/// print in their shortest round-trip form, so the kernels read the same bits.)
pub fn shared_definitions() -> Vec<String> {
    use histfit_compute::rng;
    let [soft0, soft1] = histfit_compute::SOFT_EMPTY_BIN_WALLS;
    let mut d = vec![
        format!("-DEMPTY_BIN_WALL={:e}", histfit_compute::EMPTY_BIN_WALL),
        format!("-DSOFT_WALL_0={soft0:e}"),
        format!("-DSOFT_WALL_1={soft1:e}"),
    ];
    d.extend(
        histfit_model::InterpCode::ALL
            .iter()
            .map(|c| format!("-D{}={}", c.macro_name(), c.id())),
    );
    // (KIND_NONE marks table rows the kernels never branch on.)
    for (name, v) in [
        ("KIND_GAUSS", crate::layout::KIND_GAUSS),
        ("KIND_POISSON", crate::layout::KIND_POISSON),
    ] {
        d.push(format!("-D{name}={v}"));
    }
    for (name, v) in [
        ("PH_M0", rng::M0),
        ("PH_M1", rng::M1),
        ("PH_W0", rng::W0),
        ("PH_W1", rng::W1),
    ] {
        d.push(format!("-D{name}={v:#X}u"));
    }
    // The resident fits' status codes, result width and launch bounds.
    for (name, code, _) in histfit_compute::ResidentStatus::CODES {
        d.push(format!("-D{name}={code}"));
    }
    d.push(format!("-DFIT_OUT={}", crate::resident::FIT_OUT));
    d.push(format!("-DFIT_GAVE_UP={}", crate::resident::FIT_GAVE_UP));
    d.push(format!("-DRUN_RULE={}", crate::resident::RUN_RULE));
    for (name, bit) in crate::resident::RUN_CODES {
        d.push(format!("-D{name}={bit}"));
    }
    // The orthant rounds that settle descents (histfit-compute's `Settle`).
    d.push(format!("-DAT_KINK={:e}", histfit_compute::AT_KINK));
    d.push(format!("-DORTHANT_PG={:e}", histfit_compute::ORTHANT_PG));
    d.push(format!(
        "-DORTHANT_ROUNDS={}",
        histfit_compute::ORTHANT_ROUNDS
    ));
    {
        use histfit_compute::kink_rules as k;
        d.push(format!("-DSIDE_SLOPE={:e}", k::SIDE_SLOPE));
        d.push(format!("-DMAX_SIDE_REFITS={}", k::MAX_SIDE_REFITS));
        d.push(format!("-DNEAR_KINK={:e}", k::NEAR_KINK));
        d.push(format!("-DNEAR_KINK_FROM={:e}", k::NEAR_KINK_FROM));
        d.push(format!("-DMAX_NEAR_SEARCHES={}", k::MAX_NEAR_SEARCHES));
        d.push(format!("-DNEAR_ABANDON_AFTER={}", k::NEAR_ABANDON.0));
        d.push(format!("-DNEAR_ABANDON_FACTOR={:e}", k::NEAR_ABANDON.1));
        d.push(format!("-DNEAR_HELD={}", k::NEAR_HELD));
        d.push(format!("-DSADDLE_STEP={:e}", k::SADDLE_STEP));
    }
    d.push(format!("-DFIT_MIN_BLOCKS={}", crate::resident::MIN_BLOCKS));
    d.push(format!(
        "-DRUN_MIN_BLOCKS={}",
        crate::descents::RUN_MIN_BLOCKS
    ));
    d.push(format!("-DSTREAM_MAIN={}u", rng::STREAM_MAIN));
    d.push(format!("-DSTREAM_AUX={}u", rng::STREAM_AUX));
    d.push(format!("-DLN2_HI={:e}", rng::LN2_HI));
    d.push(format!("-DLN2_LO={:e}", rng::LN2_LO));
    for (name, v) in [
        ("POISSON_INVERSION_BELOW", rng::POISSON_INVERSION_BELOW),
        ("POISSON_INVERSION_MAX_K", rng::POISSON_INVERSION_MAX_K),
    ] {
        // `{:?}` keeps the decimal point (12.0): a double literal in C, not an int.
        d.push(format!("-D{name}={v:?}"));
    }
    d
}

/// FNV-1a, 64 bit: a stable hash for cache file names.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("HISTFIT_KERNEL_CACHE") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("histfit/kernels"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/histfit/kernels"))
}

/// The loaded kernels of one device.
#[derive(Debug, Clone)]
pub struct Kernels {
    pub module: Arc<CudaModule>,
    pub nll_grad_batch: CudaFunction,
    pub nll_grad_wide: CudaFunction,
    pub generate_toys: CudaFunction,
    pub fit_toys: CudaFunction,
    /// Toy fits of a model with kinked free parameters (the kink rules in the kernel).
    pub fit_toys_kinked: CudaFunction,
    pub fit_runs: CudaFunction,
    pub yield_grad_sum: CudaFunction,
    pub check_yields: CudaFunction,
    pub main_constant: CudaFunction,
}

impl Kernels {
    /// Compiles (or reads from the cache) and loads the kernels for `gpu`; a development
    /// `$HISTFIT_KERNEL_SOURCE` in their place (see the module's documentation).
    pub fn load(gpu: &Gpu) -> Result<Kernels> {
        let (major, minor) = gpu.info.compute_capability;
        // NVRTC wants a 'static architecture name; one leaked string per process and device.
        let arch: &'static str = Box::leak(format!("sm_{major}{minor}").into_boxed_str());
        let opts = options(arch);
        let replaced = std::env::var_os("HISTFIT_KERNEL_SOURCE").map(PathBuf::from);
        let unreadable = |path: &PathBuf, e: std::io::Error| {
            CudaError::Compile(format!("HISTFIT_KERNEL_SOURCE={}: {e}", path.display()))
        };
        let ptx = match &replaced {
            Some(path) => {
                // Never silent: these are not the kernels this binary was tested with.
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    eprintln!(
                        "warning: HISTFIT_KERNEL_SOURCE={} replaces the built-in CUDA kernels",
                        path.display()
                    )
                });
                // A .cubin (the `kernel_ptx` example's PTX through `ptxas`, made where no GPU
                // is) is loaded as it is: no compile on the device at all.
                if path.extension().is_some_and(|e| e == "cubin") {
                    Ptx::from_binary(std::fs::read(path).map_err(|e| unreadable(path, e))?)
                } else {
                    let source = std::fs::read_to_string(path).map_err(|e| unreadable(path, e))?;
                    compile_with(source, opts)?
                }
            }
            None => Self::cached_or_compiled(arch, opts)?,
        };
        let module = gpu.ctx.load_module(ptx).map_err(|e| match &replaced {
            // (A .cubin made for another architecture fails here: say which file.)
            Some(path) => CudaError::Compile(format!(
                "HISTFIT_KERNEL_SOURCE={}: cuModuleLoadData: {e:?}",
                path.display()
            )),
            None => driver("cuModuleLoadData")(e),
        })?;
        Ok(Kernels {
            nll_grad_batch: module
                .load_function("nll_grad_batch")
                .map_err(driver("cuModuleGetFunction(nll_grad_batch)"))?,
            nll_grad_wide: module
                .load_function("nll_grad_wide")
                .map_err(driver("cuModuleGetFunction(nll_grad_wide)"))?,
            fit_toys: module
                .load_function("fit_toys")
                .map_err(driver("cuModuleGetFunction(fit_toys)"))?,
            fit_toys_kinked: module
                .load_function("fit_toys_kinked")
                .map_err(driver("cuModuleGetFunction(fit_toys_kinked)"))?,
            fit_runs: module
                .load_function("fit_runs")
                .map_err(driver("cuModuleGetFunction(fit_runs)"))?,
            generate_toys: module
                .load_function("generate_toys")
                .map_err(driver("cuModuleGetFunction(generate_toys)"))?,
            yield_grad_sum: module
                .load_function("yield_grad_sum")
                .map_err(driver("cuModuleGetFunction(yield_grad_sum)"))?,
            check_yields: module
                .load_function("check_yields")
                .map_err(driver("cuModuleGetFunction(check_yields)"))?,
            main_constant: module
                .load_function("main_constant")
                .map_err(driver("cuModuleGetFunction(main_constant)"))?,
            module,
        })
    }

    /// The built-in kernels' PTX for `arch`: from the disk cache (keyed by the source and the
    /// options), else compiled and written there.
    fn cached_or_compiled(arch: &str, opts: CompileOptions) -> Result<Ptx> {
        let key = fnv1a(&[SOURCE.as_bytes(), format!("{opts:?}").as_bytes()]);
        let file = cache_dir().map(|d| d.join(format!("histfit-{key:016x}-{arch}.ptx")));
        let cached = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .filter(|s| !s.is_empty());
        if let Some(src) = cached {
            return Ok(Ptx::from_src(src));
        }
        // Minutes of silence otherwise: the resident fits make a large module (BENCHMARKS.md,
        // issue 23, session 29).
        eprintln!(
            "histfit: compiling the CUDA kernels for {arch} (first use of this build on this \
             GPU; a few minutes){}",
            match &file {
                Some(f) => format!(", cached in {}", f.parent().unwrap_or(f).display()),
                None => String::new(),
            }
        );
        let ptx = compile_with(SOURCE.to_string(), opts)?;
        if let Some(f) = &file {
            // Best effort: a read-only home just means compiling again next run.
            if let Some(dir) = f.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            // A name of this writer's own: the devices of one process may compile side by
            // side on an empty cache.
            static WRITERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let k = WRITERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let tmp = f.with_extension(format!("tmp{}-{k}", std::process::id()));
            if std::fs::write(&tmp, ptx.to_src()).is_ok() {
                let _ = std::fs::rename(&tmp, f);
            }
        }
        Ok(ptx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shared constant is used by the kernels and defined only in Rust; the literals read
    /// back to the same bits (NVRTC parses them as C does).
    #[test]
    fn shared_constants_are_defined_once_in_rust() {
        // The kernels' code without comments, as whole identifiers.
        let code: String = SOURCE
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let words: std::collections::HashSet<&str> = code
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .collect();
        for d in shared_definitions() {
            let (name, value) = d
                .strip_prefix("-D")
                .and_then(|x| x.split_once('='))
                .expect("-DNAME=VALUE");
            assert!(
                words.contains(name),
                "{name} is not used by the kernels' code"
            );
            assert!(
                !SOURCE.contains(&format!("#define {name}")),
                "{name} is defined again in histfit.cu"
            );
            if let Some(hex) = value.strip_prefix("0X").or(value.strip_prefix("0x")) {
                assert!(
                    u32::from_str_radix(hex.trim_end_matches('u'), 16).is_ok(),
                    "{d}"
                );
            } else if let Some(int) = value.strip_suffix('u') {
                assert!(int.parse::<u32>().is_ok(), "{d}");
            } else {
                assert!(value.parse::<f64>().is_ok(), "{d}");
            }
        }
        let get = |n: &str| -> f64 {
            shared_definitions()
                .iter()
                .find_map(|d| {
                    d.strip_prefix(&format!("-D{n}="))
                        .map(|v| v.parse().unwrap())
                })
                .unwrap()
        };
        assert_eq!(
            get("LN2_HI").to_bits(),
            histfit_compute::rng::LN2_HI.to_bits()
        );
        assert_eq!(
            get("LN2_LO").to_bits(),
            histfit_compute::rng::LN2_LO.to_bits()
        );
        assert_eq!(
            get("EMPTY_BIN_WALL").to_bits(),
            histfit_compute::EMPTY_BIN_WALL.to_bits()
        );
        assert_eq!(
            [get("SOFT_WALL_0").to_bits(), get("SOFT_WALL_1").to_bits()],
            histfit_compute::SOFT_EMPTY_BIN_WALLS.map(f64::to_bits)
        );
        assert_eq!(get("CODE4P") as i32, histfit_model::InterpCode::Code4p.id());
    }
}
