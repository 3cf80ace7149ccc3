"""Independent reference for tests/fixtures/hs3/landau.json (ROOT 6.40's RooLandau(x, mean,
sigma) on x ∈ [0, 20], 2 000 events): −ln L with the Landau density and distribution function
from SciPy 1.17's `scipy.stats.landau` (Boost), rescaled to ROOT's convention — φ(λ) = (2/π)
p((2/π)(λ − ln(π/2))) — and the minimum over (mean, sigma) by iminuit. RooFit's own −ln L uses
CERNLIB's DENLAN approximation (≈ 1e-9 relative near the peak, 5e-8 in the tail) and its
numerical integral over the range. Prints JSON."""
import json
import math
import os

import numpy as np
from iminuit import Minuit
from scipy.stats import landau

here = os.path.dirname(os.path.abspath(__file__))
d = json.load(open(os.path.join(here, "..", "..", "tests", "fixtures", "hs3", "landau.json")))
x = np.array([e[0] for e in d["data"][0]["entries"]])
lo, hi = 0.0, 20.0
S, B = 2 / math.pi, math.log(math.pi / 2)


def nll(mean, sigma):
    z = lambda t: S * ((t - mean) / sigma - B)
    mass = landau.cdf(z(hi)) - landau.cdf(z(lo))
    return -np.sum(np.log(S * landau.pdf(z(x)) / (sigma * mass)))


m = Minuit(nll, mean=5.0, sigma=1.0)
m.limits = [(0, 10), (0.1, 5)]
m.errordef = Minuit.LIKELIHOOD
m.strategy = 2
m.tol = 1e-7
m.migrad()
m.hesse()
point2 = {"mean": 4.9459149901926995, "sigma": 0.9649227207369628}
print(json.dumps({
    "nll_at_initial": nll(5.0, 1.0),
    "point2": point2,
    "nll_at_point2": nll(**point2),
    "fit": {"nll": m.fval, "mean": m.values["mean"], "sigma": m.values["sigma"],
            "mean_error": m.errors["mean"], "sigma_error": m.errors["sigma"]},
}, indent=1))
