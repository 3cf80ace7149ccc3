"""Independent reference for tests/fixtures/hs3/fft_conv.json (ROOT 6.40's RooFFTConvPdf of
RooLandau(x, ml, sl) and RooGaussian(x, 0, sg) on x ∈ [−10, 30], 2 000 events): −ln L of the
linear convolution f(x) ∝ ∫ L(x − y) G(y) dy over y ∈ [−22, 22] (the window in which
RooFFTConvPdf samples its second density: centred on 0, the range's width and its two 5 %
buffers), normalised over the range — both
integrals by composite 8-point Gauss–Legendre on 400 pieces (moving to 800 changes nothing at
1e-12), the Landau density from SciPy 1.17's `scipy.stats.landau` rescaled to ROOT's convention
(as `landau_scipy.py`) — and the minimum over (ml, sl, sg) by iminuit. RooFit's own −ln L is its
cyclic FFT on the cache binning (the Landau's tail beyond the buffers wraps around: its fit
ends 0.05–0.1 σ from this one) and is not the reference.
Prints JSON; `--write` writes it beside the fixture."""
import json
import math
import os

import numpy as np
from scipy.stats import landau

from common import emit_reference, iminuit_reference

here = os.path.dirname(os.path.abspath(__file__))
fixtures = os.path.join(here, "..", "..", "tests", "fixtures", "hs3")
d = json.load(open(os.path.join(fixtures, "fft_conv.json")))
x = np.array([e[0] for e in d["data"][0]["entries"]])
lo, hi = -10.0, 30.0
S, B = 2 / math.pi, math.log(math.pi / 2)


def gauss_legendre(a, b, pieces):
    u, w = np.polynomial.legendre.leggauss(8)
    edges = np.linspace(a, b, pieces + 1)
    half = 0.5 * np.diff(edges)
    mid = 0.5 * (edges[1:] + edges[:-1])
    return (mid[:, None] + half[:, None] * u).ravel(), (half[:, None] * w).ravel()


Y, WY = gauss_legendre(-0.55 * (hi - lo), 0.55 * (hi - lo), 400)
X, WX = gauss_legendre(lo, hi, 400)


def conv(t, ml, sl, sg):
    g = np.exp(-0.5 * (Y / sg) ** 2) * WY
    z = S * ((t[:, None] - Y[None, :] - ml) / sl - B)
    return (S * landau.pdf(z) * g[None, :]).sum(1)


def nll(ml, sl, sg):
    norm = (conv(X, ml, sl, sg) * WX).sum()
    return -np.sum(np.log(conv(x, ml, sl, sg) / norm))


point2 = {"ml": 5.034695147459038, "sl": 1.0270865513750236, "sg": 1.904598616280796}
out = iminuit_reference(nll, {"ml": 5.0, "sl": 1.0, "sg": 2.0},
                        {"ml": (-5, 15), "sl": (0.1, 5), "sg": (0.1, 6)}, point2)
emit_reference(out, os.path.join(fixtures, "fft_conv.scipy.json"))
