#!/usr/bin/env python3
"""HistFactory models as ROOT 6.40 exports them to HS3 (`histfactory_dist`), with RooFit's
numbers on them, for histfit's HS3 HistFactory reader.

Each model is one of the XML configurations in tests/fixtures/xml (pyhf's validation set), taken
from pyhf 0.7.6's `xml2json` of it (tests/fixtures/xml/goldens/xml_imports.json). ROOT 6.40's
wheel has no XML parser, so this script builds the same measurement through HistFactory's Python
API (samples, NormFactor, OverallSys, HistoSys, StatError, ShapeSys, ShapeFactor, Lumi), makes
the workspace with `MakeModelAndMeasurementFast` and exports it with `RooJSONFactoryWSTool`.

For each NAME it writes tests/fixtures/hs3/histfactory/:
  NAME.json          the HS3 document exactly as ROOT wrote it
  NAME.roofit.json   RooFit's numbers on the workspace that was exported: -ln L at the initial
                     point and at a second point, and a Minuit2 fit of the observed data
                     (values, Hesse errors, minimum), with the global observables held as ROOT's
                     ModelConfig names them; and whether ROOT's own reading of the document
                     agrees ("reimported": ROOT 6.40 reads a Gaussian staterror back as a
                     Poisson term with its global observable left at 1, so it does not).

Run: python scripts/make_hs3_histfactory.py [NAME ...]   (a venv with `pip install root`)
     python scripts/make_hs3_histfactory.py --export WS.json OUT   any pyhf workspace (lumi,
         normfactor, normsys, histosys, staterror, shapesys, shapefactor) to OUT.json as ROOT
         exports it, and OUT.roofit.json with RooFit's -ln L at two points (no fit: for large
         models; tests/fixtures/hs3/histfactory/tHu.json.gz is `--export
         tests/fixtures/workspace_tHu.json tests/fixtures/hs3/histfactory/tHu` and `gzip -9`)
     python scripts/make_hs3_histfactory.py --mixed   mixed.json: the lumi_free measurement's two
         HistFactory channels and an event-level channel (extended Gaussian + exponential in
         `mass` whose signal yield is 20·SigXsecOverSM·Lumi and whose background yield moves with
         alpha_coupled_overall as a 10 % normsys would, linearly) in one RooSimultaneous, exported
         by ROOT, with RooFit's numbers as for the others (one likelihood: binned and unbinned
         channels sharing the POI, the luminosity and a nuisance parameter)
"""
import json
import os
import sys
import tempfile

import ROOT

ROOT.gROOT.SetBatch(True)
ROOT.RooMsgService.instance().setGlobalKillBelow(ROOT.RooFit.WARNING)
ROOT.gSystem.Load("libHistFactory")
HF = ROOT.RooStats.HistFactory
RF = ROOT.RooFit
HERE = os.path.dirname(os.path.abspath(__file__))
ROOTDIR = os.path.join(HERE, "..")
OUT = os.path.join(ROOTDIR, "tests", "fixtures", "hs3", "histfactory")
GOLDENS = os.path.join(ROOTDIR, "tests", "fixtures", "xml", "goldens", "xml_imports.json")
KEEP = []
# MakeModelAndMeasurementFast writes ROOT files of every channel: not beside the repository
SCRATCH = tempfile.mkdtemp(prefix="histfactory-")

# fixture name -> configuration in the goldens
MODELS = {
    "shapesys": "multibin_histfactory/config/example.xml",
    "histosys_2chan": "multichan_coupledhistosys_histfactory/config/example.xml",
    "normsys_2chan": "multichan_coupledoverall_histfactory/config/example.xml",
    "staterror": "xmlimport_input/config/example.xml",
    "shapefactor": "xmlimport_input/config/examples/example_DataDriven.xml",
    "shapesys_normsys": "xmlimport_input/config/examples/example_ShapeSys.xml",
    "shared_nuisance": "shared_nuispar_across_types/config/example.xml",
    # the same measurement with the luminosity free (its Gaussian constraint in the likelihood)
    "lumi_free": "multichan_coupledoverall_histfactory/config/example.xml",
}

