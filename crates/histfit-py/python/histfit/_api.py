"""The implementation of histfit's Python API (re-exported by ``histfit``; see its docs)."""

from __future__ import annotations

import builtins
import json
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._native import DeviceError, HistfitError

__all__ = [
    "open",
    "Workspace",
    "Model",
    "EventModel",
    "ModelConfig",
    "FitResult",
    "fit",
    "minos",
    "yields",
    "distributions",
    "workspace_digest",
    "xml2json",
    "combine_workspaces",
    "sort_workspace",
    "prune_workspace",
    "rename_workspace",
    "goodness_of_fit",
    "hypotest",
    "upper_limit",
    "profile_scan",
    "significance",
    "ranking",
    "fit_toys",
    "hypotest_toys",
    "devices",
    "profiled_q0",
    "expected_q0",
    "profiled_qmu",
    "ProfiledStatistic",
    "HistfitError",
    "DeviceError",
]


def _array(x: Any, name: str) -> np.ndarray:
    if isinstance(x, (Model, Workspace, FitResult, dict, str)):
        hint = " (the data come first, then the model, as in pyhf)" if isinstance(x, Model) else ""
        raise TypeError(f"{name}: expected an array of numbers, got a {type(x).__name__}{hint}")
    try:
        a = np.ascontiguousarray(np.asarray(x, dtype=np.float64).ravel())
    except (TypeError, ValueError) as e:
        raise HistfitError(f"{name}: not an array of numbers ({e})") from None
    return a


def _model(model: Any, fn: str) -> "Model":
    """``model`` checked to be a :class:`Model`, or a TypeError that names the argument."""
    if isinstance(model, Model):
        return model
    if model is None:
        raise TypeError(f"histfit.{fn}: model: missing (a histfit.Model, from Workspace.model())")
    hint = ""
    if isinstance(model, (np.ndarray, list, tuple)):
        hint = f" — histfit.{fn} takes {_ORDER.get(fn, '(model, ...)')}"
    raise TypeError(f"histfit.{fn}: model: expected a histfit.Model, got a {type(model).__name__}{hint}")


#: How the functions that mirror pyhf's take their first arguments (pyhf's order).
_ORDER = {
    "fit": "(data, model), as pyhf.infer.mle.fit",
    "hypotest": "(poi_test, data, model), as pyhf.infer.hypotest",
    "upper_limit": "(data, model), as pyhf.infer.intervals.upper_limits.upper_limit",
    "hypotest_toys": "(poi_test, data, model, n_toys=…)",
}


def _data_model(data: Any, model: Any, fn: str) -> Tuple[Any, "Model"]:
    """The (data, model) pair of a function in pyhf's order. ``f(model)`` alone fits the observed
    data (a Model is never data); ``f(model, data)`` — histfit's order before 0.2 — is a
    TypeError that says the order."""
    if isinstance(data, Model):
        if model is None:
            return None, data
        raise TypeError(f"histfit.{fn}: the data come first, then the model: histfit.{fn} takes {_ORDER[fn]}")
    return data, _model(model, fn)


def _pyhf_names(fn: str, model: "Model", init: Any, fixed: Any, bounds: Any, init_pars: Any, par_bounds: Any,
                fixed_params: Any) -> Tuple[Any, Any, Any]:
    """pyhf's keyword names (``init_pars``, ``par_bounds``, ``fixed_params``: a bool per
    parameter, held at its initial value) mapped onto histfit's ``init``, ``bounds``, ``fixed``."""
    def one(ours: Any, theirs: Any, a: str, b: str) -> Any:
        if theirs is None:
            return ours
        if ours is not None:
            raise TypeError(f"histfit.{fn}: {a}= and {b}= are the same option: give one")
        return theirs
    init = one(init, init_pars, "init", "init_pars")
    bounds = one(bounds, par_bounds, "bounds", "par_bounds")
    if fixed_params is not None:
        if fixed is not None:
            raise TypeError(f"histfit.{fn}: fixed= and fixed_params= are the same option: give one")
        flags = list(fixed_params)
        if len(flags) != len(model.par_names):
            raise HistfitError(f"fixed_params: {len(flags)} flags for {len(model.par_names)} parameters")
        start = model.suggested_init() if init is None else _options(model, init, None, None)["init"]
        fixed = [(i, float(start[i])) for i, f in enumerate(flags) if f]
    return init, fixed, bounds


class Workspace:
    """A pyhf workspace: ``Workspace(spec)`` with ``spec`` a dict (pyhf's workspace dict works
    as is), a JSON string, or a path to a JSON file.

    ``patchset``/``patch``: apply the patch named ``patch`` from a pyhf patchset (dict, JSON
    string or path), as published signal grids need; a patchset that records the digest of
    another workspace is refused unless ``force=True``.
    """

    def __init__(self, spec: Union[dict, str, os.PathLike], patchset: Any = None, patch: Optional[str] = None,
                 force: bool = False):
        text, source = self._text(spec, "workspace")
        ps_text = None
        if patchset is not None:
            ps_text, _ = self._text(patchset, "patchset")
        self._native = _native.NativeWorkspace(text, source, ps_text, patch, bool(force))

    @staticmethod
    def _text(spec: Any, what: str) -> Tuple[str, str]:
        if isinstance(spec, dict):
            return json.dumps(spec), what
        if isinstance(spec, os.PathLike) or (isinstance(spec, str) and not spec.lstrip().startswith("{")):
            path = os.fspath(spec)
            try:
                with builtins.open(path, "r", encoding="utf-8") as f:
                    return f.read(), path
            except OSError as e:
                raise HistfitError(f"{path}: cannot read: {e.strerror}") from None
        if isinstance(spec, str):
            return spec, what
        raise HistfitError(f"{what}: expected a dict, a JSON string or a path, got {type(spec).__name__}")

    def model(
        self,
        measurement: Optional[str] = None,
        interp: str = "smooth",
        normsys: Optional[str] = None,
        histosys: Optional[str] = None,
        poi: Optional[str] = None,
        yield_variations: str = "relative",
    ) -> "Model":
        """Compiles the model of ``measurement`` (default: the first). ``interp``: "smooth"
        (normsys code4, histosys code4p; pyhf's Model default) or "pyhf" (code1 / code0);
        ``normsys=``/``histosys=`` override one type's code ("code0" ... "code4p"). ``poi``: the
        parameter of interest instead of the measurement's, or ``"none"`` (fits work without
        one; tests, limits and scans say they need one).

        ``yield_variations``: what a sample's histosys variations do when its yields are inputs
        (``histfit.torch``, ``twice_nll_and_grad_yields``): ``"relative"`` (default) scales them
        with the input per bin (Δ = y·Δ₀/nominal₀: the workspace's relative shape uncertainty
        carried to the new histogram; a bin with no nominal yield keeps its absolute variation),
        ``"absolute"`` adds the workspace's deltas unchanged. Staterror and shapesys keep the
        workspace's relative uncertainties (constraint widths) either way, so their absolute
        uncertainties follow the input. Gradients are exact for the chosen definition."""
        return Model(self._native.model(measurement, interp, normsys, histosys, poi, yield_variations))

    def data(self, model: "Model", include_auxdata: bool = True) -> np.ndarray:
        """Observed data in pyhf's layout: main bins by channel, then auxiliary data."""
        _binned(model, "Workspace.data")
        d = model._native.observed()
        return d if include_auxdata else d[: model._native.n_main]


