#!/usr/bin/env python3
"""Public ATLAS likelihoods as a fit regression suite: histfit's fit against pyhf 0.7.6's scipy and
Minuit fits, in both interpolation settings, in one run.

The workspaces are background-only likelihoods of ATLAS SUSY searches published on HEPData, as
vendored by the public repository Rupt/interval-evidence (``searches/<search>/<file>.json.gz``,
each a JSON document stored as a JSON string, gzipped). A selection spanning 57 to 623
parameters is kept in ``tests/fixtures/public/`` (plain JSON, gzipped), with pyhf's minima in
``tests/fixtures/public/references.json``; the test ``crates/histfit-py/tests/
test_public_likelihoods.py`` fits them in CI against those references.

Most of these files name a POI (``mu_SIG``) that only a signal patch adds. The free fit does not
depend on which parameter is the POI, so where the named one is missing the measurement's POI is
set to the first normfactor of the workspace, for pyhf and histfit alike; the likelihood itself is
unchanged.

Run in a venv with pyhf==0.7.6, iminuit and the histfit package:

    python scripts/public_likelihoods.py                    # fit all, print the table
    python scripts/public_likelihoods.py --write            # and write references.json
    python scripts/public_likelihoods.py --import CHECKOUT  # copy the selection from a checkout
                                                            # of Rupt/interval-evidence
    python scripts/public_likelihoods.py --references       # histfit against references.json
                                                            # (no pyhf fits: seconds, not 30 min)
"""
import argparse
import gzip
import json
import logging
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "public")
SETTINGS = {
    "smooth": {"normsys": {"interpcode": "code4"}, "histosys": {"interpcode": "code4p"}},
    "pyhf": {"normsys": {"interpcode": "code1"}, "histosys": {"interpcode": "code0"}},
}
# (fixture name, path in Rupt/interval-evidence): chosen to span the sizes (57-623 parameters), the
# structure (2 to 51 channels) and what once failed (stiff shapesys bins known to 0.1 %, dozens of
# nuisance parameters at their kink under pyhf's codes, concave kinks).
SELECTION = [
    ("jets_2021__SR6j-1000", "searches/atlas_susy_jets_2021/SR6j-1000_bkg.json.gz"),
    ("3LRJmimic_2020", "searches/atlas_susy_3LRJmimic_2020/bkg.json.gz"),
    ("hb_2019__a", "searches/atlas_susy_hb_2019/a_bkg.json.gz"),
    ("2Ljets_2022__str_srzhigh", "searches/atlas_susy_2Ljets_2022/str_srzhigh_bkg.json.gz"),
    ("2Ljets_2022__rjr_sr2l_low", "searches/atlas_susy_2Ljets_2022/rjr_sr2l_low_bkg.json.gz"),
    ("2hadtau_2020__high_mass", "searches/atlas_susy_2hadtau_2020/high_mass_bkg.json.gz"),
    ("3L_2021__onshell", "searches/atlas_susy_3L_2021/onshell_bkg.json.gz"),
    ("2L0J_2019", "searches/atlas_susy_2L0J_2019/bkg.json.gz"),
    ("1Lbb_2020", "searches/atlas_susy_1Lbb_2020/bkg.json.gz"),
    ("4L_2021", "searches/atlas_susy_4L_2021/bkg.json.gz"),
    ("compressed_2020__ewkinos", "searches/atlas_susy_compressed_2020/ewkinos_bkg.json.gz"),
    ("3L_2021__offshell", "searches/atlas_susy_3L_2021/offshell_bkg.json.gz"),
    ("3Lresonance_2020", "searches/atlas_susy_3Lresonance_2020/bkg.json.gz"),
]


def read_gz_json(path):
    """A workspace from a gzipped file; interval-evidence's files hold the JSON as a JSON string."""
    with gzip.open(path, "rt") as f:
        spec = json.load(f)
    return json.loads(spec) if isinstance(spec, str) else spec


def with_poi(spec):
    """`spec` with a POI the model has (see the module docs) and the POI's name."""
    names = []
    for channel in spec["channels"]:
        for sample in channel["samples"]:
            for mod in sample["modifiers"]:
                if mod["type"] == "normfactor" and mod["name"] not in names:
                    names.append(mod["name"])
    poi = spec["measurements"][0]["config"]["poi"]
    if poi not in names:
        poi = names[0]
        for m in spec["measurements"]:
            m["config"]["poi"] = poi
    return spec, poi


def load(name):
    return with_poi(read_gz_json(os.path.join(FIXTURES, name + ".json.gz")))


def import_selection(checkout):
    os.makedirs(FIXTURES, exist_ok=True)
    for name, path in SELECTION:
        spec = read_gz_json(os.path.join(checkout, path))
        out = os.path.join(FIXTURES, name + ".json.gz")
        # mtime=0: the same bytes on every import.
        with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
            f.write(json.dumps(spec, separators=(",", ":")).encode())
        print(f"{out}: {os.path.getsize(out)} bytes", file=sys.stderr)


