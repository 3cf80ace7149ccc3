"""A toy ensemble spread over a Dask cluster: one task per shard of toy indices, each running
``histfit toys --shard K/N``, the shards merged by ``histfit merge-toys`` into the document one
run gives (bit for bit: toy i of a seed is the same wherever it is fitted).

    python examples/dask_toys.py WS.json --n-toys 10000 --shards 30 [--scheduler tcp://host:8786]
        [--gpu cuda] [--histfit PATH] [-o merged.json]

Without ``--scheduler`` a ``LocalCluster`` on this machine runs the tasks (how this example is
tested). On a real cluster every worker needs the ``histfit`` binary and the workspace at the same
path; the shards' JSON documents travel back through Dask, so no shared file system is needed.
Shard about three times as many tasks as there are worker slots: on pools of unequal machines the
fast ones then take the slack (docs/clusters.md).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def run_shard(histfit, workspace, n_toys, seed, k, n, extra):
    """One shard: the ``toys --json`` document of block K of N (1-based)."""
    cmd = [histfit, "toys", workspace, "--n-toys", str(n_toys), "--seed", str(seed),
           "--shard", f"{k}/{n}", "--json", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"shard {k}/{n}: {' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workspace")
    p.add_argument("--n-toys", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shards", type=int, default=12)
    p.add_argument("--scheduler", help="address of a running Dask scheduler (default: a LocalCluster)")
    p.add_argument("--workers", type=int, default=None, help="LocalCluster workers (default: one per core)")
    p.add_argument("--gpu", help="passed to every shard (cuda, cuda:N, ...)")
    p.add_argument("--histfit", default="histfit", help="the histfit binary on the workers")
    p.add_argument("-o", "--output", help="write the merged document here (default: stdout)")
    a = p.parse_args()

    from dask.distributed import Client, LocalCluster

    cluster = None
    if a.scheduler:
        client = Client(a.scheduler)
    else:
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True)
        client = Client(cluster)
    extra = ["--gpu", a.gpu] if a.gpu else []
    workspace = os.path.abspath(a.workspace)
    try:
        futures = [
            client.submit(run_shard, a.histfit, workspace, a.n_toys, a.seed, k, a.shards, extra,
                          pure=False)
            for k in range(1, a.shards + 1)
        ]
        docs = client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    # The merge refuses shards that do not make the whole (missing, duplicated, other seeds).
    with tempfile.TemporaryDirectory() as d:
        files = []
        for k, doc in enumerate(docs, 1):
            f = os.path.join(d, f"shard{k}.json")
            with open(f, "w") as fh:
                fh.write(doc)
            files.append(f)
        merged = subprocess.run([a.histfit, "merge-toys", "--json", *files],
                                capture_output=True, text=True)
    if merged.returncode != 0:
        sys.exit(f"merge-toys: {merged.stderr.strip()}")
    if a.output:
        with open(a.output, "w") as fh:
            fh.write(merged.stdout)
    else:
        sys.stdout.write(merged.stdout)
    summary = json.loads(merged.stdout)["summary"]
    print(f"{summary['n']} toys, {summary['converged']} converged, {summary['failed']} failed",
          file=sys.stderr)


if __name__ == "__main__":
    main()
