"""histfit.plot: every kind drawn (matplotlib) from the documents histfit's commands wrote for tHu
and the 1Lbb signal grid (tests/fixtures/plots, made by scripts/plot_examples.sh): the figure's
values equal the document's, the matplotlib artists carry them, and each figure saves as PNG."""

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


def element(data, panel, label):
    return next(e for e in data["panels"][panel]["elements"] if e.get("label") == label)


def saved(fig, tmp_path, name):
    path = tmp_path / f"{name}.png"
    fig.savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_brazil(tmp_path):
    d = doc("limit_tHu")
    data = hp.figure_data("brazil", fixture("plots/limit_tHu.json"))  # a path works as a dict does
    evals = sorted(d["evaluations"], key=lambda e: e["mu"])
    assert element(data, 0, "observed")["ys"] == [e["cls_obs"] for e in evals]
    assert element(data, 0, "expected")["ys"] == [e["cls_exp"][2] for e in evals]
    assert element(data, 0, "expected ±2σ")["hi"] == [e["cls_exp"][4] for e in evals]
    fig = hp.brazil(d)
    line = next(li for li in fig.axes[0].lines if li.get_label() == "observed")
    np.testing.assert_array_equal(line.get_ydata(), [e["cls_obs"] for e in evals])
    saved(fig, tmp_path, "brazil")


def test_scan(tmp_path):
    d = doc("scan_tHu")
    fig = hp.scan(d)
    line = next(li for li in fig.axes[0].lines if li.get_label() == "profile likelihood")
    np.testing.assert_array_equal(line.get_xdata(), [p["mu"] for p in d["points"]])
    np.testing.assert_array_equal(line.get_ydata(), [p["delta_twice_nll"] for p in d["points"]])
    saved(fig, tmp_path, "scan")


def test_pulls_and_correlation(tmp_path):
    d = doc("fit_tHu")
    # Held parameters (a fixed lumi) have no pull to draw.
    constrained = sorted([p for p in d["parameters"] if "pull" in p and not p["fixed"]],
                         key=lambda p: -abs(p["pull"]))[:10]
    data = hp.figure_data("pulls", d, top=10)
    assert element(data, 0, "pull ± constraint")["xs"] == [p["pull"] for p in constrained]
    fig = hp.pulls(d, top=10)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [p["name"] for p in constrained]
    saved(fig, tmp_path, "pulls")
    data = hp.figure_data("correlation", d, top=8)
    names = [t[1] for t in data["panels"][0]["x"]["ticks"]]
    index = {p["name"]: i for i, p in enumerate(d["parameters"])}
    cells = data["panels"][0]["elements"][0]["values"]
    assert len(cells) == 64 and d["poi"] in names
    assert cells == [d["correlation"][index[a]][index[b]] for a in names for b in names]
    saved(hp.correlation(d, top=8), tmp_path, "correlation")


def test_ranking(tmp_path):
    d = doc("ranking_tHu")
    rows = d["entries"][:12]
    data = hp.figure_data("ranking", d, top=12)
    rects = element(data, 1, "post-fit impact, θ at +1σ (post-fit σ)")["rects"]
    assert len(rects) == 12
    assert [(r[0], r[1]) for r in rects] == [(min(e["impact_postfit_up"], 0), max(e["impact_postfit_up"], 0))
                                             for e in rows]
    fig = hp.ranking(d, top=12)
    assert len(fig.axes) == 3  # the legend above, the impacts, and the pulls beside them
    saved(fig, tmp_path, "ranking")


def test_yields(tmp_path):
    d = doc("yields_postfit_tHu")
    data = hp.figure_data("yields", d)
    first = d["channels"][0]
    stacked = np.zeros(len(first["data"]))
    # The signal (the samples the POI scales) on top of the backgrounds.
    for s in sorted(first["samples"], key=lambda s: s.get("signal", False)):
        rects = element(data, 0, s["name"])["rects"]
        assert [r[2] for r in rects] == list(stacked)
        stacked += s["yields"]
        np.testing.assert_array_equal([r[3] for r in rects], stacked)
    assert element(data, 0, "data")["ys"] == first["data"]
    saved(hp.yields(d), tmp_path, "yields")
    # The list histfit.yields returns draws the same way.
    ws = histfit.Workspace(fixture("simple_workspace.json"))
    saved(hp.yields(histfit.yields(ws.model())), tmp_path, "yields_python")


def test_contour(tmp_path):
    data = hp.figure_data("contour", doc("grid_1Lbb"))
    assert data["panels"][0]["x"]["label"] == "m1"
    assert element(data, 0, "observed limit = 1")["segments"]
    assert element(data, 0, "expected ±1σ")["polygons"]
    saved(hp.contour(doc("grid_1Lbb")), tmp_path, "contour")