def pyhf_fits(pyhf, spec, setting):
    """pyhf's twice_nll at the initial point and the minima of its scipy and Minuit fits."""
    out = {}
    for label, optimizer in [("scipy", pyhf.optimize.scipy_optimizer()),
                             ("minuit", pyhf.optimize.minuit_optimizer(tolerance=1e-4))]:
        pyhf.set_backend("numpy", optimizer)
        ws = pyhf.Workspace(spec)
        model = ws.model(modifier_settings=SETTINGS[setting])
        data = np.asarray(ws.data(model), dtype=float)
        if "init" not in out:
            init = model.config.suggested_init()
            out["n_pars"] = len(init)
            out["init"] = float(-2.0 * model.logpdf(init, data)[0])
        t = time.time()
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                best = pyhf.infer.mle.fit(data, model)
            out[label] = float(-2.0 * model.logpdf(best, data)[0])
        except Exception as e:  # pyhf raises FailedMinimization
            out[label] = None
            out[label + "_failure"] = f"{type(e).__name__}: {str(e)[:160]}"
        out[label + "_seconds"] = round(time.time() - t, 2)
    return out


def histfit_fit(histfit, spec, setting):
    ws = histfit.Workspace(spec)
    model = ws.model(interp=setting)
    data = ws.data(model)
    t = time.time()
    r = histfit.fit(data, model)
    return {"twice_nll": r.twice_nll, "converged": r.converged, "reason": r.reason,
            "seconds": time.time() - t, "n_pars": len(model.par_names),
            "init": model.twice_nll(model.suggested_init(), data)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--import", dest="checkout", help="copy the selection from this checkout first")
    ap.add_argument("--write", action="store_true", help="write references.json")
    ap.add_argument("--only", help="fit only fixtures whose name contains this")
    ap.add_argument("--references", action="store_true",
                    help="take pyhf's numbers from references.json instead of fitting with pyhf")
    args = ap.parse_args()
    if args.checkout:
        import_selection(args.checkout)
    import histfit

    if args.references:
        with open(os.path.join(FIXTURES, "references.json")) as f:
            stored = json.load(f)
        pyhf = None
    else:
        import pyhf
    # pyhf logs a failed Minuit fit with its whole covariance table.
    logging.getLogger("pyhf").setLevel(logging.CRITICAL)
    refs = {"pyhf_version": stored["pyhf_version"] if pyhf is None else pyhf.__version__,
            "workspaces": {}}
    print(f"{'workspace':28s} {'pars':>4s} {'setting':7s} {'histfit':>14s} {'pyhf scipy':>14s} "
          f"{'pyhf minuit':>14s} {'histfit-best':>12s} conv  t_histfit t_scipy t_minuit")
    worst = -np.inf
    for name, path in SELECTION:
        if args.only and args.only not in name:
            continue
        spec, poi = load(name)
        entry = {"source": "Rupt/interval-evidence " + path, "poi": poi, "settings": {}}
        for setting in SETTINGS:
            if pyhf is None:
                p = stored["workspaces"][name]["settings"][setting]
            else:
                p = pyhf_fits(pyhf, spec, setting)
            h = histfit_fit(histfit, spec, setting)
            entry["n_pars"] = p["n_pars"]
            entry["settings"][setting] = p
            finite = [v for v in (p["scipy"], p["minuit"]) if v is not None]
            delta = h["twice_nll"] - min(finite) if finite else float("nan")
            worst = max(worst, delta)
            fmt = lambda v: f"{v:14.6f}" if v is not None else f"{'failed':>14s}"  # noqa: E731
            print(f"{name:28s} {p['n_pars']:4d} {setting:7s} {h['twice_nll']:14.6f} {fmt(p['scipy'])} "
                  f"{fmt(p['minuit'])} {delta:12.2e} {int(h['converged']):4d} {h['seconds']:9.3f} "
                  f"{p['scipy_seconds']:7.1f} {p['minuit_seconds']:8.1f}", flush=True)
            if h["n_pars"] != p["n_pars"] or abs(h["init"] - p["init"]) > 1e-9 * abs(p["init"]):
                print(f"  MODEL DIFFERS: histfit {h['n_pars']} pars, twice_nll(init) {h['init']!r}; "
                      f"pyhf {p['n_pars']}, {p['init']!r}", flush=True)
            if not h["converged"]:
                print(f"  not converged: {h['reason']}", flush=True)
        refs["workspaces"][name] = entry
    print(f"largest histfit - min(pyhf scipy, pyhf minuit): {worst:.3e} (target <= 1e-6)")
    if args.write and pyhf is not None:
        with open(os.path.join(FIXTURES, "references.json"), "w") as f:
            json.dump(refs, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
