"""Plots as matplotlib figures, drawn from the JSON documents histfit's commands write (a dict, or
the path of a ``--json`` output) or from the Python functions' results (:func:`histfit.fit`'s
:class:`~histfit.FitResult`, :func:`histfit.profile_scan`, :func:`histfit.ranking`,
:func:`histfit.yields`, ``histfit.upper_limit(..., return_results=True)``'s document), so they
can be redrawn without refitting — the same kinds, with
the same content, as ``histfit plot`` (the Rust side builds each figure; this module draws it):

=============== ============================================================================
``brazil``      ``histfit limit --json``: CLs against μ, expected ±1σ/±2σ, observed, limits marked
``scan``        ``histfit scan --json`` or :func:`histfit.profile_scan`: 2ΔNLL, 1σ and 2σ lines
``pulls``       ``histfit fit --json`` or a FitResult: pulls and constraints of the constrained parameters
``ranking``     ``histfit ranking --json`` or :func:`histfit.ranking`: impacts, pulls beside them
``correlation`` ``histfit fit --json`` or a FitResult: the correlation matrix, pruned to its largest entries
``yields``      ``histfit yields --json`` (or the list :func:`histfit.yields` returns): stacked
                samples, total uncertainty band, data, data / prediction panel
``contour``     ``histfit limit BKG --patchset PS --json``: exclusion contour over the patch values
``distributions`` ``histfit distributions --json`` or :func:`histfit.distributions`: an event-level
                fit's events histogrammed, the fit and its components, pulls
=============== ============================================================================

Every function takes ``style=`` (a dict, or the path of a style file as ``histfit plot --style``
reads: axis labels and units, ``log_y``, sample colours, labels and stack ``order``, an experiment
label, per-region overrides); ``yields`` and ``distributions`` take ``region=`` to draw one channel
(one figure per region, as ``histfit plot --per-region``).

Each function returns a :class:`matplotlib.figure.Figure` (made without pyplot, so no display is
needed); save it with ``fig.savefig("plot.pdf")``. :func:`figure_data` gives what is drawn (panels,
axes and elements with their values) without matplotlib. Needs matplotlib (``pip install
matplotlib``).
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, Dict, List, Optional, Union

from . import _native

__all__ = ["brazil", "scan", "pulls", "ranking", "correlation", "yields", "contour", "distributions",
           "figure_data"]

Document = Union[Dict[str, Any], List[Any], str, "os.PathLike[str]", Any]


def _load(doc: Document) -> Any:
    """A document from a path, a dict or list as the commands write them, or a Python result
    (a :class:`histfit.FitResult`, through its ``to_document()``)."""
    if hasattr(doc, "to_document"):
        return doc.to_document()
    if isinstance(doc, (str, os.PathLike)):
        with open(doc) as f:
            return json.load(f)
    if not isinstance(doc, (dict, list)):
        raise TypeError(f"doc: expected a result document (dict, path) or a histfit.FitResult, got a "
                        f"{type(doc).__name__}")
    return doc


Style = Union[Dict[str, Any], str, "os.PathLike[str]", None]


def _style_text(style: Style) -> Optional[str]:
    """A style file's content as JSON text: from a dict or a path (``histfit plot --style``'s
    format: labels, units, ``log_y``, ``samples`` colours and labels, ``order``, the experiment
    label, ``regions``)."""
    if style is None:
        return None
    if isinstance(style, (str, os.PathLike)):
        with open(style) as f:
            return f.read()
    if not isinstance(style, dict):
        raise TypeError(f"style: expected a dict or the path of a style file, got a {type(style).__name__}")
    return json.dumps(style)


def figure_data(kind: str, doc: Document, top: Optional[int] = None, style: Style = None,
                region: Optional[str] = None) -> Dict[str, Any]:
    """The figure of plot ``kind`` drawn from ``doc``, as data: ``panels`` (column by column, each
    column's rows top to bottom) with their ``x``/``y`` axes and ``elements`` (lines, bands,
    rectangles, cells, points, polygons, segments, texts) in data coordinates. ``style``: a style
    (dict or file, as ``histfit plot --style``); ``region``: draw only that channel (``yields``,
    ``distributions``: one figure per region)."""
    d = _load(doc)
    if kind == "yields" and isinstance(d, list):  # what histfit.yields returns
        d = {"channels": d}
    data = json.loads(_native.plot_figure(kind, json.dumps(d), top, _style_text(style), region))
    for w in data.pop("warnings", []):
        warnings.warn(w, stacklevel=3)
    return data


def _colour(c: Dict[str, Any]):
    r, g, b = c["rgb"]
    return (r / 255, g / 255, b / 255, c["alpha"])


def _diverging(v: float):
    """Blue (−1) – white (0) – red (+1), as the SVG/PNG plots colour correlations."""
    v = max(-1.0, min(1.0, v))
    mix = lambda a, b, t: (a + (b - a) * t) / 255  # noqa: E731
    if v >= 0:
        return (1.0, mix(255, 40, v), mix(255, 40, v))
    return (mix(255, 40, -v), mix(255, 90, -v), 1.0)


def _draw_element(ax, e: Dict[str, Any]) -> None:
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Polygon, Rectangle

    kind, label = e["type"], e.get("label")
    if kind == "line":
        ax.plot(e["xs"], e["ys"], color=_colour(e["color"]), lw=e["width"], ls="--" if e["dashed"] else "-",
                marker="o" if e["markers"] else None, ms=4, label=label)
    elif kind == "band":
        ax.fill_between(e["xs"], e["lo"], e["hi"], color=_colour(e["color"]), lw=0, label=label)
    elif kind == "rects":
        patches = [Rectangle((r[0], r[2]), r[1] - r[0], r[3] - r[2]) for r in e["rects"]]
        ax.add_collection(PatchCollection(patches, facecolor=_colour(e["color"]), edgecolor="none", label=label))
    elif kind == "cells":
        patches = [Rectangle((r[0], r[2]), r[1] - r[0], r[3] - r[2]) for r in e["rects"]]
        ax.add_collection(PatchCollection(patches, facecolor=[_diverging(v) for v in e["values"]],
                                          edgecolor="none"))
    elif kind == "points":
        xerr = None if e["x_err"] is None else list(zip(*e["x_err"])) if e["x_err"] else None
        yerr = None if e["y_err"] is None else list(zip(*e["y_err"])) if e["y_err"] else None
        ax.errorbar(e["xs"], e["ys"], xerr=xerr, yerr=yerr, fmt="o", ms=4, color=_colour(e["color"]),
                    label=label)
    elif kind == "polygons":
        patches = [Polygon(p, closed=True) for p in e["polygons"]]
        ax.add_collection(PatchCollection(patches, facecolor=_colour(e["color"]), edgecolor="none", label=label))
    elif kind == "segments":
        from matplotlib.collections import LineCollection

        ax.add_collection(LineCollection(e["segments"], colors=[_colour(e["color"])], linewidths=e["width"],
                                         linestyles="--" if e["dashed"] else "-", label=label))
    elif kind == "text":
        import matplotlib

        scale = matplotlib.rcParams["font.size"] / 10.0
        ax.text(e["x"], e["y"], e["text"], color=_colour(e["color"]), fontsize=e["size"] * 0.75 * scale, va="top")


def _legend_only(ax, elements: List[Dict[str, Any]]) -> None:
    """A panel that is only a legend: one entry per element, drawn as its kind is drawn."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = []
    for e in elements:
        colour = _colour(e["color"])
        if e["type"] in ("rects", "band", "polygons"):
            handles.append(Patch(facecolor=colour, label=e["label"]))
        elif e["type"] == "points":
            handles.append(Line2D([], [], color=colour, marker="o", ls="none", ms=4, label=e["label"]))
        else:
            handles.append(Line2D([], [], color=colour, label=e["label"]))
    ax.axis("off")
    ax.legend(handles=handles, loc="upper left", fontsize="small", frameon=False)