def test_bad_documents_are_named():
    with pytest.raises(histfit.HistfitError, match="histfit limit"):
        hp.brazil(doc("scan_tHu"))
    points = [{"values": [m, 0.0], "obs": 1.0, "exp": [1.0] * 5} for m in (1.0, 2.0, 3.0)]
    with pytest.raises(histfit.HistfitError, match="lie on a line"):
        hp.contour({"points": points})


def test_plots_take_python_results(tmp_path):
    """histfit.plot draws the Python functions' results as it draws the CLI's documents: a
    FitResult's pulls and correlations equal those of `histfit fit --json` on the same model, and
    upper_limit(return_results=True)'s document draws the Brazil band (issue 52, item 5)."""
    assert histfit.plot is hp  # `import histfit` is enough for histfit.plot.* (the README's example)
    model = histfit.Workspace(fixture("workspace_tHu.json")).model()
    r = histfit.fit(model)
    d = doc("fit_tHu")
    ours = hp.figure_data("pulls", r, top=10)
    theirs = hp.figure_data("pulls", d, top=10)
    assert ([t[1] for t in ours["panels"][0]["y"]["ticks"]] == [t[1] for t in theirs["panels"][0]["y"]["ticks"]])
    np.testing.assert_allclose(element(ours, 0, "pull ± constraint")["xs"],
                               element(theirs, 0, "pull ± constraint")["xs"], atol=1e-4)
    saved(hp.pulls(r), tmp_path, "pulls_python")
    saved(hp.correlation(r, top=8), tmp_path, "correlation_python")
    simple = histfit.Workspace(fixture("simple_workspace.json")).model()
    obs, exp, limit = histfit.upper_limit(simple, return_results=True)
    assert limit["obs"] == obs and limit["poi"] == "mu"
    band = element(hp.figure_data("brazil", limit), 0, "expected")
    assert len(band["xs"]) >= 2
    saved(hp.brazil(limit), tmp_path, "brazil_python")
    with pytest.raises(TypeError, match="FitResult"):
        hp.pulls(42)
    # Above the dense-Hessian limit only the POI's error is computed (the others NaN): drawn
    # without bars, as the CLI's document with nulls is.
    poi_only = histfit.fit(model, max_hessian_parameters=1)
    pars = poi_only.to_document()["parameters"]
    assert all(p["uncertainty"] is None for i, p in enumerate(pars) if i != model.poi_index and not p["fixed"])
    saved(hp.pulls(poi_only), tmp_path, "pulls_poi_only")


def test_style_and_regions(tmp_path):
    """A style (dict or file) recolours, relabels and restacks samples, sets labels, log-y and the
    experiment label; region= draws one channel; a misspelt key is named."""
    d = doc("yields_postfit_tHu")
    ch = d["channels"][0]
    names = [s["name"] for s in ch["samples"]]
    style = {"experiment": "ATLAS", "status": "Internal", "log_y": True, "y_label": "Events",
             "samples": {names[0]: {"color": "#00ff00", "label": "renamed"}}, "order": [names[-1]]}
    path = tmp_path / "style.json"
    path.write_text(json.dumps(style))
    for s in (style, str(path)):
        data = hp.figure_data("yields", d, style=s, region=ch["name"])
        main = next(p for p in data["panels"] if p.get("region") == ch["name"])
        assert len([p for p in data["panels"] if p.get("region")]) == 1
        rects = [e for e in main["elements"] if e["type"] == "rects"]
        assert rects[0]["label"] == names[-1]
        mine = next(e for e in rects if e["label"] == "renamed")
        assert mine["color"]["rgb"] == [0, 255, 0]
        assert main["y"]["label"] == "Events" and main["y"]["ticks"]
        assert any(e.get("text") == "ATLAS Internal" for e in main["elements"])
    saved(hp.yields(d, style=style, region=ch["name"]), tmp_path, "styled")
    with pytest.raises(histfit.HistfitError, match="logy"):
        hp.figure_data("yields", d, style={"logy": True})
    with pytest.raises(ValueError, match="no such channel"):
        hp.figure_data("yields", d, region="nowhere")
    with pytest.warns(UserWarning, match="sample \"tbar\" matches nothing"):
        hp.figure_data("yields", d, style={"samples": {"tbar": {"color": "#000000"}}})
    # A sample keeps its colour in every region's figure (the whole document's order).
    colours = {}
    for c in d["channels"]:
        for p in hp.figure_data("yields", d, region=c["name"])["panels"]:
            for e in p["elements"]:
                if e["type"] == "rects" and e.get("label"):
                    assert colours.setdefault(e["label"], e["color"]["rgb"]) == e["color"]["rgb"], e["label"]
