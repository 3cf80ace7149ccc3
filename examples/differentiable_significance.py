# %% [markdown]
# # A network's histogram, trained for discovery significance on a real ATLAS likelihood
#
# Read top to bottom (or run `python examples/differentiable_significance.py`). We take the ATLAS
# tHu workspace (184 parameters, 9 channels) and let a neural network decide how the signal sample
# `utH_dec` spreads over its bins. The loss is the expected discovery significance: q0 on the
# Asimov dataset of signal + background built from the network's histogram, computed by histfit
# with all 184 nuisance parameters re-fitted at each step. Its gradient with respect to the
# histogram (the envelope theorem, plus the Asimov data's own dependence on it) lets PyTorch
# back-propagate through the whole statistical analysis.
#
# Needs: `pip install ./crates/histfit-py torch`.

# %%
import json
import os

import torch

import histfit
import histfit.torch as ht

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "tests", "fixtures", "workspace_tHu.json")
workspace = histfit.Workspace(path)
model = workspace.model()          # normsys code4, histosys code4p (pyhf's smooth default)
print("parameters:", len(model.par_names))

# %% [markdown]
# The signal sample carries a normalisation factor (the POI), the luminosity, normsys and
# histosys variations and the MC statistical uncertainty (staterror). When its yields come from
# the network, `yield_variations="relative"` (the default of `Workspace.model`) carries the
# workspace's *relative* histosys variations and stat uncertainties over to the new histogram;
# `"absolute"` would add the workspace's deltas unchanged. histfit's gradients are exact for
# either definition. The input is the sample's bins in every channel, in the model's channel
# order (pyhf's: sorted by name).

# %%
spec = json.load(open(path))
nominal = [v for c in sorted(spec["channels"], key=lambda c: c["name"])
           for s in c["samples"] if s["name"] == "utH_dec" for v in s["data"]]
nominal = torch.tensor(nominal, dtype=torch.float64)
total_signal = float(nominal.sum())
print("signal bins:", len(nominal), " total:", round(total_signal, 3))

# %% [markdown]
# With a GPU that histfit can use (`histfit.devices()`), everything lives there: the network, its
# histogram, and histfit's statistics, which read the histogram in place and write its gradient
# into a CUDA tensor (no copy to the host per step). Without one, the same code runs on the CPU.

# %%
device = "cuda" if torch.cuda.is_available() and histfit.devices()["cuda"] else "cpu"
print("device:", device)
torch.manual_seed(1)
n_bins = len(nominal)
net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, n_bins)).double().to(device)
torch.nn.init.zeros_(net[2].weight)   # start from the workspace's own signal shape
torch.nn.init.zeros_(net[2].bias)
features = torch.randn(64, 4, dtype=torch.float64).to(device)   # stand-in for simulated signal events
prior = torch.log(nominal.clamp(min=1e-6)).to(device)

def signal_histogram():
    """The network's share of the signal per bin (starting at the workspace's), times the
    workspace's total: the network may move signal between bins, not add any."""
    return total_signal * torch.softmax(prior + net(features).mean(0), dim=0)

# %% [markdown]
# `ExpectedQ0` keeps the last fits as warm starts: consecutive steps move the histogram a little,
# so each step's fits start next to their minimum. (`ProfiledQ0(model, data)` is the same on the
# observed data.)

# %%
q0 = ht.ExpectedQ0(model)
optimizer = torch.optim.Adam(net.parameters(), lr=0.05)
for step in range(40):
    hist = signal_histogram()
    significance = q0({"utH_dec": hist})
    loss = -significance
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == 39:
        z = significance.clamp(min=0).sqrt().item()
        print(f"step {step:2d}: q0 {significance.item():.4f}  Z {z:.4f}  largest bin {hist.max().item():.3f}")

# %% [markdown]
# The network moves signal into the bins where it stands out most against the background and
# its uncertainties, and the expected significance rises. The same loop
# works with `histfit.torch.ProfiledQmu(mu, model)` for an exclusion-oriented loss.
