#!/usr/bin/env python3
"""Makes the references histfit's XML + ROOT import is tested against, from pyhf 0.7.6 (its
`readxml`, the reference importer, reading ROOT files through uproot). Run in a venv with
pyhf==0.7.6, uproot 5 and numpy:

    python scripts/make_xml_goldens.py

tests/fixtures/xml/ holds HistFactory configurations and ROOT files from pyhf's repository
(`validation/*`, `tests/test_import/*`; see tests/fixtures/xml/README.md). This script

1. writes tests/fixtures/xml/generated/*.root with uproot: the same histograms (TH1D with Σw²,
   TH1F without, TH1I, variable bins, nested directories, 300 bins)
   under each compression ROOT writes (zlib, LZ4, zstd, LZMA, none);
2. records every one-dimensional histogram of every ROOT file as uproot reads it (contents,
   edges, and the errors pyhf's importer derives) in goldens/root_histograms.json;
3. runs pyhf's xml2json on every top-level configuration and records the workspace, the likelihood
   at the suggested initial point and at a displaced point, and pyhf's best fit (scipy), all in
   pyhf's interpolation setting (code1/code0), in goldens/xml_imports.json; configurations pyhf
   refuses are recorded with the error's type.
"""
import glob
import json
import pathlib

import numpy as np
import pyhf
import pyhf.readxml
import uproot
from uproot.writing.identify import to_TAxis, to_TH1x

ROOT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "xml"
GENERATED = ROOT / "generated"
PYHF_SETTING = {"normsys": {"interpcode": "code1"}, "histosys": {"interpcode": "code0"}}


def th1(name, title, contents, sumw2, edges, dtype):
    n = len(contents)
    cells = np.concatenate([[0.0], contents, [0.0]]).astype(dtype)
    sumw2 = np.concatenate([[0.0], sumw2, [0.0]]) if len(sumw2) else np.array([])
    uniform = np.allclose(np.diff(edges), edges[1] - edges[0])
    axis = to_TAxis("xaxis", "", n, float(edges[0]), float(edges[-1]),
                    np.array([]) if uniform else np.asarray(edges, dtype=">f8"))
    centres = 0.5 * (edges[1:] + edges[:-1])
    tsumw = float(np.sum(contents))
    return to_TH1x(name, title, cells, float(n), tsumw, float(np.sum(sumw2)) if len(sumw2) else tsumw,
                   float(np.sum(contents * centres)), float(np.sum(contents * centres ** 2)),
                   np.asarray(sumw2, dtype=">f8"), axis)


def write_generated():
    GENERATED.mkdir(exist_ok=True)
    rng = np.random.default_rng(7)
    big = np.round(rng.uniform(0, 50, 300), 3)
    big_edges = np.linspace(-3.0, 3.0, 301)
    var_edges = np.array([0.0, 0.5, 1.0, 2.5, 4.0])
    small = np.array([3.5, 1.25, 7.0, 0.5])
    compressions = {"zlib": uproot.ZLIB(4), "lz4": uproot.LZ4(4), "zstd": uproot.ZSTD(4),
                    "lzma": uproot.LZMA(4), "none": None}
    for name, compression in compressions.items():
        with uproot.recreate(GENERATED / f"{name}.root", compression=compression) as f:
            f["weighted"] = th1("weighted", "TH1D with sumw2", big, big * 0.37, big_edges, ">f8")
            f["plain"] = th1("plain", "TH1F without sumw2", big, [], big_edges, ">f4")
            f["dir/sub/variable"] = th1("variable", "variable bins", small, small * 0.5, var_edges, ">f8")
            f["dir/counts"] = th1("counts", "TH1I", np.array([4, 0, 9, 2]), [], var_edges, ">i4")


def histogram_goldens():
    out = {}
    for path in sorted(glob.glob(str(ROOT / "**" / "*.root"), recursive=True)):
        rel = str(pathlib.Path(path).relative_to(ROOT))
        entries = {}
        with uproot.open(path) as f:
            for key, cls in f.classnames(cycle=False).items():
                if not cls.startswith("TH1"):
                    continue
                h = f[key]
                entries[key] = {
                    "class": cls,
                    "contents": h.to_numpy()[0].tolist(),
                    "edges": h.axis().edges().tolist(),
                    "errors": pyhf.readxml.extract_error(h),
                }
            others = {k: c for k, c in f.classnames(cycle=False).items() if not c.startswith("TH1")}
        out[rel] = {"histograms": entries, "other_classes": others}
    return out


def top_level_configs():
    for path in sorted(glob.glob(str(ROOT / "**" / "*.xml"), recursive=True)):
        if "<Combination" in open(path).read():
            rel = pathlib.Path(path).relative_to(ROOT)
            yield str(rel), str(rel.parts[0])


def import_goldens():
    out = {}
    for config, basedir in top_level_configs():
        pyhf.readxml.clear_filecache()
        case = {"basedir": basedir}
        try:
            spec = pyhf.readxml.parse(str(ROOT / config), str(ROOT / basedir))
        except Exception as e:  # the refusal is the reference
            case["error"] = type(e).__name__
            out[config] = case
            continue
        case["workspace"] = spec
        ws = pyhf.Workspace(spec)
        poi = spec["measurements"][0]["config"]["poi"]
        has_poi = any(m["name"] == poi for c in spec["channels"] for s in c["samples"] for m in s["modifiers"])
        model = ws.model(modifier_settings=PYHF_SETTING, **({} if has_poi else {"poi_name": None}))
        data = ws.data(model)
        init = np.asarray(model.config.suggested_init(), dtype=float)
        bounds = model.config.suggested_bounds()
        fixed = model.config.suggested_fixed()
        moved = init.copy()
        for i, (lo, hi) in enumerate(bounds):
            if not fixed[i]:
                moved[i] = min(hi, max(lo, init[i] + 0.3 * (1 if i % 2 == 0 else -1)))
        best, twice_nll = pyhf.infer.mle.fit(data, model, return_fitted_val=True)
        case.update({
            "poi": poi if has_poi else None,
            "parameters": model.config.par_names,
            "points": [init.tolist(), moved.tolist()],
            "twice_nll": [float(-2 * model.logpdf(p, data)[0]) for p in (init, moved)],
            "best_twice_nll": float(twice_nll),
            "best_fit": np.asarray(best).tolist(),
        })
        out[config] = case
    return out


def main():
    write_generated()
    goldens = ROOT / "goldens"
    goldens.mkdir(exist_ok=True)
    (goldens / "root_histograms.json").write_text(json.dumps(histogram_goldens(), sort_keys=True) + "\n")
    (goldens / "xml_imports.json").write_text(json.dumps(import_goldens(), indent=1, sort_keys=True) + "\n")
    print("pyhf", pyhf.__version__, "uproot", uproot.__version__)


if __name__ == "__main__":
    main()
