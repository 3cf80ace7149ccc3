#!/usr/bin/env python3
"""How many random starts per toy a toy ensemble needs to pass ``check_toy_minima.py``: for each
toy (drawn at the observed free fit, as ``histfit toys`` draws them) one search from the
generating point and ``--starts`` searches from random points of the checker's kind (every free
parameter uniform within +-2 around the initial point, factors around 1 within +-0.5), each a
single search (``starts=0``). Then, by resampling those searches, the expected number of toys
(per ``--toys``) whose best of K random starts is still above the best of 3 others (the
checker's restarts) by more than 1e-6, for several K.

    python scripts/basin_rates.py WS.json --interp smooth --toys 200 --starts 30

Where a lower basin is reached by a few random points in a hundred, no small K makes the count
zero; the table says how fast it falls (BENCHMARKS.md, issue 21, session 22).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_toy_minima import random_point  # noqa: E402


def main():
    import histfit

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workspace")
    ap.add_argument("--interp", default="smooth", choices=["smooth", "pyhf"])
    ap.add_argument("--toys", type=int, default=200)
    ap.add_argument("--starts", type=int, default=30, help="random searches per toy")
    ap.add_argument("--seed", type=int, default=0, help="the toys' seed")
    a = ap.parse_args()
    ws = histfit.Workspace(a.workspace)
    m = ws.model(interp=a.interp)
    gen = histfit.fit(ws.data(m), m).bestfit
    init, bounds, fixed = m.suggested_init(), m.suggested_bounds(), m.fixed()
    rng = np.random.default_rng(99)
    # Per toy: twice_nll of each random search relative to the search from the generating point
    # (NaN where it did not converge).
    rel = np.full((a.toys, a.starts), np.nan)
    for t in range(a.toys):
        data = m.toy_data(gen, a.seed, t)
        first = histfit.fit(data, m, init=gen, starts=0).twice_nll
        for k in range(a.starts):
            r = histfit.fit(data, m, init=random_point(rng, init, bounds, fixed), starts=0)
            if r.converged:
                rel[t, k] = r.twice_nll - first
    lower = np.nanmin(np.where(np.isnan(rel), np.inf, rel), axis=1) < -1e-6
    print(f"{a.workspace} ({a.interp}): {lower.sum()} of {a.toys} toys have a basin below the first "
          f"search's that one of {a.starts} random searches reaches")
    for t in np.flatnonzero(lower):
        r = rel[t]
        print(f"  toy {t}: lowest {np.nanmin(r):+.4g}, reached by {np.sum(r < np.nanmin(r) + 1e-4)} of "
              f"{a.starts}; {np.sum(r < -1e-6)} end below the first search")
    pick = np.random.default_rng(1)
    for k in [0, 1, 3, 6, 10, 15, 20]:
        if k + 3 > a.starts:
            break
        above = []
        for _ in range(50):
            n = 0
            for t in np.flatnonzero(lower):
                order = pick.permutation(a.starts)
                mine = np.nanmin(np.r_[0.0, rel[t, order[:k]]])
                check = np.nanmin(np.r_[np.inf, rel[t, order[k:k + 3]]])
                n += check < mine - 1e-6
            above.append(n)
        print(f"K = {k:2d} random starts per toy: {np.mean(above):.2f} toys of {a.toys} expected above the checker's")


if __name__ == "__main__":
    main()