class ModelConfig:
    """What pyhf's ``model.config`` gives that users reach for, with pyhf's names and meanings:
    ``parameters`` (the parameter sets' names, sorted), ``par_order`` (in parameter order),
    ``par_names`` (one per parameter, ``staterror_SR[3]``), ``npars``, ``poi_index``,
    ``poi_name``, ``channels`` and ``samples`` (sorted names), ``channel_nbins``,
    ``nmaindata``, ``nauxdata``, ``suggested_init()``, ``suggested_bounds()``,
    ``suggested_fixed()`` and ``par_slice(name)``."""

    def __init__(self, model: "Model"):
        native = model._native
        self._model = model
        sets = native.parameter_sets()
        self._slices = {name: slice(start, start + n) for name, _, start, n in sets}
        self.par_order: List[str] = [name for name, _, _, _ in sets]
        self.parameters: List[str] = sorted(self.par_order)
        self.par_names: List[str] = model.par_names
        self.npars: int = len(self.par_names)
        self.poi_index: Optional[int] = model.poi_index
        self.poi_name: Optional[str] = model.poi_name
        channels = native.channels()
        self.channels: List[str] = sorted(name for name, _, _ in channels)
        self.samples: List[str] = sorted({s for _, _, samples in channels for s in samples})
        self.channel_nbins: Dict[str, int] = {name: n for name, n, _ in channels}
        self.nmaindata: int = native.n_main
        self.nauxdata: int = len(native.observed()) - native.n_main

    def suggested_init(self) -> List[float]:
        return [float(v) for v in self._model.suggested_init()]

    def suggested_bounds(self) -> List[Tuple[float, float]]:
        return self._model.suggested_bounds()

    def suggested_fixed(self) -> List[bool]:
        return self._model.fixed()

    def par_slice(self, name: str) -> slice:
        """The slice of parameter set ``name`` in the parameter vector."""
        try:
            return self._slices[name]
        except KeyError:
            raise HistfitError(f'"{name}" is not a parameter set of the model') from None

    def __repr__(self) -> str:
        return (f"ModelConfig({self.npars} parameters, poi {self.poi_name!r}, channels {self.channels}, "
                f"{self.nmaindata} main bins)")


class Model:
    """A compiled model (parameters in pyhf's order and names); ``model.config`` as pyhf's."""

    def __init__(self, native: Any):
        self._native = native
        self._config: Optional[ModelConfig] = None

    @property
    def config(self) -> ModelConfig:
        """pyhf's ``model.config``: parameters, channels, samples, suggested values (see
        :class:`ModelConfig`)."""
        if self._config is None:
            self._config = ModelConfig(self)
        return self._config

    @property
    def notes(self) -> List[str]:
        """What the compiler or reader warned of or chose (empty bins; for an HS3 document, the
        analysis it opened, …)."""
        return list(self._native.notes())

    @property
    def par_names(self) -> List[str]:
        return list(self._native.par_names)

    @property
    def poi_index(self) -> Optional[int]:
        """The parameter of interest's index; ``None`` for a model compiled without one."""
        return self._native.poi_index

    @property
    def poi_name(self) -> Optional[str]:
        i = self.poi_index
        return None if i is None else self.par_names[i]

    def par_index(self, name: str) -> int:
        try:
            return self.par_names.index(name)
        except ValueError:
            raise HistfitError(f'"{name}" is not a parameter of the model') from None

    def suggested_init(self) -> np.ndarray:
        return self._native.suggested_init()

    def suggested_bounds(self) -> List[Tuple[float, float]]:
        return list(self._native.suggested_bounds())

    def fixed(self) -> List[bool]:
        return list(self._native.fixed())

    def expected_data(self, pars: Sequence[float], include_aux: bool = True) -> np.ndarray:
        return self._native.expected_data(_array(pars, "pars"), include_aux)

    def toy_data(self, pars: Sequence[float], seed: int = 0, index: int = 0) -> np.ndarray:
        """Toy dataset ``index`` of ``seed`` generated at ``pars`` (main bins Poisson, auxiliary
        data fluctuated): the same draws as :func:`fit_toys` makes, on every device."""
        return self._native.toy_data(_array(pars, "pars"), int(seed), int(index))

    def logpdf(self, pars: Sequence[float], data: Sequence[float]) -> float:
        """ln L (pyhf's ``model.logpdf``, as a float)."""
        return -0.5 * self._native.twice_nll(_array(pars, "pars"), _array(data, "data"))

    def twice_nll(self, pars: Sequence[float], data: Sequence[float]) -> float:
        return self._native.twice_nll(_array(pars, "pars"), _array(data, "data"))

    def twice_nll_and_grad(self, pars: Sequence[float], data: Sequence[float]) -> Tuple[float, np.ndarray]:
        """−2 ln L and its gradient with respect to every parameter."""
        return self._native.twice_nll_and_grad(_array(pars, "pars"), _array(data, "data"))

    def twice_nll_and_grad_yields(
        self, pars: Sequence[float], data: Sequence[float],
        yields: Union[Dict[str, Sequence[float]], "_native.DeviceYields"],
        device: Optional[str] = None,
    ) -> Tuple[float, np.ndarray, Optional[Dict[str, np.ndarray]]]:
        """−2 ln L with the nominal yields of some samples given as inputs (``{"signal": y}``;
        a sample present in several channels takes its bins concatenated in channel order,
        ``"channel/sample"`` picks one), its gradient with respect to the parameters and with
        respect to each input. Every sample may be an input; its histosys, staterror and shapesys
        follow the input as ``Workspace.model(yield_variations=...)`` defines. ``yields`` may also be a
        ``histfit._native.DeviceYields`` (float64 buffers in GPU memory, as ``histfit.torch``
        passes CUDA tensors): the yield gradient is then written to its buffer and ``None`` is
        returned in its place. ``device``: a wgpu device (``"wgpu"``, ``"vulkan:1"``,
        ``"metal+compensated"`` …) evaluates host yields on that GPU in f32, the yield gradient
        coming from the f64 host evaluator at the same point; default the CPU (or the CUDA device
        that holds the yields)."""
        source, keys, arrays = _yield_source(yields)
        v, g, gy = self._native.twice_nll_and_grad_yields(_array(pars, "pars"), _array(data, "data"), source,
                                                          device)
        return v, g, _split(gy, keys, arrays)


