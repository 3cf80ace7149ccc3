#!/usr/bin/env python3
"""histfit against RooFit 6.40 on the event-level benchmark model, in one run on one machine:
extended Gaussian + exponential on [60, 120] with free yields (nsig, nbkg, mean, sigma, lambda),
10k / 100k / 1M events drawn here with NumPy (seed 1), the same events for all; `--model cb`
makes the signal a Crystal Ball (RooCBShape, its alpha = 1.5 and n = 3 held: the same five free
parameters). `python bench_unbinned_peers.py [--model gauss|cb] [SIZES...]`.

- RooFit: `pdf.fitTo(data, EvalBackend("cpu"), Save(), PrintLevel(-1))` on a RooDataSet made from
  the NumPy arrays; the fit alone is timed (best of 3), as the issue's figures are.
- histfit: the HS3 file ROOT's exporter writes for the same model, fitted by `histfit fit FILE
  --json` (with uncertainties); reported are the fit alone (its "fit_seconds") and the whole
  process, with the events inline in the JSON and with the events in a Parquet file (pyarrow,
  snappy) that the document names through histfit's extension "histfit_source" — reading the
  events included; whole processes best of PROCESS_REPEATS (7: short processes vary by a few ms
  from run to run on a small VM).

- NextStat 0.10.1, where it is installed (`pip install nextstat==0.10.1`): `nextstat
  unbinned-fit --config SPEC.json` on the same Parquet file (its `unbinned_spec_v0`: the same
  Gaussian and exponential, the same initial values and ranges), whole process, best of 7 as
  histfit's; its −ln L at its minimum, and its own −ln L at histfit's minimum (`UnbinnedModel.nll`), which says
  whether the two programs' conventions agree and which minimum is lower.

- zfit 0.28, where ZFIT_PYTHON names a Python that has it (TensorFlow: a venv of its own,
  `pip install zfit==0.28.* pyarrow`): `scripts/zfit_fit.py` on the same Parquet file (Minuit,
  then Hesse; the same start and ranges), whole process (TensorFlow's import included) once, its
  first fit (graphs traced) and a second, warm one; the extended −ln L by NumPy at its minimum and
  at histfit's (zfit subtracts a constant of its own from its loss).

BENCH_DIR=DIR keeps the files written (HS3 documents, Parquet twins, peers' specs) in DIR.

Prints a table with the ratios and checks that histfit and RooFit found the same minimum (−ln L
within 1e-3). Needs `pip install root numpy pyarrow` and a release build (`cargo build --release
-p histfit-cli`); HISTFIT names the binary (default: target/release/histfit or
$CARGO_TARGET_DIR/release/histfit).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import ROOT

ROOT.gROOT.SetBatch(True)
ROOT.RooMsgService.instance().setGlobalKillBelow(ROOT.RooFit.WARNING)

here = os.path.dirname(os.path.abspath(__file__))
target = os.environ.get("CARGO_TARGET_DIR", os.path.join(here, "..", "target"))
HISTFIT = os.environ.get("HISTFIT", os.path.join(target, "release", "histfit"))


# The signal shape: "gauss" (the issue's benchmark) or "cb" (a Crystal Ball with its tail
# parameters held, alpha = 1.5 and n = 3: the same five free parameters), from `--model`.
MODEL = "gauss"
CB_ALPHA, CB_N = 1.5, 3.0


def cb_shape(x, mean, sigma, alpha=CB_ALPHA, n=CB_N):
    """RooCBShape's unnormalised density (alpha > 0: the tail on the low side)."""
    t = (np.asarray(x) - mean) / sigma
    a = abs(alpha)
    tail = (n / a) ** n * np.exp(-0.5 * a * a) * np.power(np.maximum(n / a - a - t, 1e-300), -n)
    return np.where(t > -a, np.exp(-0.5 * t * t), tail)


def draw_signal(k, rng):
    if MODEL == "gauss":
        sig = rng.normal(91.0, 2.5, size=4 * k)
        return sig[(sig >= 60) & (sig <= 120)][:k]
    # The Crystal Ball's inverse CDF on a fine grid over the range.
    grid = np.linspace(60.0, 120.0, 200_001)
    cdf = np.cumsum(cb_shape(grid, 91.0, 2.5))
    cdf /= cdf[-1]
    return np.interp(rng.uniform(size=k), cdf, grid)


def draw(n, rng):
    nsig = rng.poisson(0.3 * n)
    sig = draw_signal(nsig, rng)
    u = rng.uniform(size=n - nsig)
    a, b = np.exp(-0.03 * 60), np.exp(-0.03 * 120)
    bkg = np.log(a + u * (b - a)) / -0.03
    return np.concatenate([sig, bkg])


