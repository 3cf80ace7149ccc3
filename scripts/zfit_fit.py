#!/usr/bin/env python3
"""The event-level benchmark model fitted by zfit 0.28, for `bench_unbinned_peers.py` (run with a
Python that has zfit and pyarrow; TensorFlow makes it a venv of its own):

    python zfit_fit.py EVENTS.parquet N HISTFIT_BEST.json [gauss|cb]

Extended Gaussian (or Crystal Ball, alpha = 1.5 and n = 3 held) + exponential on [60, 120] with
free yields, the same initial values and ranges
as RooFit's and histfit's, over column "x" of the Parquet file; zfit's Minuit minimiser, then its
Hesse errors. Prints one JSON line: the seconds of the first fit (TensorFlow traces its graphs
there) and of a second one from the same start (warm), both with Hesse; the parameters; the
extended −ln L (ν − Σ ln Σ ν_p f_p(x_i), computed here with NumPy and SciPy from the parameters,
since zfit subtracts a constant of its own) at zfit's minimum and, given histfit's best fit
(names → values, as bench_unbinned_peers.py passes it), at histfit's.
"""
import json
import sys
import time

import numpy as np
import pyarrow.parquet as pq
from scipy.integrate import quad
from scipy.special import erf

import zfit

LO, HI = 60.0, 120.0


CB_ALPHA, CB_N = 1.5, 3.0


def cb_shape(x, mean, sigma):
    """RooCBShape's unnormalised density (alpha > 0: the tail on the low side)."""
    t = (np.asarray(x) - mean) / sigma
    a, n = CB_ALPHA, CB_N
    tail = (n / a) ** n * np.exp(-0.5 * a * a) * np.power(np.maximum(n / a - a - t, 1e-300), -n)
    return np.where(t > -a, np.exp(-0.5 * t * t), tail)


def nll(x, p, model):
    """Extended −ln L of the benchmark model at p (names → values), by NumPy and SciPy."""
    mean, sigma, lam, nsig, nbkg = p["mean"], p["sigma"], p["lambda"], p["nsig"], p["nbkg"]
    if model == "gauss":
        zs = (np.array([LO, HI]) - mean) / (sigma * np.sqrt(2.0))
        s_norm = sigma * np.sqrt(np.pi / 2.0) * (erf(zs[1]) - erf(zs[0]))
        s = np.exp(-0.5 * ((x - mean) / sigma) ** 2) / s_norm
    else:
        s_norm = quad(lambda v: float(cb_shape(v, mean, sigma)), LO, HI, points=[mean - CB_ALPHA * sigma],
                      epsabs=0, epsrel=1e-13, limit=200)[0]
        s = cb_shape(x, mean, sigma) / s_norm
    e_norm = (np.exp(lam * HI) - np.exp(lam * LO)) / lam
    f = nsig * s + nbkg * np.exp(lam * x) / e_norm
    return nsig + nbkg - np.sum(np.log(f))


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    x = pq.read_table(path, columns=["x"]).column("x").to_numpy()
    obs = zfit.Space("x", limits=(LO, HI))
    start = {"mean": 90.0, "sigma": 3.0, "lambda": -0.02, "nsig": 0.3 * n, "nbkg": 0.7 * n}
    mean = zfit.Parameter("mean", start["mean"], 80.0, 100.0)
    sigma = zfit.Parameter("sigma", start["sigma"], 0.5, 10.0)
    lam = zfit.Parameter("lambda", start["lambda"], -1.0, 0.0)
    nsig = zfit.Parameter("nsig", start["nsig"], 0.0, 1e7)
    nbkg = zfit.Parameter("nbkg", start["nbkg"], 0.0, 1e7)
    params = {"mean": mean, "sigma": sigma, "lambda": lam, "nsig": nsig, "nbkg": nbkg}
    model_name = sys.argv[4] if len(sys.argv) > 4 else "gauss"
    if model_name == "gauss":
        sig = zfit.pdf.Gauss(mu=mean, sigma=sigma, obs=obs, extended=nsig)
    else:
        alpha = zfit.Parameter("alpha", CB_ALPHA, floating=False)
        n_tail = zfit.Parameter("n", CB_N, floating=False)
        sig = zfit.pdf.CrystalBall(mu=mean, sigma=sigma, alpha=alpha, n=n_tail, obs=obs, extended=nsig)
    bkg = zfit.pdf.Exponential(lam=lam, obs=obs, extended=nbkg)
    model = zfit.pdf.SumPDF([sig, bkg])
    data = zfit.Data.from_numpy(obs=obs, array=x)
    loss = zfit.loss.ExtendedUnbinnedNLL(model=model, data=data)
    minimizer = zfit.minimize.Minuit()
    seconds = []
    for _ in range(2):
        for name, v in start.items():
            params[name].set_value(v)
        t = time.perf_counter()
        result = minimizer.minimize(loss)
        result.hesse()
        seconds.append(time.perf_counter() - t)
    best = {name: float(p.value()) for name, p in params.items()}
    out = {
        "first_fit_seconds": seconds[0],
        "warm_fit_seconds": seconds[1],
        "converged": bool(result.converged),
        "valid": bool(result.valid),
        "parameters": best,
        "nll": float(nll(x, best, model_name)),
    }
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as f:
            out["nll_at_histfit"] = float(nll(x, json.load(f), model_name))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