# per fixture, changes to the measurement's parameter settings before building
TWEAKS = {"lumi_free": {"lumi": {"fixed": False}}}


def th1(name, vals, errs=None):
    h = ROOT.TH1D(name, name, len(vals), 0.0, float(len(vals)))
    h.SetDirectory(0)
    for i, v in enumerate(vals):
        h.SetBinContent(i + 1, v)
        if errs is not None:
            h.SetBinError(i + 1, errs[i])
    ROOT.SetOwnership(h, False)  # HistFactory's objects take them
    KEEP.append(h)
    return h


def add_modifier(meas, cfg, ch, sm, nom, x):
    t, n = x["type"], x["name"]
    if t == "normfactor":
        p = cfg.get(n, {})
        b = p.get("bounds", [[0.0, 10.0]])[0]
        sm.AddNormFactor(n, p.get("inits", [1.0])[0], b[0], b[1])
    elif t == "normsys":
        sm.AddOverallSys(n, x["data"]["lo"], x["data"]["hi"])
    elif t == "histosys":
        hs = HF.HistoSys()
        hs.SetName(n)
        hs.SetHistoLow(th1(ch + sm.GetName() + n + "lo", x["data"]["lo_data"]))
        hs.SetHistoHigh(th1(ch + sm.GetName() + n + "hi", x["data"]["hi_data"]))
        sm.AddHistoSys(hs)
    elif t == "staterror":
        sm.ActivateStatError()
    elif t == "shapesys":
        # pyhf's shapesys data are absolute; HistFactory's ShapeSys histogram is relative
        ss = HF.ShapeSys()
        ss.SetName(n)
        ss.SetConstraintType(HF.Constraint.Poisson)
        rel = [d / v if v > 0 else 0.0 for d, v in zip(x["data"], nom)]
        ss.SetErrorHist(th1(ch + sm.GetName() + n + "rel", rel))
        sm.AddShapeSys(ss)
    elif t == "shapefactor":
        sm.AddShapeFactor(n)
    elif t != "lumi":
        raise SystemExit("unknown modifier " + t)


def build(ws):
    m = ws["measurements"][0]
    cfg = {p["name"]: p for p in m["config"]["parameters"]}
    meas = HF.Measurement(m["name"], m["name"])
    meas.SetOutputFilePrefix(os.path.join(SCRATCH, m["name"]))
    meas.SetPOI(m["config"]["poi"])
    lumi = cfg.get("lumi", {})
    meas.SetLumi(lumi.get("auxdata", [1.0])[0])
    meas.SetLumiRelErr(lumi.get("sigmas", [0.1])[0] / lumi.get("auxdata", [1.0])[0])
    if lumi.get("fixed"):
        meas.AddConstantParam("Lumi")
    # parameters the measurement holds constant, under HistFactory's names
    kinds = {x["name"]: x["type"] for c in ws["channels"] for s in c["samples"] for x in s["modifiers"]}
    for name, p in cfg.items():
        if p.get("fixed") and name != "lumi" and name in kinds:
            alpha = kinds.get(name) in ("normsys", "histosys")
            meas.AddConstantParam(("alpha_" if alpha else "") + name)
    obs = {o["name"]: o["data"] for o in ws["observations"]}
    for c in ws["channels"]:
        ch = HF.Channel(c["name"])
        ch.SetData(th1(c["name"] + "_data", obs[c["name"]]))
        # no relative-error threshold: every bin's gamma floats, as in pyhf
        ch.SetStatErrorConfig(0.0, "Gaussian")
        for s in c["samples"]:
            sm = HF.Sample(s["name"])
            st = [x for x in s["modifiers"] if x["type"] == "staterror"]
            sm.SetHisto(th1(c["name"] + s["name"], s["data"], st[0]["data"] if st else None))
            sm.SetNormalizeByTheory(any(x["type"] == "lumi" for x in s["modifiers"]))
            for x in s["modifiers"]:
                add_modifier(meas, cfg, c["name"], sm, s["data"], x)
            ch.AddSample(sm)
        meas.AddChannel(ch)
    KEEP.append(meas)
    w = HF.MakeModelAndMeasurementFast(meas)
    KEEP.append(w)
    return w


