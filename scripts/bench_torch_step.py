"""Per-step cost of the profiled q0 and its gradient on a tHu-sized model whose signal histogram
is a PyTorch tensor (issue 5): workspace_tHu.json plus a sample "nn_signal" in every channel,
scaled by the POI, the luminosity and one normsys. Warm-started steps, each moving the yields
by about 1 %, as a training loop does.

    python scripts/bench_torch_step.py        (needs histfit and torch installed)
"""

import os
import sys
import time

import numpy as np
import torch

import histfit
import histfit.torch as ht

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "crates", "histfit-py", "tests"))
from conftest import thu_with_network_signal_spec  # noqa: E402

spec = thu_with_network_signal_spec()
ws = histfit.Workspace(spec)
model = ws.model()
data = ws.data(model)
n_main = model._native.n_main
q0 = ht.ProfiledQ0(model, data)
base = np.linspace(30.0, 90.0, n_main)
y = torch.tensor(base, dtype=torch.float64, requires_grad=True)
t = time.perf_counter()
q0({"nn_signal": y}).backward()
cold = time.perf_counter() - t
times = []
for step in range(50):
    y = torch.tensor(base * (1 + 0.01 * np.sin(step)), dtype=torch.float64, requires_grad=True)
    t = time.perf_counter()
    q = q0({"nn_signal": y})
    q.backward()
    times.append(time.perf_counter() - t)
print(f"tHu + nn_signal: {len(model.par_names)} parameters, {n_main} bins")
print(f"first (cold) step {1e3 * cold:.1f} ms; warm steps: median {1e3 * np.median(times):.1f} ms, "
      f"min {1e3 * min(times):.1f} ms, max {1e3 * max(times):.1f} ms (q0 = {q.item():.4f})")
