"""What a pyhf user types works as in pyhf (issue 52, item 5): the functions that mirror
``pyhf.infer`` take ``(data, model)`` and pyhf's keyword names, give pyhf's numbers, and a call in
the other order is a TypeError that says the order; ``model.config`` has pyhf's fields with pyhf's
values (checked against live pyhf 0.7.6)."""

import json

import numpy as np
import pyhf
import pytest

import histfit
from conftest import fixture


def both(name):
    with open(fixture(f"{name}.json")) as f:
        spec = json.load(f)
    ws = histfit.Workspace(spec)
    model = ws.model()
    pws = pyhf.Workspace(spec)
    pmodel = pws.model()
    return model, ws.data(model), pmodel, pws.data(pmodel)


@pytest.mark.parametrize("name", ["simple_workspace", "complex_workspace", "workspace_tHu"])
def test_model_config_as_pyhf(name):
    model, _, pmodel, _ = both(name)
    c, pc = model.config, pmodel.config
    assert c.parameters == pc.parameters
    assert c.par_order == pc.par_order
    assert c.par_names == pc.par_names
    assert c.npars == pc.npars
    assert (c.poi_index, c.poi_name) == (pc.poi_index, pc.poi_name)
    assert c.channels == pc.channels
    assert c.samples == pc.samples
    assert c.channel_nbins == pc.channel_nbins
    assert (c.nmaindata, c.nauxdata) == (pc.nmaindata, pc.nauxdata)
    np.testing.assert_allclose(c.suggested_init(), pc.suggested_init(), rtol=1e-12)
    assert [tuple(b) for b in c.suggested_bounds()] == [tuple(b) for b in pc.suggested_bounds()]
    assert c.suggested_fixed() == pc.suggested_fixed()
    for p in pc.par_order:
        assert c.par_slice(p) == pc.par_slice(p)
    with pytest.raises(histfit.HistfitError, match="not a parameter set"):
        c.par_slice("nope")


def test_pyhf_order_gives_pyhfs_numbers():
    model, data, pmodel, pdata = both("simple_workspace")
    pyhf.set_backend("numpy", "scipy")
    _, twice_nll = pyhf.infer.mle.fit(pdata, pmodel, return_fitted_val=True)
    r = histfit.fit(data, model)
    assert r.twice_nll == pytest.approx(float(twice_nll), abs=1e-6)
    assert histfit.fit(model).twice_nll == r.twice_nll  # the model alone: the observed data
    cls = histfit.hypotest(1.0, data, model)
    assert cls == pytest.approx(float(pyhf.infer.hypotest(1.0, pdata, pmodel, test_stat="qtilde")), rel=1e-5)
    obs, exp = histfit.upper_limit(data, model)
    pobs, pexp = pyhf.infer.intervals.upper_limits.upper_limit(pdata, pmodel)
    assert obs == pytest.approx(float(pobs), rel=1e-4)
    np.testing.assert_allclose(exp, np.asarray(pexp, dtype=float), rtol=1e-4)
    # pyhf's keyword names: init_pars, par_bounds, fixed_params (held at their initial values), level.
    fixed = [False] * model.config.npars
    fixed[model.config.par_names.index("uncorr_bkguncrt[0]")] = True
    a = histfit.fit(data, model, init_pars=model.config.suggested_init(), fixed_params=fixed)
    b = histfit.fit(data, model, fixed={"uncorr_bkguncrt[0]": 1.0})
    assert a.twice_nll == b.twice_nll
    bounds = model.config.suggested_bounds()
    bounds[0] = (0.0, 0.3)
    assert histfit.fit(data, model, par_bounds=bounds).bestfit[0] == pytest.approx(0.3, abs=1e-9)
    assert histfit.upper_limit(data, model, level=0.1)[0] < obs
    c = histfit.hypotest_toys(1.0, data, model, n_toys=20, seed=1)
    assert 0.0 <= c["summary"]["cls_obs"] <= 1.0 and len(c["toys_b"]) == 20
    held = histfit.hypotest_toys(1.0, data, model, n_toys=20, seed=1, fixed_params=fixed)
    same = histfit.hypotest_toys(1.0, data, model, n_toys=20, seed=1, fixed={"uncorr_bkguncrt[0]": 1.0})
    assert held["summary"] == same["summary"]


def test_other_orders_are_type_errors_naming_the_argument():
    model, data, _, _ = both("simple_workspace")
    with pytest.raises(TypeError, match=r"data come first.*\(data, model\)"):
        histfit.fit(model, data)
    with pytest.raises(TypeError, match=r"data come first.*\(poi_test, data, model\)"):
        histfit.hypotest(1.0, model, data)
    with pytest.raises(TypeError, match="data come first"):
        histfit.upper_limit(model, data)
    with pytest.raises(TypeError, match=r"model: expected a histfit.Model, got a ndarray"):
        histfit.fit(data, data)
    with pytest.raises(TypeError, match=r"minos: model: expected a histfit.Model"):
        histfit.minos(data)
    with pytest.raises(TypeError, match=r"profile_scan: model: expected a histfit.Model"):
        histfit.profile_scan(data, [0.0, 1.0])
    with pytest.raises(TypeError, match=r"data: expected an array of numbers, got a Model"):
        histfit.significance(model, data=model)
    with pytest.raises(TypeError):  # keyword arguments after the model
        histfit.yields(model, True)
    with pytest.raises(TypeError, match="alpha= and level="):
        histfit.upper_limit(data, model, alpha=0.05, level=0.05)
    with pytest.raises(TypeError, match="init= and init_pars="):
        histfit.fit(data, model, init=[1.0, 1.0, 1.0], init_pars=[1.0, 1.0, 1.0])
