#!/usr/bin/env python3
"""Writes the Parquet fixtures of the event-level tests (tests/fixtures/events/), with pyarrow:

- gauss_exp.parquet: 3 000 events of the benchmark model (Gaussian at 91 ± 2.5 over an
  exponential, x in [60, 120], seed 7) in three row groups of 1 000 (snappy), with a weight
  column "w" in [0.5, 1.5], a float32 copy of x ("x32"), an int64 column ("n") and weights with
  one negative and one NaN ("wbad");
- gauss_exp.json: the HS3 document (as ROOT 6.40 exports the model) whose dataset names that file
  through histfit's extension ("histfit_source"), and gauss_exp.inline.json: the same events inline
  (the reference the Parquet dataset must equal bit for bit);
- gauss_exp_zstd.parquet: the same columns compressed with zstd, one row group;
- gauss_exp_gzip.parquet: the same with gzip;
- gauss_exp_plain_v1.parquet, gauss_exp_plain_v2.parquet: the same without dictionaries (PLAIN
  pages of 4 kB, data page formats 1 and 2);
- with_outside.parquet: the same events and a fourth row group whose x all lie in [130, 140]
  (outside the domain: an error unless "outside": "drop", which skips the row group unread), plus
  5 events at x = 59 in the first row group;
- gauss_exp_required.parquet: x as a required (non-nullable) column, PLAIN pages;
- unsigned.parquet: a uint32 column (refused: its values are not their signed reading);
- with_null.parquet: x with one null;
- sorted_paged.parquet: 4 000 events with x sorted over [40, 140], an int32 column "k" (the
  row number) and weights "w", in one row group of PLAIN pages with a page index: 200 rows a
  page of doubles, 300 of int32 (pages end where a batch of 100 rows passes 1 kB), so that a
  range one column's index skips begins inside another's page; sorted_unpaged.parquet: the same
  without a page index; sorted_paged_dict/_v2/_gzip.parquet: the same pages with a page index,
  dictionary-encoded, as data pages of format 2 (zstd), and gzipped.

Run with a Python that has pyarrow and numpy (the reference venv); the files are small and
committed, so the tests need neither.
"""
import copy
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "examples", "unbinned"))
from make_events import draw  # noqa: E402  (the benchmark model's events, one definition)

out = os.path.join(here, "..", "tests", "fixtures", "events")
model = os.path.join(here, "..", "tests", "fixtures", "hs3", "gauss_exp_ext.json")


def main():
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    x = draw(3000, rng)
    w = rng.uniform(0.5, 1.5, size=x.size)
    bad = w.copy()
    bad[10], bad[20] = -1.0, np.nan
    table = pa.table({
        "x": pa.array(x, pa.float64()),
        "w": pa.array(w, pa.float64()),
        "x32": pa.array(x.astype(np.float32), pa.float32()),
        "n": pa.array(np.arange(x.size, dtype=np.int64)),
        "wbad": pa.array(bad, pa.float64()),
    })
    pq.write_table(table, os.path.join(out, "gauss_exp.parquet"), row_group_size=1000, compression="snappy")
    pq.write_table(table, os.path.join(out, "gauss_exp_zstd.parquet"), compression="zstd")
    pq.write_table(table, os.path.join(out, "gauss_exp_gzip.parquet"), compression="gzip")
    # Without dictionaries (PLAIN pages, read by copying): data pages of format 1 and 2.
    for version in ["1.0", "2.0"]:
        pq.write_table(table, os.path.join(out, f"gauss_exp_plain_v{version[0]}.parquet"), use_dictionary=False,
                       data_page_version=version, row_group_size=1000, data_page_size=4096)
    low = x.copy()
    low[:5] = 59.0
    far = rng.uniform(130.0, 140.0, size=1000)
    outside = pa.table({
        "x": pa.array(np.concatenate([low, far]), pa.float64()),
        "w": pa.array(np.concatenate([w, np.ones(far.size)]), pa.float64()),
    })
    pq.write_table(outside, os.path.join(out, "with_outside.parquet"), row_group_size=1000,
                   compression="snappy", write_statistics=True)
    # A required (non-nullable) column: pages without definition levels.
    required = pa.table({"x": pa.array(x, pa.float64())},
                        schema=pa.schema([pa.field("x", pa.float64(), nullable=False)]))
    pq.write_table(required, os.path.join(out, "gauss_exp_required.parquet"), use_dictionary=False,
                   row_group_size=1000)
    # Unsigned integers (not read: their meaning is not the signed value).
    pq.write_table(pa.table({"x": pa.array(np.arange(100, dtype=np.uint32))}),
                   os.path.join(out, "unsigned.parquet"))
    nulls = pa.table({"x": pa.array([float(v) for v in x[:9]] + [None], pa.float64())})
    pq.write_table(nulls, os.path.join(out, "with_null.parquet"))
    # Sorted events in small pages: what a page index lets a reader skip.
    m = 4000
    paged = pa.table({
        "x": pa.array(np.sort(rng.uniform(40.0, 140.0, size=m)), pa.float64()),
        "k": pa.array(np.arange(m, dtype=np.int32)),
        "w": pa.array(rng.uniform(0.5, 1.5, size=m), pa.float64()),
    })
    for name, index in [("sorted_paged", True), ("sorted_unpaged", False)]:
        pq.write_table(paged, os.path.join(out, f"{name}.parquet"), use_dictionary=False,
                       data_page_size=1024, write_batch_size=100, write_page_index=index,
                       compression="snappy")
    # The same pages with a page index as dictionaries, as data pages of format 2, and gzipped.
    for name, options in [("sorted_paged_dict", dict(use_dictionary=True, compression="snappy")),
                          ("sorted_paged_v2", dict(use_dictionary=False, data_page_version="2.0",
                                                   compression="zstd")),
                          ("sorted_paged_gzip", dict(use_dictionary=False, compression="gzip"))]:
        pq.write_table(paged, os.path.join(out, f"{name}.parquet"), data_page_size=1024,
                       write_batch_size=100, write_page_index=True, **options)

    with open(model) as f:
        doc = json.load(f)
    for p in doc["parameter_points"][0]["parameters"]:
        if p["name"] == "nsig":
            p["value"] = 900.0
        if p["name"] == "nbkg":
            p["value"] = 2100.0
    data = doc["data"][0]
    inline = copy.deepcopy(doc)
    inline["data"][0]["entries"] = [[float(v)] for v in x]
    with open(os.path.join(out, "gauss_exp.inline.json"), "w") as f:
        json.dump(inline, f, indent=1)
    data.pop("entries", None)
    data["histfit_source"] = {"format": "parquet", "file": "gauss_exp.parquet", "columns": {"x": "x"}}
    with open(os.path.join(out, "gauss_exp.json"), "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
