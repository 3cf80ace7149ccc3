#!/usr/bin/env python3
"""Runs the HS3 test suite's likelihood checks on histfit (issue 53).

The suite (github.com/hep-statistics-serialization-standard/HS3TestSuite) holds HS3 documents
exported by ROOT (6.41.01) from RooFit's tutorials and others (`fixtures/NAME/hs3.json`), each with
the checks a backend must pass (`fixtures/NAME/expected.json`). The check that measures a
backend is `twice_delta_nll_scan`: for a distribution and a dataset (or a likelihood), 2 ΔNLL =
2 (NLL(point) − NLL(reference point)) at each scan point — the scan parameters set, every other
parameter at the reference point — against ROOT's values, |got − expected| ≤ atol + rtol
|expected| with the check's own tolerances. (`static_integrity` checks the suite's own files'
hashes and `structure_import` that a backend's workspace has the named objects: neither measures
a likelihood; they are not run here.)

histfit opens each (distribution, dataset) pair as the likelihood of that distribution on that
dataset — a `likelihoods` entry added to the document, the way a user names it — and
evaluates `EventModel.twice_nll` at the points. A fixture whose document histfit cannot open
(a type it does not read) is reported with histfit's message, not counted as passed.

    python scripts/hs3_test_suite.py SUITE_DIR [--json OUT]

SUITE_DIR is a checkout of the suite (its `manifest.json` and `fixtures/`). Prints one line
per check and a summary; exits 1 when a check fails that is not one of the differences known
and explained below (`KNOWN`).
"""
import copy
import json
import os
import sys

import histfit

# Checks whose reference histfit does not meet, and why (each verified against SciPy: see
# README, "Event-level models (HS3)"). They are reported as "differs", not "failed".
KNOWN = {
    # ROOT normalises a Gaussian in x whose mean is a function of the observable y over x and
    # y together; histfit (and the suite's own rf303, the same document shape) over x at each
    # event's y.
    "rf301_composition": "conditional normalisation (ROOT's values: the joint one)",
    "rf302_utilfuncs": "conditional normalisation (ROOT's values: the joint one)",
    "rf305_condcorrprod": "conditional normalisation (ROOT's values: the joint one)",
    "rf309_ndimplot": "conditional normalisation (ROOT's values: the joint one)",
    # A cusp at x = −0.1/alpha: histfit's quadrature reaches 2e-6 (said when the file opens),
    # ROOT's numerical integral is further off.
    "rf103_interprfuncs": "quadrature over a cusp (2e-3 from SciPy; ROOT's 0.47)",
    # ROOT's numerical normalisation: histfit equals SciPy's adaptive quad to 4e-12.
    "rf703_effpdfprod": "ROOT's numerical integral (7e-4 from SciPy; histfit 4e-12)",
    # The likelihood's aux_distributions are priors over its own parameters (the cells' scales
    # under N(s | globalScale, cellSpread)); ROOT's values leave them out (2 ΔNLL = 0 at every
    # globalScale), histfit includes them, equal to SciPy's truncated normals to 1e-15.
    "hierarchical_calibration_model": "priors left out of ROOT's values (histfit's equal SciPy's)",
    # RooFFTConvPdf's cyclic FFT on the cache binning (10 000 bins over [−10, 30]) is the
    # convolution displaced by half a bin (−0.002 in t: the linear convolution so displaced
    # gives ROOT's values to 3e-4); histfit's equals NumPy/SciPy's to 2e-12 (1.14 below ROOT's
    # 2 ΔNLL at ml = 3).
    "rf208_convolution_fft3": "ROOT's FFT, half a cache bin off (histfit's equal SciPy's linear convolution)",
}


def pairs_of(target):
    """The (distribution, dataset) pairs a scan's target names, or a likelihood's name."""
    if "likelihood" in target:
        return None, target["likelihood"]
    pdfs, data = target.get("pdf", target.get("pdfs")), target.get("data")
    pdfs = [pdfs] if isinstance(pdfs, str) else list(pdfs or [])
    data = [data] if isinstance(data, str) else list(data or [])
    if len(pdfs) != len(data) or not pdfs:
        raise ValueError(f"target {target}: distributions and datasets do not pair")
    return list(zip(pdfs, data)), None


def open_for(doc, target):
    """histfit's model of the scan's target."""
    pairs, likelihood = pairs_of(target)
    if likelihood is not None:
        return histfit.open(doc, likelihood=likelihood)
    d = copy.deepcopy(doc)
    name = "hs3_test_suite"
    d["likelihoods"] = [{"name": name, "distributions": [p for p, _ in pairs],
                         "data": [x for _, x in pairs]}]
    d.pop("analyses", None)
    return histfit.open(d, likelihood=name)


