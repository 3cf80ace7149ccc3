//! The double-float functions on the adapter at hand (lavapipe in CI): they must be good to
//! `probe::TOLERANCE` (1e-11, against f32's 6e-8), or the double-float strategy is f32 in disguise.

use histfit_wgpu::adapter::{Backend, Gpu};

#[test]
fn double_float_arithmetic_survives_the_shader_compiler() {
    let gpu = match Gpu::open(Backend::Any, None) {
        Ok(g) => g,
        Err(e) => {
            println!("SKIPPED double_float_arithmetic_survives_the_shader_compiler: {e}");
            return;
        }
    };
    let fused = histfit_wgpu::probe::fused_fma(&gpu)
        .expect("the probe runs")
        .expect("double-float is exact one way");
    let errs = histfit_wgpu::probe::double_float_errors(&gpu, fused).expect("probe runs");
    let report: Vec<String> = histfit_wgpu::probe::FUNCTIONS
        .iter()
        .zip(errs)
        .map(|(f, e)| format!("{f} {e:.2e}"))
        .collect();
    println!(
        "{} (fused fma: {fused}): worst errors: {}",
        gpu.info.name,
        report.join(", ")
    );
    assert!(
        errs.iter().all(|&e| e < histfit_wgpu::probe::TOLERANCE),
        "{}: {}",
        gpu.info.name,
        report.join(", ")
    );
}
