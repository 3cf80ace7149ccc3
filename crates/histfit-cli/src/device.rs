//! The device a command runs on, parsed once from `--gpu`, and the evaluator that goes with it.
//! Inference code never branches on the device: it receives an [`AnyEval`] (single fits, scans,
//! limits, ranking) or an [`AnyRunner`] (ensembles), whichever device is behind it.

use anyhow::{anyhow, Result};

pub use histfit_device::{batcher, AnyEval, AnyRunner, Device, Likelihood};

/// [`AnyEval::new`] (or, for commands that fit toy ensembles, [`AnyEval::for_ensembles`]) with
/// the CLI's wording of a device failure; what the device says about how it was opened (a
/// precision fallback) goes to stderr.
pub fn open(likelihood: &Likelihood, device: Device, ensembles: bool) -> Result<AnyEval> {
    let name = device.to_string();
    let eval = likelihood
        .evaluator(device, ensembles)
        .map_err(|e| anyhow!("--gpu {name}: {e}"))?;
    // Once per process: `grid` opens a session per point, each with the same adapter.
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Some(w) = eval.warning() {
        if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!("warning: --gpu {name}: {w}");
        }
    }
    Ok(eval)
}

/// `histfit devices`: the CPU, every CUDA device and every wgpu adapter, or why there is none —
/// the one devices document of `histfit-device` (also Python's `histfit.devices()`), as JSON or
/// a table.
pub fn list(json: bool) -> String {
    let mut doc = histfit_device::devices_document();
    if json {
        doc["kind"] = "devices".into();
        return serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    }
    let mut s = format!(
        "cpu        {} threads (f64)\n",
        doc["cpu"]["threads"].as_u64().unwrap_or(1)
    );
    let gpus = doc["cuda"].as_array().cloned().unwrap_or_default();
    for g in &gpus {
        s.push_str(&format!(
            "{:<10} {} (compute {}, {:.1} GiB, f64)\n",
            g["device"].as_str().unwrap_or("cuda"),
            g["name"].as_str().unwrap_or("?"),
            g["compute_capability"].as_str().unwrap_or("?"),
            g["memory_bytes"].as_f64().unwrap_or(0.0) / (1u64 << 30) as f64
        ));
    }
    match doc["cuda_unavailable_reason"].as_str() {
        Some(why) => s.push_str(&format!("cuda       none: {why}\n")),
        None if gpus.is_empty() => s.push_str("cuda       none: the driver reports no device\n"),
        None => {}
    }
    for a in doc["wgpu"].as_array().cloned().unwrap_or_default() {
        s.push_str(&format!(
            "{:<10} {} ({}, {}, f32{})\n",
            a["device"].as_str().unwrap_or("wgpu"),
            a["name"].as_str().unwrap_or("?"),
            a["backend"].as_str().unwrap_or("?"),
            a["kind"].as_str().unwrap_or("?"),
            if a["f64"].as_bool() == Some(true) {
                "; the adapter has f64"
            } else {
                ""
            }
        ));
    }
    if let Some(why) = doc["wgpu_unavailable_reason"].as_str() {
        s.push_str(&format!("wgpu       none: {why}\n"));
    }
    s
}
