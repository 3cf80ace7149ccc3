"""histfit.torch — the likelihood and profiled test statistics as PyTorch autograd functions,
for differentiable analyses (a network's output histogram → significance → loss).

Yields are given per sample as tensors (``{"signal": y}``; a sample present in several channels
takes its bins concatenated in channel order, ``"channel/sample"`` picks one); any sample may be
an input: its scale factors multiply it, staterror and shapesys keep the workspace's relative
uncertainties, and histosys variations follow ``Workspace.model(yield_variations=...)``
("relative": scaled with the input per bin, the default; or "absolute"). Gradients are exact for
that definition:
the analytic gradient of −ln L for :func:`twice_nll`, and for the profiled statistics the
envelope theorem (the nuisance parameters are re-fitted at each call, warm-started from the
previous call; no derivative of the fits is needed)::

    import histfit, histfit.torch
    model = histfit.Workspace("ws.json").model()
    q0 = histfit.torch.ProfiledQ0(model)            # keeps the warm starts between steps
    loss = -q0({"signal": net(x)})                   # maximise the discovery significance
    loss.backward()

CPU tensors are read and written as numpy arrays. CUDA tensors, when histfit can use that GPU
(``histfit.devices()``), stay there: histfit reads the yields in place and its kernels write the
gradient into a tensor on the same device, in PyTorch's own CUDA context — per step only the
fits' parameter vectors and values cross the bus, never the yields or their gradient. Float64
yields are read as they are; other dtypes are converted on the device. When histfit cannot use
the GPU (``histfit.devices()`` lists no CUDA device), CUDA tensors are copied to the host (with a
warning saying why); a failure of the GPU itself raises ``histfit.DeviceError``. On the GPU path
``ProfiledQ0.last.grad`` holds the gradients as tensors shaped like the yields, on their device.

On any other GPU, ``device="wgpu"`` (or ``"vulkan:1"``, ``"metal+compensated"`` …; every function
and module here takes it) bridges the tensors through the host to histfit's f32 evaluator: the
yields are written into the adapter's tables and the fits run there, and the gradient with
respect to the yields is formed in f64 on the host at the fits' end points.

"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

try:
    import torch
except ImportError as e:  # the optional dependency: say what to install
    raise ImportError(
        "histfit.torch needs PyTorch, which is not installed: pip install 'histfit[torch]' "
        "(or pip install torch)"
    ) from e

import histfit


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


_CUDA_REASON: Optional[str] = None
_CUDA_CHECKED = False


def _cuda_usable() -> bool:
    """Whether histfit can run on the GPU (checked once; the reason is warned about once)."""
    global _CUDA_REASON, _CUDA_CHECKED
    if not _CUDA_CHECKED:
        _CUDA_CHECKED = True
        d = histfit.devices()
        if not d.get("cuda"):
            _CUDA_REASON = d.get("cuda_unavailable_reason") or "no CUDA device"
            warnings.warn(f"histfit cannot use the GPU ({_CUDA_REASON}): CUDA tensors are copied to "
                          "the host and the statistics run on the CPU", RuntimeWarning, stacklevel=4)
    return _CUDA_REASON is None


class _OnDevice:
    """Yields as float64 CUDA buffers histfit reads in place, and the gradient buffer it writes."""

    def __init__(self, keys: List[str], yields: Tuple[torch.Tensor, ...]):
        dev = yields[0].device
        if any(y.device != dev for y in yields):
            raise histfit.HistfitError("yields: all tensors must be on one device")
        # Conversions run on the device; the float64 copies live until the call returns.
        self.inputs = [y.detach().to(torch.float64).contiguous().ravel() for y in yields]
        self.like = yields
        self.out = torch.empty(sum(y.numel() for y in self.inputs), dtype=torch.float64, device=dev)
        ordinal = dev.index if dev.index is not None else torch.cuda.current_device()
        args = [(k, y.data_ptr(), y.numel()) for k, y in zip(keys, self.inputs)]
        # Passed wherever host yields are: the same statistics, read in place on the GPU.
        self.source = histfit._native.DeviceYields(f"cuda:{ordinal}", args, self.out.data_ptr())
        # histfit's stream must see the values PyTorch's queued work produces, on any stream.
        torch.cuda.synchronize(dev)

    def grads(self) -> List[torch.Tensor]:
        parts = torch.split(self.out, [y.numel() for y in self.inputs])
        return [g.to(y.dtype).view_as(y) for g, y in zip(parts, self.like)]


def _yield_source(keys: List[str], yields, device: Optional[str] = None) -> Tuple[Any, Callable[[Any], List[torch.Tensor]]]:
    """The yields as histfit takes them — in place in GPU memory when they are CUDA tensors and
    histfit can use the GPU (no other device named), else as host arrays — and how to turn the
    gradient it returns into tensors like the yields."""
    if (device is None and yields and all(isinstance(y, torch.Tensor) and y.is_cuda for y in yields)
            and _cuda_usable()):
        dev = _OnDevice(keys, tuple(yields))
        return dev.source, lambda _: dev.grads()
    return ({k: _np(y) for k, y in zip(keys, yields)},
            lambda g: [torch.as_tensor(g[k], dtype=y.dtype, device=y.device).reshape(y.shape)
                       for k, y in zip(keys, yields)])


class _TwiceNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, model, data, keys, device, pars, *yields):
        like = pars
        source, grads = _yield_source(keys, yields, device)
        v, gp, gy = model.twice_nll_and_grad_yields(_np(pars), data, source, device)
        gys = grads(gy)
        ctx.save_for_backward(torch.as_tensor(gp, dtype=like.dtype, device=like.device), *gys)
        return torch.as_tensor(v, dtype=like.dtype, device=like.device)

    @staticmethod
    def backward(ctx, grad_out):
        gp, *gys = ctx.saved_tensors
        return (None, None, None, None, grad_out * gp, *[grad_out * g for g in gys])


def twice_nll(model: "histfit.Model", pars: torch.Tensor, yields: Dict[str, torch.Tensor], data: Any = None,
              device: Optional[str] = None) -> torch.Tensor:
    """−2 ln L at ``pars`` with the given yields; differentiable in ``pars`` and every yield.
    ``device``: a wgpu device (``"wgpu"``, ``"vulkan:1"``, ``"metal+compensated"`` …) evaluates on
    that GPU in f32 with the tensors bridged from the CPU; default the CPU, or the CUDA device
    that holds CUDA tensors."""
    keys = list(yields)
    d = model._native.observed() if data is None else np.asarray(data, dtype=np.float64)
    return _TwiceNLL.apply(model, d, keys, device, pars, *[yields[k] for k in keys])


def nll(model: "histfit.Model", pars: torch.Tensor, yields: Dict[str, torch.Tensor], data: Any = None,
        device: Optional[str] = None) -> torch.Tensor:
    """−ln L (see :func:`twice_nll`)."""
    return 0.5 * twice_nll(model, pars, yields, data, device)


class _Profiled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, owner, keys, *yields):
        source, grads = _yield_source(keys, yields, owner.device)
        r = owner._evaluate(source)
        gys = grads(r.grad)
        r.grad = dict(zip(keys, gys))  # as tensors like the yields, whichever path made them
        ctx.save_for_backward(*gys)
        return torch.as_tensor(r.q, dtype=yields[0].dtype, device=yields[0].device)

    @staticmethod
    def backward(ctx, grad_out):
        return (None, None, *[grad_out * g for g in ctx.saved_tensors])


class ProfiledQ0(torch.nn.Module):
    """q0 (discovery) as a function of sample yields; ``forward(yields) -> q0``. Keeps the last
    fits as warm starts for the next call (``reset()`` forgets them). ``device``: a wgpu device
    runs the fits on that GPU in f32, CPU tensors bridged (see :func:`twice_nll`)."""

    def __init__(self, model: "histfit.Model", data: Any = None, device: Optional[str] = None):
        super().__init__()
        self.model = model
        self.data = None if data is None else np.asarray(data, dtype=np.float64)
        self.device = device
        self.last: Optional[histfit.ProfiledStatistic] = None

    def reset(self) -> None:
        self.last = None

    def _evaluate(self, yields):
        self.last = histfit.profiled_q0(self.model, yields, data=self.data, warm=self.last, device=self.device)
        return self.last

    def forward(self, yields: Dict[str, torch.Tensor]) -> torch.Tensor:
        keys = list(yields)
        return _Profiled.apply(self, keys, *[yields[k] for k in keys])


class ProfiledQmu(ProfiledQ0):
    """One-sided qμ at ``mu`` as a function of sample yields (see :class:`ProfiledQ0`)."""

    def __init__(self, mu: float, model: "histfit.Model", data: Any = None, device: Optional[str] = None):
        super().__init__(model, data, device)
        self.mu = float(mu)

    def _evaluate(self, yields):
        self.last = histfit.profiled_qmu(self.mu, self.model, yields, data=self.data, warm=self.last,
                                         device=self.device)
        return self.last


class ExpectedQ0(ProfiledQ0):
    """Expected discovery significance q0 (Asimov dataset of μ = 1 built from the yields; see
    :func:`histfit.expected_q0`) as a function of sample yields, warm-started between calls."""

    def __init__(self, model: "histfit.Model", device: Optional[str] = None):
        super().__init__(model, None, device)

    def _evaluate(self, yields):
        self.last = histfit.expected_q0(self.model, yields, warm=self.last, device=self.device)
        return self.last


def q0(model: "histfit.Model", yields: Dict[str, torch.Tensor], data: Any = None,
       device: Optional[str] = None) -> torch.Tensor:
    """q0 at the given yields (cold fits; use :class:`ProfiledQ0` in a training loop)."""
    return ProfiledQ0(model, data, device)(yields)


def expected_q0(model: "histfit.Model", yields: Dict[str, torch.Tensor], device: Optional[str] = None) -> torch.Tensor:
    """Expected q0 at the given yields (cold fits; use :class:`ExpectedQ0` in a loop)."""
    return ExpectedQ0(model, device)(yields)


def qmu(mu: float, model: "histfit.Model", yields: Dict[str, torch.Tensor], data: Any = None,
        device: Optional[str] = None) -> torch.Tensor:
    """One-sided qμ at the given yields (cold fits; use :class:`ProfiledQmu` in a loop)."""
    return ProfiledQmu(mu, model, data, device)(yields)
