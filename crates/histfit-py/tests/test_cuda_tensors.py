"""histfit.torch with CUDA tensors and histfit's CUDA backend: the yields are read in place and
the gradients written on the device (no host copy of either: checked with the PyTorch profiler,
which records every copy of the process), with the numbers CPU tensors give. Skipped, with the
reason, where PyTorch or histfit has no GPU; run on the lent H100 before issue 5 is called done."""

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import histfit  # noqa: E402
import histfit.torch as ht  # noqa: E402
from conftest import fixture, thu_with_network_signal_spec  # noqa: E402


def _no_gpu():
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    d = histfit.devices()
    if not d["cuda"]:
        return f"histfit cannot use the GPU: {d['cuda_unavailable_reason']}"
    return None


pytestmark = pytest.mark.skipif(_no_gpu() is not None, reason=str(_no_gpu()))


@pytest.fixture(scope="module")
def thu():
    ws = histfit.Workspace(thu_with_network_signal_spec())
    model = ws.model()
    return model, ws.data(model)


def _signal(model, device, dtype=torch.float64):
    n = model._native.n_main
    return torch.linspace(30.0, 90.0, n, dtype=dtype, device=device).requires_grad_()


def _close(a, b, rtol):
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12)) <= rtol


@pytest.mark.parametrize("which", ["q0", "qmu", "expected"])
def test_statistics_match_cpu_tensors(thu, which):
    model, data = thu

    def make():
        if which == "q0":
            return ht.ProfiledQ0(model, data)
        if which == "qmu":
            return ht.ProfiledQmu(0.5, model, data)
        return ht.ExpectedQ0(model)

    out = {}
    for dev in ("cpu", "cuda"):
        y = _signal(model, dev)
        stat = make()
        q = stat({"nn_signal": y})
        q.backward()
        assert q.device.type == dev and y.grad.device.type == dev
        out[dev] = (q.item(), y.grad)
    (qc, gc), (qg, gg) = out["cpu"], out["cuda"]
    assert qc > 0
    assert abs(qg - qc) <= 1e-6 * max(qc, 1.0), (qg, qc)
    assert _close(gg, gc, 1e-5)


