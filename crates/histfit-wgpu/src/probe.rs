//! Whether double-float arithmetic survives an adapter's shader compiler. Its error terms
//! ((a + b) − a − b and the like) are zero in real-number algebra, so a compiler that rewrites
//! floating point as if it were real numbers removes them, and the double-float strategy would
//! silently fall back to f32 accuracy. The probe runs the kernel's own functions on known pairs
//! and compares them with f64.

use crate::adapter::Gpu;
use crate::Result;

const PROBE: &str = include_str!("probe.wgsl");

/// Input pairs (a, b): a within the exponential's range, b > 0 for the logarithm.
const CASES: [(f64, f64); 6] = [
    (0.1, 3.0),
    (-0.7371, 1.000_001_234_5),
    (2.5e-3, 1_234.567_89),
    (1.0 / 3.0, 0.987_654_321),
    (-5.25, 7.0e-4),
    (std::f64::consts::LN_2, 1.0 / 7.0),
];

/// The functions the probe checks, in the order of its results.
pub const FUNCTIONS: [&str; 5] = ["sum", "product", "quotient", "exp", "ln"];

/// The worst error of each double-float function ([`FUNCTIONS`]) against f64 on this adapter,
/// with the fused (`fused_fma`) or the split product: relative, but absolute for the logarithm
/// (whose value may be near 0).
pub fn double_float_errors(gpu: &Gpu, fused_fma: bool) -> Result<[f64; 5]> {
    let split = |v: f64| -> [f32; 2] {
        let hi = v as f32;
        [hi, (v - hi as f64) as f32]
    };
    // The f64 values the pairs stand for (what the device sees), and the expected results.
    let mut input: Vec<f32> = Vec::new();
    let mut want: Vec<f64> = Vec::new();
    for (a, b) in CASES {
        let (pa, pb) = (split(a), split(b));
        input.extend(pa);
        input.extend(pb);
        let (a, b) = (pa[0] as f64 + pa[1] as f64, pb[0] as f64 + pb[1] as f64);
        want.extend([a + b, a * b, a / b, a.exp(), b.ln()]);
    }
    input.extend([0.0, 0.0]); // the kernel's opaque zero
    let source = format!("{}\n{PROBE}", include_str!("df.wgsl"));
    let constants = [("DF_FMA", if fused_fma { 1.0 } else { 0.0 })];
    let got = gpu.run_once(
        &source,
        "probe",
        &constants,
        &input,
        want.len() * 2,
        CASES.len(),
    )?;
    let mut worst = [0.0f64; 5];
    for (k, (p, &w)) in got.chunks(2).zip(&want).enumerate() {
        let scale = if k % 5 == 4 { 1.0 } else { w.abs().max(1e-300) };
        let e = ((p[0] as f64 + p[1] as f64) - w).abs() / scale;
        worst[k % 5] = worst[k % 5].max(e);
    }
    Ok(worst)
}

/// Whether the adapter's fma is fused, judged by the probe, or `Err(errors)` — the worst error
/// of each function ([`FUNCTIONS`]) with split products — where double-float arithmetic is not
/// exact either way (a compiler that reassociates floating point, as fast-math does): then
/// [`crate::Precision::DoubleFloat`] cannot be trusted on this adapter. The outer `Result` is the
/// device's own failure.
pub fn fused_fma(gpu: &Gpu) -> Result<std::result::Result<bool, String>> {
    for fused in [true, false] {
        if double_float_errors(gpu, fused)?
            .iter()
            .all(|&e| e < TOLERANCE)
        {
            return Ok(Ok(fused));
        }
    }
    let errs = double_float_errors(gpu, false)?;
    Ok(Err(FUNCTIONS
        .iter()
        .zip(errs)
        .map(|(f, e)| format!("{f} {e:.1e}"))
        .collect::<Vec<_>>()
        .join(", ")))
}

/// What the probe accepts: sums and products keep about 48 bits, e^x and ln x about 38 (f32
/// alone: 24).
pub const TOLERANCE: f64 = 1e-11;
