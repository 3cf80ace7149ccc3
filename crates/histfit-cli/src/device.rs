//! The device a command runs on, parsed once from `--gpu`, and the evaluator that goes with it.
//! Inference code never branches on the device: it receives an [`AnyEval`] (single fits, scans,
//! limits, ranking) or an [`AnyRunner`] (ensembles), whichever device is behind it.

use anyhow::{anyhow, Result};
use histfit_model::Model;
use std::sync::Arc;

pub use histfit_device::{batcher, AnyEval, AnyRunner, Device};

/// [`AnyEval::new`] with the CLI's wording of a device failure.
pub fn open(model: Arc<Model>, device: Device) -> Result<AnyEval> {
    AnyEval::new(model, device).map_err(|e| anyhow!("--gpu cuda: {e}"))
}

/// `histfit devices`: the CPU and every CUDA device, or why there is none.
pub fn list(json: bool) -> String {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cuda = histfit_cuda::devices();
    if json {
        let gpus = match &cuda {
            Ok(d) => serde_json::json!(d
                .iter()
                .map(|g| serde_json::json!({
                    "device": format!("cuda:{}", g.ordinal),
                    "name": g.name,
                    "compute_capability": format!("{}.{}", g.compute_capability.0, g.compute_capability.1),
                    "memory_bytes": g.memory_bytes,
                }))
                .collect::<Vec<_>>()),
            Err(_) => serde_json::json!([]),
        };
        let doc = serde_json::json!({
            "kind": "devices",
            "cpu": {"device": "cpu", "threads": threads},
            "cuda": gpus,
            "cuda_unavailable_reason": cuda.as_ref().err().map(|e| e.to_string()),
        });
        return serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    }
    let mut s = format!("cpu        {threads} threads (f64)\n");
    match cuda {
        Ok(d) if !d.is_empty() => {
            for g in d {
                s.push_str(&format!(
                    "cuda:{}     {} (compute {}.{}, {:.1} GiB, f64)\n",
                    g.ordinal,
                    g.name,
                    g.compute_capability.0,
                    g.compute_capability.1,
                    g.memory_bytes as f64 / (1u64 << 30) as f64
                ));
            }
        }
        Ok(_) => s.push_str("cuda       none: the driver reports no device\n"),
        Err(e) => s.push_str(&format!("cuda       none: {e}\n")),
    }
    s
}
