"""The fixture tests/fixtures/hs3/smooth.json and its independent reference.

histfit's extensions `histfit_kde_dist` (a Gaussian kernel density estimate over simulated
events, Silverman's bandwidth, weighted) and `histfit_spline_dist` (a monotone cubic through given
values) as the two processes of an extended mixture in `mass` on [60, 120], yields nsig and nbkg
free. Events from NumPy (seed 83): the simulation 1500 draws of 84 + Γ(3, 2) with weights
uniform in [0.5, 1.5]; the data a Poisson count of the same signal and of a falling background
drawn from the spline's shape (its CDF on a fine grid).

The reference: −ln L = nsig + nbkg − Σ ln(nsig f_s + nbkg f_b), f_s the exact kernel sum (NumPy:
the bandwidth 0.9 min(σ, IQR/1.34) n_eff^(−1/5) with the weighted σ, the weighted quartiles as
the inverted CDF, n_eff = (Σw)²/Σw²) over its exact mass on the range, f_b SciPy's
`PchipInterpolator` (Fritsch–Carlson, the same end rule) over its integral; the fit by iminuit.
Prints the reference as JSON; with --write, writes the fixture first and the reference to
tests/fixtures/hs3/smooth.numpy.json. Needs numpy, scipy and iminuit."""
import json
import os
import sys

import numpy as np
from iminuit import Minuit
from scipy.interpolate import PchipInterpolator
from scipy.special import erf

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from common import emit_reference  # noqa: E402

fixtures = os.path.join(here, "..", "..", "tests", "fixtures", "hs3")
path = os.path.join(fixtures, "smooth.json")
LO, HI = 60.0, 120.0
KNOTS = [60.0, 70.0, 80.0, 90.0, 100.0, 110.0, 120.0]
VALUES = [10.0, 6.5, 4.6, 3.1, 2.4, 1.6, 1.2]
INIT = {"nsig": 500.0, "nbkg": 1000.0}


def signal(rng, n):
    return 84.0 + rng.gamma(3.0, 2.0, n)


def write():
    rng = np.random.default_rng(83)
    mc = signal(rng, 1500)
    mc = mc[(mc >= LO) & (mc <= HI)]
    w = rng.uniform(0.5, 1.5, len(mc))
    spline = PchipInterpolator(KNOTS, VALUES)
    grid = np.linspace(LO, HI, 200001)
    cdf = np.cumsum(spline(grid))
    cdf /= cdf[-1]
    n_sig, n_bkg = rng.poisson(480), rng.poisson(1020)
    sig = signal(rng, 3 * n_sig)
    sig = sig[(sig >= LO) & (sig <= HI)][:n_sig]
    bkg = np.interp(rng.uniform(size=n_bkg), cdf, grid)
    xs = np.round(np.concatenate([sig, bkg]), 10)
    rng.shuffle(xs)
    doc = {
        "metadata": {"hs3_version": "0.2", "description": "written by scripts/reference/smooth.py"},
        "distributions": [
            {"name": "model", "type": "mixture_dist", "summands": ["signal", "background"],
             "coefficients": ["nsig", "nbkg"], "extended": True},
            {"name": "signal", "type": "histfit_kde_dist", "x": "mass", "events": "mc_signal",
             "weight": "w", "bandwidth": "silverman"},
            {"name": "background", "type": "histfit_spline_dist", "x": "mass", "knots": KNOTS,
             "values": VALUES, "interpolation": "pchip"},
        ],
        "data": [
            {"name": "observed", "type": "unbinned", "axes": [{"name": "mass", "min": LO, "max": HI}],
             "entries": [[float(x)] for x in xs]},
            {"name": "mc_signal", "type": "unbinned",
             "axes": [{"name": "mass", "min": LO, "max": HI}, {"name": "w", "min": 0.0, "max": 10.0}],
             "entries": [[round(float(a), 10), round(float(b), 10)] for a, b in zip(mc, w)]},
        ],
        "likelihoods": [{"name": "L", "distributions": ["model"], "data": ["observed"]}],
        "domains": [{"name": "default_domain", "type": "product_domain", "axes": [
            {"name": "nsig", "min": 0.0, "max": 10000.0}, {"name": "nbkg", "min": 0.0, "max": 10000.0}]}],
        "parameter_points": [{"name": "default_values", "parameters": [
            {"name": k, "value": v} for k, v in INIT.items()]}],
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


if "--write" in sys.argv:
    write()
d = json.load(open(path))
x = np.array([e[0] for e in d["data"][0]["entries"]])
mc = np.array(d["data"][1]["entries"])
pts, w = mc[:, 0], mc[:, 1]
sw = w.sum()
n_eff = sw * sw / (w * w).sum()
mean = (w * pts).sum() / sw
sigma = np.sqrt((w * (pts - mean) ** 2).sum() / sw)
order = np.argsort(pts)
cum = np.cumsum(w[order])


def quantile(q):
    return pts[order][np.searchsorted(cum, q * sw)]


iqr = quantile(0.75) - quantile(0.25)
h = 0.9 * min(sigma, iqr / 1.34) * n_eff ** -0.2
z = (x[:, None] - pts[None, :]) / h
kde = (w * np.exp(-0.5 * z * z)).sum(axis=1) / (h * np.sqrt(2 * np.pi))
cdf = lambda t: 0.5 * (1 + erf(t / np.sqrt(2)))
mass = (w * (cdf((HI - pts) / h) - cdf((LO - pts) / h))).sum()
f_s = kde / mass
spline = PchipInterpolator(KNOTS, VALUES)
f_b = spline(x) / spline.integrate(LO, HI)


def nll(nsig, nbkg):
    return nsig + nbkg - np.sum(np.log(nsig * f_s + nbkg * f_b))


m = Minuit(nll, **INIT)
m.limits = [(0, 10000), (0, 10000)]
m.errordef = Minuit.LIKELIHOOD
m.strategy = 2
m.tol = 1e-7
m.migrad()
m.hesse()
point2 = {"nsig": 450.0, "nbkg": 1100.0}
fit = {"nll": m.fval, "valid": m.valid}
for k in INIT:
    fit[k] = m.values[k]
    fit[k + "_error"] = m.errors[k]
out = {"bandwidth": h, "nll_at_initial": nll(**INIT), "point2": point2,
       "nll_at_point2": nll(**point2), "fit": fit}
emit_reference(out, os.path.join(fixtures, "smooth.numpy.json"))
