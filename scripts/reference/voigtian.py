"""The fixture tests/fixtures/hs3/voigtian.json and its independent reference.

histfit's extension `histfit_voigtian_dist` (RooVoigtian's density: a Breit–Wigner of full width
`width` convolved with a Gaussian of width `sigma`; ROOT 6.40's exporter cannot write it) in an
extended mixture with an `exponential_dist` e^(−c x) on [60, 120]. Events from NumPy (seed 71):
Cauchy plus Gaussian draws for the signal, inverse-CDF draws for the background.

The reference: −ln L = nsig + nbkg − Σ ln(nsig f_s(x_i) + nbkg f_b(x_i)), f_s SciPy's
`voigt_profile(x − mean, sigma, width/2)` over its integral on [60, 120] (`quad`, relative
accuracy 1e-13), f_b in closed form; the fit by iminuit (strategy 2, Hesse errors). With --roofit,
RooFit's RooVoigtian −ln L at the initial point is printed beside it (RooFit integrates it
numerically). Prints the reference as JSON; with --write, writes the fixture first and the
reference to tests/fixtures/hs3/voigtian.scipy.json. Needs numpy, scipy and iminuit."""
import json
import os
import sys

import numpy as np
from scipy.integrate import quad
from scipy.special import voigt_profile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from common import emit_reference, exponential_draws, extended_mixture_doc, iminuit_reference, write_doc  # noqa: E402

fixtures = os.path.join(here, "..", "..", "tests", "fixtures", "hs3")
path = os.path.join(fixtures, "voigtian.json")
LO, HI = 60.0, 120.0
INIT = {"mean": 91.0, "width": 2.5, "sigma": 1.5, "c": 0.03, "nsig": 800.0, "nbkg": 1200.0}
LIMITS = {"mean": (80, 100), "width": (0.05, 10), "sigma": (0.1, 8), "c": (0.0, 0.2),
          "nsig": (0, 10000), "nbkg": (0, 10000)}


def write():
    rng = np.random.default_rng(71)
    n_sig, n_bkg = rng.poisson(820), rng.poisson(1180)
    sig = []
    while len(sig) < n_sig:
        x = 91.2 + 1.3 * rng.standard_cauchy(n_sig) + rng.normal(0, 1.6, n_sig)
        sig.extend(x[(x >= LO) & (x <= HI)].tolist())
    sig = sig[:n_sig]
    bkg = exponential_draws(rng, n_bkg, 0.028, LO, HI)
    xs = np.round(np.concatenate([sig, bkg]), 12)
    rng.shuffle(xs)
    doc = extended_mixture_doc(
        "scripts/reference/voigtian.py",
        [{"name": "sig", "type": "histfit_voigtian_dist", "x": "x", "mean": "mean",
          "width": "width", "sigma": "sigma"},
         {"name": "bkg", "type": "exponential_dist", "x": "x", "c": "c"}],
        LO, HI, xs, LIMITS, INIT)
    write_doc(path, doc)


if "--write" in sys.argv:
    write()
d = json.load(open(path))
x = np.array([e[0] for e in d["data"][0]["entries"]])


def nll(mean, width, sigma, c, nsig, nbkg):
    gamma = 0.5 * width
    norm = quad(lambda t: voigt_profile(t - mean, sigma, gamma), LO, HI, epsabs=0, epsrel=1e-13,
                limit=500, points=[mean])[0]
    fs = voigt_profile(x - mean, sigma, gamma) / norm
    fb = c * np.exp(-c * x) / (np.exp(-c * LO) - np.exp(-c * HI))
    return nsig + nbkg - np.sum(np.log(nsig * fs + nbkg * fb))


point2 = {"mean": 90.6, "width": 3.1, "sigma": 1.2, "c": 0.025, "nsig": 760.0, "nbkg": 1250.0}
out = iminuit_reference(nll, INIT, LIMITS, point2)
if "--roofit" in sys.argv:
    import ROOT
    ROOT.gROOT.SetBatch(True)
    w = ROOT.RooWorkspace("w")
    w.factory(f"Voigtian::sig(x[{LO},{HI}],mean[{INIT['mean']}],width[{INIT['width']}],sigma[{INIT['sigma']}])")
    w.factory(f"Exponential::bkg(x,ml[{-INIT['c']}])")
    w.factory(f"SUM::model(nsig[{INIT['nsig']}]*sig,nbkg[{INIT['nbkg']}]*bkg)")
    data = ROOT.RooDataSet.from_numpy({"x": x}, ROOT.RooArgSet(w.var("x")))
    out["roofit_nll_at_initial"] = w.pdf("model").createNLL(data).getVal()
emit_reference(out, os.path.join(fixtures, "voigtian.scipy.json"))
