"""Workspace tools against pyhf's own: the digest (also against the digests published patchsets
record), sort, prune (channels, samples, modifiers, modifier types, measurements) and rename, on
every shipped workspace and the public likelihoods."""

import glob
import gzip
import json
import os

import pyhf
import pytest

import histfit
from conftest import fixture

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
SHIPPED = ["simple_workspace", "two_channel_workspace", "complex_workspace", "workspace_tHu"]


def shipped(name):
    with open(fixture(f"{name}.json")) as f:
        return json.load(f)


def public():
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "public", "*.json.gz"))):
        with gzip.open(path, "rt") as f:
            yield os.path.basename(path), json.load(f)


def test_digest_matches_pyhf_everywhere():
    specs = [(n, shipped(n)) for n in SHIPPED] + list(public())
    assert len(specs) > 10
    for name, spec in specs:
        ws = spec.get("workspace", spec) if "workspace" in spec and "channels" not in spec else spec
        assert histfit.workspace_digest(ws) == pyhf.utils.digest(pyhf.Workspace(ws)), name


def test_sort_matches_pyhf():
    for name in SHIPPED:
        spec = shipped(name)
        assert histfit.sort_workspace(spec) == dict(pyhf.Workspace.sorted(pyhf.Workspace(spec))), name


def test_prune_and_rename_match_pyhf():
    spec = shipped("complex_workspace")
    ws = pyhf.Workspace(spec)
    chan = ws.channels[0]
    # A sample whose removal leaves every channel a sample (an empty channel is no workspace).
    sample = next(s for s in ws.samples if all(any(x["name"] != s for x in c["samples"]) for c in spec["channels"]))
    mods = [m for m, _ in ws.modifiers]
    types = sorted({t for _, t in ws.modifiers})
    cases = [
        dict(channels=[chan]),
        dict(samples=[sample]),
        dict(modifiers=[mods[-1]]),
        dict(modifier_types=[types[0]]),
        dict(modifiers=[mods[0]], modifier_types=[types[-1]]),
    ]
    for kw in cases:
        ours = histfit.prune_workspace(spec, **kw)
        theirs = dict(ws.prune(**kw))
        assert ours == theirs, kw
    renames = [
        dict(channels={chan: "renamed_channel"}),
        dict(samples={sample: "renamed_sample"}),
        # (pyhf's schema refuses a lumi modifier under another name: renamed are the others.)
        dict(modifiers={m: m + "_x" for m, t in ws.modifiers if t != "lumi"}),
        dict(measurements={ws.measurement_names[0]: "renamed_measurement"}),
    ]
    for kw in renames:
        assert histfit.rename_workspace(spec, **kw) == dict(ws.rename(**kw)), kw
    with pytest.raises(histfit.HistfitError, match='no channel "nope"'):
        histfit.prune_workspace(spec, channels=["nope"])


def test_pruned_measurements_and_a_patchset_for_another_workspace():
    spec = shipped("simple_workspace")
    two = dict(spec, measurements=spec["measurements"] + [dict(spec["measurements"][0], name="other")])
    assert histfit.prune_workspace(two, measurements=["other"]) == dict(pyhf.Workspace(two).prune(measurements=["other"]))
    with pytest.raises(histfit.HistfitError, match="no measurement would remain"):
        histfit.prune_workspace(spec, measurements=[spec["measurements"][0]["name"]])
    with open(fixture("simple_patchset.json")) as f:
        ps = json.load(f)
    ps["metadata"]["digests"] = {"sha256": "0" * 64}
    with pytest.raises(histfit.HistfitError, match="force=True"):
        histfit.Workspace(spec, patchset=ps, patch="signal_100")
    assert histfit.Workspace(spec, patchset=ps, patch="signal_100", force=True).model()
    ps["metadata"]["digests"] = {"sha256": histfit.workspace_digest(spec)}
    assert histfit.Workspace(spec, patchset=ps, patch="signal_100").model()


def test_combine_matches_pyhf():
    import copy

    a = shipped("simple_workspace")
    other = pyhf.Workspace(a).rename(channels={"singlechannel": "other"}, measurements={
        a["measurements"][0]["name"]: "other_measurement"})
    b = dict(other)
    ref = lambda l, r, **kw: dict(pyhf.Workspace.combine(pyhf.Workspace(l), pyhf.Workspace(r), **kw))  # noqa: E731
    # Disjoint names: the none join.
    assert histfit.combine_workspaces(a, b) == ref(a, b)
    with pytest.raises(histfit.HistfitError, match="in both workspaces"):
        histfit.combine_workspaces(a, a)
    # Identical items kept once, measurements merged.
    assert histfit.combine_workspaces(a, a, join="outer") == ref(a, a, join="outer")
    # A changed copy: the outer join refuses it, the one-sided joins keep their side.
    c = copy.deepcopy(a)
    c["channels"][0]["samples"][0]["data"] = [x * 2 for x in c["channels"][0]["samples"][0]["data"]]
    with pytest.raises(histfit.HistfitError, match="different contents"):
        histfit.combine_workspaces(a, c, join="outer")
    for join in ["left outer", "right outer"]:
        assert histfit.combine_workspaces(a, c, join=join) == ref(a, c, join=join), join
    # Channels of one name merged sample by sample.
    d = copy.deepcopy(a)
    d["channels"][0]["samples"] = [dict(d["channels"][0]["samples"][0], name="extra")]
    assert histfit.combine_workspaces(a, d, join="outer", merge_channels=True) == ref(
        a, d, join="outer", merge_channels=True)