def scan_spec(check):
    """The scan's parameters and points: `scan_parameters` with a list of points, or (an older
    form of the suite's) `scan_parameter` with a list of values."""
    if "scan_parameters" in check:
        return list(check["scan_parameters"]), [list(p) for p in check["scan_points"]]
    return [check["scan_parameter"]], [[v] for v in check["scan_points"]]


def scan(model, check, axes):
    """2 ΔNLL at the check's scan points, against its reference point. A scan "parameter"
    that is an axis of the data (an observable: the suite's reference scans set it with the
    parameters, and the events decide its values) changes nothing and is passed over."""
    names = model.par_names
    ref = list(model.suggested_init())
    for k, v in check.get("reference_point", {}).items():
        if k in names:
            ref[names.index(k)] = float(v)
    params, points = scan_spec(check)
    missing = [p for p in params if p not in names and p not in axes]
    if missing:
        raise ValueError(f"scan parameters {missing} are not parameters of histfit's model ({names})")
    at = [(names.index(p) if p in names else None) for p in params]
    base = model.twice_nll(ref)
    out = []
    for point in points:
        p = list(ref)
        for i, v in zip(at, point):
            if i is not None:
                p[i] = float(v)
        out.append(model.twice_nll(p) - base)
    return out


def run(suite):
    # Every folder under fixtures/ (the manifest may list fewer); the manifest gives the types.
    manifest = json.load(open(os.path.join(suite, "manifest.json")))
    listed = {fx["test_id"]: fx for fx in manifest["fixtures"]}
    results = []
    for tid in sorted(os.listdir(os.path.join(suite, "fixtures"))):
        fx = listed.get(tid, {})
        path = os.path.join(suite, "fixtures", tid)
        exp_path = os.path.join(path, "expected.json")
        if not os.path.exists(exp_path):
            results.append({"test": tid, "check": "-", "status": "no checks"})
            continue
        if not os.path.exists(os.path.join(path, "hs3.json")):
            results.append({"test": tid, "check": "-", "status": "no hs3.json"})
            continue
        doc = json.load(open(os.path.join(path, "hs3.json")))
        for check in json.load(open(exp_path))["checks"]:
            if check["kind"] != "twice_delta_nll_scan":
                continue
            r = {"test": tid, "check": check["id"], "types": fx.get("features", {}).get("types", [])}
            try:
                pairs_of(check["target"])
            except ValueError as e:
                r.update(status="failed", message=f"the check's target: {e}")
                results.append(r)
                continue
            try:
                model = open_for(doc, check["target"])
            except Exception as e:  # histfit's one-line message
                r.update(status="not read", message=str(e).splitlines()[0])
                results.append(r)
                continue
            tol = check.get("tolerance", {})
            atol, rtol = float(tol.get("atol", 0.0)), float(tol.get("rtol", 0.0))
            try:
                axes = {a["name"] for d in doc.get("data", []) for a in d.get("axes", [])}
                got = scan(model, check, axes)
            except Exception as e:
                r.update(status="failed", message=str(e).splitlines()[0])
                results.append(r)
                continue
            want = check["expected"]
            if len(got) != len(want) or not want:
                r.update(status="failed", message=f"{len(got)} points scanned, {len(want)} expected")
                results.append(r)
                continue
            worst = max(abs(g - w) - (atol + rtol * abs(w)) for g, w in zip(got, want))
            dev = max(abs(g - w) for g, w in zip(got, want))
            status = "passed" if worst <= 0 else ("differs" if tid in KNOWN else "failed")
            if status == "differs":
                r["known"] = KNOWN[tid]
            r.update(status=status, points=len(want),
                     largest_difference=dev, atol=atol, rtol=rtol, got=got, expected=want)
            results.append(r)
    return results


def main():
    args = sys.argv[1:]
    out = None
    if "--json" in args:
        i = args.index("--json")
        if i + 1 >= len(args):
            sys.exit("--json needs a file name")
        out = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    results = run(args[0])
    for r in results:
        extra = (f"{r['points']} points, largest |Δ| {r['largest_difference']:.2e} "
                 f"(atol {r['atol']:g}, rtol {r['rtol']:g})") if "points" in r else r.get("message", "")
        if "known" in r:
            extra += f": {r['known']}"
        print(f"{r['status']:>16}  {r['test']}::{r['check']}  {extra}")
    counts = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print("summary:", ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if out:
        json.dump(results, open(out, "w"), indent=1)
    sys.exit(1 if counts.get("failed") else 0)


if __name__ == "__main__":
    main()
