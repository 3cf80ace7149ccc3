"""Bad input raises HistfitError (a ValueError) naming the place and the rule; an unavailable
GPU raises DeviceError (a RuntimeError)."""

import json

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
        histfit.fit(m, [1.0, 2.0])


def test_unknown_interp_and_device():
    ws = histfit.Workspace(spec())
    with pytest.raises(histfit.HistfitError, match="interp"):
        ws.model(interp="linear")
    with pytest.raises(histfit.HistfitError, match="device"):
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
