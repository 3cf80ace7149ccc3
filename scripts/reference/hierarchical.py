"""The fixture tests/fixtures/hs3/hierarchical.json and its independent reference.

A hierarchical calibration: four detector cells, each measured by 25 events x ~ N(s_i, 0.02) on
[0.5, 1.5] (one dataset and one `gaussian_dist` per cell, a likelihood of four pairs); the cells'
scales s_i share a prior N(s_i | g, w) — a global scale g and a spread w, both free — and the
spread a hyper-prior N(w | 0.03, 0.01). The priors are the likelihood's `aux_distributions`: their
observables are the model's own parameters (s_i, w), not global observables, which histfit
reads as prior terms of the likelihood (README, "Event-level models (HS3)"). Events from NumPy
(seed 41).

The reference, written here with SciPy's truncated normal: every density normalised over its
variable's domain — each measurement over the data's [0.5, 1.5], each prior over its parameter's
bounds (s_i in [0.5, 1.5], w in [0.001, 0.2]), as histfit normalises a distribution over a
variable that is not data. -lnL = -sum ln of all of them; the fit by iminuit (strategy 2, Hesse
errors). Prints the reference as JSON; with --write, writes the fixture first and the
reference to tests/fixtures/hs3/hierarchical.scipy.json. Needs numpy, scipy and iminuit."""
import json
import os
import sys

import numpy as np
from scipy.stats import truncnorm

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from common import emit_reference, iminuit_reference, write_doc  # noqa: E402

fixtures = os.path.join(here, "..", "..", "tests", "fixtures", "hs3")
path = os.path.join(fixtures, "hierarchical.json")
CELLS = 4
EVENTS = 25
LO, HI = 0.5, 1.5
SIGMA_M = 0.02
W_MEAN, W_SIGMA = 0.03, 0.01
TRUE_SCALES = [1.01, 0.97, 1.04, 0.99]
INIT = {**{f"s{i}": 1.0 for i in range(CELLS)}, "g": 1.0, "w": 0.05}
LIMITS = {**{f"s{i}": (LO, HI) for i in range(CELLS)}, "g": (0.8, 1.2), "w": (0.001, 0.2)}


def log_truncnorm(x, mean, sigma, lo, hi):
    return truncnorm.logpdf(x, (lo - mean) / sigma, (hi - mean) / sigma, loc=mean, scale=sigma)


def make_doc():
    rng = np.random.default_rng(41)
    events = []
    for s in TRUE_SCALES:
        x = rng.normal(s, SIGMA_M, 4 * EVENTS)
        events.append(x[(x > LO) & (x < HI)][:EVENTS])
    dists, data = [], []
    for i in range(CELLS):
        dists.append({"name": f"meas{i}", "type": "gaussian_dist", "x": f"x{i}", "mean": f"s{i}",
                      "sigma": "sigma_m"})
        dists.append({"name": f"prior{i}", "type": "gaussian_dist", "x": f"s{i}", "mean": "g",
                      "sigma": "w"})
        data.append({"name": f"cell{i}", "type": "unbinned",
                     "axes": [{"name": f"x{i}", "min": LO, "max": HI}],
                     "entries": [[float(v)] for v in events[i]]})
    dists.append({"name": "spread_prior", "type": "gaussian_dist", "x": "w", "mean": "w_mean",
                  "sigma": "w_sigma"})
    params = [{"name": k, "value": v} for k, v in INIT.items()]
    params += [{"name": "sigma_m", "value": SIGMA_M, "const": True},
               {"name": "w_mean", "value": W_MEAN, "const": True},
               {"name": "w_sigma", "value": W_SIGMA, "const": True}]
    axes = [{"name": k, "min": lo, "max": hi} for k, (lo, hi) in LIMITS.items()]
    return {
        "metadata": {"hs3_version": "0.2", "description": "written by scripts/reference/hierarchical.py"},
        "distributions": dists,
        "data": data,
        "likelihoods": [{"name": "calibration",
                         "distributions": [f"meas{i}" for i in range(CELLS)],
                         "data": [f"cell{i}" for i in range(CELLS)],
                         "aux_distributions": [f"prior{i}" for i in range(CELLS)] + ["spread_prior"]}],
        "analyses": [{"name": "calibration", "likelihood": "calibration",
                      "parameters_of_interest": ["g"], "domains": ["parameters"]}],
        "domains": [{"name": "parameters", "type": "product_domain", "axes": axes}],
        "parameter_points": [{"name": "default_values", "parameters": params}],
    }


def main():
    if "--write" in sys.argv:
        write_doc(path, make_doc())
    doc = json.load(open(path))
    xs = [np.array([e[0] for e in d["entries"]]) for d in doc["data"]]

    def nll(s0, s1, s2, s3, g, w):
        s = [s0, s1, s2, s3]
        total = 0.0
        for i in range(CELLS):
            total -= log_truncnorm(xs[i], s[i], SIGMA_M, LO, HI).sum()
            total -= log_truncnorm(s[i], g, w, LO, HI)
        total -= log_truncnorm(w, W_MEAN, W_SIGMA, *LIMITS["w"])
        return float(total)

    point2 = {"s0": 1.02, "s1": 0.96, "s2": 1.05, "s3": 1.0, "g": 1.03, "w": 0.02}
    ref = iminuit_reference(nll, INIT, LIMITS, point2)
    emit_reference(ref, os.path.join(fixtures, "hierarchical.scipy.json"))


if __name__ == "__main__":
    main()
