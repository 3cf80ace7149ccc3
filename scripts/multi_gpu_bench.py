#!/usr/bin/env python3
"""Toy ensembles split over the GPUs of one host against one GPU (issue 24's measurement).

Runs the `histfit` binary given as HISTFIT (default: `histfit` on PATH) on each workspace given
on the command line, whole process, once per device setting in turn (`--devices`, default
`cuda:0;cuda:all;cuda:all@static`; `@static` runs with HISTFIT_SPLIT=static), `--repeats` times,
and compares the `--json` documents toy by toy with the first setting's: every toy's index,
twice_nll, POI, converged flag and reason must be the same bits (JSON numbers are written
shortest-round-trip, so equal text is equal bits). Toy CLs (`hypotest-toys`, with
`--hypotest-toys N`) likewise: both ensembles, q_obs and the summary. Every run has
HISTFIT_TIMING=1, so the table gives the whole process and the ensemble phase (from `generation
point fitted` to `ensemble fitted`, the fits alone) and the toys per second of each. Prints one
table last; logs and the table (rewritten after every row) go under OUT (default: here).

    HISTFIT=target/release/histfit python3 scripts/multi_gpu_bench.py \\
        --toys 100000 --hypotest-toys 20000 --repeats 2 workspace_tHu.json big.json

The first use of the kernels on a fresh machine pays the driver's JIT (70-90 s); a warm-up run
on the first setting is made first and timed apart, so the figures are warm ones.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HISTFIT = os.environ.get("HISTFIT", "histfit")
OUT = os.environ.get("OUT", ".")
HEAD = ("command", "workspace", "device", "toys", "wall s", "ensemble s", "toys/s (wall)",
        "toys/s (ensemble)", "rows differing")


def run(args, log, env=None):
    """Runs histfit with `args`; returns (seconds, ensemble-phase seconds, --json document)."""
    e = dict(os.environ, HISTFIT_TIMING="1", **(env or {}))
    t0 = time.perf_counter()
    p = subprocess.run([HISTFIT, *args, "--json"], capture_output=True, text=True, env=e)
    dt = time.perf_counter() - t0
    with open(os.path.join(OUT, log), "a") as f:
        f.write(f"$ {env or ''} histfit {' '.join(args)} --json  ({dt:.3f} s, exit {p.returncode})\n")
        f.write(p.stderr[-20000:])
    if p.returncode != 0:
        sys.exit(f"histfit {' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")
    marks = {}
    for line in p.stderr.splitlines():
        if line.startswith("timing:") and " s  " in line:
            t, what = line[len("timing:"):].split(" s  ", 1)
            marks[what.strip()] = float(t)
    start = marks.get("generation point fitted", marks.get("device opened", 0.0))
    end = marks.get("ensemble fitted", marks.get("baseline fits and both ensembles fitted", dt))
    return dt, end - start, json.loads(p.stdout)


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
    cells = [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells + [list(HEAD)]) for i in range(len(HEAD))]
    text = "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths))
                     for r in [list(HEAD)] + cells)
    with open(os.path.join(OUT, "table.txt"), "w") as f:
        f.write(text + "\n")
    return text


def setting(device):
    """`cuda:all@static` → ("cuda:all", {"HISTFIT_SPLIT": "static"})."""
    gpu, _, plan = device.partition("@")
    return gpu, ({"HISTFIT_SPLIT": plan} if plan else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workspaces", nargs="+")
    ap.add_argument("--toys", type=int, default=100_000)
    ap.add_argument("--hypotest-toys", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--devices", default="cuda:0;cuda:all;cuda:all@static",
                    help="';'-separated, run in turn; DEVICE@static splits statically")
    ap.add_argument("--extra", default="", help="';'-separated, run once each and compared")
    a = ap.parse_args()
    devices = [d for d in a.devices.split(";") if d]
    extra = [d for d in a.extra.split(";") if d]
    rows = []
    first = a.workspaces[0]
    gpu, env = setting(devices[0])
    t, _, _ = run(["toys", first, "--gpu", gpu, "--n-toys", "100"], "warmup.log", env)
    rows.append(("warm-up (first use)", os.path.basename(first), devices[0], 100, t, "", "", "",
                 ""))
    for ws in a.workspaces:
        name = os.path.basename(ws).removesuffix(".json")
        for cmd, n in (("toys", a.toys), ("hypotest-toys", a.hypotest_toys)):
            if n == 0:
                continue
            ref = None
            # Toys fitted per run: toy CLs fits both ensembles.
            fits = n * (1 if cmd == "toys" else 2)
            for rep in range(a.repeats):
                for dev in devices + (extra if rep == 0 else []):
                    gpu, env = setting(dev)
                    t, ens, doc = run([cmd, ws, "--gpu", gpu, "--n-toys", str(n), "--seed", "0"],
                                      f"{name}.log", env)
                    same = "reference" if ref is None else differing(ref, doc)
                    ref = ref or doc
                    rows.append((cmd, name, dev, n, t, ens, f"{fits / t:.0f}",
                                 f"{fits / ens:.0f}" if ens > 0 else "", same))
                    table(rows)
    print(table(rows))


if __name__ == "__main__":
    main()
