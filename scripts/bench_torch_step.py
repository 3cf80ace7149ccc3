"""Per-step cost of a profiled statistic and its gradient on a tHu-sized model whose signal
histogram is a PyTorch tensor (issue 5): workspace_tHu.json plus a sample "nn_signal" in every
channel, scaled by the POI, the luminosity and one normsys. Warm-started steps, each moving the
yields by about 1 %, as a training loop does.

    python scripts/bench_torch_step.py [--device cpu|cuda] [--stat q0|expected] [--steps N]
                                       [--trace DIR]

With ``--device cuda`` the yields are a CUDA tensor made on the device (each step's yields are
computed there from the previous ones, as a network's output would be) and histfit's CUDA
backend reads them in place. ``--trace DIR`` records five more steps with the PyTorch profiler
(CUPTI: every copy and kernel of the process, histfit's own included), writes the Chrome trace
to DIR and prints each host<->device copy by direction and size, so a copy of the signal
(n_main float64 values) would show.
"""

import argparse
import collections
import json
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

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cpu")
ap.add_argument("--stat", choices=["q0", "expected"], default="q0")
ap.add_argument("--steps", type=int, default=50)
ap.add_argument("--trace", default=None)
args = ap.parse_args()

spec = thu_with_network_signal_spec()
ws = histfit.Workspace(spec)
model = ws.model()
data = ws.data(model)
n_main = model._native.n_main
stat = ht.ProfiledQ0(model, data) if args.stat == "q0" else ht.ExpectedQ0(model)
dev = torch.device(args.device)
base = torch.linspace(30.0, 90.0, n_main, dtype=torch.float64, device=dev)


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def step(k):
    # The yields are made where they live (no host copy in the loop itself).
    y = (base * (1 + 0.01 * np.sin(k))).requires_grad_()
    q = stat({"nn_signal": y})
    q.backward()
    sync()
    return q, y


t = time.perf_counter()
q, y = step(0)
cold = time.perf_counter() - t
times = []
for k in range(1, args.steps + 1):
    t = time.perf_counter()
    q, y = step(k)
    times.append(time.perf_counter() - t)
print(f"tHu + nn_signal: {len(model.par_names)} parameters, {n_main} bins; device {dev}, {args.stat}")
print(f"first (cold) step {1e3 * cold:.1f} ms; warm steps: median {1e3 * np.median(times):.2f} ms, "
      f"min {1e3 * min(times):.2f} ms, max {1e3 * max(times):.2f} ms "
      f"(q = {q.item():.6f}, |grad| = {y.grad.norm().item():.6f}, grad on {y.grad.device})")

if args.trace:
    from torch.profiler import ProfilerActivity, profile

    os.makedirs(args.trace, exist_ok=True)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    steps = 5
    with profile(activities=acts) as prof:
        for k in range(100, 100 + steps):
            step(k)
    path = os.path.join(args.trace, f"trace_{dev.type}_{args.stat}.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    copies = collections.Counter()
    kernels = collections.Counter()
    for e in events:
        cat, a = e.get("cat", ""), e.get("args", {})
        if cat == "gpu_memcpy":
            copies[(e["name"].split(" (")[0], a.get("bytes"))] += 1
        elif cat == "kernel":
            kernels[e["name"].split("(")[0][:40]] += 1
    signal = 8 * n_main
    print(f"\nprofiled {steps} steps: copies by direction and size (the signal is {signal} bytes)")
    print(f"{'copy':<14}{'bytes':>8}{'per step':>10}")
    for (kind, b), n in sorted(copies.items(), key=lambda x: (x[0][0], x[0][1] or 0)):
        print(f"{kind:<14}{b:>8}{n / steps:>10.1f}")
    for kind in ("Memcpy HtoD", "Memcpy DtoH"):
        total = sum((k[1] or 0) * n for k, n in copies.items() if k[0] == kind)
        print(f"{kind}: {total / steps:.0f} bytes per step")
    same = sum(n for k, n in copies.items() if k[0] in ("Memcpy HtoD", "Memcpy DtoH") and k[1] == signal)
    print(f"host<->device copies of the signal's size ({signal} bytes): {same / steps:.1f} per step "
          f"(a parameter vector is {8 * len(model.par_names)} bytes)")
    print("kernels per step:", {k: v / steps for k, v in kernels.items()})