def test_twice_nll_gradcheck_and_float32(thu):
    model, data = thu
    pars = torch.tensor(model.suggested_init(), dtype=torch.float64, device="cuda", requires_grad=True)
    y = _signal(model, "cuda")
    v = ht.twice_nll(model, pars, {"nn_signal": y})
    v.backward()
    yc = _signal(model, "cpu")
    pc = pars.detach().cpu().requires_grad_()
    vc = ht.twice_nll(model, pc, {"nn_signal": yc})
    vc.backward()
    assert abs(v.item() - vc.item()) <= 1e-10 * abs(vc.item())
    assert _close(y.grad, yc.grad, 1e-10) and _close(pars.grad, pc.grad, 1e-10)
    small = histfit.Workspace(fixture("simple_workspace.json")).model()
    p = torch.tensor([1.3, 0.97, 1.02], dtype=torch.float64, device="cuda", requires_grad=True)
    s = torch.tensor([7.0, 11.0], dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(lambda p, s: ht.twice_nll(small, p, {"signal": s}), (p, s))
    y32 = _signal(model, "cuda", torch.float32)
    q = ht.ProfiledQ0(model, data)({"nn_signal": y32})
    q.backward()
    assert y32.grad.dtype == torch.float32 and y32.grad.device.type == "cuda"


def test_bad_yields_on_the_device_are_errors(thu):
    model, data = thu
    y = _signal(model, "cuda").detach().clone()
    y[3] = float("nan")
    with pytest.raises(histfit.HistfitError, match="finite"):
        ht.ProfiledQ0(model, data)({"nn_signal": y})
    with pytest.raises(histfit.HistfitError, match="expected 41 bins"):
        ht.ProfiledQ0(model, data)({"nn_signal": y[:5]})


def test_no_host_copy_of_the_signal(thu, tmp_path):
    """Every host<->device copy of a warm step, by size: none carries the signal (41 float64
    values); the trace shows histfit's kernels, so it does see histfit's work."""
    from torch.profiler import ProfilerActivity, profile

    model, data = thu
    n = model._native.n_main
    for stat in (ht.ProfiledQ0(model, data), ht.ExpectedQ0(model)):
        base = torch.linspace(30.0, 90.0, n, dtype=torch.float64, device="cuda")
        stat({"nn_signal": base.clone().requires_grad_()}).backward()  # cold step
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            y = (base * 1.01).requires_grad_()
            stat({"nn_signal": y}).backward()
            torch.cuda.synchronize()
        path = os.path.join(tmp_path, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        copies = [(e["name"], e.get("args", {}).get("bytes")) for e in events if e.get("cat") == "gpu_memcpy"]
        kernels = [e["name"] for e in events if e.get("cat") == "kernel"]
        assert any(k.startswith("nll_grad") for k in kernels) and any("yield_grad_sum" in k for k in kernels)
        across = [c for c in copies if "HtoD" in c[0] or "DtoH" in c[0]]
        assert across, "the trace should show the fits' parameter copies"
        # Scalars and indices (a few bytes) or whole parameter vectors, nothing else.
        n_par = len(model.par_names)
        assert all(b is not None and b != 8 * n and (b <= 64 or b % (8 * n_par) == 0) for _, b in across), across


def test_invalid_point_gives_nan_gradient_like_the_cpu(thu):
    model, data = thu
    pars = model.suggested_init()
    pars[model.poi_index] = -1000.0  # negative rates: −ln L is +inf, no gradient
    out = {}
    for dev in ("cpu", "cuda"):
        p = torch.tensor(pars, dtype=torch.float64, device=dev, requires_grad=True)
        y = _signal(model, dev)
        v = ht.twice_nll(model, p, {"nn_signal": y})
        v.backward()
        out[dev] = (v.item(), y.grad)
    assert out["cpu"][0] == out["cuda"][0] == float("inf")
    assert torch.isnan(out["cpu"][1]).all() and torch.isnan(out["cuda"][1]).all()


@pytest.mark.parametrize("interp", ["smooth", "pyhf"])
def test_toy_cls_on_the_device_equal_the_cpu(interp):
    """Toy CLs with ``device="cuda"`` (both ensembles drawn and fitted on the GPU, issue 23)
    against the CPU's on the same seed, in both interpolation settings: the same summary (CLs,
    CLs+b, CLb, the expected band), every toy's statistic and fits within 1e-6 of the CPU's."""
    with open(fixture("workspace_tHu.json")) as f:
        ws = histfit.Workspace(json.load(f))
    model = ws.model(interp=interp)
    data = ws.data(model)
    # At μ = 0.2, near tHu's limit (0.28), CLs is neither 0 nor 1.
    gpu = histfit.hypotest_toys(0.2, data, model, n_toys=200, seed=4, device="cuda")
    cpu = histfit.hypotest_toys(0.2, data, model, n_toys=200, seed=4, device="cpu")
    assert 0.0 < cpu["summary"]["cls_obs"] < 1.0
    # The counts and the observed CLs exactly; the expected band (CLs at quantiles of the
    # background-only statistics) to the fits' rounding.
    sg, sc = dict(gpu["summary"]), dict(cpu["summary"])
    np.testing.assert_allclose(sg.pop("cls_exp"), sc.pop("cls_exp"), rtol=0, atol=1e-9)
    assert sg == sc
    for ens in ("toys_sb", "toys_b"):
        assert len(gpu[ens]) == len(cpu[ens]) == 200
        for g, c in zip(gpu[ens], cpu[ens]):
            assert g["converged"] and c["converged"]
            for key in ("q", "twice_nll_free", "twice_nll_cond"):
                assert abs(g[key] - c[key]) <= 1e-6, (ens, key, g, c)
            assert abs(g["poi_hat"] - c["poi_hat"]) <= 2e-4, (ens, g, c)
