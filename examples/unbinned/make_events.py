#!/usr/bin/env python3
"""Writes the events of examples/unbinned/model.json: N events (default 100 000, seed 1) of a
Gaussian peak (mean 91, σ 2.5, 30 %) over an exponential background (e^(−0.03 x)) in x ∈ [60, 120]
— histfit's event-level benchmark model —, as

- events.parquet (pyarrow; column "mass", snappy, row groups of 65 536), which model.json names
  through histfit's HS3 extension "histfit_source", and
- events.root (ROOT, when installed: `pip install root`): a TTree "events" with a branch "mass",
  the same events, for ROOT users (`model_tree.json` reads them).

Usage: python examples/unbinned/make_events.py [N]   (needs numpy and pyarrow)
"""
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

here = os.path.dirname(os.path.abspath(__file__))


def draw(n, rng):
    nsig = rng.binomial(n, 0.3)
    sig = rng.normal(91.0, 2.5, size=4 * nsig)
    sig = sig[(sig >= 60) & (sig <= 120)][:nsig]
    u = rng.uniform(size=n - nsig)
    a, b = np.exp(-0.03 * 60), np.exp(-0.03 * 120)
    bkg = np.log(a + u * (b - a)) / -0.03
    x = np.concatenate([sig, bkg])
    rng.shuffle(x)
    return x


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    mass = draw(n, np.random.default_rng(1))
    pq.write_table(pa.table({"mass": mass}), os.path.join(here, "events.parquet"), row_group_size=65536)
    print(f"wrote {n} events to events.parquet")
    try:
        import ROOT
    except ImportError:
        print("ROOT not installed: events.root not written (pip install root)")
        return
    df = ROOT.RDF.FromNumpy({"mass": mass})
    df.Snapshot("events", os.path.join(here, "events.root"))
    print(f"wrote {n} events to events.root (TTree \"events\")")


if __name__ == "__main__":
    main()
