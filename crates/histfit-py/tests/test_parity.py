"""Parity with pyhf through the Python API, at the tolerances of the Rust tests: names, order,
inits, bounds and data identical; twice_nll at every golden point within 1e-9 relative (and
against pyhf's own logpdf computed here); expected data within 1e-10; MLE twice_nll no worse than
pyhf's better fit + 1e-6; hypotest and limits against pyhf's numbers."""

import json

import numpy as np
import pyhf
import pytest

import histfit
from conftest import SETTINGS, WORKSPACES, fixture


def load(name, setting):
    ws = histfit.Workspace(fixture(f"{name}.json"))
    return ws, ws.model(interp=setting)


@pytest.mark.parametrize("name", WORKSPACES)
@pytest.mark.parametrize("setting", SETTINGS)
def test_model_layout_and_likelihood(name, setting, goldens):
    g = goldens[name]["settings"][setting]
    ws, model = load(name, setting)
    assert model.par_names == g["par_names"]
    assert model.poi_index == g["poi_index"]
    np.testing.assert_array_equal(model.suggested_init(), g["suggested_init"])
    assert [list(b) for b in model.suggested_bounds()] == g["suggested_bounds"]
    assert model.fixed() == g["fixed"]
    data = ws.data(model)
    np.testing.assert_array_equal(data, g["data"])
    for p in g["points"]:
        v = model.twice_nll(p["params"], data)
        assert abs(v - p["twice_nll"]) <= 1e-9 * abs(p["twice_nll"]), (p["label"], v, p["twice_nll"])
        exp = model.expected_data(p["params"], include_aux=False)
        np.testing.assert_allclose(exp, p["expected_main"], rtol=1e-10, atol=0)
        assert model.logpdf(p["params"], data) == pytest.approx(-0.5 * p["twice_nll"], rel=1e-9)


@pytest.mark.parametrize("name", ["simple_workspace", "complex_workspace", "two_channel_workspace"])
def test_against_live_pyhf(name):
    """The same workspace dict in both libraries: pyhf's logpdf at random points."""
    import json

    with open(fixture(f"{name}.json")) as f:
        spec = json.load(f)
    pws = pyhf.Workspace(spec)
    pmodel = pws.model(modifier_settings={"normsys": {"interpcode": "code4"}, "histosys": {"interpcode": "code4p"}})
    pdata = pws.data(pmodel)
    model = histfit.Workspace(spec).model()
    assert model.par_names == pmodel.config.par_names
    rng = np.random.default_rng(1)
    init = np.asarray(pmodel.config.suggested_init())
    for _ in range(5):
        p = init + 0.2 * rng.standard_normal(init.size)
        p = np.clip(p, [b[0] for b in pmodel.config.suggested_bounds()], [b[1] for b in pmodel.config.suggested_bounds()])
        ref = float(pmodel.logpdf(p, pdata)[0])
        assert model.logpdf(p, pdata) == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("name", WORKSPACES)
@pytest.mark.parametrize("setting", SETTINGS)
def test_mle(name, setting, goldens):
    g = goldens[name]["settings"][setting]
    ws, model = load(name, setting)
    r = histfit.fit(ws.data(model), model)
    assert r.converged, r.reason
    best = min(g["mle"]["scipy"]["twice_nll"], g["mle"]["minuit"]["twice_nll"])
    assert r.twice_nll <= best + 1e-6
    assert r.uncertainties is not None and r.covariance.shape == (len(model.par_names),) * 2


@pytest.mark.parametrize("name", ["simple_workspace", "complex_workspace", "two_channel_workspace"])
def test_hypotest_and_limits(name, goldens):
    g = goldens[name]["settings"]["smooth"]
    ws, model = load(name, "smooth")
    data = ws.data(model)
    cls, tails, exp_set = histfit.hypotest(1.0, data, model, return_tail_probs=True, return_expected_set=True)
    assert abs(cls - g["hypotest_mu1"]["cls_obs"]) < 1e-4
    np.testing.assert_allclose(exp_set, g["hypotest_mu1"]["cls_exp"], atol=1e-4)
    assert cls == pytest.approx(tails[0] / tails[1])
    obs, exp = histfit.upper_limit(data, model)
    assert obs == pytest.approx(g["upper_limit"]["obs"], rel=1e-3)
    np.testing.assert_allclose(exp, g["upper_limit"]["exp"], rtol=1e-3)