class EventModel(Model):
    """An event-level likelihood (an HS3 document, as ROOT writes them), from :func:`open`: its
    parameters, its observed events, −2 ln L at a point. Every inference function takes it as it
    takes a :class:`Model` (``fit(model)``, ``hypotest(mu, model)``, ``upper_limit(model)``,
    ``profile_scan``, ``significance``, ``ranking``, ``fit_toys``, ``hypotest_toys``, ``minos``);
    it fits the events it was opened with, so those take no ``data``."""

    @property
    def config(self) -> ModelConfig:
        raise HistfitError("model.config describes binned (pyhf) models; an event-level model has "
                           "par_names, suggested_init(), suggested_bounds() and events")

    @property
    def notes(self) -> List[str]:
        """What the reader assumed or chose (the likelihood it picked, events dropped, …)."""
        return list(self._native.notes())

    @property
    def events(self) -> Dict[str, Dict[str, Any]]:
        """The observed events per dataset: ``{dataset: {"distribution", "columns": {axis:
        array}, "weights": array or None}}``."""
        return {data: {"distribution": dist, "columns": dict(zip(names, cols)), "weights": w}
                for dist, data, names, cols, w in self._native.events()}

    def twice_nll(self, pars: Sequence[float], data: Any = None) -> float:
        """−2 ln L at ``pars`` on the observed events (RooFit's convention: no term that
        depends on the events alone)."""
        return self.twice_nll_and_grad(pars, data)[0]

    def twice_nll_and_grad(self, pars: Sequence[float], data: Any = None) -> Tuple[float, np.ndarray]:
        """−2 ln L and its gradient with respect to every parameter."""
        if data is not None:
            raise HistfitError("data: an event-level model evaluates the events it was opened with "
                               "(give others to histfit.open(..., events=...))")
        return self._native.twice_nll_and_grad(_array(pars, "pars"))

    def logpdf(self, pars: Sequence[float], data: Any = None) -> float:
        """ln L."""
        return -0.5 * self.twice_nll(pars, data)

    def expected_data(self, pars: Sequence[float], include_aux: bool = True) -> np.ndarray:
        raise HistfitError("expected_data: the expected bin counts of a binned model; an event-level model has none")

    def toy_data(self, pars: Sequence[float], seed: int = 0, index: int = 0) -> np.ndarray:
        raise HistfitError("toy_data: the toys of an event-level model are drawn inside fit_toys/hypotest_toys")

    def twice_nll_and_grad_yields(self, *args: Any, **kwargs: Any) -> Any:
        raise HistfitError("twice_nll_and_grad_yields: sample yields as inputs are a binned model's")

    def __repr__(self) -> str:
        return f"<histfit.EventModel: {len(self.par_names)} parameters, POI {self.poi_name!r}>"


def open(source: Union[str, os.PathLike, dict], *, events: Optional[Dict[str, Any]] = None,
         weights: Any = None, poi: Optional[str] = None, likelihood: Optional[str] = None,
         analysis: Optional[str] = None, **model_options: Any) -> Model:
    """Opens a likelihood from a file (a path; ``.gz`` read as HEPData ships them), a JSON
    string or a dict, whatever its format: a pyhf workspace gives its :class:`Model` (the
    options of :meth:`Workspace.model` pass through: ``interp``, ``measurement``, ``poi``, …);
    an HS3 document gives an :class:`EventModel`, or a :class:`Model` where its likelihood is
    binned HistFactory channels (``histfactory_dist``, as ROOT exports a HistFactory workspace:
    the same model as its pyhf JSON, under ROOT's parameter names). For HS3:

    - ``events``: events from NumPy in place of the document's — ``{axis: array}`` for a
      document with one dataset, or ``{dataset: {axis: array}}``; ``weights``: an array (one
      dataset) or ``{dataset: array}``. Each event must lie inside its axis' ``[min, max]``.
    - ``poi``: the parameter of interest (``"none"``: none) where the document names none or
      another; ``likelihood``/``analysis``: which of several the document holds.
    - Files the document names (``histfit_source``: Parquet, ROOT trees) are found beside it.

    What the reader assumed or chose (the one distribution and dataset it fits where the document
    names no likelihood, events dropped outside the domains, …) is in ``model.notes``."""
    path: Optional[str] = None
    if isinstance(source, dict):
        doc, text = source, None
    else:
        raw = os.fspath(source) if isinstance(source, os.PathLike) else source
        if not isinstance(raw, str):
            raise TypeError(f"histfit.open: source: expected a path, a JSON string or a dict, got a {type(source).__name__}")
        if raw.lstrip().startswith("{"):
            text = raw
        else:
            path = raw
            try:
                with builtins.open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise HistfitError(f"{path}: cannot read: {e.strerror or e}") from None
            if path.endswith(".gz") or data[:2] == b"\x1f\x8b":
                import gzip
                data = gzip.decompress(data)
            text = data.decode("utf-8")
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise HistfitError(f"{path or 'source'}: not JSON: {e}") from None
    hs3 = isinstance(doc, dict) and "channels" not in doc and (
        "distributions" in doc or "hs3_version" in (doc.get("metadata") or {}))
    if not hs3:
        if events is not None or weights is not None or likelihood is not None or analysis is not None:
            raise HistfitError("events=, weights=, likelihood= and analysis= apply to HS3 documents; "
                               "this is a pyhf workspace")
        if poi is not None:
            model_options["poi"] = poi
        return Workspace(doc).model(**model_options)
    if model_options:
        raise TypeError(f"histfit.open: {', '.join(sorted(model_options))}: options of pyhf workspaces, "
                        "not of an HS3 document")
    dists = doc.get("distributions")
    if isinstance(dists, list) and any(isinstance(d, dict) and d.get("type") == "histfactory_dist" for d in dists):
        binned = _native.open_hs3_binned(json.dumps(doc) if text is None else text, path or "the document",
                                         likelihood, analysis, poi)
        if binned is not None:
            if events is not None or weights is not None:
                raise HistfitError("events= and weights= apply to event-level HS3 models; "
                                   "this document's likelihood is binned (histfactory_dist)")
            return Model(binned)
    names = [d.get("name") for d in doc.get("data", []) if isinstance(d, dict)]
    given = []
    if events is not None:
        if not isinstance(events, dict) or not events:
            raise HistfitError("events: expected {axis: array} or {dataset: {axis: array}}")
        per_dataset = all(isinstance(v, dict) for v in events.values())
        if not per_dataset:
            if len(names) != 1:
                raise HistfitError(f"events: the document has {len(names)} datasets ({', '.join(map(str, names))}): "
                                   "give {dataset: {axis: array}}")
            events = {names[0]: events}
        if weights is not None and not isinstance(weights, dict):
            if len(events) != 1:
                raise HistfitError("weights: give {dataset: array} for several datasets")
            weights = {next(iter(events)): weights}
        weights = weights or {}
        for w in weights:
            if w not in events:
                raise HistfitError(f"weights[{w!r}]: no events given for that dataset")
        for name, cols in events.items():
            axes = [str(a) for a in cols]
            arrays = [_array(cols[a], f"events[{name!r}][{a!r}]") for a in cols]
            w = weights.get(name)
            given.append((str(name), axes, arrays, None if w is None else _array(w, f"weights[{name!r}]")))
    elif weights is not None:
        raise HistfitError("weights= without events=: the document's own events carry their weights")
    directory = os.path.dirname(os.path.abspath(path)) if path else None
    native = _native.open_events(json.dumps(doc) if text is None else text, path or "the document", directory,
                                 likelihood, analysis, poi, given)
    return EventModel(native)


