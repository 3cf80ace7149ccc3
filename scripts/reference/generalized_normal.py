"""The fixture tests/fixtures/hs3/generalized_normal.json and its independent reference.

HS3's own types that ROOT 6.40 does not export, written by hand as the standard (v0.2.9)
describes them: a `rate_extended_dist` (the rate n) over a fraction `mixture_dist` of a
`generalized_normal_dist` e^(−(|x − μ|/α)^β) and an `exponential_dist` e^(−c x) on [0, 10], and a
flat-topped `generalized_normal_dist` constraint (α = 0.05, β = 8) on c about its global
observable c_obs. Events from NumPy (seed 53).

The reference: −ln L = n − N ln n − Σ ln f(x_i) − ln g(c_obs | c), the densities from SciPy's
`gennorm` (β, loc μ, scale α: the same definition) normalised over the domain by its CDF, and the
exponential in closed form; the fit by iminuit (strategy 2, Hesse errors). Prints the reference
as JSON; with --write, writes the fixture first. Needs numpy, scipy and iminuit."""
import json
import os
import sys

import numpy as np
from iminuit import Minuit
from scipy.stats import gennorm

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "..", "tests", "fixtures", "hs3", "generalized_normal.json")
LO, HI = 0.0, 10.0
INIT = {"mu": 4.0, "alpha": 1.2, "beta": 3.0, "c": 0.3, "f": 0.3, "n": 3000.0}
C_OBS = 0.3


def write():
    rng = np.random.default_rng(53)
    n = rng.poisson(3000)
    n_sig = rng.binomial(n, 0.3)
    sig = []
    while len(sig) < n_sig:
        x = gennorm.rvs(3.0, loc=4.2, scale=1.1, size=n_sig, random_state=rng)
        sig.extend(x[(x >= LO) & (x <= HI)].tolist())
    sig = sig[:n_sig]
    u = rng.uniform(size=n - n_sig)
    c = 0.32
    bkg = -np.log(np.exp(-c * LO) - u * (np.exp(-c * LO) - np.exp(-c * HI))) / c
    xs = np.round(np.concatenate([sig, bkg]), 12)
    rng.shuffle(xs)
    par = lambda name, v, lo=None, hi=None, const=False: {
        k: w for k, w in [("name", name), ("value", v), ("min", lo), ("max", hi),
                          ("const", True if const else None)] if w is not None}
    doc = {
        "metadata": {"hs3_version": "0.2",
                     "description": "written by scripts/reference/generalized_normal.py"},
        "distributions": [
            {"name": "model", "type": "product_dist", "factors": ["extended", "c_constraint"]},
            {"name": "extended", "type": "rate_extended_dist", "rate": "n", "dist": "shape"},
            {"name": "shape", "type": "mixture_dist", "summands": ["sig", "bkg"],
             "coefficients": ["f"], "extended": False},
            {"name": "sig", "type": "generalized_normal_dist", "x": "x", "mean": "mu",
             "alpha": "alpha", "beta": "beta"},
            {"name": "bkg", "type": "exponential_dist", "x": "x", "c": "c"},
            {"name": "c_constraint", "type": "generalized_normal_dist", "x": "c_obs",
             "mean": "c", "alpha": "0.05", "beta": "8"},
        ],
        "data": [{"name": "events", "type": "unbinned",
                  "axes": [{"name": "x", "min": LO, "max": HI}],
                  "entries": [[float(x)] for x in xs]}],
        "likelihoods": [{"name": "L", "distributions": ["model"], "data": ["events"]}],
        "domains": [{"name": "default_domain", "type": "product_domain", "axes": [
            {"name": "mu", "min": 1.0, "max": 9.0}, {"name": "alpha", "min": 0.2, "max": 5.0},
            {"name": "beta", "min": 0.8, "max": 12.0}, {"name": "c", "min": 0.01, "max": 1.0},
            {"name": "f", "min": 0.0, "max": 1.0}, {"name": "n", "min": 0.0, "max": 10000.0}]}],
        "parameter_points": [{"name": "default_values", "parameters": [
            par(k, v) for k, v in INIT.items()] + [par("c_obs", C_OBS, const=True)]}],
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


if "--write" in sys.argv:
    write()
d = json.load(open(path))
x = np.array([e[0] for e in d["data"][0]["entries"]])


def nll(mu, alpha, beta, c, f, n):
    g = gennorm(beta, loc=mu, scale=alpha)
    sig = g.pdf(x) / (g.cdf(HI) - g.cdf(LO))
    bkg = c * np.exp(-c * x) / (np.exp(-c * LO) - np.exp(-c * HI))
    cons = gennorm(8.0, loc=c, scale=0.05).pdf(C_OBS)
    return n - len(x) * np.log(n) - np.sum(np.log(f * sig + (1 - f) * bkg)) - np.log(cons)


m = Minuit(nll, **INIT)
m.limits = [(1, 9), (0.2, 5), (0.8, 12), (0.01, 1), (0, 1), (0, 10000)]
m.errordef = Minuit.LIKELIHOOD
m.strategy = 2
m.tol = 1e-7
m.migrad()
m.hesse()
point2 = {"mu": 4.3, "alpha": 0.9, "beta": 2.2, "c": 0.33, "f": 0.25, "n": 3100.0}
fit = {"nll": m.fval, "valid": m.valid}
for k in INIT:
    fit[k] = m.values[k]
    fit[k + "_error"] = m.errors[k]
print(json.dumps({"nll_at_initial": nll(**INIT), "point2": point2, "nll_at_point2": nll(**point2),
                  "fit": fit}, indent=1))
