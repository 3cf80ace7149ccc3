#!/usr/bin/env python3
"""Times a maximum likelihood fit with uncertainties of one workspace with histfit, NextStat and
pyhf in one run on one machine, and prints the ratios.

    python scripts/bench_peers.py [WORKSPACE] [--repeat N] [--histfit target/release/histfit]

Needs a venv with nextstat==0.10.1, pyhf==0.7.6, iminuit (and numpy<2.4 for pyhf's toys, not used
here). Each tool is timed on the fit alone (model already built), median of N runs after one warm-up:
  histfit  `histfit fit WS --json`, its own "fit_seconds" (fit + Hessian + covariance), and the
           whole process wall time (JSON parse, compile, fit, output) for reference;
  NextStat `nextstat.fit(model)` with `model = nextstat.from_pyhf(json)`;
  pyhf     `pyhf.infer.mle.fit(data, model, return_uncertainties=True)` with the Minuit optimizer.
"""
import argparse, json, statistics, subprocess, sys, time, platform, os

from benchlib import median_time



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workspace", nargs="?", default="tests/fixtures/workspace_tHu.json")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--histfit", default="target/release/histfit")
    ap.add_argument("--skip-pyhf", action="store_true")
    a = ap.parse_args()
    text = open(a.workspace).read()
    rows = []

    hf_fit, hf_wall, hf_nll = [], [], None
    for _ in range(a.repeat + 1):
        t = time.perf_counter()
        out = subprocess.run([a.histfit, "fit", a.workspace, "--json"], capture_output=True, text=True, check=True)
        hf_wall.append(time.perf_counter() - t)
        doc = json.loads(out.stdout)
        hf_fit.append(doc["fit_seconds"])
        hf_nll = doc["twice_nll"]
    hf_fit, hf_wall = statistics.median(hf_fit[1:]), statistics.median(hf_wall[1:])
    rows.append(("histfit fit (in-process)", hf_fit, hf_nll))
    rows.append(("histfit CLI end to end", hf_wall, hf_nll))

    import nextstat
    ns_model = nextstat.from_pyhf(text)
    res = {}
    def ns_fit():
        res["r"] = nextstat.fit(ns_model)
    t_ns = median_time(ns_fit, a.repeat)
    rows.append((f"NextStat {getattr(nextstat, '__version__', '?')} fit", t_ns, res["r"].twice_nll))

    if not a.skip_pyhf:
        import pyhf
        pyhf.set_backend("numpy", pyhf.optimize.minuit_optimizer(tolerance=1e-4))
        ws = pyhf.Workspace(json.loads(text))
        model = ws.model()
        data = ws.data(model)
        out = {}
        def pyhf_fit():
            out["r"] = pyhf.infer.mle.fit(data, model, return_uncertainties=True, return_fitted_val=True)
        t_py = median_time(pyhf_fit, 1)
        rows.append((f"pyhf {pyhf.__version__} fit (minuit)", t_py, float(out["r"][1])))

    print(f"workspace: {a.workspace}   machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(f"{'tool':<32} {'seconds':>10} {'twice_nll':>16} {'ratio vs histfit fit':>22}")
    for name, t, nll in rows:
        print(f"{name:<32} {t:>10.4f} {nll:>16.8f} {t / hf_fit:>21.1f}x")


if __name__ == "__main__":
    sys.exit(main())
