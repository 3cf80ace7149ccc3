"""Event-level likelihoods from Python: ``histfit.open`` on HS3 documents (events inline, from
Parquet or a ROOT tree beside the document, or NumPy arrays given at open), −2 ln L and its
gradient against an independent NumPy/SciPy computation, and the inference functions on them."""

import json
import math

import numpy as np
import pytest
from scipy.special import erf

import histfit
from conftest import fixture

DOC = fixture("events/gauss_exp.json")


def inline():
    with open(fixture("events/gauss_exp.inline.json")) as f:
        return json.load(f)


def numpy_twice_nll(p, x, w=None):
    """The extended Gaussian + exponential on [60, 120] (parameters nsig, nbkg, mean, sigma,
    lambda; HS3's exponential e^(-c x) with c = -lambda), written out here."""
    nsig, nbkg, mean, sigma, lam = p
    lo, hi = 60.0, 120.0
    gnorm = sigma * math.sqrt(math.pi / 2) * (erf((hi - mean) / (sigma * math.sqrt(2))) - erf((lo - mean) / (sigma * math.sqrt(2))))
    enorm = (math.exp(lam * hi) - math.exp(lam * lo)) / lam
    f = nsig * np.exp(-0.5 * ((x - mean) / sigma) ** 2) / gnorm + nbkg * np.exp(lam * x) / enorm
    w = np.ones_like(x) if w is None else w
    return 2 * (nsig + nbkg - np.sum(w * np.log(f)))


def test_open_reads_every_format_the_same():
    m = histfit.open(DOC)  # events from the Parquet file beside the document
    assert isinstance(m, histfit.EventModel)
    assert m.par_names == ["nsig", "nbkg", "mean", "sigma", "lambda"]
    x = m.events["obsData"]["columns"]["x"]
    assert len(x) == 3000
    assert histfit.open(inline()).twice_nll(m.suggested_init()) == m.twice_nll(m.suggested_init())
    given = histfit.open(inline(), events={"x": x})
    assert given.twice_nll(m.suggested_init()) == m.twice_nll(m.suggested_init())
    # pyhf workspaces open as before
    assert isinstance(histfit.open(fixture("simple_workspace.json")), histfit.Model)


def test_nll_and_gradient_against_numpy():
    m = histfit.open(DOC)
    x = m.events["obsData"]["columns"]["x"]
    for p in [m.suggested_init(), np.array([1000.0, 1900.0, 90.3, 2.9, -0.025])]:
        v, g = m.twice_nll_and_grad(p)
        assert v == pytest.approx(numpy_twice_nll(p, x), rel=1e-10)
        for i in range(5):
            h = 1e-5 * max(1.0, abs(p[i]))
            up, dn = p.copy(), p.copy()
            up[i] += h
            dn[i] -= h
            fd = (numpy_twice_nll(up, x) - numpy_twice_nll(dn, x)) / (2 * h)
            assert g[i] == pytest.approx(fd, rel=1e-6, abs=1e-6), i


def test_weighted_numpy_events():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(91, 2.5, 400), 60 + rng.exponential(30, 3000)])
    x = x[(x >= 60) & (x <= 120)]
    w = rng.uniform(0.5, 1.5, len(x))
    m = histfit.open(inline(), events={"obsData": {"x": x}}, weights={"obsData": w})
    p = m.suggested_init()
    # the weighted extended likelihood: nsig + nbkg - sum w ln f
    assert m.twice_nll(p) == pytest.approx(numpy_twice_nll(p, x, w), rel=1e-10)
    # the three uncertainty estimates of a weighted fit: the naive ones are the fit's, the
    # sandwich against NumPy's C D C with D = sum w^2 s s^T (each event's score s = d ln(nu f)
    # by central differences here) and C the fit's covariance
    r = histfit.fit(m)
    assert r.converged
    u = r.weighted_uncertainties
    assert set(u) == {"naive", "sumw2", "sandwich", "sandwich_covariance"}
    np.testing.assert_allclose(u["naive"], r.uncertainties, rtol=1e-9)

    def ln_density(q):
        nsig, nbkg, mean, sigma, lam = q
        lo, hi = 60.0, 120.0
        gnorm = sigma * math.sqrt(math.pi / 2) * (erf((hi - mean) / (sigma * math.sqrt(2))) - erf((lo - mean) / (sigma * math.sqrt(2))))
        enorm = (math.exp(lam * hi) - math.exp(lam * lo)) / lam
        return np.log(nsig * np.exp(-0.5 * ((x - mean) / sigma) ** 2) / gnorm + nbkg * np.exp(lam * x) / enorm)

    q = r.bestfit
    scores = []
    for i in range(5):
        h = 1e-6 * max(1.0, abs(q[i]))
        up, dn = q.copy(), q.copy()
        up[i] += h
        dn[i] -= h
        scores.append((ln_density(up) - ln_density(dn)) / (2 * h))
    s = np.array(scores)
    d = (s * w**2) @ s.T
    cov = r.covariance @ d @ r.covariance
    np.testing.assert_allclose(u["sandwich_covariance"], cov, rtol=1e-5, atol=1e-9 * np.abs(cov).max())
    np.testing.assert_allclose(u["sandwich"], np.sqrt(np.diag(cov)), rtol=1e-5)
    # the result document carries them as `histfit fit --json` does
    doc = r.to_document()["weighted_uncertainties"]
    assert doc["sandwich"]["mean"] == u["sandwich"][m.par_names.index("mean")]
    # unweighted events give none
    assert histfit.fit(histfit.open(DOC)).weighted_uncertainties is None


