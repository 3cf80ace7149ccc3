#!/usr/bin/env python3
"""A signal grid against separate runs: `histfit limit BKG --patchset PS` (all points in one
process, timed) and `histfit limit BKG --patch PS:NAME` for every point, compared field by field
(floats by repr: bit for bit).

    scripts/check_grid.py BINARY BKG.json PATCHSET.json [--command limit|hypotest] [--jobs N]
                          [--extra "--bounds mu_SIG=0:10000"]

Prints the grid's wall time, how many points were computed, failed (with the same error on both
sides) and identical; exit status 1 if any point differs.
"""

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HEADER = {"workspace", "measurement", "interpolation", "poi"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary")
    ap.add_argument("workspace")
    ap.add_argument("patchset")
    ap.add_argument("--command", default="limit", choices=["limit", "hypotest"])
    ap.add_argument("--jobs", type=int, default=2, help="separate runs in parallel")
    ap.add_argument("--extra", default="", help="further options for every run, e.g. '--bounds mu=0:100'")
    a = ap.parse_args()
    t0 = time.perf_counter()
    extra = a.extra.split()
    p = subprocess.run([a.binary, a.command, a.workspace, "--patchset", a.patchset, "--json", *extra],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 3):
        sys.exit(f"grid failed: {p.stderr}")
    grid = json.loads(p.stdout)

    def single(point):
        r = subprocess.run([a.binary, a.command, a.workspace, "--patch", f"{a.patchset}:{point['patch']}",
                            "--json", *extra], capture_output=True, text=True)
        return point, r

    differ = same_error = identical = 0
    with ThreadPoolExecutor(a.jobs) as ex:
        for point, r in ex.map(single, grid["points"]):
            name = point["patch"]
            if r.returncode != 0:
                err = r.stderr.strip().removeprefix("error: ")
                if point.get("error") == err:
                    same_error += 1
                else:
                    differ += 1
                    print(f"DIFFERENT {name}: separate run failed ({err}), grid: {point.get('error')}")
                continue
            doc = json.loads(r.stdout)
            bad = [k for k, v in doc.items() if k not in HEADER and repr(point.get(k)) != repr(v)]
            if bad:
                differ += 1
                print(f"DIFFERENT {name}: {bad[:5]}")
            else:
                identical += 1
    print(f"grid of {grid['n_points']} points: {wall:.2f} s wall; {identical} identical to separate runs, "
          f"{same_error} the same error in both, {differ} different")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
