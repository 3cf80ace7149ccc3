"""histfit.xml2json against pyhf 0.7.6's xml2json on pyhf's validation configurations (the
references of tests/fixtures/xml/goldens/xml_imports.json, made by scripts/make_xml_goldens.py),
its warnings, and its errors."""

import json
import warnings

import pytest

import histfit
from conftest import fixture

with open(fixture("xml/goldens/xml_imports.json")) as f:
    GOLDENS = json.load(f)
IMPORTED = sorted(k for k, v in GOLDENS.items() if "workspace" in v)
REFUSED = sorted(k for k, v in GOLDENS.items() if "error" in v)


@pytest.mark.parametrize("config", IMPORTED)
def test_same_workspace_as_pyhf(config):
    case = GOLDENS[config]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = histfit.xml2json(fixture(f"xml/{config}"), basedir=fixture(f"xml/{case['basedir']}"))
    assert spec == case["workspace"]
    model = histfit.Workspace(spec).model(interp="pyhf", poi=case["poi"] or "none")
    assert sorted(model.par_names) == sorted(case["parameters"])


@pytest.mark.parametrize("config", REFUSED)
def test_refused_as_pyhf_refuses(config):
    with pytest.raises(histfit.HistfitError, match=r"\.(xml|root)"):
        histfit.xml2json(fixture(f"xml/{config}"), basedir=fixture(f"xml/{GOLDENS[config]['basedir']}"))


def test_ignored_settings_are_warned_about():
    with pytest.warns(UserWarning, match="ConstraintTerm Type=\"LogNormal\""):
        histfit.xml2json(fixture("xml/xmlimport_input/config/example.xml"),
                         basedir=fixture("xml/xmlimport_input"))


def test_mount_rewrites_paths(tmp_path):
    # The configuration names ./data/…; mount the real data directory under another name.
    case = GOLDENS["multibin_histfactory/config/example.xml"]
    base = fixture("xml/multibin_histfactory")
    channel = open(f"{base}/config/example_channel.xml").read().replace("./data/data.root", "/mnt/in/data.root")
    top = open(f"{base}/config/example.xml").read().replace("./config/example_channel.xml", str(tmp_path / "ch.xml"))
    (tmp_path / "ch.xml").write_text(channel)
    (tmp_path / "top.xml").write_text(top)
    spec = histfit.xml2json(tmp_path / "top.xml", basedir=tmp_path, mounts=[(f"{base}/data", "/mnt/in")])
    assert spec == case["workspace"]
