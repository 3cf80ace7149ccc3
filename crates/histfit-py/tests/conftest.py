import json
import os

import pytest

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "fixtures")
WORKSPACES = ["simple_workspace", "complex_workspace", "two_channel_workspace", "workspace_tHu"]
SETTINGS = ["smooth", "pyhf"]


def fixture(name):
    return os.path.join(FIXTURES, name)


@pytest.fixture(scope="session")
def goldens():
    out = {}
    for name in WORKSPACES:
        with open(fixture(f"{name}.golden.json")) as f:
            out[name] = json.load(f)
    return out


def thu_with_network_signal_spec():
    """workspace_tHu.json with one more sample in every channel, "nn_signal", scaled by the POI,
    the luminosity and one normsys: a tHu-sized model whose signal histogram can be an input
    (also used by scripts/bench_torch_step.py)."""
    with open(fixture("workspace_tHu.json")) as f:
        spec = json.load(f)
    poi = spec["measurements"][0]["config"]["poi"]
    for c in spec["channels"]:
        nb = len(c["samples"][0]["data"])
        c["samples"].append({
            "name": "nn_signal",
            "data": [1.0 + 0.5 * k for k in range(nb)],
            "modifiers": [
                {"type": "normfactor", "name": poi, "data": None},
                {"type": "lumi", "name": "lumi", "data": None},
                {"type": "normsys", "name": "luminosity", "data": {"hi": 1.017, "lo": 0.983}},
            ],
        })
    return spec
