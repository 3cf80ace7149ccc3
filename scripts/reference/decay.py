"""The fixtures tests/fixtures/hs3/decay.json, decay_variants.json and their independent reference.

HS3's `decay_dist` (the standard's section 2.1.1, "Decay distribution": a single-sided,
double-sided or flipped exponential decay in t convolved with a resolution model, normalised over
the range; ROOT's RooDecay) with the standard's `gauss_model_function`, ROOT's
`gauss_resolution_model` and `mixture_model` (RooAddModel), and `truth_model_function`:

- decay.json: an extended mixture over dt in [-10, 10] of a single-sided decay (tau_s) convolved
  with two Gaussian resolution models (fraction gm1frac of width sigma1, the rest of width 3) and
  a double-sided decay (tau_b) convolved with the first. Events from NumPy (seed 41).
- decay_variants.json: non-extended one-distribution documents (the flipped decay with an offset
  Gaussian, each basis with perfect resolution, a single-sided decay on a range far below its
  peak) and their -lnL at the initial point.

The reference: SciPy's `exponnorm` (the exponentially modified Gaussian: the single-sided decay
convolved with a Gaussian; the flipped one mirrored) and the bare exponentials for perfect
resolution, normalised by `quad` over the range (relative 1e-13); the fit of decay.json by
iminuit (strategy 2, Hesse errors). With --roofit, RooFit's RooDecay -lnL of decay.json at the
initial point is printed beside it. Prints the reference; with --write, writes the fixtures and
the reference to tests/fixtures/hs3/decay.scipy.json. Needs numpy, scipy and iminuit."""
import json
import os
import sys

import numpy as np
from scipy.integrate import quad
from scipy.stats import exponnorm

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from common import emit_reference, iminuit_reference, write_doc  # noqa: E402

fixtures = os.path.join(here, "..", "..", "tests", "fixtures", "hs3")
path = os.path.join(fixtures, "decay.json")
variants_path = os.path.join(fixtures, "decay_variants.json")
LO, HI = -10.0, 10.0
SIGMA2 = 3.0
INIT = {"tau_s": 1.5, "tau_b": 0.5, "sigma1": 1.0, "gm1frac": 0.7, "nsig": 1200.0, "nbkg": 800.0}
LIMITS = {"tau_s": (0.2, 5.0), "tau_b": (0.05, 3.0), "sigma1": (0.2, 2.5), "gm1frac": (0.0, 1.0),
          "nsig": (0, 20000), "nbkg": (0, 20000)}


def conv(t, tau, kind, mean, sigma):
    """The basis convolved with N(mean, sigma) (or alone where sigma is None), without 1/tau."""
    if sigma is None:
        return {0: np.where(t >= 0, np.exp(-np.abs(t) / tau), 0.0),
                1: np.exp(-np.abs(t) / tau),
                2: np.where(t <= 0, np.exp(-np.abs(t) / tau), 0.0)}[kind]
    k = tau / sigma
    single = tau * exponnorm.pdf(t, k, loc=mean, scale=sigma)
    flipped = tau * exponnorm.pdf(2 * mean - t, k, loc=mean, scale=sigma)
    return {0: single, 1: single + flipped, 2: flipped}[kind]


def density(t, tau, kind, models, lo, hi):
    """sum_k c_k conv_k / sum_k c_k integral(conv_k); models: (c, mean, sigma)."""
    num = sum(c * conv(t, tau, kind, m, s) for c, m, s in models)
    breaks = [0.0] + [m for _, m, _ in models if m is not None]
    breaks = [b for b in breaks if lo < b < hi]
    den = sum(c * quad(lambda u: float(conv(np.array(u), tau, kind, m, s)), lo, hi, epsabs=0,
                       epsrel=1e-13, limit=1000, points=breaks or None)[0] for c, m, s in models)
    return num / den


def sig_models(sigma1, gm1frac):
    return [(gm1frac, 0.0, sigma1), (1 - gm1frac, 0.0, SIGMA2)]


def doc_of(distributions, lo, hi, xs, params, extended_names=None):
    return {
        "metadata": {"hs3_version": "0.2", "description": "written by scripts/reference/decay.py"},
        "distributions": distributions,
        "data": [{"name": "events", "type": "unbinned",
                  "axes": [{"name": "dt", "min": lo, "max": hi}],
                  "entries": [[float(x)] for x in xs]}],
        "likelihoods": [{"name": "L", "distributions": [distributions[0]["name"]],
                         "data": ["events"]}],
        "domains": [{"name": "default_domain", "type": "product_domain", "axes": [
            {"name": k, "min": float(a), "max": float(b)} for k, (a, b) in params.items()]}],
        "parameter_points": [{"name": "default_values", "parameters": [
            {"name": k, "value": v} for k, v in extended_names.items()]}],
    }


