//! Builds the kernels the binary carries (`kernels/prebuilt/`): the built-in source compiled by
//! NVRTC to a cubin for each architecture, gzip'd, and `MANIFEST` with each one's key (the hash
//! of the source and options it was compiled from; the library loads none whose key is not its
//! own). Needs NVRTC, not a GPU; run by `scripts/build_cuda_kernels.sh` on a GPU host, since the
//! development machines have no CUDA:
//! `prebuild_kernels OUT_DIR [sm_90 …]` (all of `prebuilt_architectures()` when none is named).

use histfit_cuda::kernels;
use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(out) = args.next().map(std::path::PathBuf::from) else {
        eprintln!("usage: prebuild_kernels OUT_DIR [ARCH …]");
        std::process::exit(2)
    };
    let mut archs: Vec<String> = args.collect();
    if archs.is_empty() {
        archs = kernels::prebuilt_architectures()
            .map(str::to_string)
            .collect();
    }
    // One thread an architecture: each compile is single-threaded and takes a minute or more.
    let built: Vec<Result<String, String>> = std::thread::scope(|s| {
        let jobs: Vec<_> = archs
            .iter()
            .map(|arch| s.spawn(|| build(arch, &out)))
            .collect();
        jobs.into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err("a compile thread panicked".into()))
            })
            .collect()
    });
    let mut manifest = String::new();
    let mut failed = false;
    for line in built {
        match line {
            Ok(l) => manifest.push_str(&l),
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1)
    }
    // Lines of architectures not rebuilt now are kept (a subset may be rebuilt alone).
    let old = std::fs::read_to_string(out.join("MANIFEST")).unwrap_or_default();
    let mut lines: Vec<String> = old
        .lines()
        .filter(|l| {
            !archs
                .iter()
                .any(|a| l.split(' ').next() == Some(a.as_str()))
        })
        .map(str::to_string)
        .chain(manifest.lines().map(str::to_string))
        .collect();
    lines.sort_by_key(|l| {
        kernels::prebuilt_architectures().position(|a| l.starts_with(&format!("{a} ")))
    });
    std::fs::write(out.join("MANIFEST"), lines.join("\n") + "\n").expect("MANIFEST written");
}

/// Compiles, compresses and writes one architecture's cubin; its manifest line.
fn build(arch: &str, out: &std::path::Path) -> Result<String, String> {
    let started = std::time::Instant::now();
    let cubin =
        kernels::compile_cubin(kernels::SOURCE, arch).map_err(|e| format!("{arch}: {e}"))?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&cubin).map_err(|e| e.to_string())?;
    let gz = gz.finish().map_err(|e| e.to_string())?;
    let file = out.join(format!("{arch}.cubin.gz"));
    std::fs::write(&file, &gz).map_err(|e| format!("{}: {e}", file.display()))?;
    eprintln!(
        "{arch}: {:.1} s, cubin {} bytes, gzip'd {}",
        started.elapsed().as_secs_f64(),
        cubin.len(),
        gz.len()
    );
    Ok(format!("{arch} {:016x}\n", kernels::key(arch)))
}
