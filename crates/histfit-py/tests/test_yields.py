"""Yields as inputs: gradients against central differences, profiled q0/qμ gradients against
differences of re-fitted statistics, warm starts, and refusals."""

import numpy as np
import pytest

import histfit
from conftest import fixture, thu_with_network_signal_spec


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
    f = (lambda yy, warm=None: histfit.profiled_q0(m, {"signal": yy}, data=data, warm=warm)) if kind == "q0" else \
        (lambda yy, warm=None: histfit.profiled_qmu(1.0, m, {"signal": yy}, data=data, warm=warm))
    r = f(y)
    assert r.converged and r.q > 0
    for k in range(2):
        fd = central_difference(lambda yy: f(yy).q, y, k, 1e-3)
        assert r.grad["signal"][k] == pytest.approx(fd, rel=1e-4)
    warm = f(y * 1.01, r)
    cold = f(y * 1.01)
    assert warm.q == pytest.approx(cold.q, rel=1e-6)


def test_yield_inputs_are_checked(simple):
    m, data = simple
    p = m.suggested_init()
    # A sample with shapesys takes yields (its relative uncertainties held); a bin whose total
    # would be negative is refused.
    v, g, gy = m.twice_nll_and_grad_yields(p, data, {"background": [50.0, 52.0]})
    assert np.isfinite(v) and np.all(np.isfinite(gy["background"]))
    with pytest.raises(histfit.HistfitError, match="negative"):
        m.twice_nll_and_grad_yields(p, data, {"background": [-500.0, 52.0]})
    with pytest.raises(histfit.HistfitError, match="no sample"):
        m.twice_nll_and_grad_yields(p, data, {"nope": [1.0]})
    with pytest.raises(histfit.HistfitError, match="expected 2 bins"):
        histfit.profiled_q0(m, {"signal": [1.0]}, data=data)
    with pytest.raises(histfit.HistfitError, match="finite"):
        histfit.profiled_q0(m, {"signal": [1.0, float("nan")]}, data=data)


def central_difference(f, y, k, rel_step):
    """(f(y + h e_k) − f(y − h e_k)) / 2h with h = rel_step · y_k."""
    h = rel_step * y[k]
    yp, ym = y.copy(), y.copy()
    yp[k] += h
    ym[k] -= h
    return (f(yp) - f(ym)) / (2 * h)


def thu_with_network_signal():
    ws = histfit.Workspace(thu_with_network_signal_spec())
    return ws, ws.model()


def test_thu_sized_q0_gradient_matches_differences():
    """The issue's check: 1e-6 relative against central differences on a tHu-sized model. The
    differences' noise is the fits' residual error over the step, so the fits run to EDM 1e-14."""
    ws, m = thu_with_network_signal()
    data = ws.data(m)
    n = m._native.n_main
    y = np.linspace(30.0, 90.0, n)
    r = histfit.profiled_q0(m, {"nn_signal": y}, data=data, edm=1e-14)
    assert r.converged and r.q > 1.0
    worst = 0.0
    for k in [0, n // 2, n - 1]:
        fd = central_difference(lambda yy: histfit.profiled_q0(m, {"nn_signal": yy}, data=data, edm=1e-14).q, y, k, 3e-4)
        worst = max(worst, abs(r.grad["nn_signal"][k] - fd) / abs(fd))
    assert worst < 1e-6, worst


def test_inputs_do_not_linger(simple):
    m, data = simple
    p = m.suggested_init()
    plain = m.twice_nll(p, data)
    m.twice_nll_and_grad_yields(p, data, {"signal": [50.0, 70.0]})
    with open(fixture("simple_workspace.json")) as f:
        import json

        nominal = json.load(f)["channels"][0]["samples"][0]["data"]
    # A later call with other inputs (here: the same sample at its nominal yields through a
    # channel-qualified key) sees the model's yields everywhere else.
    again = m.twice_nll_and_grad_yields(p, data, {"singlechannel/signal": nominal})[0]
    assert again == pytest.approx(plain, rel=1e-12)
    with pytest.raises(histfit.HistfitError, match="twice"):
        m.twice_nll_and_grad_yields(p, data, {"signal": nominal, "singlechannel/signal": nominal})
    with pytest.raises(histfit.HistfitError, match="negative"):
        histfit.profiled_q0(m, {"signal": [-1000.0, 5.0]}, data=data)


def test_expected_q0_gradient_matches_differences(simple):
    m, _ = simple
    y = np.array([12.0, 20.0])
    r = histfit.expected_q0(m, {"signal": y}, edm=1e-14)
    assert r.converged and r.q > 0
    for k in range(2):
        fd = central_difference(lambda yy: histfit.expected_q0(m, {"signal": yy}, edm=1e-14).q, y, k, 1e-4)
        assert r.grad["signal"][k] == pytest.approx(fd, rel=1e-5)


def test_device_yields_need_a_cuda_device(simple):
    # Yields in device memory name their device; a CPU one is refused before anything is read.
    m, data = simple
    dev = histfit._native.DeviceYields("cpu", [("signal", 0, 2)], 0)
    with pytest.raises(histfit.HistfitError, match="expected a CUDA device"):
        histfit.profiled_q0(m, dev, data=data)
    with pytest.raises(histfit.HistfitError, match="unknown device"):
        m.twice_nll_and_grad_yields(m.suggested_init(), data, histfit._native.DeviceYields("tpu", [], 0))