def test_inference_on_an_event_model():
    m = histfit.open(DOC, poi="nsig")
    r = histfit.fit(m)
    assert r.converged and r.starts == 1
    # the fit's minimum against an independent minimiser of the NumPy NLL
    from scipy.optimize import minimize
    x = m.events["obsData"]["columns"]["x"]
    ref = minimize(lambda p: numpy_twice_nll(p, x), r.bestfit, method="Nelder-Mead",
                   options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 20000})
    assert r.twice_nll <= ref.fun + 1e-6
    cls = histfit.hypotest(r.bestfit[0] + 3 * r.uncertainties[0], m)
    assert 0.0 < cls < 0.2
    scan = histfit.profile_scan(m, [r.bestfit[0], r.bestfit[0] + r.uncertainties[0]])
    two = [pt["delta_twice_nll"] for pt in scan["points"]]
    assert two[0] == pytest.approx(0.0, abs=1e-6) and two[1] == pytest.approx(1.0, abs=0.05)
    toys = histfit.fit_toys(m, n_toys=20, seed=1)
    assert toys["summary"]["converged"] == 20


def test_bad_event_input_is_named():
    with pytest.raises(histfit.HistfitError, match=r"events\[\"obsData\"\]\[\"x\"\].*outside its domain"):
        histfit.open(inline(), events={"x": np.array([50.0, 70.0])})
    with pytest.raises(histfit.HistfitError, match=r"not an axis of the dataset"):
        histfit.open(inline(), events={"y": np.array([70.0])})
    with pytest.raises(histfit.HistfitError, match=r"weights must be finite and not negative"):
        histfit.open(inline(), events={"x": np.array([70.0, 80.0])}, weights=np.array([1.0, -1.0]))
    with pytest.raises(histfit.HistfitError, match=r"events\[\"nope\"\].*no dataset of that name"):
        histfit.open(inline(), events={"nope": {"x": np.array([70.0])}})
    with pytest.raises(histfit.HistfitError, match="poi \"nope\""):
        histfit.open(DOC, poi="nope")
    m = histfit.open(DOC)
    with pytest.raises(histfit.HistfitError, match="fits the events it was opened with"):
        histfit.fit(np.array([1.0]), m)
    with pytest.raises(histfit.HistfitError, match="needs a binned"):
        histfit.yields(m)
    with pytest.raises(histfit.HistfitError, match="model.config"):
        m.config
    with pytest.raises(histfit.HistfitError, match="needs a binned"):
        histfit.goodness_of_fit(m)
    doc = inline()
    doc["data"].append(dict(doc["data"][0], name="other"))
    doc["likelihoods"] = [{"name": "L", "distributions": ["model"], "data": ["obsData"]}]
    with pytest.raises(histfit.HistfitError, match=r"events\[\"other\"\].*does not fit this dataset"):
        histfit.open(doc, events={"other": {"x": np.array([70.0])}})


