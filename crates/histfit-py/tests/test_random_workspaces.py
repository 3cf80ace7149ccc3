"""Differential test against pyhf 0.7.6 on random small workspaces (scripts/random_workspaces.py,
fixed seeds): parameter names and order, twice_nll at random points (1e-9 relative), the fit's
minimum (at or below pyhf's scipy fit + 1e-6) and the three fits inside an asymptotic hypotest
(free, conditional at mu = 1, the mu = 0 fit that makes the Asimov data; each at or below pyhf's
on the same data + 1e-6, none abandoned), in both interpolation settings.

Many more workspaces, with a multi-start histfit reference too, by hand:
``python scripts/diff_random_fits.py --n 10000 --starts 20``.
"""
import os
import sys

import pytest

pytest.importorskip("pyhf")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts"))
from diff_random_fits import run, summary  # noqa: E402


def _check(records, mode):
    print("\n".join(summary(records, mode)))
    failures = [f"workspace {r['index']} ({r['setting']}): " + "; ".join(r["failures"])
                for r in records if r["failures"]]
    assert not failures, f"{len(failures)} of {len(records)} failed:\n" + "\n".join(failures[:20])


def test_fits_on_500_random_workspaces():
    records = run(500, seed=2026, mode="fit")
    assert len(records) == 1000
    _check(records, "fit")


def test_hypotest_fits_on_150_random_workspaces():
    records = run(150, seed=2027, mode="hypotest")
    assert len(records) == 300
    _check(records, "hypotest")
