"""Bad input raises HistfitError (a ValueError) naming the place and the rule; an unavailable
GPU raises DeviceError (a RuntimeError)."""

import json
import sys

import numpy as np
import pytest

import histfit
from conftest import fixture


def spec():
    with open(fixture("complex_workspace.json")) as f:
        return json.load(f)


def test_malformed_json():
    with pytest.raises(histfit.HistfitError, match="JSON"):
        histfit.Workspace('{"channels": [')


def test_missing_file():
    with pytest.raises(histfit.HistfitError, match="cannot read"):
        histfit.Workspace("/nonexistent/ws.json")


def test_bin_count_mismatch_names_the_place():
    s = spec()
    s["channels"][0]["samples"][0]["data"].append(1.0)
    with pytest.raises(histfit.HistfitError, match=r"channels\[0\]"):
        histfit.Workspace(s).model()


def test_unknown_modifier_type():
    s = spec()
    s["channels"][0]["samples"][0]["modifiers"][0]["type"] = "nonsense"
    with pytest.raises(histfit.HistfitError, match="nonsense"):
        histfit.Workspace(s)


def test_missing_poi():
    s = spec()
    s["measurements"][0]["config"]["poi"] = "not_a_parameter"
    with pytest.raises(histfit.HistfitError, match="not_a_parameter"):
        histfit.Workspace(s).model()


def test_wrong_parameter_count():
    ws = histfit.Workspace(spec())
    m = ws.model()
    with pytest.raises(histfit.HistfitError, match="parameters"):
        m.twice_nll(np.ones(2), ws.data(m))


def test_wrong_data_length():
    ws = histfit.Workspace(spec())
    m = ws.model()
    with pytest.raises(histfit.HistfitError):
        histfit.fit([1.0, 2.0], m)


def test_unknown_interp_and_device():
    ws = histfit.Workspace(spec())
    with pytest.raises(histfit.HistfitError, match="interp"):
        ws.model(interp="linear")
    with pytest.raises(histfit.HistfitError, match="unknown device"):
        histfit.fit(ws.model(), device="tpu")


@pytest.mark.skipif(sys.platform == "darwin", reason="Metal exists here")
def test_a_backend_without_an_adapter_is_a_device_error():
    ws = histfit.Workspace(spec())
    with pytest.raises(histfit.DeviceError, match="no wgpu adapter.*Metal"):
        histfit.fit(ws.model(), device="metal")


def test_gpu_absent_is_a_device_error():
    if histfit.devices()["cuda"]:
        pytest.skip("a CUDA device is present")
    ws = histfit.Workspace(spec())
    with pytest.raises(histfit.DeviceError, match="CUDA is not available"):
        histfit.fit(ws.model(), device="cuda")


def test_errors_are_standard_exception_types():
    assert issubclass(histfit.HistfitError, ValueError)
    assert issubclass(histfit.DeviceError, RuntimeError)


def test_the_package_exports_its_api_and_version():
    import histfit

    assert isinstance(histfit.__version__, str) and histfit.__version__.count(".") == 2
    for leaked in ("np", "os", "json", "Dict", "warnings", "dataclass"):
        assert not hasattr(histfit, leaked), leaked
    assert set(histfit.__all__) <= set(dir(histfit))


def test_histfit_torch_without_torch_says_what_to_install():
    import subprocess
    import sys

    code = "import sys; sys.modules['torch'] = None; import histfit.torch"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode != 0
    assert "pip install 'histfit[torch]'" in r.stderr, r.stderr


def test_fixing_outside_the_bounds_is_refused_as_on_the_cli():
    ws = histfit.Workspace(fixture("simple_workspace.json"))
    model = ws.model()
    with pytest.raises(histfit.HistfitError, match=r'cannot fix "mu" at 50: outside its bounds \[0, 10\]'):
        histfit.fit(model, fixed={"mu": 50})


def test_poi_choice_and_a_model_without_one():
    import json

    with open(fixture("simple_workspace.json")) as f:
        spec = json.load(f)
    m = histfit.Workspace(spec).model(poi="uncorr_bkguncrt[0]")
    assert m.poi_name == "uncorr_bkguncrt[0]"
    # Background only: the signal (and the POI's normfactor) gone, the measurement unchanged.
    spec["channels"][0]["samples"].pop(0)
    with pytest.raises(histfit.HistfitError, match="--poi none"):
        histfit.Workspace(spec).model()
    m = histfit.Workspace(spec).model(poi="none")
    assert m.poi_index is None and m.poi_name is None
    assert histfit.fit(m).converged
    with pytest.raises(histfit.HistfitError, match="parameter of interest"):
        histfit.hypotest(1.0, m)


def test_fit_options_on_every_inference_function():
    m = histfit.Workspace(fixture("simple_workspace.json")).model()
    plain = histfit.significance(m)
    fixed = histfit.significance(m, fixed={"uncorr_bkguncrt[0]": 1.2})
    assert plain["q0_obs"] != fixed["q0_obs"]
    s = histfit.profile_scan(m, [-0.5, 0.0, 0.5], bounds={"mu": (-1.0, 5.0)})
    assert all(p["converged"] for p in s["points"])
    h = histfit.hypotest(1.0, m, init={"mu": 0.5}, return_expected=True)
    assert np.isfinite(h[0])
    lim = histfit.upper_limit(m, bounds={"mu": (0.0, 8.0)})
    assert lim is not None
    with pytest.raises(histfit.HistfitError, match="not an interval"):
        histfit.ranking(m, bounds={"mu": (3.0, 1.0)})
    with pytest.raises(histfit.HistfitError, match="outside its bounds"):
        histfit.hypotest(1.0, m, fixed={"uncorr_bkguncrt[0]": 20.0})


def test_asimov_and_bounds_everywhere():
    m = histfit.Workspace(fixture("simple_workspace.json")).model()
    # The Asimov dataset of the pre-fit prediction: the fit returns the prediction's μ.
    assert histfit.fit(m, asimov=True).bestfit[0] == pytest.approx(1.0, abs=1e-5)
    assert histfit.fit(m, asimov=True, init={"mu": 2.0}).bestfit[0] == pytest.approx(2.0, abs=1e-5)
    assert histfit.fit(m, bounds={"mu": (0.0, 0.3)}).bestfit[0] == pytest.approx(0.3, abs=1e-9)
    s = histfit.significance(m, asimov=True)
    assert s["mu_hat"] == pytest.approx(1.0, abs=1e-5)
    g = histfit.goodness_of_fit(m, asimov=True)
    assert g["statistic"] == pytest.approx(0.0, abs=1e-8)
    signal = lambda t: next(x for x in t[0]["samples"] if x["name"] == "signal")["yields"][0]  # noqa: E731
    assert signal(histfit.yields(m, init={"mu": 2.0})) == pytest.approx(2 * signal(histfit.yields(m)))
    assert "mu" in histfit.minos(m, pars=["mu"], bounds={"mu": (0.0, 5.0)})
    with pytest.raises(histfit.HistfitError, match="give one"):
        histfit.hypotest(1.0, m.expected_data(m.suggested_init()), m, asimov=True)
