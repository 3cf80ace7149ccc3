"""Plots as matplotlib figures, drawn from the JSON documents histfit's commands write (a dict, or
the path of a ``--json`` output), so they can be redrawn without refitting — the same kinds as
``histfit plot``:

=============== ============================================================================
``brazil``      ``histfit limit --json``: CLs against μ, expected ±1σ/±2σ, observed, limits marked
``scan``        ``histfit scan --json`` or :func:`histfit.profile_scan`: 2ΔNLL, 1σ and 2σ lines
``pulls``       ``histfit fit --json``: pulls and constraints of the constrained parameters
``ranking``     ``histfit ranking --json`` or :func:`histfit.ranking`: impacts and pulls
``correlation`` ``histfit fit --json``: the correlation matrix, pruned to its largest entries
``yields``      ``histfit yields --json`` or :func:`histfit.yields`: stacked samples, data, ratio
``contour``     ``histfit limit BKG --patchset PS --json``: exclusion contour over the patch values
=============== ============================================================================

Each function returns a :class:`matplotlib.figure.Figure` (made without pyplot, so no display is
needed); save it with ``fig.savefig("plot.pdf")``. Needs matplotlib (``pip install matplotlib``).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional, Union

import numpy as np

from ._native import HistfitError

__all__ = ["brazil", "scan", "pulls", "ranking", "correlation", "yields", "contour"]

Document = Union[Dict[str, Any], List[Any], str, "os.PathLike[str]"]


def _figure(**kw):
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("histfit.plot needs matplotlib: pip install matplotlib") from None
    return Figure(**kw)


def _load(doc: Document) -> Any:
    if isinstance(doc, (str, os.PathLike)):
        with open(doc) as f:
            return json.load(f)
    return doc


def _need(doc: Any, key: str, kind: str, command: str) -> Any:
    if not isinstance(doc, dict) or doc.get(key) is None:
        raise HistfitError(f'the document has no "{key}": {kind} plots are drawn from the JSON of `{command}`')
    return doc[key]


def brazil(doc: Document):
    """CLs against the POI from a limit document: the ±2σ (yellow) and ±1σ (green) bands of the
    expected CLs, its median (dashed), the observed CLs, the line CLs = α and the limits."""
    d = _load(doc)
    evals = sorted(_need(d, "evaluations", "brazil", "histfit limit"), key=lambda e: e["mu"])
    mu = np.array([e["mu"] for e in evals])
    exp = np.array([e["cls_exp"] for e in evals])
    fig = _figure(figsize=(8, 6))
    ax = fig.add_subplot()
    ax.fill_between(mu, exp[:, 0], exp[:, 4], color="#ffdc00", label="expected ±2σ")
    ax.fill_between(mu, exp[:, 1], exp[:, 3], color="#00c800", label="expected ±1σ")
    ax.plot(mu, exp[:, 2], "k--", lw=2, label="expected")
    obs = [(e["mu"], e["cls_obs"]) for e in evals if e.get("cls_obs") is not None]
    if obs:
        ax.plot(*zip(*obs), "k-o", lw=2, ms=4, label="observed")
    ax.axhline(d["alpha"], color="r", lw=1, label=f"α = {d['alpha']}")
    if d.get("obs") is not None:
        ax.axvline(d["obs"], color="r", ls=":", label=f"observed limit {d['obs']:.4g}")
    if d.get("exp"):
        ax.axvline(d["exp"][2], color="grey", ls=":", label=f"expected limit {d['exp'][2]:.4g}")
    ax.set_xlabel(d.get("poi") or "μ")
    ax.set_ylabel("CLs")
    ax.set_ylim(0, 1.05)
    ax.legend()
    ax.set_title("Upper limit (CLs)")
    return fig


def scan(doc: Document):
    """2ΔNLL against the POI from a scan document, with the 1σ and 2σ lines and the best fit."""
    d = _load(doc)
    pts = sorted(_need(d, "points", "scan", "histfit scan"), key=lambda p: p["mu"])
    fig = _figure(figsize=(8, 6))
    ax = fig.add_subplot()
    ax.plot([p["mu"] for p in pts], [p["delta_twice_nll"] for p in pts], "o-", color="#1f5ab4",
            label="profile likelihood")
    ax.axhline(1, color="grey", ls="--", label="1σ")
    ax.axhline(4, color="grey", ls=":", label="2σ")
    if d.get("mu_hat") is not None:
        ax.axvline(d["mu_hat"], color="r", ls="--", label=f"best fit {d['mu_hat']:.4g}")
    ax.set_xlabel(d.get("poi") or "μ")
    ax.set_ylabel("2ΔNLL = −2 ln λ")
    ax.set_ylim(bottom=0)
    ax.legend()
    ax.set_title("Profile likelihood scan")
    return fig


def pulls(doc: Document, top: Optional[int] = None):
    """Pulls (θ̂ − θ₀)/σ₀ with their constraints σ̂/σ₀ from a fit document; ``top`` keeps the
    largest."""
    d = _load(doc)
    rows = [p for p in _need(d, "parameters", "pulls", "histfit fit") if p.get("pull") is not None]
    if not rows:
        raise HistfitError("parameters: no constrained parameter has a pull")
    if top is not None:
        rows = sorted(rows, key=lambda p: -abs(p["pull"]))[:top]
    n = len(rows)
    y = np.arange(n)[::-1]
    fig = _figure(figsize=(8, 1.5 + 0.28 * n))
    ax = fig.add_subplot()
    ax.axvspan(-2, 2, color="#ffdc00", label="±2σ")
    ax.axvspan(-1, 1, color="#00c800", label="±1σ")
    ax.axvline(0, color="grey", ls="--")
    ax.errorbar([p["pull"] for p in rows], y, xerr=[p["constraint"] for p in rows], fmt="ko",
                label="pull ± constraint")
    ax.set_yticks(y, [p["name"] for p in rows])
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("(θ̂ − θ₀) / σ₀")
    ax.legend(loc="upper right")
    ax.set_title("Pulls and constraints")
    fig.tight_layout()
    return fig


def ranking(doc: Document, top: int = 20):
    """The ``top`` parameters by impact on the POI: pre-fit (light) and post-fit (dark) impacts
    of ±1σ, and each parameter's pull and constraint on a second x axis (top)."""
    d = _load(doc)
    rows = _need(d, "entries", "ranking", "histfit ranking")[:top]
    n = len(rows)
    y = np.arange(n)[::-1]
    fig = _figure(figsize=(10, 1.8 + 0.32 * n))
    ax = fig.add_subplot()
    for key, colour, alpha, h, label in [
        ("impact_prefit_up", "#1f5ab4", 0.3, 0.76, "pre-fit impact, θ = θ̂ + σ"),
        ("impact_prefit_down", "#c81e1e", 0.3, 0.76, "pre-fit impact, θ = θ̂ − σ"),
        ("impact_postfit_up", "#1f5ab4", 1.0, 0.5, "post-fit impact, θ = θ̂ + σ̂"),
        ("impact_postfit_down", "#c81e1e", 1.0, 0.5, "post-fit impact, θ = θ̂ − σ̂"),
    ]:
        ax.barh(y, [r[key] for r in rows], height=h, color=colour, alpha=alpha, label=label)
    ax.axvline(0, color="grey")
    ax.set_yticks(y, [r["name"] for r in rows])
    ax.set_xlabel(f"Δ{d.get('poi') or 'μ'}")
    pulled = [(yy, r) for yy, r in zip(y, rows) if r.get("pull") is not None]
    if pulled:
        twin = ax.twiny()
        twin.errorbar([r["pull"] for _, r in pulled], [yy for yy, _ in pulled],
                      xerr=[r["constraint"] for _, r in pulled], fmt="ko", ms=4, label="pull ± constraint")
        reach = max(2.0, max(abs(r["pull"]) + r["constraint"] for _, r in pulled)) * 1.1
        twin.set_xlim(-reach, reach)
        twin.set_xlabel("pull (θ̂ − θ₀) / σ₀")
    reach = max(abs(r[k]) for r in rows for k in ("impact_prefit_up", "impact_prefit_down",
                                                   "impact_postfit_up", "impact_postfit_down")) * 1.15
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-0.7, n - 0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig


