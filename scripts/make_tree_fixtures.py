#!/usr/bin/env python3
"""Writes the TTree fixtures of histfit's ROOT tree reader with ROOT itself (`pip install root`):
tests/fixtures/events/tree_<compression>.root, each a TTree "events" of 1 000 entries with flat
branches of every number type (mass/D, pt/F, n/I, big/L, flag/O, u/i, s/S, b/B, w/D) in
baskets of 2 000 bytes (several per branch), written with zlib, LZ4, LZMA, zstd, no compression
and ROOT's default; tree_kinds.root, with the tree in a directory "sub" and branches the reader
refuses (an array, a std::vector, a leaf list); and tree_values.parquet, the same values (pyarrow),
which the tests compare every file's branches with. Run once; the outputs are committed.

    python scripts/make_tree_fixtures.py      # needs: pip install root numpy pyarrow
"""
import array
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import ROOT

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "tests", "fixtures", "events")
N = 1000

rng = np.random.default_rng(11)
values = {
    "mass": 60 + 60 * rng.random(N),
    "pt": rng.exponential(20, N).astype(np.float32),
    "n": rng.integers(-5, 50, N).astype(np.int32),
    "big": rng.integers(-(2**40), 2**40, N).astype(np.int64),
    "flag": rng.random(N) < 0.3,
    "u": rng.integers(0, 2**32 - 1, N, dtype=np.uint64).astype(np.uint32),
    "s": rng.integers(-3000, 3000, N).astype(np.int16),
    "b": rng.integers(-100, 100, N).astype(np.int8),
    "w": rng.normal(1, 0.1, N),
}
leaves = {"mass": "D", "pt": "F", "n": "I", "big": "L", "flag": "O", "u": "i", "s": "S", "b": "B", "w": "D"}
codes = {"mass": "d", "pt": "f", "n": "i", "big": "q", "flag": "b", "u": "I", "s": "h", "b": "b", "w": "d"}


def write(name, compression):
    path = os.path.join(out, f"tree_{name}.root")
    f = ROOT.TFile(path, "RECREATE") if compression is None else ROOT.TFile(path, "RECREATE", "", compression)
    t = ROOT.TTree("events", "histfit tree reader fixture")
    buffers = {k: array.array(codes[k], [0]) for k in values}
    for k, leaf in leaves.items():
        t.Branch(k, buffers[k], f"{k}/{leaf}")
    for br in t.GetListOfBranches():
        br.SetBasketSize(2000)
    for i in range(N):
        for k in values:
            buffers[k][0] = values[k][i].item()
        t.Fill()
    t.Write()
    f.Close()


for name, comp in [("zlib", 101), ("lz4", 404), ("lzma", 207), ("zstd", 505), ("none", 0), ("default", None)]:
    write(name, comp)

# Branches the reader refuses, and a tree in a directory.
f = ROOT.TFile(os.path.join(out, "tree_kinds.root"), "RECREATE")
d = f.mkdir("sub")
d.cd()
t = ROOT.TTree("events", "branches of every shape")
x = array.array("d", [0.0])
arr = array.array("d", [0.0, 0.0])
ab = array.array("d", [0.0, 0.0])
vec = ROOT.std.vector("double")()
t.Branch("x", x, "x/D")
t.Branch("arr", arr, "arr[2]/D")
t.Branch("ab", ab, "a/D:b/D")
t.Branch("vec", vec)
for i in range(10):
    x[0] = float(i)
    vec.clear()
    vec.push_back(float(i))
    t.Fill()
t.Write()
f.Close()

# (Unsigned Parquet columns are not read by histfit: u as a signed 64-bit column.)
reference = {k: (v.astype(np.int64) if k == "u" else v) for k, v in values.items()}
pq.write_table(pa.table(reference), os.path.join(out, "tree_values.parquet"))
print("wrote", sorted(p for p in os.listdir(out) if p.startswith("tree_")))
