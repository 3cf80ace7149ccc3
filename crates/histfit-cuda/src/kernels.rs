//! The kernel source, its kernels built ahead for the common GPUs, and NVRTC for the rest.
//!
//! A command's first kernel launch must not wait minutes. The binary therefore carries the
//! kernels compiled ahead (`kernels/prebuilt/sm_XY.cubin.gz`, made on a GPU host by
//! `scripts/build_cuda_kernels.sh`) for the architectures most clusters have; a cubin built for
//! `sm_XY` runs on every GPU of compute capability X.Y′ with Y′ ≥ Y, so the newest one at or
//! below the GPU's is taken. Each is keyed by a hash of the source and the compiler options
//! ([`key`]): one that does not match this build's source is never loaded (a test keeps the
//! shipped ones current).
//!
//! Where none fits, NVRTC compiles the source to a cubin once (40–60 s, said on stderr while it
//! happens) and the result is cached on disk under the same
//! key, so a changed kernel or a different GPU never picks up a stale one. The cache lives in
//! `$HISTFIT_KERNEL_CACHE` (a directory a cluster's nodes can share: docs/clusters.md), else
//! `$XDG_CACHE_HOME/histfit/kernels`, else `~/.cache/histfit/kernels`; when none is writable the
//! kernels are simply compiled each run.
//!
//! For kernel development only, `$HISTFIT_KERNEL_SOURCE` names a file compiled instead of the
//! built-in source, so that variants of a kernel can be timed on a lent GPU without rebuilding
//! the binary (the Rust side's launch arguments must still match it); a `.cubin` there is
//! loaded as it is, so a variant costs no compile on the device. It is said on stderr, and such
//! kernels are never cached.

use crate::device::Gpu;
use crate::{driver, CudaError, Result};
use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;
use std::ffi::{CStr, CString};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

/// The CUDA source of every histfit kernel.
pub const SOURCE: &str = include_str!("../kernels/histfit.cu");

/// The kernels built ahead: architecture and gzip'd cubin. `MANIFEST` gives each one's key.
const PREBUILT: [(&str, &[u8]); 5] = [
    (
        "sm_75",
        include_bytes!("../kernels/prebuilt/sm_75.cubin.gz"),
    ),
    (
        "sm_80",
        include_bytes!("../kernels/prebuilt/sm_80.cubin.gz"),
    ),
    (
        "sm_90",
        include_bytes!("../kernels/prebuilt/sm_90.cubin.gz"),
    ),
    (
        "sm_100",
        include_bytes!("../kernels/prebuilt/sm_100.cubin.gz"),
    ),
    (
        "sm_120",
        include_bytes!("../kernels/prebuilt/sm_120.cubin.gz"),
    ),
];

/// `ARCH KEY` lines, one per prebuilt cubin: the [`key`] of the source and options it was
/// compiled from.
const MANIFEST: &str = include_str!("../kernels/prebuilt/MANIFEST");

/// The architectures kernels are built ahead for (`scripts/build_cuda_kernels.sh` builds these).
pub fn prebuilt_architectures() -> impl Iterator<Item = &'static str> {
    PREBUILT.iter().map(|(arch, _)| *arch)
}

/// NVRTC's options for `arch` (`sm_90`, …): no fused multiply-add contraction (the toy generator
/// must round exactly as the CPU does; the likelihood loses nothing measurable), IEEE division
/// and square root, line numbers in the code (no effect on it; Nsight Compute attributes time to
/// source lines with them), and the constants shared with Rust.
fn options(arch: &str) -> Vec<String> {
    [
        "--ftz=false",
        "--prec-sqrt=true",
        "--prec-div=true",
        "--fmad=false",
        &format!("--gpu-architecture={arch}"),
        "--generate-line-info",
    ]
    .into_iter()
    .map(str::to_string)
    .chain(shared_definitions())
    .collect()
}

/// The key of the built-in source compiled for `arch`: a hash of the source and the options.
pub fn key(arch: &str) -> u64 {
    let opts = options(arch).join("\u{1f}");
    fnv1a(&[SOURCE.as_bytes(), opts.as_bytes()])
}