def correlation(doc: Document, top: int = 25):
    """The correlation matrix of a fit document, pruned to the ``top`` free parameters with the
    largest off-diagonal correlations (the POI always kept)."""
    d = _load(doc)
    params = _need(d, "parameters", "correlation", "histfit fit")
    corr = np.asarray(_need(d, "correlation", "correlation", "histfit fit"), dtype=float)
    free = [i for i, p in enumerate(params) if not p.get("fixed")]
    poi = d.get("poi_index")
    strength = {i: max([abs(corr[i, j]) for j in free if j != i] or [0.0]) for i in free}
    keep = sorted(sorted(free, key=lambda i: (i != poi, -strength[i]))[:max(top, 1)])
    sub = corr[np.ix_(keep, keep)]
    names = [params[i]["name"] for i in keep]
    k = len(keep)
    fig = _figure(figsize=(2 + 0.45 * k, 1.5 + 0.45 * k))
    ax = fig.add_subplot()
    im = ax.imshow(sub, cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xticks(range(k), names, rotation=90)
    ax.set_yticks(range(k), names)
    if k <= 20:
        for a in range(k):
            for b in range(k):
                ax.text(b, a, f"{sub[a, b]:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax)
    ax.set_title("Correlations (fit)")
    fig.tight_layout()
    return fig


def yields(doc: Document):
    """Stacked samples per channel with the total's uncertainty band, the data (√n bars) and a
    data / prediction panel, from a yields document (or the list :func:`histfit.yields` returns)."""
    d = _load(doc)
    channels = d if isinstance(d, list) else _need(d, "channels", "yields", "histfit yields")
    postfit = isinstance(d, dict) and bool(d.get("postfit"))
    cols = min(max(len(channels), 1), 4)
    rows = math.ceil(len(channels) / cols)
    fig = _figure(figsize=(4.5 * cols, 5 * rows))
    grid = fig.add_gridspec(2 * rows, cols, height_ratios=[3, 1] * rows, hspace=0.35)
    for c, ch in enumerate(channels):
        top = fig.add_subplot(grid[2 * (c // cols), c % cols])
        bottom = fig.add_subplot(grid[2 * (c // cols) + 1, c % cols], sharex=top)
        nb = len(ch["data"])
        edges = np.arange(nb + 1)
        base = np.zeros(nb)
        for s in ch["samples"]:
            y = np.asarray(s["yields"], dtype=float)
            top.bar(edges[:-1], y, width=1.0, bottom=base, align="edge", label=s["name"])
            base = base + y
        total = np.asarray(ch["total"]["yields"], dtype=float)
        sigma = np.asarray(ch["total"]["uncertainties"], dtype=float)
        data = np.asarray(ch["data"], dtype=float)
        top.fill_between(edges, np.append(total - sigma, total[-1] - sigma[-1]),
                         np.append(total + sigma, total[-1] + sigma[-1]), step="post", color="grey",
                         alpha=0.45, label="total uncertainty")
        top.errorbar(edges[:-1] + 0.5, data, yerr=np.sqrt(np.clip(data, 0, None)), fmt="ko", label="data")
        top.set_title(f"{ch['name']} ({'post-fit' if postfit else 'pre-fit'})")
        top.set_ylabel("events")
        if c == 0:
            top.legend(fontsize="x-small")
        with np.errstate(divide="ignore", invalid="ignore"):
            bottom.fill_between(edges, np.append((total - sigma) / total, ((total - sigma) / total)[-1]),
                                np.append((total + sigma) / total, ((total + sigma) / total)[-1]),
                                step="post", color="grey", alpha=0.45)
            bottom.errorbar(edges[:-1] + 0.5, data / total, yerr=np.sqrt(np.clip(data, 0, None)) / total, fmt="ko")
        bottom.axhline(1, color="grey", ls="--")
        bottom.set_ylabel("data / pred.")
        bottom.set_xlabel("bin")
    fig.suptitle(f"{'Post-fit' if postfit else 'Pre-fit'} yields")
    return fig


def contour(doc: Document):
    """The exclusion contour of a signal-grid limit document over its two patch values: where the
    observed and the median expected limits equal 1 (ln(limit) interpolated linearly on a
    Delaunay triangulation), and the ±1σ band of the expected one."""
    import matplotlib.tri as mtri

    d = _load(doc)
    points = _need(d, "points", "contour", "histfit limit BKG.json --patchset PATCHSET.json")
    good = [p for p in points if "error" not in p]
    if len(good) < 3:
        raise HistfitError("points: a contour needs at least three points with limits")
    xy = np.array([p["values"] for p in good], dtype=float)
    # Triangulated in coordinates scaled to the unit square (unlike axes give no slivers).
    lo, span = xy.min(0), np.ptp(xy, 0)
    span[span == 0] = 1
    unit = (xy - lo) / span
    tri = mtri.Triangulation(unit[:, 0], unit[:, 1])
    tri = mtri.Triangulation(xy[:, 0], xy[:, 1], triangles=tri.triangles)
    ln_obs = np.log([p["obs"] for p in good])
    ln_exp = np.log([p["exp"] for p in good])
    fig = _figure(figsize=(9, 7.5))
    ax = fig.add_subplot()
    # Inside the band: expected −1σ limit below 1 and +1σ limit above it.
    inside = np.minimum(-ln_exp[:, 1], ln_exp[:, 3])
    ax.tricontourf(tri, inside, levels=[0, np.inf], colors=["#ffdc00"], alpha=0.7)
    ax.tricontour(tri, ln_exp[:, 2], levels=[0], colors="k", linestyles="--", linewidths=2)
    ax.tricontour(tri, ln_obs, levels=[0], colors="r", linewidths=3)
    ax.plot(xy[:, 0], xy[:, 1], ".", color="grey", alpha=0.6)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color="#ffdc00", label="expected ±1σ"),
                       Line2D([], [], color="k", ls="--", label="expected limit = 1"),
                       Line2D([], [], color="r", lw=3, label="observed limit = 1")])
    labels = d.get("labels") or ["", ""]
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_title("Exclusion contour (CLs, 95%)")
    return fig
