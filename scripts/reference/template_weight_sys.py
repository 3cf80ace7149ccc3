"""The fixture tests/fixtures/hs3/template_weight_sys.json and its independent reference.

histfit's HS3 extensions for simulated events with per-event weight systematics: a signal
density `histfit_template_dist` made from 3 000 simulated events (dataset "mc_signal": mass,
nominal weight w — some negative, as NLO generators write them —, and the weights under each
systematic's ±1σ), 25 bins on [100, 150]; two systematics, alpha_jes (code 0: its minimum lies
well away from the kink at 0, where Hesse errors by differences are ill-defined) and alpha_eff
(code 4p, smooth through 0: its minimum is near 0), each with a Gaussian constraint; the signal yield mu × the template's morphed total
(`histfit_template_yield`), the background exponential with a free yield. Data: 1 500 events,
NumPy, seed 29.

The reference re-implements the model with NumPy alone: the bin sums by np.histogram, each
bin's content interpolated and held at ≥ 0 (code 4p: α/2 (δ⁺ + δ⁻) + α²(15 − 10α² + 3α⁴)(δ⁺ − δ⁻)/16 inside
±1, linear outside; code 0: linear), the density content/width over the total; −ln L extended,
the constraints ½α² + ln √(2π). The fit by iminuit (strategy 2, Hesse errors). Prints JSON; with
--write, writes the fixture first. Needs numpy and iminuit."""
import json
import os
import sys

import numpy as np
from iminuit import Minuit

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "..", "tests", "fixtures", "hs3", "template_weight_sys.json")
LO, HI, NBINS = 100.0, 150.0, 25
INIT = {"mu": 1.0, "alpha_jes": 0.0, "alpha_eff": 0.0, "nbkg": 1200.0, "c": 0.02}


def write():
    rng = np.random.default_rng(29)
    n_mc = 3000
    m = rng.normal(125.0, 3.0, size=n_mc)
    m = np.clip(m, LO + 1e-6, HI - 1e-6)
    w = 0.1 * (1 + 0.2 * rng.standard_normal(n_mc))
    w[rng.uniform(size=n_mc) < 0.05] *= -0.3  # a few negative weights
    # JES: events shifted in mass by ±1 %: the weights of a reweighting that moves the peak.
    shift = 0.01 * 125.0
    ratio = np.exp(-0.5 * ((m - 125.0 - shift) ** 2 - (m - 125.0) ** 2) / 9.0)
    jes_up = w * np.clip(ratio, 0.2, 5.0)
    jes_down = w * np.clip(1.0 / ratio, 0.2, 5.0)
    eff_up = w * (1.05 + 0.002 * (m - 125.0))
    eff_down = w * (0.96 - 0.001 * (m - 125.0))
    n_sig = rng.poisson(300)
    n_bkg = rng.poisson(1200)
    sig = rng.normal(125.4, 3.0, size=4 * n_sig)
    sig = sig[(sig >= LO) & (sig <= HI)][:n_sig]
    c = 0.021
    u = rng.uniform(size=n_bkg)
    bkg = -np.log(np.exp(-c * LO) - u * (np.exp(-c * LO) - np.exp(-c * HI))) / c
    data = np.round(np.concatenate([sig, bkg]), 10)
    rng.shuffle(data)
    big = {"min": -1e6, "max": 1e6}
    doc = {
        "metadata": {"hs3_version": "0.2",
                     "description": "written by scripts/reference/template_weight_sys.py"},
        "distributions": [
            {"name": "model", "type": "product_dist",
             "factors": ["mix", "jes_constraint", "eff_constraint"]},
            {"name": "mix", "type": "mixture_dist", "summands": ["signal", "background"],
             "coefficients": ["nsig", "nbkg"], "extended": True},
            {"name": "signal", "type": "histfit_template_dist", "x": "mass",
             "events": "mc_signal", "weight": "w", "binning": {"nbins": NBINS},
             "weight_systematics": [
                 {"parameter": "alpha_jes", "up": "w_jes_up", "down": "w_jes_down",
                  "interpolation": "code0"},
                 {"parameter": "alpha_eff", "up": "w_eff_up", "down": "w_eff_down",
                  "interpolation": "code4p"}]},
            {"name": "background", "type": "exponential_dist", "x": "mass", "c": "c"},
            {"name": "jes_constraint", "type": "gaussian_dist", "x": "nom_jes",
             "mean": "alpha_jes", "sigma": "1"},
            {"name": "eff_constraint", "type": "gaussian_dist", "x": "nom_eff",
             "mean": "alpha_eff", "sigma": "1"},
        ],
        "functions": [
            {"name": "signal_mc_yield", "type": "histfit_template_yield", "template": "signal"},
            {"name": "nsig", "type": "product", "factors": ["mu", "signal_mc_yield"]},
        ],
        "data": [
            {"name": "observed", "type": "unbinned",
             "axes": [{"name": "mass", "min": LO, "max": HI}],
             "entries": [[float(x)] for x in data]},
            {"name": "mc_signal", "type": "unbinned",
             "axes": [{"name": "mass", "min": LO, "max": HI}] + [
                 dict(name=n, **big) for n in
                 ["w", "w_jes_up", "w_jes_down", "w_eff_up", "w_eff_down"]],
             "entries": [[round(float(v), 12) for v in row] for row in
                         zip(m, w, jes_up, jes_down, eff_up, eff_down)]},
        ],
        "likelihoods": [{"name": "L", "distributions": ["model"], "data": ["observed"]}],
        "analyses": [{"name": "A", "likelihood": "L", "parameters_of_interest": ["mu"]}],
        "domains": [{"name": "default_domain", "type": "product_domain", "axes": [
            {"name": "mu", "min": -5.0, "max": 50.0},
            {"name": "alpha_jes", "min": -5.0, "max": 5.0},
            {"name": "alpha_eff", "min": -5.0, "max": 5.0},
            {"name": "nbkg", "min": 0.0, "max": 10000.0},
            {"name": "c", "min": 0.0, "max": 0.2}]}],
        "parameter_points": [{"name": "default_values", "parameters": [
            {"name": k, "value": v} for k, v in INIT.items()] + [
            {"name": "nom_jes", "value": 0.0, "const": True},
            {"name": "nom_eff", "value": 0.0, "const": True}]},
        ],
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=0)