def workspace():
    w = ROOT.RooWorkspace("w")
    if MODEL == "gauss":
        w.factory("Gaussian::sig(x[60,120], mean[90,80,100], sigma[3,0.5,10])")
    else:
        w.factory(f"CBShape::sig(x[60,120], mean[90,80,100], sigma[3,0.5,10], alpha[{CB_ALPHA}], "
                  f"n[{CB_N}])")
    w.factory("Exponential::bkg(x, lambda[-0.02,-1,0])")
    w.factory("SUM::model(nsig[1000,0,10000000]*sig, nbkg[1000,0,10000000]*bkg)")
    return w


# Runs of each whole process (histfit, NextStat) of which the fastest is reported.
PROCESS_REPEATS = 7


def roofit(x, n):
    w = workspace()
    var = w.var("x")
    data = ROOT.RooDataSet.from_numpy({"x": x}, ROOT.RooArgSet(var))
    pdf = w.pdf("model")
    best = None
    for _ in range(3):
        for name, v in [("mean", 90.0), ("sigma", 3.0), ("lambda", -0.02), ("nsig", 0.3 * n), ("nbkg", 0.7 * n)]:
            w.var(name).setVal(v)
        t = time.perf_counter()
        r = pdf.fitTo(data, ROOT.RooFit.EvalBackend("cpu"), ROOT.RooFit.Save(), ROOT.RooFit.PrintLevel(-1))
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best, r.minNll(), r.status()


def hs3_file(x, n, path):
    w = workspace()
    for name, v in [("nsig", 0.3 * n), ("nbkg", 0.7 * n)]:
        w.var(name).setVal(v)
    var = w.var("x")
    data = ROOT.RooDataSet.from_numpy({"x": x}, ROOT.RooArgSet(var))
    data.SetName("obsData")
    w.Import(data)
    ROOT.RooJSONFactoryWSTool(w).exportJSON(path)


def parquet_twin(path, x):
    """The same document with its events in a Parquet file beside it."""
    with open(path) as f:
        doc = json.load(f)
    events = path.replace(".json", ".parquet")
    pq.write_table(pa.table({"x": x}), events)
    data = doc["data"][0]
    data.pop("entries")
    data["histfit_source"] = {"format": "parquet", "file": os.path.basename(events)}
    twin = path.replace(".json", ".pq.json")
    with open(twin, "w") as f:
        json.dump(doc, f)
    return twin


def nextstat_spec(parquet, n, path):
    """NextStat's unbinned spec of the benchmark model over the events in `parquet`."""
    par = lambda name, init, lo, hi: {"name": name, "init": init, "bounds": [lo, hi]}
    signal_pdf = ({"type": "gaussian", "observable": "x", "params": ["mean", "sigma"]}
                  if MODEL == "gauss" else
                  {"type": "crystal_ball", "observable": "x", "params": ["mean", "sigma", "alpha", "n"]})
    spec = {
        "schema_version": "nextstat_unbinned_spec_v0",
        "model": {"parameters": [
            par("nsig", 0.3 * n, 0, 1e7), par("nbkg", 0.7 * n, 0, 1e7), par("mean", 90.0, 80, 100),
            par("sigma", 3.0, 0.5, 10), par("lambda", -0.02, -1, 0)]
            + ([par("alpha", CB_ALPHA, CB_ALPHA, CB_ALPHA), par("n", CB_N, CB_N, CB_N)]
               if MODEL == "cb" else [])},
        "channels": [{
            "name": "SR", "data": {"file": parquet},
            "observables": [{"name": "x", "bounds": [60, 120]}],
            "processes": [
                {"name": "sig", "pdf": signal_pdf,
                 "yield": {"type": "parameter", "name": "nsig"}},
                {"name": "bkg", "pdf": {"type": "exponential", "observable": "x", "params": ["lambda"]},
                 "yield": {"type": "parameter", "name": "nbkg"}}]}],
    }
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def nextstat(spec, histfit_best):
    """Whole-process time (best of PROCESS_REPEATS) and −ln L of `nextstat unbinned-fit`, and
    NextStat's −ln L at histfit's minimum (names → values); None where NextStat is not
    installed."""
    exe = shutil.which("nextstat") or os.path.join(os.path.dirname(sys.executable), "nextstat")
    if not os.path.exists(exe):
        return None
    best = None
    for _ in range(PROCESS_REPEATS):
        t = time.perf_counter()
        out = subprocess.run([exe, "unbinned-fit", "--config", spec], capture_output=True, text=True,
                             check=True)
        dt = time.perf_counter() - t
        doc = json.loads(out.stdout)
        if best is None or dt < best[0]:
            best = (dt, doc["nll"])
    import nextstat as ns
    model = ns.UnbinnedModel.from_config(spec)
    at = [histfit_best[name] for name in model.parameter_names()]
    return best[0], best[1], model.nll(at)


