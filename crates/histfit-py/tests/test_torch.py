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