@dataclass
class FitResult:
    """A maximum likelihood fit."""

    par_names: List[str]
    bestfit: np.ndarray
    uncertainties: Optional[np.ndarray]
    covariance: Optional[np.ndarray]
    correlation: Optional[np.ndarray]
    twice_nll: float
    converged: bool
    reason: str
    iterations: int
    evaluations: int
    hessian_positive_definite: Optional[bool] = None
    fixed: List[bool] = field(default_factory=list)
    #: searches made (the requested start and further starts)
    starts: int = 1
    #: kinked parameters (codes 0/1): ``{"name", "side", "other_side_searched"}``
    kinks: List[Dict[str, Any]] = field(default_factory=list)
    #: several minima found, a start that was not finite, searches capped
    warnings: List[str] = field(default_factory=list)
    #: per parameter, the centre and width of its constraint (None where it is free)
    constraints: List[Optional[Tuple[float, float]]] = field(default_factory=list)
    poi_index: Optional[int] = None
    #: for a fit to weighted events, the three uncertainty estimates, each an array over every
    #: parameter (0 where fixed): ``"naive"`` (the inverse Hessian, ``uncertainties`` above),
    #: ``"sumw2"`` (H⁻¹H₂H⁻¹, RooFit's SumW2Error) and ``"sandwich"`` (the asymptotically
    #: correct H⁻¹DH⁻¹), and ``"sandwich_covariance"``; None for unweighted events
    weighted_uncertainties: Optional[Dict[str, np.ndarray]] = None

    def to_document(self) -> Dict[str, Any]:
        """The result as ``histfit fit --json`` writes it (the fields the plots read: parameters
        with value, uncertainty, fixed, pull and constraint; the correlation matrix)."""
        def number(v: Any) -> Optional[float]:
            """A float, or None (JSON's null, as the CLI writes) where it is NaN."""
            v = float(v)
            return None if np.isnan(v) else v

        pars = []
        for i, name in enumerate(self.par_names):
            u = None if self.uncertainties is None else number(self.uncertainties[i])
            p: Dict[str, Any] = {"name": name, "value": float(self.bestfit[i]), "uncertainty": u,
                                 "fixed": bool(self.fixed[i]) if self.fixed else False}
            c = self.constraints[i] if i < len(self.constraints) else None
            if c is not None:
                centre, width = c
                p["pull"] = (float(self.bestfit[i]) - centre) / width
                p["constraint"] = None if u is None else u / width
            pars.append(p)
        return {
            "kind": "fit",
            "poi_index": self.poi_index,
            "poi": None if self.poi_index is None else self.par_names[self.poi_index],
            "parameters": pars,
            "correlation": None if self.correlation is None else [[number(v) for v in row] for row in self.correlation],
            "twice_nll": self.twice_nll,
            "converged": self.converged,
            **self._weighted_document(),
        }

    def _weighted_document(self) -> Dict[str, Any]:
        """The weighted-fit estimates as ``histfit fit --json`` writes them: per estimate, each
        free parameter's error by name."""
        w = self.weighted_uncertainties
        if w is None:
            return {}
        free = [i for i in range(len(self.par_names)) if not (self.fixed and self.fixed[i])]
        return {"weighted_uncertainties": {key: {self.par_names[i]: float(w[key][i]) for i in free}
                                           for key in ("naive", "sumw2", "sandwich")}}


def _binned(model: Model, what: str) -> None:
    """A HistfitError where ``model`` is event-level and ``what`` needs a binned one."""
    if isinstance(model, EventModel):
        raise HistfitError(f"{what} needs a binned (HistFactory) model; this is an event-level model")


def _data(model: Model, data: Any) -> Optional[np.ndarray]:
    return None if data is None else _array(data, "data")


def _dataset(model: Model, data: Any, asimov: bool, opts: Dict[str, Any]) -> Optional[np.ndarray]:
    """The data of a request: ``data`` (default the observed), or with ``asimov=True`` the Asimov
    dataset of the pre-fit prediction — the initial parameters with ``init`` and ``fixed``
    applied — as a blinded analysis fits."""
    if not asimov:
        return _data(model, data)
    if data is not None:
        raise HistfitError("data= and asimov=True: give one")
    if isinstance(model, EventModel):
        return None  # the events are _native_for's
    return np.asarray(model._native.expected_data(_prefit(model, opts), True), dtype=np.float64)


def _prefit(model: Model, opts: Dict[str, Any]) -> np.ndarray:
    """The pre-fit parameters: the initial ones with ``init`` and ``fixed`` applied."""
    pars = np.array(model.suggested_init() if opts["init"] is None else opts["init"], dtype=np.float64)
    for i, v in opts["fix"]:
        pars[i] = v
    return pars


def _native_for(model: Model, asimov: bool, opts: Dict[str, Any]) -> Any:
    """The native model a request runs on: the model's own, or for an event-level model with
    ``asimov=True`` the same model holding its Asimov dataset at the pre-fit parameters (the
    expected events on a fine grid of each observable as weighted events, and the constraints'
    global observables at their means, as ``histfit fit --asimov``)."""
    if asimov and isinstance(model, EventModel):
        return model._native.asimov(_prefit(model, opts))
    return model._native


def _options(model: Model, init: Any, fixed: Any, bounds: Any) -> Dict[str, Any]:
    """The fit options every inference function takes: ``init`` (all values, or ``{name:
    value}`` over the suggested start), ``fixed`` (``{name: value}`` or ``[(index, value)]``),
    ``bounds`` (all pairs, or ``{name: (lo, hi)}`` over the suggested bounds)."""
    start = None
    if init is not None:
        if isinstance(init, dict):
            start = np.asarray(model.suggested_init(), dtype=np.float64)
            for k, v in init.items():
                start[model.par_index(k)] = float(v)
        else:
            start = _array(init, "init")
    bnds = None
    if bounds is not None:
        if isinstance(bounds, dict):
            bnds = [tuple(b) for b in model.suggested_bounds()]
            for k, b in bounds.items():
                lo, hi = b
                bnds[model.par_index(k)] = (float(lo), float(hi))
        else:
            bnds = [(float(lo), float(hi)) for lo, hi in bounds]
    return {"init": start, "fix": _fixes(model, fixed), "bounds": bnds}