def reimported(path):
    """The document read back by ROOT (not the reference: ROOT 6.40's reader turns the Gaussian
    staterror constraint it wrote into a Poisson term whose global observable stays at 1)."""
    w = ROOT.RooWorkspace("reimported")
    KEEP.append(w)
    if not ROOT.RooJSONFactoryWSTool(w).importJSON(path):
        raise SystemExit(f"ROOT cannot read back {path}")
    return w


def minimum(nll, params):
    """The lowest of iminuit's minima of RooFit's -ln L from several starts, with Hesse errors
    (RooFit's own fitTo stops early: on histosys_2chan 0.74 above the minimum)."""
    import iminuit

    names = [p.GetName() for p in params]
    start = [p.getVal() for p in params]

    def f(x):
        for p, v in zip(params, x):
            p.setVal(v)
        return nll.getVal()

    starts = [start]
    for i, p in enumerate(params):
        for step in (-1.0, 1.0):
            x = list(start)
            x[i] = min(max(x[i] + step, p.getMin()), p.getMax())
            starts.append(x)
    best = None
    for x0 in starts:
        m = iminuit.Minuit(f, x0, name=names)
        m.errordef = 0.5
        m.strategy = 2
        m.tol = 1e-6
        m.limits = [(p.getMin(), p.getMax()) for p in params]
        m.migrad()
        if best is None or m.fval < best.fval:
            best = m
    # Hesse errors without the limits: with them, Minuit's errors pass through its bounded-
    # variable transform (SigXsecOverSM in [0, 3] at 1.0 ± 1.6 comes out 2.0)
    ranges = [(p.getMin(), p.getMax()) for p in params]
    for p in params:
        p.setRange(-1e30, 1e30)
    free = iminuit.Minuit(f, list(best.values), name=names)
    free.errordef = 0.5
    free.strategy = 2
    free.hesse()
    for p, (lo, hi) in zip(params, ranges):
        p.setRange(lo, hi)
    return {"minNll": best.fval, "valid": best.valid,
            "parameters": {n: {"value": best.values[n], "error": free.errors[n]} for n in names}}


def reference(w, fit=True):
    """RooFit's numbers on workspace `w` (the fit only where `fit`)."""
    return reference_of(w, "ModelConfig", "obsData", fit)


def reference_of(w, config, dataset, fit=True):
    """RooFit's numbers on model configuration `config` of workspace `w` and its dataset
    `dataset` (the fit only where `fit`)."""
    mc = w.obj(config)
    for g in mc.GetGlobalObservables():
        g.setRange(-1e3, 1e3)
    pdf, data = mc.GetPdf(), w.data(dataset)
    glob = mc.GetGlobalObservables()
    opts = [RF.GlobalObservables(glob), RF.EvalBackend("cpu")]
    nll = pdf.createNLL(data, *opts)
    KEEP.append(nll)
    params = [p for p in pdf.getParameters(data) if not p.isConstant() and not glob.find(p.GetName())]
    params.sort(key=lambda p: p.GetName())
    init = {p.GetName(): p.getVal() for p in params}
    nll_init = nll.getVal()
    # a second point: every free parameter moved by a tenth of its range's half-width
    second = {}
    for i, p in enumerate(params):
        step = 0.1 * min(p.getVal() - p.getMin(), p.getMax() - p.getVal(), 1.0)
        second[p.GetName()] = p.getVal() + (step if i % 2 == 0 else -step)
    for p in params:
        p.setVal(second[p.GetName()])
    nll_second = nll.getVal()
    # a third point far out: every free parameter 1.5 units (or a quarter of its range) away,
    # where the interpolation codes extrapolate
    third = {}
    for i, p in enumerate(params):
        step = min(1.5, 0.25 * (p.getMax() - p.getMin()))
        v = init[p.GetName()] + (step if i % 2 == 0 else -step)
        third[p.GetName()] = min(max(v, p.getMin()), p.getMax())
    for p in params:
        p.setVal(third[p.GetName()])
    nll_third = nll.getVal()
    for p in params:
        p.setVal(init[p.GetName()])
    fitted = minimum(nll, params) if fit else None
    for p in params:
        p.setVal(init[p.GetName()])
    return {
        "root_version": ROOT.gROOT.GetVersion(),
        "data": dataset,
        "free_parameters": [p.GetName() for p in params],
        "initial": init,
        "nll_initial": nll_init,
        "second": second,
        "nll_second": nll_second,
        "third": third,
        "nll_third": nll_third,
        "fit": fitted,
        "conventions": "the workspace HistFactory built and ROOT exported (not the document read back: "
                       "see 'reimported'); "
                       "nll = createNLL(obsData, GlobalObservables(ModelConfig's), EvalBackend('cpu')); "
                       "constant terms differ from pyhf's: compare differences between points; "
                       "fit = iminuit (strategy 2, tolerance 1e-6) on that NLL from the initial point and "
                       "from each free parameter moved ±1 (clipped): the lowest minimum, with Hesse errors "
                       "computed without the parameters' limits; "
                       "global observables' ranges widened to ±1e3 for these numbers, so that each "
                       "Gaussian constraint is normalised over the real line as in pyhf (RooFit otherwise "
                       "normalises a γ's Gaussian over its global observable's range [0, 10]: 4e-6 in -ln L)",
    }


