"""Yield tables against a direct computation with pyhf: per-sample expected yields from pyhf's
main model at the same parameters, their Jacobian by central differences, and σ = √diag(J C Jᵀ)
with the same covariance (pre-fit: the constraints' widths; post-fit: histfit's fit)."""

import json

import numpy as np
import pyhf
import pytest

import histfit
from conftest import fixture

SETTINGS = {"normsys": {"interpcode": "code4"}, "histosys": {"interpcode": "code4p"}}


def direct(pm, pars, cov):
    """Per channel: {sample: (yields, σ)} and the total (yields, σ)."""
    pars = np.asarray(pars, dtype=float)
    by_sample = lambda p: np.asarray(pm.main_model.expected_data(p, return_by_sample=True))  # noqa: E731
    y0 = by_sample(pars)
    bounds = pm.config.suggested_bounds()
    jac = np.zeros((len(pars),) + y0.shape)
    for j in range(len(pars)):
        if cov[j, j] <= 0:
            continue
        h = 1e-6 * max(1.0, np.sqrt(cov[j, j]))
        a, b = max(pars[j] - h, bounds[j][0]), min(pars[j] + h, bounds[j][1])
        up, dn = pars.copy(), pars.copy()
        up[j], dn[j] = b, a
        jac[j] = (by_sample(up) - by_sample(dn)) / (b - a)
    out = {}
    for ch in pm.config.channels:
        sl = pm.config.channel_slices[ch]
        samples = {}
        for k, s in enumerate(pm.config.samples):
            y = y0[k, sl]
            if not np.any(y):
                continue
            jk = jac[:, k, sl]
            samples[s] = (y, np.sqrt(np.einsum("ib,ij,jb->b", jk, cov, jk)))
        jt = jac[:, :, sl].sum(axis=1)
        out[ch] = (samples, (y0[:, sl].sum(axis=0), np.sqrt(np.einsum("ib,ij,jb->b", jt, cov, jt))))
    return out


def prefit_cov(pm):
    n = len(pm.config.par_names)
    cov = np.zeros((n, n))
    for name in pm.config.par_order:
        ps = pm.config.param_set(name)
        if not getattr(ps, "constrained", False):
            continue
        sl = pm.config.par_slice(name)
        for i, w, f in zip(range(sl.start, sl.stop), ps.width(), ps.suggested_fixed):
            if not f:
                cov[i, i] = w * w
    return cov


@pytest.mark.parametrize("name", ["complex_workspace", "workspace_tHu"])
@pytest.mark.parametrize("postfit", [False, True])
def test_yields_match_a_direct_computation(name, postfit):
    with open(fixture(f"{name}.json")) as f:
        spec = json.load(f)
    pws = pyhf.Workspace(spec)
    pm = pws.model(modifier_settings=SETTINGS)
    model = histfit.Workspace(spec).model()
    if postfit:
        r = histfit.fit(model)
        pars, cov = r.bestfit, r.covariance
    else:
        pars, cov = np.asarray(pm.config.suggested_init(), dtype=float), prefit_cov(pm)
    ref = direct(pm, pars, cov)
    table = histfit.yields(model, postfit=postfit)
    for ch in table:
        samples, (ty, tu) = ref[ch["name"]]
        assert ch["data"] == list(pws.data(pm, include_auxdata=False)[pm.config.channel_slices[ch["name"]]])
        for s in ch["samples"]:
            y, u = samples[s["name"]]
            np.testing.assert_allclose(s["yields"], y, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(s["uncertainties"], u, rtol=2e-5, atol=1e-9)
        np.testing.assert_allclose(ch["total"]["yields"], ty, rtol=1e-10)
        np.testing.assert_allclose(ch["total"]["uncertainties"], tu, rtol=2e-5, atol=1e-9)
