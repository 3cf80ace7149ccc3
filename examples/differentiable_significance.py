# %% [markdown]
# # A network's histogram, trained for discovery significance
#
# Read top to bottom (or run `python examples/differentiable_significance.py`). We take a small
# pyhf workspace — a signal and a background with an uncertain shape — and let a neural network
# decide how a fixed number of signal events spreads over the two bins. The loss is the expected
# discovery significance: q0 on the Asimov dataset of signal + background built from the
# network's histogram, computed by histfit with every nuisance parameter re-fitted at each step.
# Its gradient with respect to the histogram (the envelope theorem, plus the Asimov data's own
# dependence on it) lets PyTorch back-propagate through the whole statistical analysis.
#
# Needs: `pip install ./crates/histfit-py torch`.

# %%
import os

import torch

import histfit
import histfit.torch as ht

here = os.path.dirname(os.path.abspath(__file__))
workspace = histfit.Workspace(os.path.join(here, "..", "tests", "fixtures", "simple_workspace.json"))
model = workspace.model()          # normsys code4, histosys code4p (pyhf's smooth default)
data = workspace.data(model)       # observed counts, then auxiliary data
print("parameters:", model.par_names)

# %% [markdown]
# The signal sample here carries only a normalisation factor (the POI `mu`), so its yields can be
# an input. Samples with histosys, staterror or shapesys modifiers cannot: their terms depend on
# their own nominal yields, and histfit refuses rather than return a wrong gradient.

# %% [markdown]
# With a GPU that histfit can use (`histfit.devices()`), everything lives there: the network, its
# histogram, and histfit's statistics, which read the histogram in place and write its gradient
# into a CUDA tensor (no copy to the host per step). Without one, the same code runs on the CPU.

# %%
device = "cuda" if torch.cuda.is_available() and histfit.devices()["cuda"] else "cpu"
print("device:", device)
torch.manual_seed(1)
net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).double().to(device)
features = torch.randn(64, 4, dtype=torch.float64).to(device)   # stand-in for simulated signal events
total_signal = 30.0

def signal_histogram():
    """The network's share of signal events per bin, times the expected total."""
    return total_signal * torch.softmax(net(features).mean(0), dim=0)

# %% [markdown]
# `ExpectedQ0` keeps the last fits as warm starts: consecutive steps move the histogram a little,
# so each step's fits start next to their minimum. (`ProfiledQ0(model, data)` is the same on the
# observed data.)

# %%
q0 = ht.ExpectedQ0(model)
optimizer = torch.optim.Adam(net.parameters(), lr=0.05)
for step in range(40):
    hist = signal_histogram()
    significance = q0({"signal": hist})
    loss = -significance
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == 39:
        z = significance.clamp(min=0).sqrt().item()
        print(f"step {step:2d}: signal {hist.detach().cpu().numpy().round(2)}  q0 {significance.item():.3f}  Z {z:.3f}")

# %% [markdown]
# The network moves signal into the bin where it stands out most against the background and its
# uncertainty, and the expected significance rises until the split is optimal. The same loop
# works with `histfit.torch.ProfiledQmu(mu, model)` for an exclusion-oriented loss.
