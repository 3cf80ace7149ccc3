#!/usr/bin/env python3
"""Toy ensembles split over the GPUs of one host against one GPU (issue 24's measurement).

Runs the `histfit` binary given as HISTFIT (default: `histfit` on PATH) on each workspace given
on the command line, whole process, once per device setting in turn (`cuda:0`, `cuda:all`, and
repeats), and compares the `--json` documents toy by toy: every toy's twice_nll, POI, converged
flag and index must be the same bits (JSON numbers are written shortest-round-trip, so equal text
is equal bits). Toy CLs (`hypotest-toys`) likewise, both ensembles and the p-values. Prints one
table last; logs and the timing table go under OUT (default: the current folder).

    HISTFIT=target/release/histfit python3 scripts/multi_gpu_bench.py \\
        --toys 100000 --hypotest-toys 20000 --repeats 2 workspace_tHu.json big.json

The first use of the kernels on a fresh machine pays the driver's JIT (about 90 s); a warm-up
run on `cuda:0` is made first and timed apart, so the figures are warm ones.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HISTFIT = os.environ.get("HISTFIT", "histfit")
OUT = os.environ.get("OUT", ".")


def run(args, log):
    """Runs histfit with `args`, returns (seconds, parsed --json document)."""
    t0 = time.perf_counter()
    p = subprocess.run([HISTFIT, *args, "--json"], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    with open(os.path.join(OUT, log), "a") as f:
        f.write(f"$ histfit {' '.join(args)} --json  ({dt:.3f} s, exit {p.returncode})\n")
        f.write(p.stderr[-4000:])
    if p.returncode != 0:
        sys.exit(f"histfit {' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return dt, json.loads(p.stdout)


def toy_rows(doc):
    """The per-toy results a split must reproduce, as exact text."""
    if doc["kind"] == "toys":
        return [json.dumps(t, sort_keys=True) for t in doc["toys"]]
    return [
        json.dumps(t, sort_keys=True) for key in ("toys_sb", "toys_b") for t in doc[key]
    ] + [json.dumps(doc["summary"], sort_keys=True), json.dumps(doc["q_obs"])]


def differing(a, b):
    ra, rb = toy_rows(a), toy_rows(b)
    if len(ra) != len(rb):
        return f"{len(ra)} vs {len(rb)} rows"
    return sum(x != y for x, y in zip(ra, rb))


def table(rows):
    """The rows as an aligned text table, also written to OUT/table.txt (after every row, so a
    run cut short keeps what it measured)."""
    head = ("command", "workspace", "device", "toys", "wall s", "toys/s", "rows differing")
    widths = [max(8 if isinstance(r[i], float) else len(str(r[i])) for r in rows + [head])
              for i in range(len(head))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(head, widths))]
    for r in rows:
        cells = [f"{c:.3f}" if isinstance(c, float) else str(c) for c in r]
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths)))
    text = "\n".join(lines)
    with open(os.path.join(OUT, "table.txt"), "w") as f:
        f.write(text + "\n")
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workspaces", nargs="+")
    ap.add_argument("--toys", type=int, default=100_000)
    ap.add_argument("--hypotest-toys", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--devices", default="cuda:0;cuda:all", help="';'-separated, run in turn")
    ap.add_argument("--extra", default="", help="';'-separated, run once each and compared")
    a = ap.parse_args()
    devices = [d for d in a.devices.split(";") if d]
    extra = [d for d in a.extra.split(";") if d]
    rows = []
    first = a.workspaces[0]
    t, _ = run(["toys", first, "--gpu", devices[0], "--n-toys", "100"], "warmup.log")
    rows.append(("warm-up (first use)", os.path.basename(first), devices[0], 100, t, "", ""))
    for ws in a.workspaces:
        name = os.path.basename(ws).removesuffix(".json")
        for cmd, n in (("toys", a.toys), ("hypotest-toys", a.hypotest_toys)):
            if n == 0:
                continue
            ref = None
            for rep in range(a.repeats):
                for dev in devices + (extra if rep == 0 else []):
                    # Fixed cost (parse, baseline fits, curvature units, opening the devices):
                    # the same command with 1000 toys.
                    if rep == 0:
                        t1, _ = run([cmd, ws, "--gpu", dev, "--n-toys", "1000", "--seed", "0"],
                                    f"{name}.log")
                        rows.append((cmd, name, dev, 1000, t1, "", ""))
                        table(rows)
                    t, doc = run([cmd, ws, "--gpu", dev, "--n-toys", str(n), "--seed", "0"],
                                 f"{name}.log")
                    if ref is None:
                        ref, same = doc, "reference"
                    else:
                        same = differing(ref, doc)
                    fits = n * (1 if cmd == "toys" else 2)
                    rows.append((cmd, name, dev, n, t, f"{fits / t:.0f}", same))
                    table(rows)
    print(table(rows))


if __name__ == "__main__":
    main()
