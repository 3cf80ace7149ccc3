#!/usr/bin/env python3
"""Differential test of histfit against pyhf 0.7.6 on random workspaces
(``scripts/random_workspaces.py``): the likelihood, the parameter table, the fit's minimum and
the fits inside an asymptotic hypotest.

For each workspace and interpolation setting (smooth = code4/code4p, pyhf = code1/code0):

- parameter names and order identical;
- twice_nll at random points within 1e-9 relative (both non-finite counts as agreement);
- ``fit``: histfit's minimum against pyhf's scipy fit, and (``--starts K``) against the best of K
  more histfit fits from random starts; a histfit minimum above the better of the two by more than
  ``--tol`` is a failure;
- ``hypotest`` (workspaces with a background in every channel): the free fit (POI >= 0, as q~
  uses), the conditional fit at mu = 1 and the mu = 0 fit that makes the Asimov dataset, each
  against pyhf's fit on the same data; a histfit fit above pyhf's by more than ``--tol``, or one
  abandoned, is a failure.

Needs pyhf==0.7.6 and the histfit package in the running Python. Prints one line per failure and
a summary; ``--json FILE`` writes every record. Exit status 1 when anything failed.

    python scripts/diff_random_fits.py --n 1000 --seed 11 --mode fit --starts 20
    python scripts/diff_random_fits.py --n 1000 --seed 12 --mode hypotest
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_workspaces import random_workspace  # noqa: E402

SETTINGS = {
    "smooth": {"normsys": {"interpcode": "code4"}, "histosys": {"interpcode": "code4p"}},
    "pyhf": {"normsys": {"interpcode": "code1"}, "histosys": {"interpcode": "code0"}},
}


def _pyhf():
    import pyhf

    pyhf.set_backend("numpy", pyhf.optimize.scipy_optimizer())
    return pyhf


def random_points(rng, init, bounds, fixed, k):
    """k points near the initial point, inside the bounds (fixed parameters at their init)."""
    pts = []
    for _ in range(k):
        p = np.array(init, dtype=float)
        for i, (lo, hi) in enumerate(bounds):
            if fixed[i]:
                continue
            a, b = max(lo, init[i] - 2.0), min(hi, init[i] + 2.0)
            if init[i] == 1.0 and lo >= 0.0:  # gamma and normalisation factors: near 1
                a, b = max(lo, 0.5), min(hi, 1.5)
            p[i] = rng.uniform(a, b)
        pts.append(p)
    return pts


def pyhf_twice_nll(model, pars, data):
    with np.errstate(all="ignore"):
        v = float(-2.0 * model.logpdf(np.asarray(pars, dtype=float), data)[0])
    return v


def pyhf_fit(pyhf, model, data, fix=None, poi_lower=None):
    """pyhf's scipy fit: (twice_nll at its best fit, by pyhf's own logpdf) or (None, reason)."""
    init = model.config.suggested_init()
    bounds = [list(b) for b in model.config.suggested_bounds()]
    fixed = list(model.config.suggested_fixed())
    if poi_lower is not None:
        bounds[model.config.poi_index][0] = poi_lower
    if fix is not None:
        init = list(init)
        init[model.config.poi_index] = fix
        fixed[model.config.poi_index] = True
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            best = pyhf.infer.mle.fit(data, model, init_pars=init, par_bounds=bounds, fixed_params=fixed)
    except Exception as e:  # pyhf raises FailedMinimization
        return None, f"{type(e).__name__}: {str(e)[:120]}"
    # pyhf's Poisson term of a bin with no events is -lambda even for lambda < 0, so its fit can
    # run off to negative yields and -inf; histfit (like ROOT) refuses negative rates. Such a
    # minimum is no reference (a documented pyhf quirk, counted apart).
    if np.min(model.expected_actualdata(best)) < 0:
        return None, "pyhf quirk: its best fit has a negative expected count"
    return pyhf_twice_nll(model, best, data), best


def histfit_best_of_starts(histfit, hm, data, k, rng, fixed_poi=None):
    """The lowest converged twice_nll of k histfit fits from random starts within the bounds."""
    init, bounds, fixed = hm.suggested_init(), hm.suggested_bounds(), hm.fixed()
    best = math.inf
    for p in random_points(rng, init, bounds, fixed, k):
        fix = None
        if fixed_poi is not None:
            p[hm.poi_index] = fixed_poi
            fix = {hm.poi_name: fixed_poi}
        r = histfit.fit(data, hm, init=p, fixed=fix, starts=0)
        if r.converged and r.twice_nll < best:
            best = r.twice_nll
    return best


def check_workspace(spec, setting, mode, starts, tol, rng, histfit, pyhf):
    """Records of one workspace in one setting."""
    out = {"setting": setting, "failures": []}
    ws = pyhf.Workspace(spec)
    pm = ws.model(modifier_settings=SETTINGS[setting])
    data = np.asarray(ws.data(pm), dtype=float)
    hm = histfit.Workspace(spec).model(interp=setting)
    out["n_pars"] = len(hm.par_names)
    if hm.par_names != list(pm.config.par_names):
        out["failures"].append(f"parameter names differ: {hm.par_names} vs {pm.config.par_names}")
        return out
    if list(hm.fixed()) != list(pm.config.suggested_fixed()):
        out["failures"].append("fixed parameters differ")
    worst, any_finite = 0.0, False
    for p in random_points(rng, hm.suggested_init(), hm.suggested_bounds(), hm.fixed(), 6):
        # Below λ = 0 the two differ by design (see README: "A bin with no events").
        with np.errstate(all="ignore"):
            if np.min(pm.expected_actualdata(p)) < 0:
                continue
        a, b = hm.twice_nll(p, data), pyhf_twice_nll(pm, p, data)
        any_finite |= math.isfinite(a) or math.isfinite(b)
        if not (math.isfinite(a) or math.isfinite(b)):
            continue
        rel = abs(a - b) / max(abs(b), 1.0) if math.isfinite(a) and math.isfinite(b) else math.inf
        worst = max(worst, rel)
    out["nll_rel"] = worst
    if worst > 1e-9:
        out["failures"].append(f"twice_nll differs from pyhf's by {worst:.2e} relative")
    if mode == "fit":
        h = histfit.fit(data, hm)
        p_val, p_best = pyhf_fit(pyhf, pm, data)
        ref = math.inf if p_val is None else p_val
        multi = histfit_best_of_starts(histfit, hm, data, starts, rng) if starts else math.inf
        best_ref = min(ref, multi)
        out.update(histfit=h.twice_nll, converged=h.converged, reason=h.reason, pyhf=p_val,
                   pyhf_error=None if p_val is not None else p_best, multistart=multi)
        # No finite point anywhere (a bin with events that no sample fills): both refuse.
        impossible = (p_val is None and "not finite at the starting point" in h.reason
                      and not any_finite)
        out["impossible"] = impossible
        if not h.converged and not impossible:
            out["failures"].append(f"fit did not converge: {h.reason}")
        if math.isfinite(best_ref) and h.twice_nll > best_ref + tol:
            out["failures"].append(
                f"fit at {h.twice_nll:.9f}, pyhf {p_val}, best of {starts} starts {multi:.9f}: "
                f"above by {h.twice_nll - best_ref:.3e} ({h.reason})")
    else:
        r = json.loads(histfit._native.hypotest(hm._native, 1.0, data, "qtilde", "cpu"))
        fits = r["fits"]
        out["histfit_fits"] = fits
        out["hypotest_warnings"] = r.get("warnings", [])
        refs = {
            "free": pyhf_fit(pyhf, pm, data, poi_lower=0.0),
            "conditional": pyhf_fit(pyhf, pm, data, fix=1.0),
            "asimov_source": pyhf_fit(pyhf, pm, data, fix=0.0),
        }
        out["pyhf_fits"] = {k: v[0] for k, v in refs.items()}
        for key, (p_val, _) in refs.items():
            h = fits.get(key)
            if h is None or not math.isfinite(h):
                out["failures"].append(f"hypotest {key} fit missing or not finite: {h}")
            elif p_val is not None and h > p_val + tol:
                out["failures"].append(f"hypotest {key} fit at {h:.9f} above pyhf's {p_val:.9f} by {h - p_val:.3e}")
        for w in r.get("warnings", []):
            if "not finite" in w or "did not converge" in w:
                out["failures"].append(f"hypotest warning: {w}")
    return out


def run(n, seed, mode, starts=0, tol=1e-6, settings=("smooth", "pyhf"), first=0, progress=False):
    """Checks workspaces first..first+n of the stream `seed`; returns the records."""
    import histfit

    pyhf = _pyhf()
    records = []
    t0 = time.time()
    for i in range(first, first + n):
        spec = random_workspace(seed, i, background=(mode == "hypotest"))
        for setting in settings:
            rng = np.random.default_rng([seed, i, 7])
            rec = check_workspace(spec, setting, mode, starts, tol, rng, histfit, pyhf)
            rec["index"] = i
            records.append(rec)
            if progress and rec["failures"]:
                print(f"ws {seed}/{i} {setting}: " + "; ".join(rec["failures"]), flush=True)
        if progress and (i - first + 1) % 100 == 0:
            print(f"... {i - first + 1}/{n} workspaces, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return records


def summary(records, mode):
    lines = []
    for setting in sorted({r["setting"] for r in records}):
        rs = [r for r in records if r["setting"] == setting]
        failed = sum(1 for r in rs if r["failures"])
        line = f"{setting}: {len(rs)} workspaces, {failed} with a failure"
        if mode == "fit":
            above = [r["pyhf"] - r["histfit"] for r in rs if r.get("pyhf") is not None]
            worse_pyhf = [d for d in above if d > 1e-6]
            quirk = sum(1 for r in rs if "quirk" in str(r.get("pyhf_error")))
            line += f"; {sum(1 for r in rs if r.get('impossible'))} with no finite point (both refuse)"
            line += (f"; pyhf's scipy fit above histfit's on {len(worse_pyhf)}"
                     f" (max {max(worse_pyhf, default=0):.3g}); pyhf failed on "
                     f"{sum(1 for r in rs if r.get('pyhf') is None) - quirk}, ran to a negative yield on {quirk}")
        else:
            d = [r["pyhf_fits"][k] - r["histfit_fits"][k] for r in rs for k in r["pyhf_fits"]
                 if r["pyhf_fits"][k] is not None and r["histfit_fits"].get(k) is not None]
            line += (f"; of {len(d)} fits pyhf's is above histfit's on {sum(1 for v in d if v > 1e-6)}"
                     f" (max {max(d, default=0):.3g})")
        lines.append(line)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--mode", choices=["fit", "hypotest"], default="fit")
    ap.add_argument("--starts", type=int, default=0, help="histfit fits from random starts as a second reference")
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--settings", default="smooth,pyhf")
    ap.add_argument("--json", help="write every record here")
    a = ap.parse_args()
    recs = run(a.n, a.seed, a.mode, a.starts, a.tol, tuple(a.settings.split(",")), a.first, progress=True)
    for line in summary(recs, a.mode):
        print(line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(recs, f, indent=1)
    sys.exit(1 if any(r["failures"] for r in recs) else 0)


if __name__ == "__main__":
    main()
