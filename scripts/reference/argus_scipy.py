"""Independent reference for tests/fixtures/hs3/argus.json (ROOT 6.40's RooArgusBG, p = 0.5, the
observable's range [5.2, 5.29] ending below m0 = 5.291): −ln L with the normalisation integrated
by SciPy's quad, and its minimum over (c, p) by iminuit. RooFit's own −ln L for this file differs by
1.9e-5 relative (its normalisation integral for p = 0.5); this script is the reference the tests
use. Run with numpy, scipy and iminuit installed; prints JSON."""
import json
import os

import numpy as np
from iminuit import Minuit
from scipy.integrate import quad

here = os.path.dirname(os.path.abspath(__file__))
d = json.load(open(os.path.join(here, "..", "..", "tests", "fixtures", "hs3", "argus.json")))
x = np.array([e[0] for e in d["data"][0]["entries"]])
lo, hi, m0 = 5.2, 5.29, 5.291


def nll(c, p):
    f = lambda m: m * (1 - (m / m0) ** 2) ** p * np.exp(c * (1 - (m / m0) ** 2))
    n, _ = quad(f, lo, hi, epsabs=0, epsrel=1e-13, limit=200)
    u = 1 - (x / m0) ** 2
    return -np.sum(np.log(x) + p * np.log(u) + c * u - np.log(n))


m = Minuit(nll, c=-20.0, p=0.5)
m.limits = [(-100, -1), (0.1, 2)]
m.errordef = Minuit.LIKELIHOOD
m.strategy = 2
m.tol = 1e-6
m.migrad()
m.hesse()
print(json.dumps({
    "nll_at_initial": nll(-20.0, 0.5),
    "fit": {"nll": m.fval, "c": m.values["c"], "p": m.values["p"],
            "c_error": m.errors["c"], "p_error": m.errors["p"]},
}, indent=1))