/// What NVRTC is asked for.
#[derive(Clone, Copy, PartialEq)]
enum Output {
    Ptx,
    Cubin,
}

/// `source` compiled by NVRTC to PTX for `arch` (`sm_90`, …) with the options the kernels are
/// loaded with; needs NVRTC only, no GPU (the `kernel_ptx` example uses it to read a variant's
/// registers and spills with `ptxas -v`).
pub fn compile(source: &str, arch: &str) -> Result<Ptx> {
    if !crate::device::nvrtc_present() {
        return Err(CudaError::Unavailable(
            "the CUDA run-time compiler library (libnvrtc) was not found".into(),
        ));
    }
    let ptx = nvrtc(source, &options(arch), Output::Ptx)?;
    // (NVRTC's PTX ends with its NUL.)
    let text = String::from_utf8_lossy(ptx.strip_suffix(&[0]).unwrap_or(&ptx)).into_owned();
    Ok(Ptx::from_src(text))
}

/// `source` compiled by NVRTC to a cubin for `arch` (a real architecture, `sm_90`), the machine
/// code the driver loads without compiling again; needs NVRTC only, no GPU.
pub fn compile_cubin(source: &str, arch: &str) -> Result<Vec<u8>> {
    if !crate::device::nvrtc_present() {
        return Err(CudaError::Unavailable(format!(
            "the CUDA run-time compiler library (libnvrtc) was not found; this build carries no \
             kernels for {arch} and needs it to compile them"
        )));
    }
    nvrtc(source, &options(arch), Output::Cubin)
}

/// One NVRTC compile: the program's log in the error where it fails.
fn nvrtc(source: &str, options: &[String], output: Output) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result, sys};
    let fail = |what: &str, e: &dyn std::fmt::Debug| CudaError::Compile(format!("{what}: {e:?}"));
    let src = CString::new(source).map_err(|e| fail("the kernel source", &e))?;
    let prog = result::create_program(&src, None).map_err(|e| fail("nvrtcCreateProgram", &e))?;
    // SAFETY: `prog` was created above and is destroyed once, at the end; the buffers are sized
    // by NVRTC's own size queries.
    unsafe {
        let compiled = result::compile_program(prog, options).map_err(|e| {
            let log = result::get_program_log(prog)
                .map(|l| CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned())
                .unwrap_or_default();
            CudaError::Compile(format!("{e:?}\n{log}"))
        });
        let code = compiled.and_then(|()| {
            type SizeOf = unsafe fn(sys::nvrtcProgram, *mut usize) -> sys::nvrtcResult;
            type Get = unsafe fn(sys::nvrtcProgram, *mut std::ffi::c_char) -> sys::nvrtcResult;
            let (size_of, get, name): (SizeOf, Get, &str) = match output {
                Output::Ptx => (sys::nvrtcGetPTXSize, sys::nvrtcGetPTX, "nvrtcGetPTX"),
                Output::Cubin => (sys::nvrtcGetCUBINSize, sys::nvrtcGetCUBIN, "nvrtcGetCUBIN"),
            };
            let mut size = 0usize;
            size_of(prog, &mut size)
                .result()
                .map_err(|e| fail(name, &e))?;
            let mut code = vec![0u8; size];
            get(prog, code.as_mut_ptr().cast())
                .result()
                .map_err(|e| fail(name, &e))?;
            Ok(code)
        });
        let _ = result::destroy_program(prog);
        code
    }
}

/// The prebuilt cubin for a GPU of compute capability `major.minor`: the newest architecture of
/// the same major version at or below it, decompressed; `Err` with the architecture when its
/// manifest key is not this source's (stale: never loaded), `Ok(None)` when none fits.
fn prebuilt(
    major: u32,
    minor: u32,
) -> std::result::Result<Option<(&'static str, Vec<u8>)>, String> {
    let Some((arch, gz)) = newest_fitting(major, minor) else {
        return Ok(None);
    };
    if manifest_key(arch) != Some(key(arch)) {
        return Err(arch.to_string());
    }
    let mut cubin = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut cubin)
        .map_err(|e| format!("{arch} (unreadable: {e})"))?;
    Ok(Some((arch, cubin)))
}