def _fixes(model: Model, fixed: Any) -> List[Tuple[int, float]]:
    if fixed is None:
        return []
    if isinstance(fixed, dict):
        return [(model.par_index(k) if isinstance(k, str) else int(k), float(v)) for k, v in fixed.items()]
    return [(int(i), float(v)) for i, v in fixed]


def fit(data: Any = None, model: Optional[Model] = None, *, init: Any = None, fixed: Any = None,
        bounds: Any = None, device: str = "cpu", starts: Optional[int] = None, asimov: bool = False,
        max_hessian_parameters: Optional[int] = None, init_pars: Any = None, par_bounds: Any = None,
        fixed_params: Any = None) -> FitResult:
    """Maximum likelihood fit with uncertainties, covariance and correlations: ``fit(data,
    model)`` in pyhf's order (``fit(model)`` fits the observed data). ``init``: all values, or
    ``{name: value}``; ``fixed``: ``{"name": value}`` or ``[(index, value)]``; ``bounds``: all
    pairs or ``{name: (lo, hi)}``; pyhf's ``init_pars``, ``par_bounds`` and ``fixed_params`` (a
    bool per parameter, held at its initial value) are taken too. ``starts``: further
    starts searched for a lower minimum, per batch; batches go on (up to four) while they find
    different minima (default: by model size, 24 for up to 16 free parameters, none above 64;
    an event-level model one search, as RooFit and iminuit fit them; 0 for a single search from
    ``init``); where there are any, one more comes first, with the
    free normalisations at a tenth of their initial values. ``max_hessian_parameters`` (default 4096): above this
    many parameters no dense Hessian is built; the POI's uncertainty alone is computed (by
    conjugate gradients), the others are NaN and ``covariance``/``correlation`` None, with a
    warning."""
    data, model = _data_model(data, model, "fit")
    init, fixed, bounds = _pyhf_names("fit", model, init, fixed, bounds, init_pars, par_bounds, fixed_params)
    o = _options(model, init, fixed, bounds)
    r = json.loads(
        _native.fit(_native_for(model, asimov, o), _dataset(model, data, asimov, o), o["init"], o["fix"], True, device,
                    None if starts is None else int(starts), o["bounds"],
                    None if max_hessian_parameters is None else int(max_hessian_parameters))
    )
    n = len(r["par_names"])
    mat = lambda v: None if v is None else np.asarray(v, dtype=np.float64).reshape(n, n)  # noqa: E731
    if "weighted_uncertainties_error" in r:
        warnings.warn(f"no uncertainties for weighted events: {r['weighted_uncertainties_error']}")
    return FitResult(
        par_names=r["par_names"],
        bestfit=np.asarray(r["bestfit"], dtype=np.float64),
        uncertainties=None if r["uncertainties"] is None else np.asarray(r["uncertainties"], dtype=np.float64),
        covariance=mat(r["covariance"]),
        correlation=mat(r["correlation"]),
        twice_nll=r["twice_nll"],
        converged=r["converged"],
        reason=r["reason"],
        iterations=r["iterations"],
        evaluations=r["evaluations"],
        hessian_positive_definite=r.get("hessian_positive_definite"),
        fixed=r.get("fixed", []),
        starts=r.get("starts", 1),
        kinks=r.get("kinks", []),
        warnings=r.get("warnings", []),
        constraints=[None if c is None else (float(c[0]), float(c[1])) for c in model._native.constraints()],
        poi_index=model.poi_index,
        weighted_uncertainties=_weighted(r.get("weighted_uncertainties"), n),
    )


def _weighted(w: Optional[Dict[str, Any]], n: int) -> Optional[Dict[str, np.ndarray]]:
    """The native result's weighted-fit estimates (over the free parameters) as arrays over every
    parameter, 0 where fixed."""
    if w is None:
        return None
    free = w["free"]
    out: Dict[str, np.ndarray] = {}
    for key in ("naive", "sumw2", "sandwich"):
        full = np.zeros(n)
        full[free] = w[key]
        out[key] = full
    cov = np.zeros((n, n))
    k = len(free)
    cov[np.ix_(free, free)] = np.asarray(w["sandwich_covariance"], dtype=np.float64).reshape(k, k)
    out["sandwich_covariance"] = cov
    return out


def minos(model: Model, *, pars: Union[str, Sequence[str]] = "all", data: Any = None, fixed: Any = None,
          device: str = "cpu", init: Any = None, bounds: Any = None, asimov: bool = False) -> Dict[str, Dict[str, Any]]:
    """MINOS asymmetric intervals: for each parameter (names, or ``"all"`` free ones), where the
    profile likelihood rises by ½ from the minimum (2ΔNLL = 1). Per name: ``value``,
    ``lower_error`` (≤ 0), ``upper_error`` (≥ 0), ``lower_at_bound``/``upper_at_bound`` (the
    interval ends at the parameter's bound), ``converged`` and the number of conditional ``fits``."""
    model = _model(model, "minos")
    names = model.par_names
    o = _options(model, init, fixed, bounds)
    fixes = o["fix"]
    if isinstance(pars, str) and pars == "all":
        held = {i for i, _ in fixes}
        which = [i for i, f in enumerate(model._native.fixed()) if not f and i not in held]
    else:
        pars = [pars] if isinstance(pars, str) else list(pars)
        unknown = [p for p in pars if p not in names]
        if unknown:
            raise HistfitError(f"minos: {unknown[0]!r} is not a parameter of the model")
        which = [names.index(p) for p in pars]
    r = json.loads(_native.minos(_native_for(model, asimov, o), which, _dataset(model, data, asimov, o), fixes, device, o["init"],
                                 o["bounds"]))
    return {m["name"]: m for m in r}


def yields(model: Model, *, postfit: bool = False, data: Any = None, fixed: Any = None,
           device: str = "cpu", init: Any = None, bounds: Any = None, asimov: bool = False,
           max_hessian_parameters: Optional[int] = None) -> List[Dict[str, Any]]:
    """Yields per channel (``name``, ``data``), sample (``samples``: ``name``, ``yields``,
    ``uncertainties`` per bin) and the channel ``total``, with standard deviations propagated
    through the full covariance: pre-fit the constraints' widths (free parameters taken as
    known), post-fit the fit's covariance; totals include the correlations between samples.
    ``max_hessian_parameters`` (default 4096): the largest model whose dense covariance is built;
    above it the request is refused with one message (see :func:`fit`)."""
    model = _model(model, "yields")
    o = _options(model, init, fixed, bounds)
    return json.loads(_native.yields(_native_for(model, asimov, o), bool(postfit), _dataset(model, data, asimov, o), o["fix"], device,
                                     o["init"], o["bounds"],
                                     None if max_hessian_parameters is None else int(max_hessian_parameters)))