def write():
    rng = np.random.default_rng(41)
    n_sig, n_bkg = rng.poisson(1200), rng.poisson(800)
    wide = rng.uniform(size=n_sig) > 0.7
    sig = rng.exponential(1.5, n_sig) + rng.normal(0, np.where(wide, SIGMA2, 1.0))
    bkg = rng.exponential(0.5, n_bkg) * rng.choice([-1, 1], n_bkg) + rng.normal(0, 1.0, n_bkg)
    xs = np.concatenate([sig, bkg])
    xs = np.round(xs[(xs >= LO) & (xs <= HI)], 12)
    rng.shuffle(xs)
    dists = [
        {"name": "model", "type": "mixture_dist", "summands": ["sig", "bkg"],
         "coefficients": ["nsig", "nbkg"], "extended": True},
        {"name": "sig", "type": "decay_dist", "t": "dt", "tau": "tau_s", "decayType": 0,
         "resolutionModel": "gmsum"},
        {"name": "bkg", "type": "decay_dist", "t": "dt", "tau": "tau_b", "decayType": 1,
         "resolutionModel": "gm1"},
        {"name": "gmsum", "type": "mixture_model", "summands": ["gm1", "gm2"],
         "coefficients": ["gm1frac"], "extended": False},
        {"name": "gm1", "type": "gauss_resolution_model", "x": "dt", "mean": 0.0,
         "sigma": "sigma1"},
        {"name": "gm2", "type": "gauss_resolution_model", "x": "dt", "mean": 0.0,
         "sigma": SIGMA2},
    ]
    write_doc(path, doc_of(dists, LO, HI, xs, LIMITS, INIT))
    # The variants: (distribution fields, range, events, parameters).
    rng = np.random.default_rng(43)
    pos = np.round(rng.exponential(1.0, 150), 12)
    pos = pos[pos <= 8]
    both = np.round(rng.exponential(1.0, 150) * rng.choice([-1, 1], 150), 12)
    both = both[np.abs(both) <= 8]
    smeared = np.round(-rng.exponential(1.0, 150) + rng.normal(0.2, 0.8, 150), 12)
    smeared = smeared[np.abs(smeared) <= 8]
    far = np.round(rng.uniform(-10, -4, 100), 12)
    gauss_fn = {"name": "res", "type": "gauss_model_function", "x": "dt", "mean": "mu",
                "sigma": "s"}
    truth_fn = {"name": "res", "type": "truth_model_function", "x": "dt"}
    cases = [
        ("flipped, offset Gaussian", 2, gauss_fn, -8, 8, smeared, {"tau": 0.9, "mu": 0.2, "s": 0.8}),
        ("single-sided, perfect resolution", 0, truth_fn, 0, 8, pos, {"tau": 1.1}),
        ("flipped, perfect resolution", 2, truth_fn, -8, 0, -pos, {"tau": 0.8}),
        ("double-sided, perfect resolution", 1, truth_fn, -8, 8, both, {"tau": 1.2}),
        ("single-sided, far below the peak", 0, gauss_fn, -10, -4, far,
         {"tau": 0.7, "mu": 0.3, "s": 0.9}),
    ]
    variants = []
    for what, kind, res, lo, hi, ev, params in cases:
        dists = [{"name": "model", "type": "decay_dist", "t": "dt", "tau": "tau",
                  "decayType": kind, "resolutionModel": "res"}]
        doc = doc_of(dists, lo, hi, ev, {k: (0.01 if k in ("tau", "s") else -5, 10)
                                         for k in params}, params)
        doc["functions"] = [res]
        models = [(1.0, params.get("mu"), params.get("s"))]
        f = density(ev, params["tau"], kind, models, lo, hi)
        variants.append({"what": what, "doc": doc, "nll": float(-np.sum(np.log(f)))})
    with open(variants_path, "w") as f:
        json.dump(variants, f, indent=1)


if "--write" in sys.argv:
    write()
d = json.load(open(path))
x = np.array([e[0] for e in d["data"][0]["entries"]])


def nll(tau_s, tau_b, sigma1, gm1frac, nsig, nbkg):
    fs = density(x, tau_s, 0, sig_models(sigma1, gm1frac), LO, HI)
    fb = density(x, tau_b, 1, [(1.0, 0.0, sigma1)], LO, HI)
    return nsig + nbkg - np.sum(np.log(nsig * fs + nbkg * fb))


point2 = {"tau_s": 1.3, "tau_b": 0.6, "sigma1": 1.1, "gm1frac": 0.6, "nsig": 1100.0, "nbkg": 900.0}
out = iminuit_reference(nll, INIT, LIMITS, point2)
if "--roofit" in sys.argv:
    import ROOT
    ROOT.gROOT.SetBatch(True)
    w = ROOT.RooWorkspace("w")
    w.factory(f"dt[{LO},{HI}]")
    w.factory(f"GaussModel::gm1(dt,bias1[0],sigma1[{INIT['sigma1']}])")
    w.factory(f"GaussModel::gm2(dt,bias2[0],sigma2[{SIGMA2}])")
    w.factory(f"AddModel::gmsum({{gm1,gm2}},{{gm1frac[{INIT['gm1frac']}]}})")
    w.factory(f"Decay::sig(dt,tau_s[{INIT['tau_s']}],gmsum,RooDecay::SingleSided)")
    w.factory(f"Decay::bkg(dt,tau_b[{INIT['tau_b']}],gm1,RooDecay::DoubleSided)")
    w.factory(f"SUM::model(nsig[{INIT['nsig']}]*sig,nbkg[{INIT['nbkg']}]*bkg)")
    data = ROOT.RooDataSet.from_numpy({"dt": x}, ROOT.RooArgSet(w.var("dt")))
    out["roofit_nll_at_initial"] = w.pdf("model").createNLL(data).getVal()
emit_reference(out, os.path.join(fixtures, "decay.scipy.json"))