def zfit_run(parquet, n, histfit_best, tmp):
    """zfit's whole process (seconds), its first and warm fits, its −ln L at its minimum and at
    histfit's; None where ZFIT_PYTHON is not set."""
    python = os.environ.get("ZFIT_PYTHON")
    if not python:
        return None
    best_path = os.path.join(tmp, f"histfit_best_{n}.json")
    with open(best_path, "w") as f:
        json.dump(histfit_best, f)
    t = time.perf_counter()
    out = subprocess.run([python, os.path.join(here, "zfit_fit.py"), parquet, str(n), best_path, MODEL],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, ZFIT_DISABLE_TF_WARNINGS="1"))
    wall = time.perf_counter() - t
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    return wall, doc


def histfit(path):
    best = None
    for _ in range(PROCESS_REPEATS):
        t = time.perf_counter()
        out = subprocess.run([HISTFIT, "fit", path, "--json"], capture_output=True, text=True, check=True)
        dt = time.perf_counter() - t
        doc = json.loads(out.stdout)
        if best is None or dt < best[0]:
            best = (dt, doc["fit_seconds"], 0.5 * doc["twice_nll"], doc["converged"],
                    {q["name"]: q["value"] for q in doc["parameters"]})
    return best


def main():
    global MODEL
    args = sys.argv[1:]
    if "--model" in args:
        at = args.index("--model")
        MODEL = args[at + 1]
        del args[at:at + 2]
    assert MODEL in ("gauss", "cb"), f"--model gauss|cb, not {MODEL}"
    rng = np.random.default_rng(1)
    sizes = [int(s) for s in args] or [10_000, 100_000, 1_000_000]
    print(f"signal: {'Gaussian' if MODEL == 'gauss' else f'Crystal Ball (alpha {CB_ALPHA}, n {CB_N} held)'}"
          " + exponential, extended, 5 free parameters")
    print(f"{'events':>9} {'RooFit fit':>11} {'histfit fit':>12} {'ratio':>7} {'process (JSON)':>15} {'ratio':>7}"
          f" {'process (Parquet)':>18} {'ratio':>7}  -lnL RooFit / histfit")
    keep = os.environ.get("BENCH_DIR") and os.path.abspath(os.environ["BENCH_DIR"])
    if keep:
        os.makedirs(keep, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = keep or scratch
        for n in sizes:
            x = draw(n, rng)
            rf_t, rf_nll, status = roofit(x, n)
            path = os.path.join(tmp, f"{'bench' if MODEL == 'gauss' else MODEL}_{n}.json")
            hs3_file(x, n, path)
            wall, fit_s, hf_nll, converged, _ = histfit(path)
            twin = parquet_twin(path, x)
            pq_wall, _, pq_nll, pq_converged, best = histfit(twin)
            spec = nextstat_spec(twin.replace(".pq.json", ".parquet"), n,
                                 os.path.join(tmp, f"nextstat_{n}.json"))
            ns = nextstat(spec, best)
            same = abs(rf_nll - hf_nll) < 1e-3 and abs(rf_nll - pq_nll) < 1e-3
            print(f"{n:>9} {rf_t:>10.4f}s {fit_s:>11.4f}s {rf_t / fit_s:>6.1f}x {wall:>14.4f}s {rf_t / wall:>6.1f}x"
                  f" {pq_wall:>17.4f}s {rf_t / pq_wall:>6.1f}x"
                  f"  {rf_nll:.4f} / {hf_nll:.4f} (status {status}, converged {converged and pq_converged}"
                  f"{'' if same else ', MINIMA DIFFER'})")
            zf = zfit_run(twin.replace(".pq.json", ".parquet"), n, best, tmp)
            if zf is not None:
                zf_wall, doc = zf
                print(f"{'':>9} zfit 0.28 whole process {zf_wall:.2f}s ({zf_wall / pq_wall:.0f}x histfit's), "
                      f"first fit {doc['first_fit_seconds']:.3f}s, warm fit {doc['warm_fit_seconds']:.4f}s "
                      f"({doc['warm_fit_seconds'] / fit_s:.1f}x histfit's fit); its -lnL {doc['nll']:.4f} at its "
                      f"minimum, {doc['nll_at_histfit']:.4f} at histfit's ({doc['nll'] - doc['nll_at_histfit']:+.4f}), "
                      f"converged {doc['converged']}")
            if ns is not None:
                ns_wall, ns_nll, ns_at_hf = ns
                print(f"{'':>9} NextStat 0.10.1 whole process {ns_wall:.4f}s: histfit (Parquet) "
                      f"{ns_wall / pq_wall:.1f}x faster; its -lnL {ns_nll:.4f} at its minimum, "
                      f"{ns_at_hf:.4f} at histfit's ({ns_nll - ns_at_hf:+.4f})")


if __name__ == "__main__":
    main()
