"""histfit.torch — the likelihood and profiled test statistics as PyTorch autograd functions,
for differentiable analyses (a network's output histogram → significance → loss).

Yields are given per sample as tensors (``{"signal": y}``; a sample present in several channels
takes its bins concatenated in channel order, ``"channel/sample"`` picks one); the samples must
carry only scaling modifiers (normfactor, lumi, normsys, shapefactor). Gradients are exact:
the analytic gradient of −ln L for :func:`twice_nll`, and for the profiled statistics the
envelope theorem (the nuisance parameters are re-fitted at each call, warm-started from the
previous call; no derivative of the fits is needed)::

    import histfit, histfit.torch
    model = histfit.Workspace("ws.json").model()
    q0 = histfit.torch.ProfiledQ0(model)            # keeps the warm starts between steps
    loss = -q0({"signal": net(x)})                   # maximise the discovery significance
    loss.backward()

Tensors may live on any device; the computation runs in histfit on the CPU (the values are
copied to the host and the gradients back).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import torch

import histfit


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


class _TwiceNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, model, data, keys, pars, *yields):
        v, gp, gy = model.twice_nll_and_grad_yields(_np(pars), data, {k: _np(y) for k, y in zip(keys, yields)})
        like = pars
        ctx.save_for_backward(
            torch.as_tensor(gp, dtype=like.dtype, device=like.device),
            *[torch.as_tensor(gy[k], dtype=y.dtype, device=y.device) for k, y in zip(keys, yields)],
        )
        return torch.as_tensor(v, dtype=like.dtype, device=like.device)

    @staticmethod
    def backward(ctx, grad_out):
        gp, *gys = ctx.saved_tensors
        return (None, None, None, grad_out * gp, *[grad_out * g for g in gys])


def twice_nll(model: "histfit.Model", pars: torch.Tensor, yields: Dict[str, torch.Tensor], data: Any = None) -> torch.Tensor:
    """−2 ln L at ``pars`` with the given yields; differentiable in ``pars`` and every yield."""
    keys = list(yields)
    d = model._native.observed() if data is None else np.asarray(data, dtype=np.float64)
    return _TwiceNLL.apply(model, d, keys, pars, *[yields[k] for k in keys])


def nll(model: "histfit.Model", pars: torch.Tensor, yields: Dict[str, torch.Tensor], data: Any = None) -> torch.Tensor:
    """−ln L (see :func:`twice_nll`)."""
    return 0.5 * twice_nll(model, pars, yields, data)


class _Profiled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, owner, keys, *yields):
        r = owner._evaluate({k: _np(y) for k, y in zip(keys, yields)})
        ctx.save_for_backward(*[torch.as_tensor(r.grad[k], dtype=y.dtype, device=y.device) for k, y in zip(keys, yields)])
        return torch.as_tensor(r.q, dtype=yields[0].dtype, device=yields[0].device)

    @staticmethod
    def backward(ctx, grad_out):
        return (None, None, *[grad_out * g for g in ctx.saved_tensors])


class ProfiledQ0(torch.nn.Module):
    """q0 (discovery) as a function of sample yields; ``forward(yields) -> q0``. Keeps the last
    fits as warm starts for the next call (``reset()`` forgets them)."""

    def __init__(self, model: "histfit.Model", data: Any = None):
        super().__init__()
        self.model = model
        self.data = None if data is None else np.asarray(data, dtype=np.float64)
        self.last: Optional[histfit.ProfiledStatistic] = None

    def reset(self) -> None:
        self.last = None

    def _evaluate(self, yields):
        self.last = histfit.profiled_q0(self.model, yields, self.data, self.last)
        return self.last

    def forward(self, yields: Dict[str, torch.Tensor]) -> torch.Tensor:
        keys = list(yields)
        return _Profiled.apply(self, keys, *[yields[k] for k in keys])


class ProfiledQmu(ProfiledQ0):
    """One-sided qμ at ``mu`` as a function of sample yields (see :class:`ProfiledQ0`)."""

    def __init__(self, mu: float, model: "histfit.Model", data: Any = None):
        super().__init__(model, data)
        self.mu = float(mu)

    def _evaluate(self, yields):
        self.last = histfit.profiled_qmu(self.mu, self.model, yields, self.data, self.last)
        return self.last


class ExpectedQ0(ProfiledQ0):
    """Expected discovery significance q0 (Asimov dataset of μ = 1 built from the yields; see
    :func:`histfit.expected_q0`) as a function of sample yields, warm-started between calls."""

    def __init__(self, model: "histfit.Model"):
        super().__init__(model, None)

    def _evaluate(self, yields):
        self.last = histfit.expected_q0(self.model, yields, self.last)
        return self.last


def q0(model: "histfit.Model", yields: Dict[str, torch.Tensor], data: Any = None) -> torch.Tensor:
    """q0 at the given yields (cold fits; use :class:`ProfiledQ0` in a training loop)."""
    return ProfiledQ0(model, data)(yields)


def expected_q0(model: "histfit.Model", yields: Dict[str, torch.Tensor]) -> torch.Tensor:
    """Expected q0 at the given yields (cold fits; use :class:`ExpectedQ0` in a loop)."""
    return ExpectedQ0(model)(yields)


def qmu(mu: float, model: "histfit.Model", yields: Dict[str, torch.Tensor], data: Any = None) -> torch.Tensor:
    """One-sided qμ at the given yields (cold fits; use :class:`ProfiledQmu` in a loop)."""
    return ProfiledQmu(mu, model, data)(yields)