def distributions(model: Model, *, bins: int = 50, prefit: bool = False, fixed: Any = None, init: Any = None,
                  bounds: Any = None) -> Dict[str, Any]:
    """An event-level model's events histogrammed (``bins`` equal bins of each observable's
    domain: ``counts`` Σw, ``errors`` √Σw²) against the ``expected`` counts per bin at the fit
    (``prefit=True``: at the initial parameters), in total and per ``components`` (a mixture's
    summands), with the ``pulls``: the document ``histfit distributions --json`` writes, which
    :func:`histfit.plot.distributions` draws. Channels of several observables are left out (in
    ``notes``)."""
    model = _model(model, "distributions")
    if not isinstance(model, EventModel):
        raise HistfitError("distributions draws event-level models; a binned model's counts per bin are histfit.yields")
    o = _options(model, init, fixed, bounds)
    return json.loads(_native.distributions(model._native, int(bins), bool(prefit), o["fix"], o["init"], o["bounds"]))


def workspace_digest(spec: Dict[str, Any]) -> str:
    """The workspace's SHA-256 digest as pyhf computes it (``pyhf.utils.digest``) and patchsets
    record it."""
    return _native.workspace_digest(json.dumps(spec))


def xml2json(config: Union[str, os.PathLike], basedir: Union[str, os.PathLike] = ".",
             mounts: Sequence[Tuple[str, str]] = ()) -> Dict[str, Any]:
    """A HistFactory XML configuration (the top-level ``<Combination>`` file) and the ROOT
    histograms it names as a pyhf workspace, as ``pyhf xml2json`` makes it; paths in the XML are
    relative to ``basedir``, and ``mounts`` rewrites (host, mount) prefixes first. What pyhf does
    not carry over (constraint terms, Poisson stat-error constraints, …) is reported with
    ``warnings.warn``. A malformed file, a missing file or histogram, or a histogram binned unlike
    its channel raises ``HistfitError`` naming the file and the element or object."""
    text, notes = _native.xml2json(os.fspath(config), os.fspath(basedir),
                                   [(os.fspath(h), os.fspath(m)) for h, m in mounts])
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return json.loads(text)


def combine_workspaces(left: Dict[str, Any], right: Dict[str, Any], join: str = "none",
                       merge_channels: bool = False) -> Dict[str, Any]:
    """Two workspaces as one (pyhf's ``Workspace.combine``): channels, observations and
    measurements joined by name — ``join`` "none" (a name on both sides is refused), "outer"
    (identical items kept once, measurements of one name merged), "left outer" or "right outer"
    (that side wins); ``merge_channels`` merges channels of one name sample by sample."""
    return json.loads(_native.workspace_combine(json.dumps(left), json.dumps(right), join, bool(merge_channels)))


