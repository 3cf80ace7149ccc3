"""histfit.torch: gradcheck in float64 for every autograd function, and a small network trained
to maximise the expected discovery significance (the loss falls)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # installed by scripts/test-all (CPU use of the PyPI wheel)

import histfit  # noqa: E402
import histfit.torch as ht  # noqa: E402
from conftest import fixture  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return histfit.Workspace(fixture("simple_workspace.json")).model()


def test_gradcheck_twice_nll(model):
    pars = torch.tensor([1.3, 0.97, 1.02], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([7.0, 11.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda p, s: ht.twice_nll(model, p, {"signal": s}), (pars, y))
    assert torch.autograd.gradcheck(lambda p, s: ht.nll(model, p, {"signal": s}), (pars, y))


def test_gradcheck_profiled_statistics(model):
    y = torch.tensor([20.0, 25.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: ht.q0(model, {"signal": s}), (y,), eps=1e-3, atol=1e-4, rtol=1e-3)
    y2 = torch.tensor([5.0, 10.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: ht.qmu(1.0, model, {"signal": s}), (y2,), eps=1e-3, atol=1e-4, rtol=1e-3)
    y3 = torch.tensor([12.0, 20.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: ht.expected_q0(model, {"signal": s}), (y3,), eps=1e-3, atol=1e-4,
                                    rtol=1e-3)


def test_training_raises_the_expected_significance(model):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    features = torch.randn(16, 4, dtype=torch.float64)
    q0 = ht.ExpectedQ0(model)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    losses = []
    for _ in range(25):
        # A fixed total of 30 signal events, shared between the two bins by the network.
        shares = torch.softmax(net(features).mean(0), dim=0)
        loss = -q0({"signal": 30.0 * shares})
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 1e-3, losses


def test_gradients_are_shaped_like_the_yields(model):
    # A (1, 2) signal tensor: the host path's gradients come back in its shape, as the GPU path's
    # do, and the module's last result holds them as tensors.
    y = torch.tensor([[20.0, 25.0]], dtype=torch.float64, requires_grad=True)
    q0 = ht.ProfiledQ0(model)
    q = q0({"signal": y})
    q.backward()
    assert y.grad.shape == y.shape
    assert isinstance(q0.last.grad["signal"], torch.Tensor) and q0.last.grad["signal"].shape == y.shape
    torch.testing.assert_close(q0.last.grad["signal"], y.grad)


def _thu_signal(interp="smooth", yield_variations="relative"):
    """tHu with its signal sample utH_dec (histosys, staterror, normsys, lumi, the POI, in every
    channel) as the input, and the sample's workspace yields in the model's channel order."""
    import json
    spec = json.load(open(fixture("workspace_tHu.json")))
    nominal = [v for c in sorted(spec["channels"], key=lambda c: c["name"])
               for s in c["samples"] if s["name"] == "utH_dec" for v in s["data"]]
    model = histfit.Workspace(spec).model(interp=interp, yield_variations=yield_variations)
    return model, torch.tensor(nominal, dtype=torch.float64)


@pytest.mark.parametrize("interp", ["smooth", "pyhf"])
@pytest.mark.parametrize("variations", ["relative", "absolute"])
def test_gradcheck_on_thu_with_a_tensor_signal(interp, variations):
    model, nominal = _thu_signal(interp, variations)
    init = np.asarray(model.suggested_init())
    pars = torch.tensor(init + 0.1 * np.sin(np.arange(len(init))), dtype=torch.float64)
    pars = torch.clamp(pars, min=torch.tensor([b[0] for b in model.suggested_bounds()], dtype=torch.float64),
                       max=torch.tensor([b[1] for b in model.suggested_bounds()], dtype=torch.float64))
    pars.requires_grad_(True)
    y = (1.3 * nominal + 0.1).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p, s: ht.twice_nll(model, p, {"utH_dec": s}), (pars, y))
    if interp == "smooth":
        # The profiled statistics re-fit all 184 parameters at every evaluation.
        y2 = (2.0 * nominal + 0.05).requires_grad_(True)
        assert torch.autograd.gradcheck(lambda s: ht.expected_q0(model, {"utH_dec": s}), (y2,), eps=1e-4,
                                        atol=1e-4, rtol=1e-3)


def test_training_on_thu_raises_the_expected_significance():
    model, nominal = _thu_signal()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, len(nominal))).double()
    features = torch.randn(16, 4, dtype=torch.float64)
    prior = torch.log(nominal.clamp(min=1e-6))
    q0 = ht.ExpectedQ0(model)
    opt = torch.optim.Adam(net.parameters(), lr=0.02)
    losses = []
    for _ in range(15):
        hist = float(nominal.sum()) * torch.softmax(prior + net(features).mean(0), dim=0)
        loss = -q0({"utH_dec": hist})
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 1.0, losses


def _wgpu_adapter():
    d = histfit.devices()
    return bool(d.get("wgpu")), d.get("wgpu_unavailable_reason")


def test_cpu_tensors_bridged_to_wgpu_match_the_cpu(model):
    """``device="wgpu"``: the fits on the adapter in f32, the CPU tensors bridged; −2 ln L and its
    gradients, q0, qμ and expected q0 with their yield gradients as on the CPU (lavapipe in CI)."""
    ok, why = _wgpu_adapter()
    if not ok:
        pytest.skip(f"no wgpu adapter: {why}")
    # Double-float by name: the tolerances are its tiers (an adapter whose compiler breaks it is
    # refused, and the test says so).
    wgpu = "wgpu+double-float"
    try:
        histfit.profiled_q0(model, {"signal": [5.0, 10.0]}, device=wgpu)
    except histfit.DeviceError as e:
        if "double-float" in str(e):
            pytest.skip(str(e))
        raise
    pars = torch.tensor([1.3, 0.97, 1.02], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([7.0, 11.0], dtype=torch.float64, requires_grad=True)
    grads = []
    for device in (None, wgpu):
        v = ht.twice_nll(model, pars, {"signal": y}, device=device)
        gp, gy = torch.autograd.grad(v, (pars, y))
        grads.append((v.item(), gp, gy))
    (vc, gpc, gyc), (vw, gpw, gyw) = grads
    assert abs(vc - vw) < 2e-4
    assert torch.allclose(gpc, gpw, atol=2e-3, rtol=0) and torch.allclose(gyc, gyw, atol=1e-6, rtol=0)
    for stat in (lambda s, dev: ht.q0(model, {"signal": s}, device=dev),
                 lambda s, dev: ht.qmu(1.0, model, {"signal": s}, device=dev),
                 lambda s, dev: ht.expected_q0(model, {"signal": s}, device=dev)):
        out = []
        for device in (None, wgpu):
            s = torch.tensor([12.0, 20.0], dtype=torch.float64, requires_grad=True)
            q = stat(s, device)
            (g,) = torch.autograd.grad(q, (s,))
            out.append((q.item(), g))
        (qc, gc), (qw, gw) = out
        assert abs(qc - qw) < 1e-4, (qc, qw)
        assert torch.allclose(gc, gw, atol=1e-3, rtol=0), (gc, gw)


def test_a_cuda_device_with_host_yields_is_refused(model):
    with pytest.raises(histfit.HistfitError, match="input yields are fitted on the CPU"):
        histfit.profiled_q0(model, {"signal": [5.0, 10.0]}, device="cuda")
