#!/usr/bin/env python3
"""Compares two toy documents of one run made on different devices (or builds), toy by toy:
``histfit toys --json`` (twice_nll and POI of each toy's fit) or ``histfit hypotest-toys --json``
(each toy's q and, per ensemble, the free fit's twice_nll and POI and the conditional fit's
twice_nll). Prints, per quantity, how many toys differ by more than the tolerance (twice_nll and
q: ``--tol``, 1e-6; POI: ``--tol-poi``, 2e-4) and the largest differences (first minus second),
and the converged counts. Exit status 1 where any toy differs or the converged counts do.

    python scripts/compare_toys.py gpu.json cpu.json
"""
import argparse
import json
import sys


def compare(label, a, b, keys, tol, tol_poi):
    """Prints the comparison of the toy lists `a` and `b` on `keys`; whether they agree."""
    if [t["index"] for t in a] != [t["index"] for t in b]:
        print(f"{label}: the documents hold different toys")
        return False
    ok = True
    conv = (sum(t["converged"] for t in a), sum(t["converged"] for t in b))
    ok &= conv[0] == conv[1]
    print(f"{label}: {len(a)} toys, converged {conv[0]} / {conv[1]}")
    for key in keys:
        d = [(x[key] - y[key], x["index"]) for x, y in zip(a, b) if x.get(key) is not None and y.get(key) is not None]
        missing = sum(1 for x, y in zip(a, b) if (x.get(key) is None) != (y.get(key) is None))
        limit = tol_poi if key in ("poi", "poi_hat") else tol
        apart = sum(1 for e, _ in d if abs(e) > limit)
        ok &= apart == 0 and missing == 0
        worst = sorted(d, key=lambda e: -abs(e[0]))[:4]
        print(f"  {key}: {apart} apart by more than {limit:g}, {missing} present in one only; "
              f"largest {[(i, f'{e:.2e}') for e, i in worst]}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--tol-poi", type=float, default=2e-4)
    a = ap.parse_args()
    x, y = (json.load(open(f)) for f in (a.first, a.second))
    if "toys_sb" in x:
        print(f"q_obs {x['q_obs']} / {y['q_obs']}; summaries {'equal' if x['summary'] == y['summary'] else 'differ'}")
        keys = ["q", "twice_nll_free", "poi_hat", "twice_nll_cond"]
        ok = x["summary"] == y["summary"]
        for ens in ("toys_sb", "toys_b"):
            ok &= compare(ens, x[ens], y[ens], keys, a.tol, a.tol_poi)
    else:
        ok = compare("toys", x["toys"], y["toys"], ["twice_nll", "poi"], a.tol, a.tol_poi)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