def main(names):
    goldens = json.load(open(GOLDENS))
    os.makedirs(OUT, exist_ok=True)
    for name in names:
        ws = json.loads(json.dumps(goldens[MODELS[name]]["workspace"]))
        for p in ws["measurements"][0]["config"]["parameters"]:
            p.update(TWEAKS.get(name, {}).get(p["name"], {}))
        w = build(ws)
        path = os.path.join(OUT, name + ".json")
        with open(path, "w") as f:
            f.write(ROOT.RooJSONFactoryWSTool(w).exportJSONtoString())
        ref = reference(w)
        ref["configuration"] = MODELS[name]
        back = reference(reimported(path))  # widened ranges only after the export above
        ref["reimported"] = {
            "nll_initial": back["nll_initial"],
            "minNll": back["fit"]["minNll"],
            "agrees": abs((back["nll_second"] - back["nll_initial"]) - (ref["nll_second"] - ref["nll_initial"])) < 1e-8,
        }
        with open(os.path.join(OUT, name + ".roofit.json"), "w") as f:
            json.dump(ref, f, indent=1)
        print(f"{name}: valid {ref['fit']['valid']}, minNll {ref['fit']['minNll']:.6f}, "
              + ", ".join(f"{k} = {v['value']:.4f} ± {v['error']:.4f}" for k, v in ref["fit"]["parameters"].items()))


def export(workspace, out):
    with open(workspace) as f:
        w = build(json.load(f))
    with open(out + ".json", "w") as f:
        f.write(ROOT.RooJSONFactoryWSTool(w).exportJSONtoString())
    ref = reference(w, fit=False)
    with open(out + ".roofit.json", "w") as f:
        json.dump(ref, f, indent=1)
    print(f"{out}.json: {len(ref['free_parameters'])} free parameters; -ln L moves by "
          f"{ref['nll_second'] - ref['nll_initial']!r} between the two points")


