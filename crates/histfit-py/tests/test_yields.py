"""Yields as inputs: gradients against central differences, profiled q0/qμ gradients against
differences of re-fitted statistics, warm starts, and refusals."""

import numpy as np
import pytest

import histfit
from conftest import fixture


@pytest.fixture(scope="module")
def simple():
    ws = histfit.Workspace(fixture("simple_workspace.json"))
    m = ws.model()
    return m, ws.data(m)


def test_nll_gradient_wrt_yields(simple):
    m, data = simple
    p = np.array([1.3, 0.97, 1.02])
    y = np.array([7.0, 11.0])
    v, g, gy = m.twice_nll_and_grad_yields(p, data, {"signal": y})
    for k in range(2):
        h = 1e-5 * y[k]
        yp, ym = y.copy(), y.copy()
        yp[k] += h
        ym[k] -= h
        fd = (m.twice_nll_and_grad_yields(p, data, {"signal": yp})[0]
              - m.twice_nll_and_grad_yields(p, data, {"signal": ym})[0]) / (2 * h)
        assert gy["signal"][k] == pytest.approx(fd, rel=1e-6)
    # The model's own yields reproduce the plain likelihood; they stay untouched by
    # yield-input calls.
    with open(fixture("simple_workspace.json")) as f:
        import json

        nominal = json.load(f)["channels"][0]["samples"][0]["data"]
    assert m.twice_nll_and_grad_yields(p, data, {"signal": nominal})[0] == pytest.approx(
        m.twice_nll(p, data), rel=1e-12)
    assert m.twice_nll_and_grad_yields(p, data, {"signal": nominal})[1] == pytest.approx(
        m.twice_nll_and_grad(p, data)[1], rel=1e-12)


@pytest.mark.parametrize("kind", ["q0", "qmu"])
def test_profiled_gradient_matches_differences(simple, kind):
    m, data = simple
    y = np.array([20.0, 25.0]) if kind == "q0" else np.array([5.0, 10.0])
    f = (lambda yy, warm=None: histfit.profiled_q0(m, {"signal": yy}, data, warm)) if kind == "q0" else \
        (lambda yy, warm=None: histfit.profiled_qmu(1.0, m, {"signal": yy}, data, warm))
    r = f(y)
    assert r.converged and r.q > 0
    for k in range(2):
        h = 1e-3 * y[k]
        yp, ym = y.copy(), y.copy()
        yp[k] += h
        ym[k] -= h
        fd = (f(yp).q - f(ym).q) / (2 * h)
        assert r.grad["signal"][k] == pytest.approx(fd, rel=1e-4)
    warm = f(y * 1.01, r)
    cold = f(y * 1.01)
    assert warm.q == pytest.approx(cold.q, rel=1e-6)


def test_yield_inputs_are_checked(simple):
    m, data = simple
    p = m.suggested_init()
    with pytest.raises(histfit.HistfitError, match="shapesys"):
        m.twice_nll_and_grad_yields(p, data, {"background": [50.0, 52.0]})
    with pytest.raises(histfit.HistfitError, match="no sample"):
        m.twice_nll_and_grad_yields(p, data, {"nope": [1.0]})
    with pytest.raises(histfit.HistfitError, match="expected 2 bins"):
        histfit.profiled_q0(m, {"signal": [1.0]}, data)
    with pytest.raises(histfit.HistfitError, match="finite"):
        histfit.profiled_q0(m, {"signal": [1.0, float("nan")]}, data)
