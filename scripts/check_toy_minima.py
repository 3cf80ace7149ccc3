#!/usr/bin/env python3
"""Checks that histfit's toy fits end at the lowest minimum a cheap search finds: for each toy
(generated at the observed free fit, the draws of ``histfit toys``), the fit's twice_nll must not
exceed by more than ``--tol`` the best of
  - a refit from its own best fit with the sign of every near-zero nuisance parameter flipped
    (|theta| < ``--near``; the other basin of a kink or of a one-sided variation), and
  - 3 refits from random points (every free parameter uniform within +-2 around the initial
    point, factors around 1 within +-0.5),
each a single search (``starts=0``). Also counts fits that did not converge. ``--jobs N`` checks
toys in N forked processes (the same points and results).

    python scripts/check_toy_minima.py WS.json --interp pyhf --toys 200 [--patch FILE:NAME]

With ``--ensemble TOYS.json`` (the JSON of ``histfit toys ... --json``, e.g. a GPU ensemble run
elsewhere) the toys are drawn at that ensemble's generation point and its fits are the ones
checked (the refits run here, on the CPU).
"""
import argparse
import json
import sys

import numpy as np


def random_point(rng, init, bounds, fixed):
    """A restart point: every free parameter uniform within +-2 around the initial point (factors
    around 1 with a lower bound of 0 or more within +-0.5), inside the bounds by 1e-3."""
    p = np.array(init, dtype=float)
    for i, (lo, hi) in enumerate(bounds):
        if fixed[i]:
            continue
        w = 0.5 if init[i] == 1.0 and lo >= 0 else 2.0
        p[i] = np.clip(init[i] + w * rng.uniform(-1, 1), lo + 1e-3, hi - 1e-3)
    return p


# The check of one toy, for forked workers (a closure over the model cannot be pickled).
_CHECK = None


def _check(t):
    return _CHECK(t)


def main():
    global _CHECK
    import histfit

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workspace")
    ap.add_argument("--patch", help="FILE:NAME of a pyhf patchset")
    ap.add_argument("--interp", default="pyhf", choices=["smooth", "pyhf"])
    ap.add_argument("--toys", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--near", type=float, default=0.1)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--json", help="write the per-toy records here")
    ap.add_argument("--jobs", type=int, default=1, help="check toys in this many processes")
    ap.add_argument("--ensemble", help="check this `histfit toys --json` output instead of fitting here")
    a = ap.parse_args()
    if a.patch:
        pfile, pname = a.patch.rsplit(":", 1)
        ws = histfit.Workspace(a.workspace, patchset=pfile, patch=pname)
    else:
        ws = histfit.Workspace(a.workspace)
    m = ws.model(interp=a.interp)
    ensemble = None
    if a.ensemble:
        with open(a.ensemble) as fh:
            ensemble = json.load(fh)
        gen = np.asarray(ensemble["gen_params"], dtype=float)
        a.seed, a.toys = ensemble["seed"], min(a.toys, len(ensemble["toys"]))
    else:
        gen = histfit.fit(ws.data(m), m).bestfit
    init, bounds, fixed = m.suggested_init(), m.suggested_bounds(), m.fixed()
    names = m.par_names
    # Nuisance parameters centred at 0 (normsys/histosys-like): the ones a sign flip moves.
    centred = [i for i in range(len(names)) if not fixed[i] and init[i] == 0.0 and i != m.poi_index]
    # The restart points are drawn up front, toy after toy, so that any number of jobs checks
    # the same points.
    rng = np.random.default_rng(a.seed + 12345)
    restarts = [[random_point(rng, init, bounds, fixed) for _ in range(3)] for _ in range(a.toys)]

    def check(t):
        data = m.toy_data(gen, a.seed, t)
        r = histfit.fit(data, m, init=gen)
        twice_nll, converged, reason = r.twice_nll, r.converged, r.reason
        if ensemble is not None:
            toy = ensemble["toys"][t]
            assert toy["index"] == t
            twice_nll, converged, reason = toy["twice_nll"], toy["converged"], toy.get("reason", "")
        best, how = np.inf, ""
        flip = r.bestfit.copy()
        near = [i for i in centred if abs(flip[i]) < a.near]
        for i in near:
            flip[i] = -flip[i] if flip[i] != 0.0 else 0.05
        f = histfit.fit(data, m, init=flip, starts=0)
        if f.converged and f.twice_nll < best:
            best, how = f.twice_nll, f"sign flip of {len(near)}"
        for k, point in enumerate(restarts[t]):
            f = histfit.fit(data, m, init=point, starts=0)
            if f.converged and f.twice_nll < best:
                best, how = f.twice_nll, f"restart {k}"
        # The CPU fit is one more check of an ensemble's fit.
        if ensemble is not None and r.converged and r.twice_nll < best:
            best, how = r.twice_nll, "CPU fit"
        return {"toy": t, "twice_nll": twice_nll, "converged": converged, "reason": reason,
                "best_check": best, "how": how}

    if a.jobs > 1:
        # Forked workers inherit the model and the ensemble; each toy is checked by one of them.
        import multiprocessing
        _CHECK = check
        with multiprocessing.get_context("fork").Pool(a.jobs) as pool:
            records = pool.map(_check, range(a.toys), chunksize=1)
    else:
        records = [check(t) for t in range(a.toys)]
    worse, failed, unchecked = 0, 0, 0
    for rec in records:
        t, best = rec["toy"], rec["best_check"]
        failed += not rec["converged"]
        if not np.isfinite(best):
            unchecked += 1
            print(f"toy {t}: no check refit converged", flush=True)
        above = rec["twice_nll"] - best
        if above > a.tol:
            worse += 1
            print(f"toy {t}: fit {rec['twice_nll']:.9f} above the {rec['how']} refit by {above:.3e} "
                  f"({rec['reason']})", flush=True)
    print(f"{a.workspace} ({a.interp}): {a.toys} toys, {failed} not converged, "
          f"{worse} above the best check by more than {a.tol:g}, {unchecked} without a converged check")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(records, fh, indent=1)
    sys.exit(1 if worse or failed or unchecked else 0)


if __name__ == "__main__":
    main()
