"""MINOS intervals against iminuit's MINOS on the same likelihood (pyhf's logpdf, minimised by
Minuit with errordef ½), and the saturated-model goodness of fit against a direct computation
from pyhf's expected data at histfit's best fit."""

import json

import numpy as np
import pyhf
import pytest
from scipy import stats

import histfit
from conftest import fixture

import iminuit  # installed by scripts/test-all: the reference MINOS

SETTINGS = {"normsys": {"interpcode": "code4"}, "histosys": {"interpcode": "code4p"}}


def pyhf_model(name):
    with open(fixture(f"{name}.json")) as f:
        spec = json.load(f)
    ws = pyhf.Workspace(spec)
    m = ws.model(modifier_settings=SETTINGS)
    return spec, m, np.asarray(ws.data(m))


@pytest.mark.parametrize("name", ["simple_workspace", "two_channel_workspace", "complex_workspace"])
def test_minos_matches_iminuit(name):
    spec, pm, data = pyhf_model(name)
    nll = lambda p: -float(pm.logpdf(np.asarray(p), data)[0])  # noqa: E731
    m = iminuit.Minuit(nll, np.asarray(pm.config.suggested_init(), dtype=float), name=pm.config.par_names)
    m.errordef = iminuit.Minuit.LIKELIHOOD
    m.limits = pm.config.suggested_bounds()
    m.fixed = pm.config.suggested_fixed()
    m.strategy = 2
    m.tol = 1e-6
    m.migrad()
    assert m.valid
    model = histfit.Workspace(spec).model()
    free = [n for n, f in zip(pm.config.par_names, pm.config.suggested_fixed()) if not f]
    ours = histfit.minos(model, pars=free)
    for n in free:
        m.minos(n)
        me = m.merrors[n]
        o = ours[n]
        assert o["converged"], o
        # Where Minuit's interval hits a parameter bound it says so; ours ends there too.
        if me.at_lower_limit:
            assert o["lower_at_bound"], (n, o)
        else:
            assert o["lower_error"] == pytest.approx(me.lower, abs=1e-4), (n, o, me)
        if me.at_upper_limit:
            assert o["upper_at_bound"], (n, o)
        else:
            assert o["upper_error"] == pytest.approx(me.upper, abs=1e-4), (n, o, me)


@pytest.mark.parametrize("name", ["simple_workspace", "complex_workspace"])
def test_goodness_of_fit_matches_a_direct_computation(name):
    spec, pm, data = pyhf_model(name)
    model = histfit.Workspace(spec).model()
    g = histfit.goodness_of_fit(model)
    fit = histfit.fit(model)
    assert g["twice_nll"] == pytest.approx(fit.twice_nll, rel=1e-12)
    # −2 ln λ_sat: the Poisson terms at the fit against the same terms with λ = n (pyhf's own
    # expected data at histfit's minimum); the constraint terms cancel.
    lam = np.asarray(pm.expected_data(fit.bestfit, include_auxdata=False))
    n = data[: lam.size]
    direct = 2.0 * float(np.sum(lam - n + np.where(n > 0, n * np.log(np.where(n > 0, n / lam, 1.0)), 0.0)))
    assert g["statistic"] == pytest.approx(direct, rel=1e-9, abs=1e-12)
    unconstrained_free = sum(
        1
        for i, (p, f) in enumerate(zip(pm.config.par_names, pm.config.suggested_fixed()))
        if not f and pm.config.param_set(p.split("[")[0]).constrained is False
    )
    assert g["dof"] == lam.size - unconstrained_free
    assert g["p_value"] == pytest.approx(float(stats.chi2.sf(direct, g["dof"])), rel=1e-9)
