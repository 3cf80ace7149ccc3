"""histfit: fast HistFactory statistics for pyhf JSON workspaces.

A thin Python front end of the Rust engine (no statistics here)::

    import histfit
    ws = histfit.Workspace("workspace.json")        # a path, a JSON string or a pyhf dict
    model = ws.model()                              # interp="smooth" (code4/4p) or "pyhf" (code1/0)
    data = ws.data(model)
    result = histfit.fit(data, model)               # pyhf's order; best fit, uncertainties, covariance
    cls = histfit.hypotest(1.0, data, model)        # pyhf-compatible return options
    obs, exp = histfit.upper_limit(data, model)
    model.config.par_names                          # pyhf's model.config

Every function takes ``device="cpu"`` (default) or ``"cuda"`` / ``"cuda:N"`` (``"cuda:N,M"`` /
``"cuda:all"`` split toy ensembles over several GPUs). Arrays come back as
NumPy float64 arrays. Bad input raises :class:`HistfitError` (a ``ValueError``) with a message
naming the place and the rule; an unavailable or failing GPU raises :class:`DeviceError` (a
``RuntimeError``). The computation runs with the GIL released.
"""

import os as _os

# Mesa's Vulkan device-select layer looks for a desktop session to order GPUs by, and on a
# machine without one libwayland prints "error: XDG_RUNTIME_DIR is invalid" on every wgpu
# enumeration (as the CLI, which sets the same switch at start-up: histfit_wgpu's
# skip_display_probe). Without a session there is nothing to order by; a user's own choice
# (MESA_VK_DEVICE_SELECT, NODEVICE_SELECT) is kept.
if not _os.path.isdir(_os.environ.get("XDG_RUNTIME_DIR", "")) and not {
    "MESA_VK_DEVICE_SELECT", "NODEVICE_SELECT"} & set(_os.environ):
    _os.environ["NODEVICE_SELECT"] = "1"

from . import _api
from . import plot  # noqa: F401  (histfit.plot.* after `import histfit`; matplotlib loads on first use)
from ._api import *  # noqa: F401,F403  (exactly the names in _api.__all__)
from ._native import __version__

__all__ = [*_api.__all__, "__version__", "plot"]
