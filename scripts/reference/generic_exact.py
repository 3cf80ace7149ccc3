"""Independent reference for tests/fixtures/hs3/generic.json (ROOT 6.40's RooGenericPdf
exp(-a*x)*(1+b*x*x) on [0, 10]): −ln L with the normalisation in closed form,
∫ e^(−ax)(1 + b x²) dx = [−e^(−ax) (1/a + b (x²/a + 2x/a² + 2/a³))], and its minimum by iminuit.
RooFit integrates this PDF numerically, to about 1e-8 relative in −ln L here. Prints JSON."""
import json
import os

import numpy as np
from iminuit import Minuit

here = os.path.dirname(os.path.abspath(__file__))
d = json.load(open(os.path.join(here, "..", "..", "tests", "fixtures", "hs3", "generic.json")))
x = np.array([e[0] for e in d["data"][0]["entries"]])
lo, hi = 0.0, 10.0


def primitive(t, a, b):
    return -np.exp(-a * t) * (1 / a + b * (t * t / a + 2 * t / a**2 + 2 / a**3))


def nll(a, b):
    n = primitive(hi, a, b) - primitive(lo, a, b)
    return -np.sum(-a * x + np.log1p(b * x * x) - np.log(n))


m = Minuit(nll, a=0.3, b=0.05)
m.limits = [(0.01, 2), (0, 1)]
m.errordef = Minuit.LIKELIHOOD
m.strategy = 2
m.tol = 1e-6
m.migrad()
m.hesse()
print(json.dumps({
    "nll_at_initial": nll(0.3, 0.05),
    "fit": {"nll": m.fval, "a": m.values["a"], "b": m.values["b"],
            "a_error": m.errors["a"], "b_error": m.errors["b"]},
}, indent=1))
