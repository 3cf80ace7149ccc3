#!/usr/bin/env python3
"""Times histfit's inference commands against NextStat 0.10.1 on one workspace, in one run on one
machine, and prints the ratios (issue: statistical inference on the CPU).

    python scripts/bench_peers_infer.py [WORKSPACE] [--histfit target/release/histfit] [--repeat N]

histfit is timed end to end as a process (`histfit hypotest|scan|limit|ranking WS --json`: JSON parse,
compile, inference, output), NextStat on the call alone with the model already built. Medians
of N runs after one warm-up.
"""
import argparse, subprocess, platform, os
import nextstat

from benchlib import median_time



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workspace", nargs="?", default="tests/fixtures/workspace_tHu.json")
    ap.add_argument("--histfit", default="target/release/histfit")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    model = nextstat.from_pyhf(open(a.workspace).read())
    hf = lambda *args: (lambda: subprocess.run([a.histfit, *args, a.workspace, "--json"], capture_output=True, check=True))
    mus = [3.0 * i / 20 for i in range(21)]
    rows = [
        ("hypotest mu=1", hf("hypotest", "--mu", "1"), lambda: nextstat.hypotest(1.0, model)),
        ("profile scan 21 points 0..3", hf("scan", "--poi-range", "0:3", "--points", "21"),
         lambda: nextstat.profile_scan(model, mus)),
        ("upper limit (obs + band)", hf("limit"), lambda: nextstat.upper_limit(model, method="root")),
        ("ranking (all nuisances)", hf("ranking"), lambda: nextstat.ranking(model)),
    ]
    print(f"workspace: {a.workspace}   machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores")
    print(f"{'task':<30} {'histfit s':>10} {'NextStat s':>11} {'ratio':>8}")
    for name, h, n in rows:
        th = median_time(h, a.repeat)
        try:
            tn = median_time(n, a.repeat)
        except Exception as e:  # an API mismatch must not hide the histfit figure
            print(f"{name:<30} {th:>10.4f} {'error':>11}  ({e})")
            continue
        print(f"{name:<30} {th:>10.4f} {tn:>11.4f} {tn / th:>7.1f}x")


if __name__ == "__main__":
    main()
