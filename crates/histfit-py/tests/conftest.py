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
