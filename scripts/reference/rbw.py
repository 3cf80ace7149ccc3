"""The fixture tests/fixtures/hs3/rbw.json and its independent reference.

HS3's `relativistic_breit_wigner_dist` (the standard's section 2.1.1, "Relativistic Breit-Wigner
distribution"; ROOT 6.40 has no such class and pyhs3 0.4.2 does not read it) in an extended
mixture with an `exponential_dist` e^(-c x) on [0.3, 1.3]: a rho(770)-like resonance decaying to
pi+ pi- (l = 1, the channel whose spectrum is modelled) and to K+ K- (l = 1, closed below
0.987 GeV, inside the range). Events from NumPy (seed 29): accept-reject draws from the same
line shape for the signal, inverse-CDF draws for the background.

The reference, written from the standard's formula here in NumPy: the density
x G1(x) / ((mBW^2 - x^2)^2 + mBW^2 G(x)^2), G_i(x) = Gamma_i n_l^2(z) rho_i(x), rho = 2q/x,
z = qR, n_1^2 = z^2/(1 + z^2) (the Blatt-Weisskopf factor; the standard's "h_0^2 = 1/(1+z^2)"
is its l = 1 factor: at l = 0 n = 1, which its constant-width special case needs), a channel
below threshold has width 0; normalised by SciPy's `quad` on [0.3, 1.3] (relative 1e-13,
break points at the thresholds and the peak). -lnL = nsig + nbkg - sum ln(nsig f_s + nbkg f_b);
the fit by iminuit (strategy 2, Hesse errors). Prints the reference as JSON; with --write,
writes the fixture first and the reference to tests/fixtures/hs3/rbw.scipy.json. Needs numpy,
scipy and iminuit."""
import json
import os
import sys

import numpy as np
from scipy.integrate import quad

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from common import emit_reference, exponential_draws, extended_mixture_doc, iminuit_reference, write_doc  # noqa: E402

fixtures = os.path.join(here, "..", "..", "tests", "fixtures", "hs3")
path = os.path.join(fixtures, "rbw.json")
LO, HI = 0.3, 1.3
MPI, MK = 0.13957, 0.49368
R = 3.0
GAMMA_KK = 0.02
INIT = {"mass": 0.775, "gamma": 0.15, "c": 1.5, "nsig": 1500.0, "nbkg": 1000.0}
LIMITS = {"mass": (0.6, 0.95), "gamma": (0.02, 0.5), "c": (-5.0, 10.0), "nsig": (0, 20000),
          "nbkg": (0, 20000)}


def width(x, gamma, m1, m2, l):
    s = x * x
    q2 = (s - (m1 + m2) ** 2) * (s - (m1 - m2) ** 2) / (4 * s)
    q2 = np.where(x >= m1 + m2, q2, 0.0)
    rho = 2 * np.sqrt(q2) / x
    y = q2 * R * R
    n2 = {0: 1.0, 1: y / (1 + y)}[l]
    return gamma * n2 * rho


def shape(x, mass, gamma):
    g1 = width(x, gamma, MPI, MPI, 1)
    g = g1 + width(x, GAMMA_KK, MK, MK, 1)
    return x * g1 / ((mass ** 2 - x * x) ** 2 + mass ** 2 * g ** 2)


def norm(mass, gamma):
    return quad(lambda t: shape(t, mass, gamma), LO, HI, epsabs=0, epsrel=1e-13, limit=1000,
                points=[2 * MK, mass])[0]


def write():
    rng = np.random.default_rng(29)
    n_sig, n_bkg = rng.poisson(1500), rng.poisson(1000)
    top = 1.2 * shape(np.linspace(LO, HI, 20001), 0.775, 0.15).max()
    sig = []
    while len(sig) < n_sig:
        x = rng.uniform(LO, HI, 4 * n_sig)
        keep = rng.uniform(0, top, x.size) < shape(x, 0.775, 0.15)
        sig.extend(x[keep].tolist())
    sig = sig[:n_sig]
    bkg = exponential_draws(rng, n_bkg, 1.4, LO, HI)
    xs = np.round(np.concatenate([sig, bkg]), 12)
    rng.shuffle(xs)
    doc = extended_mixture_doc(
        "scripts/reference/rbw.py",
        [{"name": "sig", "type": "relativistic_breit_wigner_dist", "x": "x", "mass": "mass",
          "channels": [
              {"name": "pipi", "Gamma": "gamma", "m1": MPI, "m2": MPI, "l": 1, "R": R},
              {"name": "KK", "Gamma": GAMMA_KK, "m1": MK, "m2": MK, "l": 1, "R": R}]},
         {"name": "bkg", "type": "exponential_dist", "x": "x", "c": "c"}],
        LO, HI, xs, LIMITS, INIT)
    write_doc(path, doc)


if "--write" in sys.argv:
    write()
d = json.load(open(path))
x = np.array([e[0] for e in d["data"][0]["entries"]])


def nll(mass, gamma, c, nsig, nbkg):
    fs = shape(x, mass, gamma) / norm(mass, gamma)
    fb = c * np.exp(-c * x) / (np.exp(-c * LO) - np.exp(-c * HI))
    return nsig + nbkg - np.sum(np.log(nsig * fs + nbkg * fb))


point2 = {"mass": 0.79, "gamma": 0.13, "c": 1.2, "nsig": 1400.0, "nbkg": 1100.0}
out = iminuit_reference(nll, INIT, LIMITS, point2)
emit_reference(out, os.path.join(fixtures, "rbw.scipy.json"))
