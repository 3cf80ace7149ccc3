"""Independent reference for tests/fixtures/hs3/exp_poly.json (ROOT 6.40's RooLegacyExpPoly(x,
{a1, a2}) = exp(a1 x + a2 x²) on x ∈ [0, 10], 2 000 events): −ln L with the normalisation by
SciPy's adaptive `quad` (relative accuracy 1e-13; RooFit integrates this class numerically to its
default 1e-7), and the minimum over (a1, a2) by iminuit. Prints JSON; `--write` writes it beside
the fixture."""
import json
import os

import numpy as np
from scipy.integrate import quad

from common import emit_reference, iminuit_reference

here = os.path.dirname(os.path.abspath(__file__))
fixtures = os.path.join(here, "..", "..", "tests", "fixtures", "hs3")
d = json.load(open(os.path.join(fixtures, "exp_poly.json")))
x = np.array([e[0] for e in d["data"][0]["entries"]])
lo, hi = 0.0, 10.0


def nll(a1, a2):
    norm, _ = quad(lambda t: np.exp(a1 * t + a2 * t * t), lo, hi, epsabs=0, epsrel=1e-13, limit=200)
    return -np.sum(a1 * x + a2 * x * x) + len(x) * np.log(norm)


point2 = {"a1": -0.2906787680313182, "a2": 0.008656670995777705}
out = iminuit_reference(nll, {"a1": -0.3, "a2": 0.01}, {"a1": (-2, 1), "a2": (-0.5, 0.5)}, point2)
emit_reference(out, os.path.join(fixtures, "exp_poly.scipy.json"))