def test_every_inference_function_and_a_tree_source():
    """minos, significance, upper_limit, ranking and hypotest_toys on an event-level model; and
    a document whose events come from a ROOT tree (a selection over branches) opened the same way."""
    m = histfit.open(DOC, poi="nsig")
    r = histfit.fit(m)
    assert r.converged
    mi = histfit.minos(m, pars=["nsig"])["nsig"]
    assert mi["lower_error"] < 0 < mi["upper_error"]
    assert mi["upper_error"] == pytest.approx(r.uncertainties[0], rel=0.2)
    assert histfit.significance(m)["z_obs"] > 5
    obs, exp = histfit.upper_limit(m)
    assert obs > r.bestfit[0]
    rank = histfit.ranking(m)
    # (No parameter of this model is constrained: nothing to rank, and no fit failed.)
    assert rank["entries"] == [] and rank["failed_fits"] == 0
    toys = histfit.hypotest_toys(r.bestfit[0], m, n_toys=20)
    summary = toys["summary"]
    assert summary["failed_b"] == summary["failed_sb"] == 0 and 0.2 < summary["cls_obs"] <= 1.0
    doc = inline()
    del doc["data"][0]["entries"]
    doc["data"][0]["histfit_source"] = {"format": "root", "file": fixture("events/tree_zstd.root"),
                                        "tree": "events", "columns": {"x": "mass"}, "selection": "pt > 10"}
    t = histfit.open(doc)
    assert any("not selected" in n for n in t.notes)
    x = t.events["obsData"]["columns"]["x"]
    assert 300 < len(x) < 1000 and np.all((x >= 60) & (x <= 120))
    assert histfit.fit(t).twice_nll == pytest.approx(t.twice_nll(histfit.fit(t).bestfit))


def test_distributions_and_their_plot():
    """The numbers the plot of an event-level fit draws, and the matplotlib figure of them."""
    m = histfit.open(DOC)
    d = histfit.distributions(m, bins=30)
    c = d["channels"][0]
    assert sum(c["counts"]) == 3000
    r = histfit.fit(m)
    assert sum(c["expected"]) == pytest.approx(r.bestfit[0] + r.bestfit[1], rel=1e-9)
    comps = np.array([x["expected"] for x in c["components"]])
    assert np.allclose(comps.sum(axis=0), c["expected"], rtol=1e-12)
    pre = histfit.distributions(m, bins=30, prefit=True)["channels"][0]
    assert sum(pre["expected"]) == pytest.approx(900 + 2100, rel=1e-9)
    fig = histfit.plot.distributions(d)
    assert len(fig.axes) >= 2
    with pytest.raises(histfit.HistfitError, match="histfit.yields"):
        histfit.distributions(histfit.open(fixture("simple_workspace.json")))


def test_asimov_of_an_event_level_model():
    """asimov=True fits the Asimov dataset at the pre-fit parameters: the fit returns them, the
    hypotest's expected and observed CLs agree, and the observed events are left as they were."""
    m = histfit.open(DOC)
    init = m.suggested_init()
    r = histfit.fit(m, asimov=True)
    np.testing.assert_allclose(r.bestfit, init, rtol=1e-4, atol=1e-6)
    moved = dict(zip(m.par_names, init))
    moved["mean"] += 0.5
    r2 = histfit.fit(m, asimov=True, init=moved)
    assert r2.bestfit[m.par_names.index("mean")] == pytest.approx(moved["mean"], abs=1e-4)
    # On the background-only Asimov dataset the observed CLs is the median expected one.
    b = histfit.open(DOC, poi="nsig")
    obs, exp = histfit.hypotest(60.0, b, asimov=True, init={"nsig": 0.0}, return_expected=True)
    assert obs == pytest.approx(exp, rel=1e-3)
    assert 0.0 < obs < 1.0
    assert histfit.fit(m).twice_nll != pytest.approx(r.twice_nll)


def fits_as_roofit(m, ref):
    """The fit of `m`: converged, its parameters within 0.05 σ of RooFit's and Hesse errors
    within 2 % (`ref`: a `*.roofit.json` of scripts/make_hs3_histfactory.py)."""
    r = histfit.fit(m)
    assert r.converged
    for name, p in ref["fit"]["parameters"].items():
        k = m.par_names.index(name)
        assert abs(r.bestfit[k] - p["value"]) <= 0.05 * p["error"], name
        assert r.uncertainties[k] == pytest.approx(p["error"], rel=0.02), name
    return r


def test_root_exported_histfactory_workspace_opens_as_a_binned_model():
    """ROOT's HS3 export of a HistFactory workspace is a binned Model under ROOT's parameter
    names, fitted as RooFit fits it (scripts/make_hs3_histfactory.py)."""
    path = fixture("hs3/histfactory/shapefactor.json")
    with open(fixture("hs3/histfactory/shapefactor.roofit.json")) as f:
        ref = json.load(f)
    m = histfit.open(path)
    assert isinstance(m, histfit.Model)
    assert "gamma_stat_signalRegion_bin_0" in m.par_names
    assert m.par_names[m.poi_index] == "SigXsecOverSM"
    fits_as_roofit(m, ref)
    asimov = histfit.open(path, analysis="simPdf_asimovData")
    assert not np.array_equal(asimov._native.observed(), m._native.observed())
    with pytest.raises(histfit.HistfitError, match="binned"):
        histfit.open(path, events={"x": np.zeros(3)})