def test_gradient_matches_differences():
    ws, model = load("complex_workspace", "smooth")
    data = ws.data(model)
    p = model.suggested_init() + 0.05
    v, g = model.twice_nll_and_grad(p, data)
    assert v == pytest.approx(model.twice_nll(p, data))
    for i in range(p.size):
        h = 1e-6 * max(1.0, abs(p[i]))
        up, dn = p.copy(), p.copy()
        up[i] += h
        dn[i] -= h
        fd = (model.twice_nll(up, data) - model.twice_nll(dn, data)) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-6, abs=1e-6)


def test_inference_helpers_run():
    ws, model = load("simple_workspace", "smooth")
    data = ws.data(model)
    scan = histfit.profile_scan(model, [0.0, 0.5, 1.0], data=data)
    assert len(scan["points"]) == 3
    sig = histfit.significance(model, data=data)
    assert sig["p0_obs"] > 0
    rank = histfit.ranking(model, data=data)
    assert len(rank["entries"]) == 2
    toys = histfit.fit_toys(model, n_toys=20, seed=3)
    assert toys["converged"].all() and toys["poi"].shape == (20,)
    assert toys["summary"]["n"] == 20 and toys["summary"]["failed"] == 0
    # Drawn by default at the free fit of the observed data, as `histfit toys` draws them.
    np.testing.assert_array_equal(toys["gen_params"], histfit.fit(data, model).bestfit)
    again = histfit.fit_toys(model, n_toys=20, seed=3)
    np.testing.assert_array_equal(toys["twice_nll"], again["twice_nll"])
    assert toys["reason"] == [""] * 20
    # A model this small makes its further starts in every fit: no ensemble second starts.
    assert np.isnan(toys["second_start"]).all() and toys["summary"]["second_starts"] == 0
    # Model.toy_data gives the ensemble's draws: fitting toy 7 from the same start gives its fit
    # (to rounding: an ensemble fits in units of the curvature at its generating point, a single
    # fit in the likelihood's own, so the two descents round differently on the way).
    gen = toys["gen_params"]
    one = histfit.fit(model.toy_data(gen, 3, 7), model, init=gen)
    assert abs(one.twice_nll - toys["twice_nll"][7]) <= 1e-9
    # Another point explicitly: the model's initial point.
    init = model.suggested_init()
    at_init = histfit.fit_toys(model, n_toys=5, gen_params=init, seed=3)
    np.testing.assert_array_equal(at_init["gen_params"], init)
    ht = histfit.hypotest_toys(1.0, data, model, n_toys=50, seed=1)
    assert 0.0 <= ht["summary"]["cls_obs"] <= 1.0


def test_large_model_toys_report_the_basin_probe():
    """tHu (184 free parameters) is above the size where a fit makes its own further starts: its
    ensembles fit every toy from a second start (its mirror) too, and report it per toy."""
    ws, model = load("workspace_tHu", "smooth")
    toys = histfit.fit_toys(model, n_toys=12, seed=2)
    assert toys["converged"].all()
    assert toys["summary"]["second_starts"] == 12
    # tHu's toys have one basin near the generating point: the second start changes nothing.
    assert toys["summary"]["lower_basins"] == 0
    assert np.isfinite(toys["second_start"]).all() and (toys["second_start"] <= 1e-6).all()
    # Asked starts: every toy also starts from that many points around the model's initial
    # point, the lowest kept; 0 fits each toy from one start.
    more = histfit.fit_toys(model, n_toys=12, seed=2, starts=2)
    assert more["converged"].all() and np.isfinite(more["second_start"]).all()
    assert (more["twice_nll"] <= toys["twice_nll"] + 1e-9 * np.abs(toys["twice_nll"])).all()
    single = histfit.fit_toys(model, n_toys=12, seed=2, starts=0)
    assert np.isnan(single["second_start"]).all() and single["summary"]["second_starts"] == 0
    cls = histfit.hypotest_toys(1.0, model, n_toys=4, seed=2, starts=1)
    assert cls["starts"] == 1 and all(t["second_start"] is not None for t in cls["toys_sb"])


