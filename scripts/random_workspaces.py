#!/usr/bin/env python3
"""Small random pyhf workspaces for differential tests of histfit's likelihood and fits.

Every workspace is valid pyhf JSON and a deterministic function of (seed, index):

- 1-3 channels of 1-5 bins; 1-3 samples per channel, a background sample in every channel
  when ``background=True`` (hypotests need one), a signal sample scaled by the POI ``mu``;
- every modifier type: normfactor (the POI and free background normalisations), shapefactor,
  normsys, histosys, lumi, staterror, shapesys;
- modifiers shared between samples and channels (one name, several places);
- inverted (hi below nominal, lo above) and one-sided (hi and lo on the same side) variations;
- shapesys bins with zero uncertainty (pyhf holds their gamma fixed at 1) and zero nominal;
- observations drawn from the model at a random point, so fits must move nuisance parameters.

Used by ``crates/histfit-py/tests/test_random_workspaces.py`` (a fixed seed in CI) and by
``scripts/diff_random_fits.py`` (many workspaces by hand). Run as a script to write some:

    python scripts/random_workspaces.py OUTDIR --n 10 --seed 1
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np


def _variation(rng: np.random.Generator) -> tuple[float, float]:
    """(hi, lo) factors of a normsys: ordinary, inverted, one-sided or asymmetric."""
    size = rng.uniform(0.02, 0.45)
    kind = rng.choice(["normal", "inverted", "one_sided", "asymmetric"], p=[0.45, 0.2, 0.2, 0.15])
    if kind == "normal":
        return 1 + size, 1 - size
    if kind == "inverted":
        return 1 - size, 1 + size
    if kind == "one_sided":
        other = rng.uniform(0.0, 0.8) * size
        return (1 + size, 1 + other) if rng.random() < 0.5 else (1 - size, 1 - other)
    return 1 + size, 1 - rng.uniform(0.1, 1.0) * size * rng.uniform(0.2, 1.5)


def _shape(rng: np.random.Generator, nominal: np.ndarray) -> tuple[list, list]:
    """(hi_data, lo_data) of a histosys: per-bin shifts with the same patterns as normsys."""
    hi, lo = [], []
    pattern = rng.choice(["normal", "inverted", "one_sided", "mixed"], p=[0.4, 0.2, 0.2, 0.2])
    for n in nominal:
        size = rng.uniform(0.0, 0.4)
        if pattern == "normal":
            h, l = 1 + size, 1 - size
        elif pattern == "inverted":
            h, l = 1 - size, 1 + size
        elif pattern == "one_sided":
            h, l = 1 + size, 1 + rng.uniform(0.0, 0.8) * size
        else:
            s = rng.choice([-1.0, 1.0])
            h, l = 1 + s * size, 1 - s * rng.uniform(0.0, 1.2) * size
        hi.append(round(float(n * h), 6))
        lo.append(round(float(n * l), 6))
    return hi, lo


def random_workspace(seed: int, index: int, background: bool = False) -> dict:
    """The workspace number ``index`` of the stream ``seed``."""
    rng = np.random.default_rng([seed, index])
    n_channels = int(rng.integers(1, 4))
    # Names drawn from small pools so that modifiers are shared between samples and channels.
    norm_pool = [f"np_{k}" for k in range(int(rng.integers(1, 5)))]
    shape_pool = [f"shape_{k}" for k in range(int(rng.integers(1, 4)))]
    uses_lumi = rng.random() < 0.4
    channels, observations = [], []
    truth = {"mu": float(rng.uniform(0.0, 2.0))}
    for c in range(n_channels):
        nb = int(rng.integers(1, 6))
        cname = f"ch{c}"
        samples = []
        n_samples = int(rng.integers(1, 4))
        has_signal = c == 0 or rng.random() < 0.6
        kinds = (["signal"] if has_signal else []) + ["background"] * n_samples
        if not background and has_signal and rng.random() < 0.3:
            kinds = kinds[:1]  # a channel with signal only (no hypotest uses these)
        stat_in_channel = rng.random() < 0.5
        for s, kind in enumerate(kinds):
            scale = rng.uniform(2.0, 15.0) if kind == "signal" else rng.uniform(5.0, 120.0)
            nominal = np.round(scale * rng.uniform(0.3, 1.5, nb), 4)
            if kind == "background" and not background and rng.random() < 0.1:
                nominal[int(rng.integers(nb))] = 0.0  # an empty bin
            mods = []
            if kind == "signal":
                mods.append({"name": "mu", "type": "normfactor", "data": None})
            elif rng.random() < 0.25:
                mods.append({"name": f"k_{s % 2}", "type": "normfactor", "data": None})
            if uses_lumi and rng.random() < 0.7:
                mods.append({"name": "lumi", "type": "lumi", "data": None})
            used = set()
            for _ in range(int(rng.integers(0, 4))):
                name = str(rng.choice(norm_pool))
                if name in used:
                    continue
                used.add(name)
                hi, lo = _variation(rng)
                mods.append({"name": name, "type": "normsys", "data": {"hi": round(hi, 6), "lo": round(lo, 6)}})
            for _ in range(int(rng.integers(0, 3))):
                name = str(rng.choice(shape_pool))
                if name in used:
                    continue
                used.add(name)
                hi, lo = _shape(rng, nominal)
                mods.append({"name": name, "type": "histosys", "data": {"hi_data": hi, "lo_data": lo}})
            if stat_in_channel and kind == "background" and rng.random() < 0.8:
                err = np.round(np.sqrt(np.maximum(nominal, 0)) * rng.uniform(0.05, 0.6, nb), 5)
                if rng.random() < 0.2:
                    err[int(rng.integers(nb))] = 0.0
                mods.append({"name": f"staterror_{cname}", "type": "staterror", "data": err.tolist()})
            if kind == "background" and rng.random() < 0.3:
                err = np.round(nominal * rng.uniform(0.02, 0.5, nb), 5)
                zero = rng.random(nb) < 0.3
                err[zero] = 0.0
                mods.append({"name": f"shapesys_{cname}_{s}", "type": "shapesys", "data": err.tolist()})
            if kind == "background" and rng.random() < 0.08:
                mods.append({"name": f"sf_{cname}", "type": "shapefactor", "data": None})
            samples.append({"name": f"{kind}_{s}", "data": nominal.tolist(), "modifiers": mods})
        if not background:
            pass
        elif not any(s["name"].startswith("background") for s in samples):
            samples.append({"name": "background_x", "data": np.round(rng.uniform(5, 50, nb), 4).tolist(), "modifiers": []})
        # Observed counts: the nominal expectation at a random mu, its nuisance parameters
        # pulled by roughly one sigma, then a Poisson draw.
        pull = {}
        expected = np.zeros(nb)
        for smp in samples:
            y = np.asarray(smp["data"], dtype=float).copy()
            factor = 1.0
            for m in smp["modifiers"]:
                if m["type"] == "normfactor":
                    factor *= truth["mu"] if m["name"] == "mu" else truth.setdefault(m["name"], rng.uniform(0.5, 1.5))
                elif m["type"] == "normsys":
                    a = pull.setdefault(m["name"], rng.normal(0, 1))
                    factor *= (m["data"]["hi"] if a > 0 else m["data"]["lo"]) ** abs(a)
                elif m["type"] == "histosys":
                    a = pull.setdefault(m["name"], rng.normal(0, 1))
                    ref = np.asarray(m["data"]["hi_data"] if a > 0 else m["data"]["lo_data"])
                    y = y + abs(a) * (ref - np.asarray(smp["data"]))
            expected += np.maximum(factor * y, 0.0)
        counts = rng.poisson(np.maximum(expected, 0.5))
        # A bin that no sample fills gets no events: otherwise no point has a finite likelihood.
        empty = np.sum([np.abs(s["data"]) for s in samples], axis=0) == 0
        counts[empty] = 0
        observations.append({"name": cname, "data": [float(v) for v in counts]})
        channels.append({"name": cname, "samples": samples})
    parameters = []
    if uses_lumi and any(m["type"] == "lumi" for ch in channels for s in ch["samples"] for m in s["modifiers"]):
        parameters.append({"name": "lumi", "auxdata": [1.0], "sigmas": [round(float(rng.uniform(0.01, 0.1)), 4)],
                           "bounds": [[0.5, 1.5]], "inits": [1.0]})
    if rng.random() < 0.3:
        parameters.append({"name": "mu", "bounds": [[0.0, 10.0]]})
    return {
        "channels": channels,
        "observations": observations,
        "measurements": [{"name": "meas", "config": {"poi": "mu", "parameters": parameters}}],
        "version": "1.0.0",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--background", action="store_true", help="a background sample in every channel")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    for i in range(a.n):
        with open(os.path.join(a.outdir, f"ws_{a.seed}_{i}.json"), "w") as f:
            json.dump(random_workspace(a.seed, i, a.background), f, indent=1)


if __name__ == "__main__":
    main()