def test_binned_and_event_level_channels_in_one_likelihood():
    """ROOT's export of a RooSimultaneous of HistFactory channels and an extended Gaussian +
    exponential channel opens as one likelihood, fitted as RooFit fits it; its plot draws the
    event-level channel at the whole likelihood's fit."""
    path = fixture("hs3/histfactory/mixed.json")
    with open(fixture("hs3/histfactory/mixed.roofit.json")) as f:
        ref = json.load(f)
    with pytest.raises(histfit.HistfitError, match="--analysis"):
        histfit.open(path)
    m = histfit.open(path, analysis="combPdf_obsData_all")
    assert isinstance(m, histfit.EventModel)
    assert m.par_names[m.poi_index] == "SigXsecOverSM"
    assert {"Lumi", "alpha_coupled_overall", "nbkg0", "width"} <= set(m.par_names)
    r = fits_as_roofit(m, ref)
    d = histfit.distributions(m, bins=10)
    assert [c["name"] for c in d["channels"]] == ["model_events"]
    y = histfit.yields(m, postfit=True)
    assert [c["name"] for c in y] == ["channel1", "channel2"]
    assert d["parameters"] == pytest.approx(list(r.bestfit), rel=1e-4, abs=1e-6)


def test_discovery_significance_is_expected_at_the_documents_signal():
    """An event-level POI is a yield: the expected discovery significance is that of the signal the
    document describes (the POI's value in it), not of one event (pyhf's μ = 1), and an asked
    value replaces it. Checked against the closed form: a signal uniform on [0, 0.5] over a
    background uniform on [0, 1] is a two-bin counting experiment, whose Asimov q0 at (s, b) is
    2 [n_A ln(n_A / m) + n_B ln(n_B / m)], n_A = s + b/2, n_B = b/2, m = (n_A + n_B) / 2."""
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(0, 1, 400), rng.uniform(0, 0.5, 25)])
    doc = {
        "metadata": {"hs3_version": "0.2"},
        "distributions": [
            {"name": "model", "type": "mixture_dist", "summands": ["sig", "bkg"],
             "coefficients": ["nsig", "nbkg"], "extended": True},
            {"name": "sig", "type": "histogram_dist",
             "data": {"axes": [{"name": "x", "edges": [0.0, 0.5, 1.0]}], "contents": [1.0, 0.0]}},
            {"name": "bkg", "type": "uniform_dist", "x": ["x"]},
        ],
        "data": [{"name": "obsData", "type": "unbinned", "axes": [{"name": "x", "min": 0.0, "max": 1.0}],
                  "entries": [[v] for v in x]}],
        "parameter_points": [{"name": "default_values", "parameters": [
            {"name": "nsig", "value": 40.0, "min": 0.0, "max": 1000.0},
            {"name": "nbkg", "value": 400.0, "min": 0.0, "max": 5000.0}]}],
    }
    m = histfit.open(doc, poi="nsig")

    def closed_form(s):
        b = histfit.fit(m, fixed={"nsig": s}).bestfit[1]
        n_a, n_b = s + b / 2, b / 2
        mid = (n_a + n_b) / 2
        return 2 * (n_a * math.log(n_a / mid) + n_b * math.log(n_b / mid))

    default = histfit.significance(m)
    assert default["expected_at"] == 40.0
    assert default["q0_exp"] == pytest.approx(closed_form(40.0), rel=1e-6)
    asked = histfit.significance(m, expected_at=15.0)
    assert asked["expected_at"] == 15.0
    assert asked["q0_exp"] == pytest.approx(closed_form(15.0), rel=1e-6)
    assert asked["q0_obs"] == default["q0_obs"]
    with pytest.raises(ValueError, match="expected discovery figures.*inside the POI's bounds"):
        histfit.significance(m, expected_at=-1.0)
    # A document whose POI value is 0 names no signal: pyhf's 1 (the CLI says so on stderr).
    doc["parameter_points"][0]["parameters"][0]["value"] = 0.0
    assert histfit.significance(histfit.open(doc, poi="nsig"))["expected_at"] == 1.0
    # The asymptotic q0 hypotest takes the same value.
    cls, exp = histfit.hypotest(0.0, m, test_stat="q0", expected_at=15.0, return_expected=True)
    assert exp == pytest.approx(asked["p0_exp"], rel=1e-9)
    # The toys' discovery test draws its second ensemble at the same signal.
    toys = histfit.hypotest_toys(0.0, m, n_toys=40, test_stat="q0")
    assert toys["params_b"][0] == pytest.approx(40.0) and toys["params_sb"][0] == 0.0
    assert toys["summary"]["cls_exp"][2] < 0.1
