"""What the independent references of scripts/reference/ share: the HS3 document of an extended
signal + background mixture over one observable with its events inline, and iminuit's fit of a
reference −ln L with the reference's JSON (−ln L at the initial point and a second point, the
minimum, each parameter's value and Hesse error)."""
import json
import sys

from iminuit import Minuit


def extended_mixture_doc(script, distributions, lo, hi, xs, limits, init):
    """The document: `model`, the extended mixture of `sig` and `bkg` with yields `nsig` and
    `nbkg` (which `distributions` must define after it), over x in [lo, hi] with events `xs`."""
    return {
        "metadata": {"hs3_version": "0.2", "description": f"written by {script}"},
        "distributions": [
            {"name": "model", "type": "mixture_dist", "summands": ["sig", "bkg"],
             "coefficients": ["nsig", "nbkg"], "extended": True},
        ] + distributions,
        "data": [{"name": "events", "type": "unbinned",
                  "axes": [{"name": "x", "min": lo, "max": hi}],
                  "entries": [[float(x)] for x in xs]}],
        "likelihoods": [{"name": "L", "distributions": ["model"], "data": ["events"]}],
        "domains": [{"name": "default_domain", "type": "product_domain", "axes": [
            {"name": k, "min": float(a), "max": float(b)} for k, (a, b) in limits.items()]}],
        "parameter_points": [{"name": "default_values", "parameters": [
            {"name": k, "value": v} for k, v in init.items()]}],
    }


def write_doc(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def iminuit_reference(nll, init, limits, point2):
    """iminuit's fit of `nll` from `init` within `limits` (strategy 2, tolerance 1e-7, Hesse
    errors), and −ln L at `init` and `point2`: the reference document."""
    m = Minuit(nll, **init)
    m.limits = [limits[k] for k in init]
    m.errordef = Minuit.LIKELIHOOD
    m.strategy = 2
    m.tol = 1e-7
    m.migrad()
    m.hesse()
    fit = {"nll": m.fval, "valid": m.valid}
    for k in init:
        fit[k] = m.values[k]
        fit[k + "_error"] = m.errors[k]
    return {"nll_at_initial": nll(**init), "point2": point2, "nll_at_point2": nll(**point2),
            "fit": fit}


def exponential_draws(rng, n, c, lo, hi):
    """n draws of e^(−c x) on [lo, hi] by its inverse distribution function."""
    import numpy as np
    u = rng.uniform(size=n)
    return -np.log(np.exp(-c * lo) - u * (np.exp(-c * lo) - np.exp(-c * hi))) / c


def emit_reference(out, path):
    """Prints the reference document `out` as JSON and, with --write on the command line, writes
    it to `path` too."""
    text = json.dumps(out, indent=1)
    print(text)
    if "--write" in sys.argv:
        with open(path, "w") as f:
            f.write(text + "\n")