def _draw(data: Dict[str, Any]):
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("histfit.plot needs matplotlib: pip install matplotlib") from None
    # Text grows with the picture as in the SVG/PNG plots (``font_scale``, from the size asked).
    size = matplotlib.rcParams["font.size"] * data.get("font_scale", 1.0)
    with matplotlib.rc_context({"font.size": size}):
        return _draw_figure(data, Figure)


def _draw_figure(data: Dict[str, Any], Figure):
    fig = Figure(figsize=(data["width"] / 100, data["height"] / 100))
    cols, rows = data["column_weights"], data["row_weights"]
    grid = fig.add_gridspec(len(rows), len(cols), width_ratios=cols, height_ratios=rows)
    for i, p in enumerate(data["panels"]):
        if not p["visible"]:
            continue
        ax = fig.add_subplot(grid[i % len(rows), i // len(rows)])
        if not p.get("axes", True):
            _legend_only(ax, p["elements"])
            continue
        for e in p["elements"]:
            _draw_element(ax, e)
        for axis, set_lim, set_label, set_ticks in [
            (p["x"], ax.set_xlim, ax.set_xlabel, ax.set_xticks),
            (p["y"], ax.set_ylim, ax.set_ylabel, ax.set_yticks),
        ]:
            set_lim(*axis["range"])
            set_label(axis["label"])
            if axis["ticks"] is not None:
                set_ticks([t[0] for t in axis["ticks"]], [t[1] for t in axis["ticks"]],
                          rotation=90 if axis["vertical_labels"] else None)
        if p["title"]:
            ax.set_title(p["title"])
        if p["legend"] and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    if data["title"]:
        fig.suptitle(data["title"])
    fig.tight_layout()
    return fig


def brazil(doc: Document, style: Style = None):
    """CLs against the POI from a limit document: the ±2σ and ±1σ bands of the expected CLs, its
    median (dashed), the observed CLs, the line CLs = α and the limits marked."""
    return _draw(figure_data("brazil", doc, style=style))


def scan(doc: Document, style: Style = None):
    """2ΔNLL against the POI from a scan document, with the 1σ and 2σ lines and the best fit."""
    return _draw(figure_data("scan", doc, style=style))


def pulls(doc: Document, top: Optional[int] = None, style: Style = None):
    """Pulls (θ̂ − θ₀)/σ₀ with their constraints σ̂/σ₀ from a fit document; ``top`` keeps the
    largest."""
    return _draw(figure_data("pulls", doc, top, style))


def ranking(doc: Document, top: int = 20, style: Style = None):
    """The ``top`` parameters by impact on the POI: pre-fit (light) and post-fit (dark) impacts
    of ±1σ, and each parameter's pull and constraint in a panel beside them."""
    return _draw(figure_data("ranking", doc, top, style))


def correlation(doc: Document, top: int = 25, style: Style = None):
    """The correlation matrix of a fit document, pruned to the ``top`` free parameters with the
    largest off-diagonal correlations (the POI always kept)."""
    return _draw(figure_data("correlation", doc, top, style))


def yields(doc: Document, style: Style = None, region: Optional[str] = None):
    """Stacked samples per channel with the total's uncertainty band, the data (√n bars) and a
    data / prediction panel, from a yields document (or the list :func:`histfit.yields` returns)."""
    return _draw(figure_data("yields", doc, style=style, region=region))


def contour(doc: Document, style: Style = None):
    """The exclusion contour of a signal-grid limit document over its two patch values: where the
    observed and the median expected limits equal 1 (ln(limit) interpolated linearly on a Delaunay
    triangulation), and the ±1σ band of the expected one."""
    return _draw(figure_data("contour", doc, style=style))


def distributions(doc: Document, style: Style = None, region: Optional[str] = None):
    """An event-level fit: per channel the events histogrammed (points with √Σw² bars), the
    expected counts per bin of the fit (solid) and of each component (dashed), and the pulls
    (Σw − expected) / √(expected · Σw²/Σw) in the panel under it."""
    return _draw(figure_data("distributions", doc, style=style, region=region))