if "--write" in sys.argv:
    write()
d = json.load(open(path))
x = np.array([e[0] for e in d["data"][0]["entries"]])
mc = np.array(d["data"][1]["entries"])
edges = np.linspace(LO, HI, NBINS + 1)
hist = lambda col: np.histogram(mc[:, 0], bins=edges, weights=mc[:, col])[0]
nom = hist(1)
deltas = [(hist(2) - nom, nom - hist(3), "0"), (hist(4) - nom, nom - hist(5), "4p")]
which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, NBINS - 1)
width = edges[1] - edges[0]


def interp(a, up, down, code):
    if code == "0" or abs(a) > 1:
        return a * (up if a >= 0 else down)
    return 0.5 * a * (up + down) + a * a * (15 - 10 * a * a + 3 * a**4) * (up - down) / 16


def nll(mu, alpha_jes, alpha_eff, nbkg, c):
    content = nom.copy()
    for a, (up, down, code) in zip([alpha_jes, alpha_eff], deltas):
        content = content + interp(a, up, down, code)
    content = np.maximum(content, 0.0)  # an emptied bin holds nothing
    total = content.sum()
    nsig = mu * total
    f_sig = content[which] / width / total
    f_bkg = c * np.exp(-c * x) / (np.exp(-c * LO) - np.exp(-c * HI))
    cons = 0.5 * (alpha_jes**2 + alpha_eff**2) + np.log(2 * np.pi)
    return nsig + nbkg - np.sum(np.log(nsig * f_sig + nbkg * f_bkg)) + cons


m = Minuit(nll, **INIT)
m.limits = [(-5, 50), (-5, 5), (-5, 5), (0, 10000), (0, 0.2)]
m.errordef = Minuit.LIKELIHOOD
m.strategy = 2
m.tol = 1e-7
m.migrad()
m.hesse()
point2 = {"mu": 1.3, "alpha_jes": 0.6, "alpha_eff": -1.4, "nbkg": 1150.0, "c": 0.025}
fit = {"nll": m.fval, "valid": m.valid}
for k in INIT:
    fit[k] = m.values[k]
    fit[k + "_error"] = m.errors[k]
print(json.dumps({"nll_at_initial": nll(**INIT), "point2": point2, "nll_at_point2": nll(**point2),
                  "fit": fit}, indent=1))
