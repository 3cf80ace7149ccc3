"""histfit.plot: every kind drawn (matplotlib) from the documents histfit's commands wrote for tHu
and the 1Lbb signal grid (tests/fixtures/plots, made by scripts/plot_examples.sh), the drawn
values equal to the document's, and each figure saved as PNG."""

import json

import numpy as np
import pytest

pytest.importorskip("matplotlib")  # installed by scripts/test-all

import histfit  # noqa: E402
import histfit.plot as hp  # noqa: E402
from conftest import fixture  # noqa: E402


def doc(name):
    with open(fixture(f"plots/{name}.json")) as f:
        return json.load(f)


def saved(fig, tmp_path, name):
    path = tmp_path / f"{name}.png"
    fig.savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_brazil(tmp_path):
    d = doc("limit_tHu")
    fig = hp.brazil(fixture("plots/limit_tHu.json"))  # a path works as well as a dict
    ax = fig.axes[0]
    evals = sorted(d["evaluations"], key=lambda e: e["mu"])
    observed = next(line for line in ax.lines if line.get_label() == "observed")
    np.testing.assert_array_equal(observed.get_ydata(), [e["cls_obs"] for e in evals])
    expected = next(line for line in ax.lines if line.get_label() == "expected")
    np.testing.assert_array_equal(expected.get_ydata(), [e["cls_exp"][2] for e in evals])
    limit = next(line for line in ax.lines if line.get_label().startswith("observed limit"))
    assert limit.get_xdata()[0] == d["obs"]
    saved(fig, tmp_path, "brazil")


def test_scan(tmp_path):
    d = doc("scan_tHu")
    fig = hp.scan(d)
    line = fig.axes[0].lines[0]
    np.testing.assert_array_equal(line.get_xdata(), [p["mu"] for p in d["points"]])
    np.testing.assert_array_equal(line.get_ydata(), [p["delta_twice_nll"] for p in d["points"]])
    saved(fig, tmp_path, "scan")


def test_pulls_and_correlation(tmp_path):
    d = doc("fit_tHu")
    fig = hp.pulls(d, top=10)
    constrained = sorted([p for p in d["parameters"] if "pull" in p], key=lambda p: -abs(p["pull"]))[:10]
    points = fig.axes[0].containers[0].lines[0]
    np.testing.assert_array_equal(points.get_xdata(), [p["pull"] for p in constrained])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [p["name"] for p in constrained]
    saved(fig, tmp_path, "pulls")
    fig = hp.correlation(d, top=8)
    image = fig.axes[0].images[0].get_array()
    names = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    index = {p["name"]: i for i, p in enumerate(d["parameters"])}
    expected = np.array([[d["correlation"][index[a]][index[b]] for b in names] for a in names])
    np.testing.assert_array_equal(image, expected)
    assert d["poi"] in names
    saved(fig, tmp_path, "correlation")


def test_ranking(tmp_path):
    d = doc("ranking_tHu")
    fig = hp.ranking(d, top=12)
    bars = fig.axes[0].containers
    rows = d["entries"][:12]
    for container, key in zip(bars, ["impact_prefit_up", "impact_prefit_down", "impact_postfit_up",
                                     "impact_postfit_down"]):
        np.testing.assert_allclose([b.get_width() for b in container], [r[key] for r in rows], rtol=0, atol=0)
    saved(fig, tmp_path, "ranking")


def test_yields(tmp_path):
    d = doc("yields_postfit_tHu")
    fig = hp.yields(d)
    first = d["channels"][0]
    ax = fig.axes[0]
    stacked = np.zeros(len(first["data"]))
    for container, sample in zip(ax.containers, first["samples"]):
        np.testing.assert_allclose([b.get_y() for b in container], stacked, rtol=0, atol=1e-12)
        stacked += sample["yields"]
        np.testing.assert_allclose([b.get_y() + b.get_height() for b in container], stacked, rtol=1e-12)
    saved(fig, tmp_path, "yields")
    # The list histfit.yields returns draws the same.
    ws = histfit.Workspace(fixture("simple_workspace.json"))
    saved(hp.yields(histfit.yields(ws.model())), tmp_path, "yields_python")


def test_contour(tmp_path):
    fig = hp.contour(doc("grid_1Lbb"))
    assert fig.axes[0].get_xlabel() == "m1"
    saved(fig, tmp_path, "contour")


def test_a_document_of_the_wrong_kind_is_named():
    with pytest.raises(histfit.HistfitError, match="histfit limit"):
        hp.brazil(doc("scan_tHu"))