def test_fit_above_the_dense_limit_gives_the_poi_alone():
    """``max_hessian_parameters`` below the model's size: the POI's uncertainty by conjugate
    gradients (equal to the dense one), the others NaN, no covariance, and a warning saying so."""
    with open(fixture("complex_workspace.json")) as f:
        model = histfit.Workspace(json.load(f)).model()
    dense = histfit.fit(model)
    poi_only = histfit.fit(model, max_hessian_parameters=1)
    poi = model.poi_index
    assert dense.covariance is not None and poi_only.covariance is None
    assert poi_only.correlation is None
    assert np.isfinite(poi_only.uncertainties[poi])
    assert abs(poi_only.uncertainties[poi] - dense.uncertainties[poi]) <= 1e-4 * dense.uncertainties[poi]
    others = [u for i, u in enumerate(poi_only.uncertainties) if i != poi and dense.uncertainties[i] > 0]
    assert others and all(np.isnan(u) for u in others)
    assert any("dense-Hessian limit of 1" in w for w in poi_only.warnings), poi_only.warnings


def test_what_needs_the_covariance_refuses_above_the_dense_limit():
    """Ranking and post-fit yields need the dense covariance: above ``max_hessian_parameters``
    they refuse with one message naming the limit, and run at the default."""
    with open(fixture("complex_workspace.json")) as f:
        model = histfit.Workspace(json.load(f)).model()
    for call in (lambda: histfit.ranking(model, max_hessian_parameters=1),
                 lambda: histfit.yields(model, postfit=True, max_hessian_parameters=1)):
        with pytest.raises(histfit.HistfitError, match="above the limit of 1 parameters"):
            call()
    assert histfit.ranking(model, max_hessian_parameters=4096)["entries"]
    assert histfit.yields(model, postfit=True, max_hessian_parameters=4096)


def test_q0_tests_mu_zero_as_pyhf():
    """q0 is the test of μ = 0: asked at μ = 1 it says so and tests 0, as pyhf does (pyhf's CLs
    here is its p0 at μ = 0)."""
    ws, model = load("simple_workspace", "smooth")
    data = ws.data(model)
    with open(fixture("simple_workspace.json")) as f:
        pws = pyhf.Workspace(json.load(f))
    pmodel = pws.model(modifier_settings={"normsys": {"interpcode": "code4"}, "histosys": {"interpcode": "code4p"}})
    ref = float(pyhf.infer.hypotest(1.0, pws.data(pmodel), pmodel, test_stat="q0"))
    with pytest.warns(UserWarning, match="q0 tests"):
        cls = histfit.hypotest(1.0, data, model, test_stat="q0")
    assert cls == pytest.approx(ref, abs=1e-6)
    assert cls == pytest.approx(histfit.hypotest(0.0, data, model, test_stat="q0"), abs=1e-12)


def test_no_toys_is_an_error():
    """An ensemble of no toys has no CLs: refused, never 0."""
    ws, model = load("simple_workspace", "smooth")
    data = ws.data(model)
    with pytest.raises(ValueError, match="at least one toy"):
        histfit.hypotest_toys(1.0, data, model, n_toys=0)
    with pytest.raises(ValueError, match="at least one toy"):
        histfit.fit_toys(model, n_toys=0)
    with pytest.raises(ValueError, match="at least one value"):
        histfit.profile_scan(model, [], data=data)