def sort_workspace(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The workspace with channels, samples, modifiers, measurements and observations sorted by
    name (pyhf's ``Workspace.sorted``)."""
    return json.loads(_native.workspace_sorted(json.dumps(spec)))


def prune_workspace(spec: Dict[str, Any], channels: Sequence[str] = (), samples: Sequence[str] = (),
                    modifiers: Sequence[str] = (), modifier_types: Sequence[str] = (),
                    measurements: Sequence[str] = ()) -> Dict[str, Any]:
    """The workspace with the named items removed (pyhf's ``Workspace.prune``; every name must
    exist)."""
    prune = {"channels": list(channels), "samples": list(samples), "modifiers": list(modifiers),
             "modifier_types": list(modifier_types), "measurements": list(measurements)}
    return json.loads(_native.workspace_prune_and_rename(json.dumps(spec), prune, {}))


def rename_workspace(spec: Dict[str, Any], channels: Optional[Dict[str, str]] = None,
                     samples: Optional[Dict[str, str]] = None, modifiers: Optional[Dict[str, str]] = None,
                     measurements: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The workspace with items renamed ``{old: new}`` (pyhf's ``Workspace.rename``)."""
    rename = {"channels": channels or {}, "samples": samples or {}, "modifiers": modifiers or {},
              "measurements": measurements or {}}
    return json.loads(_native.workspace_prune_and_rename(json.dumps(spec), {}, rename))


def goodness_of_fit(model: Model, *, data: Any = None, fixed: Any = None, device: str = "cpu", init: Any = None,
                    bounds: Any = None, asimov: bool = False) -> Dict[str, Any]:
    """Goodness of fit against the saturated model: ``statistic`` = −2 ln λ_sat at the best fit
    (every bin's expectation set to its count, the constraint terms at the fit), ``dof`` = bins −
    free parameters without a constraint, ``p_value`` = P(χ²_dof ≥ statistic), with the fit's
    ``twice_nll`` and ``converged``."""
    model = _model(model, "goodness_of_fit")
    _binned(model, "goodness of fit against the saturated model")
    o = _options(model, init, fixed, bounds)
    return json.loads(_native.goodness_of_fit(_native_for(model, asimov, o), _dataset(model, data, asimov, o), o["fix"], device,
                                              o["init"], o["bounds"]))


def hypotest(
    poi_test: float,
    data: Any = None,
    model: Optional[Model] = None,
    *,
    test_stat: str = "qtilde",
    return_tail_probs: bool = False,
    return_expected: bool = False,
    return_expected_set: bool = False,
    device: str = "cpu",
    init: Any = None,
    fixed: Any = None,
    bounds: Any = None,
    asimov: bool = False,
    init_pars: Any = None,
    par_bounds: Any = None,
    fixed_params: Any = None,
    expected_at: Optional[float] = None,
):
    """Asymptotic CLs at ``poi_test``: ``hypotest(poi_test, data, model)`` in pyhf's order
    (``hypotest(mu, model)`` tests the observed data), returned as pyhf's ``infer.hypotest``
    does: CLs, then optionally ``[CLs+b, CLb]``, the expected CLs and the expected set (−2σ …
    +2σ). Options as :func:`fit` (pyhf's names too); ``expected_at`` as for
    :func:`significance` (``test_stat="q0"``)."""
    data, model = _data_model(data, model, "hypotest")
    init, fixed, bounds = _pyhf_names("hypotest", model, init, fixed, bounds, init_pars, par_bounds, fixed_params)
    o = _options(model, init, fixed, bounds)
    at = None if expected_at is None else float(expected_at)
    r = json.loads(_native.hypotest(_native_for(model, asimov, o), float(poi_test), _dataset(model, data, asimov, o), test_stat,
                                    device, **o, expected_at=at))
    for w in r.get("warnings", []):
        warnings.warn(f"histfit.hypotest: {w}", stacklevel=2)
    out: list = [np.float64(r["cls_obs"])]
    if return_tail_probs:
        out.append([np.float64(r["clsb_obs"]), np.float64(r["clb_obs"])])
    if return_expected:
        out.append(np.float64(r["cls_exp"][2]))
    if return_expected_set:
        out.append(np.asarray(r["cls_exp"], dtype=np.float64))
    return out[0] if len(out) == 1 else tuple(out)


def upper_limit(data: Any = None, model: Optional[Model] = None, *, alpha: Optional[float] = None, test_stat: str = "qtilde",
                device: str = "cpu", init: Any = None, fixed: Any = None, bounds: Any = None, asimov: bool = False,
                return_results: bool = False, level: Optional[float] = None, init_pars: Any = None,
                par_bounds: Any = None, fixed_params: Any = None):
    """Observed and expected (−2σ … +2σ) upper limits on the POI at CLs = ``alpha`` (pyhf's
    ``level`` too): ``upper_limit(data, model)`` in pyhf's order (``upper_limit(model)`` for the
    observed data). ``return_results=True`` adds the limit's document (every CLs evaluated, as
    ``histfit limit --json``; :func:`histfit.plot.brazil` draws it)."""
    data, model = _data_model(data, model, "upper_limit")
    init, fixed, bounds = _pyhf_names("upper_limit", model, init, fixed, bounds, init_pars, par_bounds, fixed_params)
    if level is not None and alpha is not None:
        raise TypeError("histfit.upper_limit: alpha= and level= are the same option: give one")
    alpha = 0.05 if alpha is None and level is None else (alpha if level is None else level)
    o = _options(model, init, fixed, bounds)
    r = json.loads(_native.upper_limit(_native_for(model, asimov, o), _dataset(model, data, asimov, o), float(alpha), test_stat,
                                       device, **o))
    for w in r.get("warnings", []):
        warnings.warn(f"histfit.upper_limit: {w}", stacklevel=2)
    obs, exp = np.float64(r["obs"]), np.asarray(r["exp"], dtype=np.float64)
    if return_results:
        if model.poi_name is not None:
            r.setdefault("poi", model.poi_name)
        return obs, exp, r
    return obs, exp


def profile_scan(model: Model, values: Sequence[float], *, data: Any = None, device: str = "cpu",
                 init: Any = None, fixed: Any = None, bounds: Any = None, asimov: bool = False) -> Dict[str, Any]:
    """Profile likelihood scan of the POI at ``values``: the scan document (points with 2ΔNLL
    and fits; :func:`histfit.plot.scan` draws it)."""
    model = _model(model, "profile_scan")
    o = _options(model, init, fixed, bounds)
    values = [float(v) for v in _array(values, "values")]
    return json.loads(_native.profile_scan(_native_for(model, asimov, o), values, _dataset(model, data, asimov, o), device, **o))


def significance(model: Model, *, data: Any = None, device: str = "cpu", init: Any = None, fixed: Any = None,
                 bounds: Any = None, asimov: bool = False, expected_at: Optional[float] = None) -> Dict[str, Any]:
    """Discovery significance (q0): observed and expected p0 and Z. The expected figures are those
    of the signal at POI = ``expected_at`` (its Asimov dataset); by default 1 where the POI is a
    binned model's (a signal strength, as pyhf), and for an event-level POI (often a yield) its
    value in the document where positive, else 1. The result's ``expected_at`` says which."""
    model = _model(model, "significance")
    o = _options(model, init, fixed, bounds)
    at = None if expected_at is None else float(expected_at)
    return json.loads(_native.significance(_native_for(model, asimov, o), _dataset(model, data, asimov, o), device, **o,
                                           expected_at=at))


def ranking(model: Model, *, data: Any = None, device: str = "cpu", init: Any = None, fixed: Any = None,
            bounds: Any = None, asimov: bool = False,
            max_hessian_parameters: Optional[int] = None) -> Dict[str, Any]:
    """Nuisance-parameter ranking by impact on the POI. It needs the dense post-fit covariance:
    ``max_hessian_parameters`` (default 4096) is the largest model it is built for, above which
    the ranking is refused with one message (see :func:`fit`)."""
    model = _model(model, "ranking")
    o = _options(model, init, fixed, bounds)
    limit = None if max_hessian_parameters is None else int(max_hessian_parameters)
    return json.loads(_native.ranking(_native_for(model, asimov, o), _dataset(model, data, asimov, o), device, **o,
                                      max_hessian_parameters=limit))


def fit_toys(model: Model, *, n_toys: int, gen_params: Any = None, seed: int = 0, device: str = "cpu",
             data: Any = None, init: Any = None, fixed: Any = None, bounds: Any = None, asimov: bool = False,
             starts: Optional[int] = None) -> Dict[str, Any]:
    """Generates and fits ``n_toys`` toys. They are drawn at ``gen_params``, or by default at the
    free fit of ``data`` (the observed data if None) — the default of ``histfit toys`` too, so
    the same seed gives the same ensemble in both; pass ``model.suggested_init()`` to draw at the
    model's initial point. Returns arrays ``index``, ``twice_nll``, ``poi``, ``converged``, the
    list ``reason`` (why each fit that did not converge stopped; empty for those that did),
    ``second_start`` (where a toy was fitted from more than one start — models above 64 free
    parameters: every toy, from the mirror of its first fit's end through its start, see
    ``docs/architecture.md`` — how much that lowered its twice_nll;
    NaN where it made one start), ``gen_params`` and the ``summary``
    (counts, the fitted POI's mean and standard deviation, toys fitted from second starts and
    those that found a lower basin). ``starts``: further starts of every toy's fit — up to 64
    free parameters the fit's own (as ``fit(..., starts=)``), above that many points around the
    model's initial point besides the basin probe's starts, and one more from ``gen_params`` in
    the likelihood's own units (0: one start only; default: 32 and that one where the probe
    finds a lower basin, none elsewhere; an event-level model: one start)."""
    model = _model(model, "fit_toys")
    gen = None if gen_params is None else _array(gen_params, "gen_params")
    o = _options(model, init, fixed, bounds)
    doc = json.loads(_native.fit_toys(_native_for(model, asimov, o), gen, int(n_toys), int(seed), device,
                                      _dataset(model, data, asimov, o), **o,
                                      starts=None if starts is None else int(starts)))
    toys = doc["toys"]
    return {
        "index": np.asarray([t["index"] for t in toys], dtype=np.int64),
        "twice_nll": np.asarray([t["twice_nll"] for t in toys], dtype=np.float64),
        "poi": np.asarray([t["poi"] for t in toys], dtype=np.float64),
        "converged": np.asarray([t["converged"] for t in toys], dtype=bool),
        "reason": [t.get("reason", "") for t in toys],
        "second_start": np.asarray([t.get("second_start", np.nan) for t in toys], dtype=np.float64),
        "gen_params": np.asarray(doc["gen_params"], dtype=np.float64),
        "summary": doc["summary"],
    }


def hypotest_toys(poi_test: float, data: Any = None, model: Optional[Model] = None, *, n_toys: int,
                  seed: int = 0, test_stat: str = "qtilde", device: str = "cpu", init: Any = None,
                  fixed: Any = None, bounds: Any = None, asimov: bool = False,
                  starts: Optional[int] = None, init_pars: Any = None, par_bounds: Any = None,
                  fixed_params: Any = None, expected_at: Optional[float] = None) -> Dict[str, Any]:
    """Toy-based CLs at ``poi_test``: the result document (summary with CLs, CLs+b, CLb,
    expected band and failed-fit counts; per-toy statistics: ``q``, the free fit's
    ``twice_nll_free`` and ``poi_hat``, the conditional fit's ``twice_nll_cond``, ``converged``).
    ``starts``: further starts of every fit, as for :func:`fit_toys`; ``expected_at``: with
    ``test_stat="q0"``, where the second ensemble is drawn, as for :func:`significance`.
    Arguments in pyhf's order, as :func:`hypotest` (``hypotest_toys(mu, model, n_toys=…)`` for
    the observed data)."""
    data, model = _data_model(data, model, "hypotest_toys")
    init, fixed, bounds = _pyhf_names("hypotest_toys", model, init, fixed, bounds, init_pars, par_bounds,
                                      fixed_params)
    o = _options(model, init, fixed, bounds)
    return json.loads(_native.hypotest_toys(_native_for(model, asimov, o), float(poi_test), int(n_toys),
                                            _dataset(model, data, asimov, o), int(seed), test_stat, device, **o,
                                            starts=None if starts is None else int(starts),
                                            expected_at=None if expected_at is None else float(expected_at)))


def _yield_inputs(yields: Dict[str, Sequence[float]]) -> Tuple[List[str], List[np.ndarray]]:
    if not isinstance(yields, dict) or not yields:
        raise HistfitError("yields: expected a non-empty dict {sample name: yields}")
    keys = list(yields)
    return keys, [_array(yields[k], f"yields of {k}") for k in keys]


def _yield_source(yields) -> Tuple[Any, Optional[List[str]], Optional[List[np.ndarray]]]:
    """Yields as the native calls take them: host arrays by name (with the names and arrays, to
    split the gradient), or a ``_native.DeviceYields`` (GPU memory; the gradient goes to its
    buffer) as it is."""
    if isinstance(yields, _native.DeviceYields):
        return yields, None, None
    keys, arrays = _yield_inputs(yields)
    return list(zip(keys, arrays)), keys, arrays


def _split(flat, keys: Optional[List[str]], arrays: Optional[List[np.ndarray]]) -> Optional[Dict[str, np.ndarray]]:
    """The flat yield gradient per input; ``None`` where it was written to device memory."""
    if keys is None or flat is None:
        return None
    out, at = {}, 0
    for k, a in zip(keys, arrays):
        out[k] = np.asarray(flat[at:at + a.size], dtype=np.float64)
        at += a.size
    return out


@dataclass
class ProfiledStatistic:
    """A profiled test statistic at given yields, with its gradient with respect to them (by
    the envelope theorem: the nuisance parameters are re-fitted, no derivative of the fits)."""

    q: float
    grad: Optional[Dict[str, Any]]
    """Per input; ``None`` when the yields were given in device memory (the gradient is in its
    buffer; ``histfit.torch`` fills this in with tensors)."""
    mu_hat: float
    free_bestfit: np.ndarray
    cond_bestfit: np.ndarray
    converged: bool


def _profiled(model: Model, yields, data, mu: float, discovery: bool, warm, edm=None,
              expected: bool = False, device: Optional[str] = None) -> ProfiledStatistic:
    model = _model(model, "profiled_q0" if discovery else "profiled_qmu")
    _binned(model, "profiled statistics of sample yields")
    source, keys, arrays = _yield_source(yields)
    wf = wc = None
    if warm is not None:
        wf, wc = _array(warm.free_bestfit, "warm"), _array(warm.cond_bestfit, "warm")
    edm = None if edm is None else float(edm)
    if expected:
        r = json.loads(model._native.expected_q0(source, wf, wc, edm, device))
    else:
        data = model._native.observed() if data is None else _array(data, "data")
        r = json.loads(model._native.profiled_statistic(source, data, float(mu), discovery, wf, wc, edm, device))
    if not r["converged"]:
        warnings.warn("a fit behind the profiled statistic did not converge; its value and gradient "
                      "are unreliable (see .converged)", RuntimeWarning, stacklevel=3)
    return ProfiledStatistic(
        q=r["q"],
        grad=_split(None if r["grad"] is None else np.asarray(r["grad"], dtype=np.float64), keys, arrays),
        mu_hat=r["mu_hat"],
        free_bestfit=np.asarray(r["free_bestfit"], dtype=np.float64),
        cond_bestfit=np.asarray(r["cond_bestfit"], dtype=np.float64),
        converged=r["converged"],
    )


def profiled_q0(model: Model, yields: Union[Dict[str, Sequence[float]], "_native.DeviceYields"], *, data: Any = None,
                warm: Optional[ProfiledStatistic] = None, edm: Optional[float] = None,
                device: Optional[str] = None) -> ProfiledStatistic:
    """Discovery statistic q0 with the given samples' yields (see
    :meth:`Model.twice_nll_and_grad_yields`, which also says how yields in GPU memory are given)
    and dq0/dyields. ``warm``: the previous call's
    result, whose fits start this call's (a training step moves the yields a little). ``edm``:
    the fits' convergence threshold (default 1e-11); at 1e-13 or below the minima are then
    polished by Newton steps (gradient to ~1e-8 relative, at a few dozen more evaluations).
    ``device``: a wgpu device runs the fits on that GPU in f32 (see
    :meth:`Model.twice_nll_and_grad_yields`)."""
    return _profiled(model, yields, data, 0.0, True, warm, edm, device=device)


def profiled_qmu(mu: float, model: Model, yields: Union[Dict[str, Sequence[float]], "_native.DeviceYields"], *,
                 data: Any = None,
                 warm: Optional[ProfiledStatistic] = None, edm: Optional[float] = None,
                 device: Optional[str] = None) -> ProfiledStatistic:
    """One-sided qμ at ``mu`` with the given yields, and dqμ/dyields (``device`` as for
    :func:`profiled_q0`)."""
    return _profiled(model, yields, data, mu, False, warm, edm, device=device)


def expected_q0(model: Model, yields: Union[Dict[str, Sequence[float]], "_native.DeviceYields"], *,
                warm: Optional[ProfiledStatistic] = None,
                edm: Optional[float] = None, device: Optional[str] = None) -> ProfiledStatistic:
    """Expected discovery significance: q0 on the Asimov dataset of μ = 1 (nuisance parameters
    at their initial values) built from the given yields, and dq0/dyields — including the
    dataset's own dependence on the yields. Z = sqrt(q0). ``device`` as for
    :func:`profiled_q0`."""
    return _profiled(model, yields, None, 0.0, True, warm, edm, expected=True, device=device)


def devices() -> Dict[str, Any]:
    """The CPU and the CUDA devices histfit can use (or why there is none)."""
    return json.loads(_native.devices())