def mixed():
    """The lumi_free measurement plus an event-level channel, in one RooSimultaneous."""
    import numpy as np

    goldens = json.load(open(GOLDENS))
    ws = json.loads(json.dumps(goldens[MODELS["lumi_free"]]["workspace"]))
    for p in ws["measurements"][0]["config"]["parameters"]:
        p.update(TWEAKS["lumi_free"].get(p["name"], {}))
    w = build(ws)
    mc = w.obj("ModelConfig")
    sim = w.pdf("simPdf")
    cat = w.cat("channelCat")
    mass = ROOT.RooRealVar("mass", "mass", 100.0, 150.0)
    w.factory("Gaussian::sig_mass(mass[100,150], mean[125, 120, 130], width[2.5, 0.5, 10])")
    w.factory("Exponential::bkg_mass(mass, slope[-0.03, -1, 1])")
    w.factory("expr::nsig('20*SigXsecOverSM*Lumi', SigXsecOverSM, Lumi)")
    w.factory("expr::nbkg('nbkg0*(1 + 0.1*alpha_coupled_overall)', nbkg0[300, 0, 2000], alpha_coupled_overall)")
    w.factory("SUM::model_events(nsig*sig_mass, nbkg*bkg_mass)")
    mass = w.var("mass")
    # the events: 20 signal and 300 background drawn with NumPy (seed 1) inside [100, 150]
    rng = np.random.default_rng(1)
    sig = rng.normal(125.0, 2.5, 40)
    bkg = 100.0 + rng.exponential(1 / 0.03, 2000)
    x = np.concatenate([sig[(sig > 100) & (sig < 150)][:20], bkg[bkg < 150][:300]])
    events = ROOT.RooDataSet("events", "events", ROOT.RooArgSet(mass))
    for v in x:
        mass.setVal(float(v))
        events.add(ROOT.RooArgSet(mass))
    KEEP.append(events)
    allcat = ROOT.RooCategory("allCat", "allCat")
    labels = [s.first for s in cat]
    for l in labels + ["events"]:
        allcat.defineType(l)
    pdfs = {l: sim.getPdf(l) for l in labels}
    pdfs["events"] = w.pdf("model_events")
    cmap = ROOT.std.map("std::string, RooAbsPdf*")()
    for k, v in pdfs.items():
        cmap[k] = v
    combined = ROOT.RooSimultaneous("combPdf", "combPdf", cmap, allcat)
    KEEP.append(combined)
    obs = w.data("obsData")
    weight = ROOT.RooRealVar("weightVar", "weightVar", 1.0)
    parts = ROOT.std.map("std::string, RooDataSet*")()
    keep = ROOT.RooArgSet(obs.get())
    keep.remove(cat, True, True)
    for l in labels:
        d = obs.reduce(RF.SelectVars(keep), RF.Cut(f"channelCat==channelCat::{l}"))
        KEEP.append(d)
        parts[l] = d
    wev = ROOT.RooDataSet("events_w", "events_w", ROOT.RooArgSet(mass, weight), RF.WeightVar(weight))
    for v in x:
        mass.setVal(float(v))
        wev.add(ROOT.RooArgSet(mass), 1.0)
    KEEP.append(wev)
    parts["events"] = wev
    vars_ = ROOT.RooArgSet(keep)
    vars_.add(mass)
    vars_.add(weight)
    data = ROOT.RooDataSet("obsData_all", "obsData_all", vars_, RF.Index(allcat), RF.Import(parts), RF.WeightVar(weight))
    KEEP.append(data)
    w.Import(combined, RF.RecycleConflictNodes(), RF.Silence())
    w.Import(data, RF.Silence())
    m2 = ROOT.RooStats.ModelConfig("ModelConfigAll", w)
    m2.SetPdf("combPdf")
    m2.SetParametersOfInterest(mc.GetParametersOfInterest())
    nps = ROOT.RooArgSet(mc.GetNuisanceParameters())
    for n in ("mean", "width", "slope", "nbkg0"):
        nps.add(w.var(n))
    m2.SetNuisanceParameters(nps)
    m2.SetGlobalObservables(mc.GetGlobalObservables())
    m2.SetObservables(ROOT.RooArgSet(mc.GetObservables(), ROOT.RooArgSet(mass, allcat)))
    w.Import(m2)
    text = ROOT.RooJSONFactoryWSTool(w).exportJSONtoString()
    path = os.path.join(OUT, "mixed.json")
    with open(path, "w") as f:
        f.write(text)
    ref = reference_of(w, "ModelConfigAll", "obsData_all")
    ref["configuration"] = "lumi_free + an extended Gaussian + exponential channel in mass"
    ref["events"] = len(x)
    with open(os.path.join(OUT, "mixed.roofit.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(f"mixed: valid {ref['fit']['valid']}, minNll {ref['fit']['minNll']:.6f}, "
          + ", ".join(f"{k} = {v['value']:.4f} ± {v['error']:.4f}" for k, v in ref["fit"]["parameters"].items()))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--mixed"]:
        mixed()
    elif sys.argv[1:2] == ["--export"]:
        export(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1:] or list(MODELS))
    sys.stdout.flush()
    os._exit(0)  # cppyy/ROOT teardown order