/// The carried cubin a GPU of compute capability `major.minor` can run: same major version,
/// the highest minor at or below its own.
fn newest_fitting(major: u32, minor: u32) -> Option<(&'static str, &'static [u8])> {
    let version = |arch: &str| -> Option<(u32, u32)> {
        let digits = arch.strip_prefix("sm_")?;
        let (ma, mi) = digits.split_at(digits.len().checked_sub(1)?);
        Some((ma.parse().ok()?, mi.parse().ok()?))
    };
    PREBUILT
        .iter()
        .filter_map(|&(arch, gz)| {
            let (ma, mi) = version(arch)?;
            (ma == major && mi <= minor).then_some((mi, arch, gz))
        })
        .max_by_key(|&(mi, _, _)| mi)
        .map(|(_, arch, gz)| (arch, gz))
}

/// The key `MANIFEST` records for `arch`.
fn manifest_key(arch: &str) -> Option<u64> {
    MANIFEST.lines().find_map(|l| {
        let (a, k) = l.split_once(' ')?;
        (a == arch).then(|| u64::from_str_radix(k.trim(), 16).ok())?
    })
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
        format!("-DSTIRLING_FROM={:e}", histfit_compute::STIRLING_FROM),
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
    // The orthant rounds that settle descents (histfit-seam's `Settle`).
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
    /// Loads the kernels for `gpu`: built ahead where this build carries them for its
    /// architecture, else from the disk cache, else compiled by NVRTC (said on stderr); a
    /// development `$HISTFIT_KERNEL_SOURCE` in their place (see the module's documentation).
    pub fn load(gpu: &Gpu) -> Result<Kernels> {
        let (major, minor) = gpu.info.compute_capability;
        let arch = format!("sm_{major}{minor}");
        let replaced = std::env::var_os("HISTFIT_KERNEL_SOURCE").map(PathBuf::from);
        let module = match &replaced {
            Some(path) => {
                let ptx = Self::replacement(path, &arch)?;
                // (A .cubin made for another architecture fails here: say which file.)
                gpu.ctx.load_module(ptx).map_err(|e| {
                    CudaError::Compile(format!(
                        "HISTFIT_KERNEL_SOURCE={}: cuModuleLoadData: {e:?}",
                        path.display()
                    ))
                })?
            }
            None => {
                let why = match prebuilt(major as u32, minor as u32) {
                    Ok(Some((carried, cubin))) => match gpu.ctx.load_module(Ptx::from_binary(cubin)) {
                        Ok(module) => return Self::functions(module),
                        // A driver older than the toolkit that built the cubins refuses them.
                        Err(e) => format!(
                            "the driver refused the kernels this build carries for {carried} ({e:?}; they need a driver of CUDA 13, R580 or later)"
                        ),
                    },
                    Ok(None) => format!("this build carries no kernels for {arch}"),
                    Err(stale) => format!(
                        "the kernels this build carries for {stale} were not built from its \
                         source (scripts/build_cuda_kernels.sh rebuilds them)"
                    ),
                };
                let ptx = Self::cached_or_compiled(&arch, &why)?;
                gpu.ctx
                    .load_module(ptx)
                    .map_err(driver("cuModuleLoadData"))?
            }
        };
        Self::functions(module)
    }

    /// The kernels of a loaded module.
    fn functions(module: Arc<CudaModule>) -> Result<Kernels> {
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

    /// A development source or cubin named by `$HISTFIT_KERNEL_SOURCE`, compiled for `arch`.
    fn replacement(path: &PathBuf, arch: &str) -> Result<Ptx> {
        let unreadable = |e: std::io::Error| {
            CudaError::Compile(format!("HISTFIT_KERNEL_SOURCE={}: {e}", path.display()))
        };
        // Never silent: these are not the kernels this binary was tested with.
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "warning: HISTFIT_KERNEL_SOURCE={} replaces the built-in CUDA kernels",
                path.display()
            )
        });
        // A .cubin (made on a GPU host by the `kernel_ptx` example and `ptxas`) is loaded as it
        // is: no compile at all.
        let cubin = if path.extension().is_some_and(|e| e == "cubin") {
            std::fs::read(path).map_err(unreadable)?
        } else {
            let source = std::fs::read_to_string(path).map_err(unreadable)?;
            compile_cubin(&source, arch)?
        };
        Ok(Ptx::from_binary(cubin))
    }

    /// The built-in kernels' cubin for `arch`: from the disk cache (keyed by the source and the
    /// options), else compiled (saying on stderr what and `why`) and written there.
    fn cached_or_compiled(arch: &str, why: &str) -> Result<Ptx> {
        let key = key(arch);
        let file = cache_dir().map(|d| d.join(format!("histfit-{key:016x}-{arch}.cubin")));
        let cached = file
            .as_ref()
            .and_then(|f| std::fs::read(f).ok())
            .filter(|c| c.starts_with(b"\x7fELF"));
        if let Some(cubin) = cached {
            return Ok(Ptx::from_binary(cubin));
        }
        // Never a silent wait: the fits make a large module.
        eprintln!(
            "histfit: compiling the CUDA kernels for {arch} with NVRTC ({why}; about a minute, once){}",
            match &file {
                Some(f) => format!(", cached in {}", f.parent().unwrap_or(f).display()),
                None => String::new(),
            }
        );
        let cubin = compile_cubin(SOURCE, arch)?;
        if let Some(f) = &file {
            // Best effort: a read-only cache just means compiling again next run.
            if let Some(dir) = f.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            // A name of this writer's own, renamed into place: the devices of one process, or
            // the jobs of a cluster sharing the directory, may compile side by side.
            static WRITERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let k = WRITERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            let tmp = f.with_extension(format!("tmp-{}-{}-{k}", host.trim(), std::process::id()));
            if std::fs::write(&tmp, &cubin).is_ok() && std::fs::rename(&tmp, f).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
        Ok(Ptx::from_binary(cubin))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels the binary carries were built from this source with these options, one per
    /// architecture, and are cubins. When the kernels change, this fails until
    /// `scripts/build_cuda_kernels.sh` has rebuilt them on a GPU host (the binary would
    /// otherwise compile them with NVRTC on every new machine: minutes before the first toy).
    #[test]
    fn prebuilt_kernels_match_the_source() {
        for (arch, gz) in PREBUILT {
            assert_eq!(
                manifest_key(arch),
                Some(key(arch)),
                "kernels/prebuilt/{arch}.cubin.gz was not built from this source and these \
                 options: run scripts/build_cuda_kernels.sh on a GPU host"
            );
            let mut cubin = Vec::new();
            flate2::read::GzDecoder::new(gz)
                .read_to_end(&mut cubin)
                .expect("a gzip file");
            assert!(cubin.starts_with(b"\x7fELF"), "{arch}: not a cubin");
        }
        assert_eq!(
            MANIFEST.lines().count(),
            PREBUILT.len(),
            "one line an architecture"
        );
    }

    /// A GPU takes the newest carried architecture of its major version at or below its own.
    #[test]
    fn carried_architecture_for_each_gpu() {
        let arch = |major, minor| newest_fitting(major, minor).map(|(a, _)| a);
        assert_eq!(arch(9, 0), Some("sm_90"));
        assert_eq!(arch(8, 6), Some("sm_80"));
        assert_eq!(arch(8, 9), Some("sm_80"));
        assert_eq!(arch(7, 5), Some("sm_75"));
        assert_eq!(arch(12, 1), Some("sm_120"));
        assert_eq!(arch(10, 3), Some("sm_100"));
        assert_eq!(arch(7, 0), None);
        assert_eq!(arch(11, 0), None);
    }

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
