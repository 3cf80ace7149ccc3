#!/usr/bin/env python3
"""Write small HS3 fixtures (as exported by ROOT/RooFit's RooJSONFactoryWSTool)
plus RooFit reference fit results into tests/fixtures/hs3/ (the committed copies).
Needs ROOT 6.40 (pip install root), numpy.

For each fixture NAME:
  NAME.json         HS3 file exactly as ROOT exports it (data inline)
  NAME.roofit.json  reference: fit results, NLL at initial values and at a 2nd point

Run:  python scripts/make_hs3_fixtures.py [name ...]   (a venv with root installed)
"""
import array
import json
import math
import os
import sys

import ROOT

ROOT.gROOT.SetBatch(True)
ROOT.RooMsgService.instance().setGlobalKillBelow(ROOT.RooFit.WARNING)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hs3")
os.makedirs(OUT, exist_ok=True)
RF = ROOT.RooFit
NEVT = 2000

# keep python references to everything alive until the end (avoid cppyy GC issues)
_KEEP = []


def keep(*objs):
    _KEEP.extend(objs)
    return objs[0] if len(objs) == 1 else objs


def seed(s):
    ROOT.RooRandom.randomGenerator().SetSeed(s)


def float_params(pdf, data):
    params = pdf.getParameters(data.get())
    return [p for p in params if isinstance(p, ROOT.RooRealVar) and not p.isConstant()]


def const_params(pdf, data):
    params = pdf.getParameters(data.get())
    return [p for p in params if p.isConstant() or not isinstance(p, ROOT.RooRealVar)]


def snapshot(params):
    return {p.GetName(): p.getVal() for p in params}


def restore(params, vals):
    for p in params:
        if p.GetName() in vals:
            p.setVal(vals[p.GetName()])


def nll_value(pdf, data, nll_opts):
    nll = pdf.createNLL(data, RF.EvalBackend("cpu"), *nll_opts)
    v = nll.getVal()
    return v


def fit_result_dict(r, pdf, data):
    d = {
        "status": r.status(),
        "covQual": r.covQual(),
        "minNll": r.minNll(),
        "edm": r.edm(),
        "parameters": {},
        "correlation": {},
    }
    fl = r.floatParsFinal()
    for p in fl:
        d["parameters"][p.GetName()] = {
            "value": p.getVal(),
            "error": p.getError(),
            "errorLo": p.getErrorLo(),
            "errorHi": p.getErrorHi(),
            "init": r.floatParsInit().find(p.GetName()).getVal(),
        }
    names = [p.GetName() for p in fl]
    for a in names:
        d["correlation"][a] = {b: r.correlation(a, b) for b in names}
    return d


def do_fit(pdf, data, fit_opts, nll_opts, params, init_vals):
    restore(params, init_vals)
    for p in params:
        p.setError(0.0)
    opts = [RF.Save(), RF.PrintLevel(-1), RF.EvalBackend("cpu")] + list(fit_opts) + list(nll_opts)
    r = pdf.fitTo(data, *opts)
    keep(r)
    d = fit_result_dict(r, pdf, data)
    # NLL (createNLL, not offset) at the fitted point
    d["nll_at_fit"] = nll_value(pdf, data, nll_opts)
    return d


def second_point(params, fitted, init_vals):
    """Chosen fixed 2nd point: fitted value + alternating +-0.5*HesseError, clipped to range."""
    pt = {}
    for i, p in enumerate(params):
        n = p.GetName()
        v = fitted["parameters"][n]["value"]
        e = fitted["parameters"][n]["error"]
        s = 0.5 if i % 2 == 0 else -0.5
        nv = v + s * e
        nv = min(max(nv, p.getMin()), p.getMax())
        pt[n] = nv
    return pt


def finish(name, w, pdfname, data, *, fit_variants=None, nll_opts=(), notes="", extra=None,
           data_name=None, fit_pdf=None, split_export=False):
    """Export w to NAME.json (before fitting, so default_values = initial values),
    then fit and write NAME.roofit.json."""
    pdf = fit_pdf if fit_pdf is not None else w.pdf(pdfname)
    tool = ROOT.RooJSONFactoryWSTool(w)
    path = os.path.join(OUT, name + ".json")
    if split_export:
        # ROOT 6.40 leaves a RooRealSumPdf out of a workspace that also holds unbinned data
        # (no distributions, no error): the model and the data each exported by ROOT from a
        # workspace of its own, and the data's entry put beside the model's.
        wm, wd = ROOT.RooWorkspace("w"), ROOT.RooWorkspace("w")
        wm.Import(pdf)
        wd.Import(data)
        keep(wm, wd)
        doc = json.loads(str(ROOT.RooJSONFactoryWSTool(wm).exportJSONtoString()))
        doc["data"] = json.loads(str(ROOT.RooJSONFactoryWSTool(wd).exportJSONtoString()))["data"]
        with open(path, "w") as f:
            json.dump(doc, f)
        ok = True
    else:
        ok = tool.exportJSON(path)
    with open(path) as f:
        json.load(f)  # sanity check; file kept byte-for-byte as ROOT wrote it

    params = float_params(pdf, data)
    params_sorted = sorted(params, key=lambda p: p.GetName())
    init_vals = snapshot(params_sorted)
    consts = {p.GetName(): p.getVal() for p in const_params(pdf, data)}

    restore(params_sorted, init_vals)
    nll_init = nll_value(pdf, data, nll_opts)

    if fit_variants is None:
        fit_variants = {"default": []}
    fits = {}
    for vname, fopts in fit_variants.items():
        fits[vname] = do_fit(pdf, data, fopts, nll_opts, params_sorted, init_vals)
    main = fits[next(iter(fit_variants))]

    pt2 = second_point(params_sorted, main, init_vals)
    restore(params_sorted, pt2)
    nll_pt2 = nll_value(pdf, data, nll_opts)
    restore(params_sorted, init_vals)

    ref = {
        "fixture": name,
        "hs3_file": name + ".json",
        "pdf": pdfname,
        "data": data_name or data.GetName(),
        "n_entries": data.numEntries(),
        "sum_weights": data.sumEntries(),
        "is_weighted": bool(data.isWeighted()),
        "extended": bool(pdf.extendMode() != 0) if hasattr(pdf, "extendMode") else None,
        "observables": [v.GetName() for v in data.get()],
        "floating_parameters": [p.GetName() for p in params_sorted],
        "constant_parameters": consts,
        "initial_values": init_vals,
        "nll_at_initial": nll_init,
        "nll_point2": {"values": pt2, "nll": nll_pt2,
                       "how": "fitted value +/- 0.5*HesseError (alternating sign, sorted param order), clipped"},
        "fit": main,
        "fits": fits,
        "conventions": ("nll = RooAbsPdf::createNLL(data, EvalBackend('cpu')).getVal(): -sum_i w_i log pdf(x_i)"
                        " (+ extended term nexp - N*log(nexp) when extended; no log N! term)"
                        " (+ -log constraint pdfs when constraints present). fit = fitTo(data, Save(),"
                        " PrintLevel(-1), EvalBackend('cpu'), ...); 'minNll' is RooFitResult::minNll(),"
                        " compare with 'nll_at_fit' (createNLL at fitted point) to see any offset."),
        "export_ok": bool(ok),
        "notes": notes,
        "root_version": ROOT.gROOT.GetVersion(),
    }
    if extra:
        ref.update(extra)
    with open(os.path.join(OUT, name + ".roofit.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(f"{name}: export_ok={ok} status={main['status']} covQual={main['covQual']} "
          f"minNll={main['minNll']:.6f} nll_init={nll_init:.6f} nll_fit={main['nll_at_fit']:.6f}")
    for n, p in main["parameters"].items():
        print(f"    {n} = {p['value']:.6g} +- {p['error']:.4g}")
    keep(w, data, tool)


def gen(w, pdfname, obs, n=NEVT, s=12345, name="obsData"):
    seed(s)
    pdf = w.pdf(pdfname)
    data = pdf.generate(ROOT.RooArgSet(*[w.var(o) for o in obs]), n)
    data.SetName(name)
    data.SetTitle(name)
    w.Import(data)
    return w.data(name)


# ---------------------------------------------------------------------------
def f_gauss_exp_ext():
    w = ROOT.RooWorkspace("w")
    w.factory("Gaussian::sig(x[60,120], mean[91,80,100], sigma[2.5,0.5,10])")
    w.factory("Exponential::bkg(x, lambda[-0.03,-1,0])")
    w.factory("SUM::model(nsig[600,0,10000]*sig, nbkg[1400,0,10000]*bkg)")
    d = gen(w, "model", ["x"], s=1001)
    finish("gauss_exp_ext", w, "model", d,
           notes="Extended SUM with yields nsig,nbkg. 2000 events generated (fixed count) at the initial values.")


def f_cb_exp_ext():
    w = ROOT.RooWorkspace("w")
    w.factory("CBShape::sig(x[0,10], m0[5,3,7], sigma[0.5,0.1,2], alpha[1.5,0.3,5], n[3])")
    w.var("n").setConstant(True)
    w.factory("Exponential::bkg(x, lambda[-0.2,-2,0])")
    w.factory("SUM::model(nsig[800,0,10000]*sig, nbkg[1200,0,10000]*bkg)")
    d = gen(w, "model", ["x"], s=1002)
    finish("cb_exp_ext", w, "model", d, notes="CBShape (RooCBShape) + Exponential, extended; n fixed (const).")


def f_dcb():
    w = ROOT.RooWorkspace("w")
    w.factory("RooCrystalBall::model(x[0,10], x0[5,3,7], sigmaL[0.8,0.1,3], sigmaR[1.0,0.1,3],"
              " alphaL[1.2,0.2,5], nL[3], alphaR[1.8,0.2,5], nR[4])")
    w.var("nL").setConstant(True)
    w.var("nR").setConstant(True)
    d = gen(w, "model", ["x"], s=1003)
    finish("dcb", w, "model", d, notes="RooCrystalBall double-sided, non-extended; nL,nR const.")


def f_argus():
    w = ROOT.RooWorkspace("w")
    w.factory("ArgusBG::model(x[5.20,5.29], m0[5.291], c[-20,-100,-1], p[0.5,0.1,2])")
    w.var("m0").setConstant(True)
    d = gen(w, "model", ["x"], s=1004)
    finish("argus", w, "model", d, notes="ArgusBG; m0 const, c and p floating.")


def f_cheb_poly():
    w = ROOT.RooWorkspace("w")
    w.factory("Chebychev::model(x[0,10], {c1[0.3,-1,1], c2[-0.1,-1,1]})")
    d = gen(w, "model", ["x"], s=1005)
    finish("cheb_poly", w, "model", d,
           notes="RooChebychev with 2 coefficients on x in [0,10] (RooFit maps x range to [-1,1]).")


def f_bernstein():
    w = ROOT.RooWorkspace("w")
    w.factory("Bernstein::model(x[0,10], {b0[1], b1[0.5,0,5], b2[2,0,5]})")
    w.var("b0").setConstant(True)
    d = gen(w, "model", ["x"], s=1006)
    finish("bernstein", w, "model", d, notes="RooBernstein degree 2, b0 const=1 (normalisation degeneracy).")


def f_bifurgauss():
    w = ROOT.RooWorkspace("w")
    w.factory("BifurGauss::model(x[0,10], mean[5,2,8], sigmaL[1,0.1,5], sigmaR[2,0.1,5])")
    d = gen(w, "model", ["x"], s=1007)
    finish("bifurgauss", w, "model", d)


def f_lognormal():
    w = ROOT.RooWorkspace("w")
    w.factory("Lognormal::model(x[0.5,20], m0[3,1,10], k[1.5,1.1,5])")
    d = gen(w, "model", ["x"], s=1008)
    finish("lognormal", w, "model", d,
           notes="RooLognormal(x, m0, k): exported as lognormal_dist with mu=log(m0), sigma=log(k) generic_functions.")


def f_landau():
    w = ROOT.RooWorkspace("w")
    w.factory("Landau::model(x[0,20], mean[5,0,10], sigma[1,0.1,5])")
    d = gen(w, "model", ["x"], s=1009)
    finish("landau", w, "model", d)


def f_generic():
    w = ROOT.RooWorkspace("w")
    x = w.factory("x[0,10]")
    a = ROOT.RooRealVar("a", "a", 0.3, 0.01, 2.0)
    b = ROOT.RooRealVar("b", "b", 0.05, 0.0, 1.0)
    keep(a, b)
    pdf = ROOT.RooGenericPdf("model", "model", "exp(-@1*@0)*(1+@2*@0*@0)", ROOT.RooArgList(x, a, b))
    w.Import(pdf)
    d = gen(w, "model", ["x"], s=1010)
    finish("generic", w, "model", d,
           notes="RooGenericPdf 'exp(-@1*@0)*(1+@2*@0*@0)' with (x,a,b); ROOT rewrites @i to names in the export.")


def f_frac_mixture():
    w = ROOT.RooWorkspace("w")
    w.factory("Gaussian::sig(x[0,10], mean[5,3,7], sigma[0.7,0.1,3])")
    w.factory("Polynomial::bkg(x, {p1[0.1,-0.05,1]})")
    w.factory("SUM::model(f[0.4,0,1]*sig, bkg)")
    d = gen(w, "model", ["x"], s=1011)
    finish("frac_mixture", w, "model", d,
           notes="Non-extended f*Gauss + (1-f)*Polynomial(1 + p1*x) (RooPolynomial lowestOrder=1 -> "
                 "coefficients ['1.0','p1'] in export).")


def f_prod2d():
    w = ROOT.RooWorkspace("w")
    w.factory("Gaussian::gx(x[0,10], mx[5,2,8], sx[1,0.1,4])")
    w.factory("Exponential::ey(y[0,5], ly[-0.5,-3,0])")
    w.factory("PROD::model(gx, ey)")
    d = gen(w, "model", ["x", "y"], s=1012)
    finish("prod2d", w, "model", d, notes="Product of Gaussian(x) and Exponential(y); 2D unbinned data.")


def _constrained_ws():
    w = ROOT.RooWorkspace("w")
    w.factory("Gaussian::sig(x[60,120], mean[91,80,100], sigma[2.5,0.5,10])")
    w.factory("Exponential::bkg(x, lambda[-0.03,-1,0])")
    w.factory("SUM::model(nsig[600,0,10000]*sig, nbkg[1400,0,10000]*bkg)")
    w.factory("Gaussian::cons(gmean[91,80,100], mean, csig[0.5])")
    w.var("gmean").setConstant(True)
    w.var("csig").setConstant(True)
    return w


def _combined(w, data, catname="channelCat"):
    cat = w.cat(catname)
    x = w.var("x")
    comb = ROOT.RooDataSet("obsData", "obsData", ROOT.RooArgSet(x), RF.Index(cat), RF.Import("ch1", data))
    w.Import(comb)
    return w.data("obsData")


def _simultaneous_with_config(w, pdf, s, globs):
    """pdf wrapped in a 1-channel RooSimultaneous "simPdf" (ROOT 6.40's HS3 exporter only handles
    ModelConfigs whose pdf is a RooSimultaneous; otherwise it segfaults in
    exportSingleModelConfig), 2000 events of "model" drawn with seed s, and a ModelConfig (POI
    nsig, global observables globs). Returns the combined data and the global observables."""
    w.factory(f"SIMUL::simPdf(channelCat[ch1=0], ch1={pdf})")
    seed(s)
    raw = w.pdf("model").generate(ROOT.RooArgSet(w.var("x")), NEVT)
    keep(raw)
    d = _combined(w, raw)
    mc = ROOT.RooStats.ModelConfig("ModelConfig", w)
    mc.SetPdf("simPdf")
    mc.SetParametersOfInterest("nsig")
    mc.SetObservables("x,channelCat")
    mc.SetGlobalObservables(",".join(globs))
    mc.SetNuisanceParameters("mean,sigma,lambda,nbkg")
    w.Import(mc)
    keep(mc)
    glob = ROOT.RooArgSet(*[w.var(g) for g in globs])
    keep(glob)
    return d, glob


def f_constrained():
    w = _constrained_ws()
    w.factory("PROD::full(model, cons)")
    d, glob = _simultaneous_with_config(w, "full", 1013, ["gmean"])
    finish("constrained", w, "simPdf", d, nll_opts=[RF.GlobalObservables(glob)],
           data_name="obsData (HS3: obsData_ch1)",
           notes="gauss_exp_ext x Gaussian constraint cons(gmean=91 const | mean, csig=0.5 const) via "
                 "PROD::full(model,cons), wrapped in a 1-channel RooSimultaneous simPdf (channelCat ch1) because "
                 "ROOT's HS3 exporter requires a RooSimultaneous for ModelConfig export. ModelConfig: POI nsig, "
                 "globs gmean, NPs mean,sigma,lambda,nbkg. In HS3 the likelihood is "
                 "{distributions:[full], data:[obsData_ch1]}; constraint is inside 'full' (product_dist). "
                 "NLL created with GlobalObservables(gmean) -> constraint normalised over gmean. "
                 "Data generated from 'model' (2000 events, without constraint).",
           extra={"hs3_likelihood": "simPdf_obsData", "hs3_analysis": "simPdf_obsData",
                  "constraint_term_at_initial": -math.log(
                      1.0 / (math.sqrt(2 * math.pi) * 0.5))})


def f_constrained_ext():
    w = _constrained_ws()
    w.factory("SIMUL::simPdf(channelCat[ch1=0], ch1=model)")
    seed(1013)
    raw = w.pdf("model").generate(ROOT.RooArgSet(w.var("x")), NEVT)
    keep(raw)
    d = _combined(w, raw)
    mc = ROOT.RooStats.ModelConfig("ModelConfig", w)
    mc.SetPdf("simPdf")
    mc.SetParametersOfInterest("nsig")
    mc.SetObservables("x,channelCat")
    mc.SetGlobalObservables("gmean")
    mc.SetNuisanceParameters("mean,sigma,lambda,nbkg")
    ext = ROOT.RooArgSet(w.pdf("cons"))
    mc.SetExternalConstraints(ext)
    w.Import(mc)
    keep(mc, ext)
    glob = ROOT.RooArgSet(w.var("gmean"))
    keep(glob)
    finish("constrained_ext", w, "simPdf", d,
           nll_opts=[RF.GlobalObservables(glob), RF.ExternalConstraints(ext)],
           data_name="obsData (HS3: obsData_ch1)",
           notes="Same as 'constrained' (same data, seed 1013) but the Gaussian constraint is an EXTERNAL "
                 "constraint of the ModelConfig -> HS3 likelihood has aux_distributions:[cons]. "
                 "NLL/fit use ExternalConstraints(cons), GlobalObservables(gmean).")


def f_weighted():
    w = ROOT.RooWorkspace("w")
    w.factory("Gaussian::sig(x[0,10], mean[5,3,7], sigma[0.8,0.1,3])")
    w.factory("Exponential::bkg(x, lambda[-0.3,-2,0])")
    w.factory("SUM::model(f[0.3,0,1]*sig, bkg)")
    seed(1014)
    x = w.var("x")
    raw = w.pdf("model").generate(ROOT.RooArgSet(x), NEVT)
    keep(raw)
    wv = ROOT.RooRealVar("weight", "weight", 1.0)
    keep(wv)
    ds = ROOT.RooDataSet("obsData", "obsData", ROOT.RooArgSet(x, wv), RF.WeightVar(wv))
    rng = ROOT.RooRandom.randomGenerator()
    for i in range(raw.numEntries()):
        row = raw.get(i)
        xv = row.getRealValue("x")
        x.setVal(xv)
        wt = 0.5 + 0.1 * xv + 0.2 * rng.Uniform()  # x-dependent weights in [0.5, 1.7]
        ds.add(ROOT.RooArgSet(x), wt)
    w.Import(ds)
    d = w.data("obsData")
    finish("weighted", w, "model", d,
           fit_variants={
               "default": [RF.SumW2Error(False)],
               "sumw2": [RF.SumW2Error(True)],
               "asymptotic": [RF.AsymptoticError(True)],
           },
           notes="Non-extended f*Gauss+(1-f)*Exp on weighted events (weights 0.5+0.1x+0.2u). "
                 "fits.default = SumW2Error(False) (plain weighted-NLL Hesse), fits.sumw2 = SumW2Error(True), "
                 "fits.asymptotic = AsymptoticError(True). Central values identical; errors differ.")


def f_constrained_pois_mvn():
    """gauss_exp_ext with a Poisson constraint (a sideband count nobs_b of mean nbkg) and a
    bivariate normal constraint on (mean, sigma) from global observables (gmean, gsig)."""
    w = ROOT.RooWorkspace("w")
    w.factory("Gaussian::sig(x[60,120], mean[91,80,100], sigma[2.5,0.5,10])")
    w.factory("Exponential::bkg(x, lambda[-0.03,-1,0])")
    w.factory("SUM::model(nsig[600,0,10000]*sig, nbkg[1400,0,10000]*bkg)")
    w.factory("Poisson::pcons(nobs_b[1380], nbkg)")
    w.var("nobs_b").setConstant(True)
    gmean = ROOT.RooRealVar("gmean", "gmean", 91.2, 80, 100)
    gsig = ROOT.RooRealVar("gsig", "gsig", 2.45, 0.5, 10)
    gmean.setConstant(True)
    gsig.setConstant(True)
    cov = ROOT.TMatrixDSym(2)
    cov[0][0], cov[1][1] = 0.25, 0.04
    cov[0][1] = cov[1][0] = 0.05
    mvn = ROOT.RooMultiVarGaussian("mvn", "mvn", ROOT.RooArgList(gmean, gsig),
                                   ROOT.RooArgList(w.var("mean"), w.var("sigma")), cov)
    w.Import(mvn, RF.RecycleConflictNodes())
    keep(gmean, gsig, cov, mvn)
    w.factory("PROD::full(model, pcons, mvn)")
    d, glob = _simultaneous_with_config(w, "full", 1015, ["nobs_b", "gmean", "gsig"])
    finish("constrained_pois_mvn", w, "simPdf", d, nll_opts=[RF.GlobalObservables(glob)],
           data_name="obsData (HS3: obsData_ch1)",
           notes="gauss_exp_ext x Poisson(nobs_b=1380 const | nbkg) x MultiVarGaussian((gmean=91.2, gsig=2.45) "
                 "const | (mean, sigma), cov [[0.25,0.05],[0.05,0.04]]), in a 1-channel RooSimultaneous; "
                 "NLL with GlobalObservables(nobs_b, gmean, gsig). Data: 2000 events of 'model', seed 1015.")


def f_histogram():
    """A Gaussian over a histogram template (RooHistPdf, bins of different widths)."""
    w = ROOT.RooWorkspace("w")
    x = w.factory("x[0,10]")
    edges = array.array("d", [0.0, 1.0, 3.0, 6.0, 10.0])
    h = ROOT.TH1D("template", "template", 4, edges)
    for b, c in enumerate([5.0, 20.0, 30.0, 12.0]):
        h.SetBinContent(b + 1, c)
    dh = ROOT.RooDataHist("template_hist", "template_hist", ROOT.RooArgList(x), h)
    hp = ROOT.RooHistPdf("bkg", "bkg", ROOT.RooArgSet(x), dh)
    w.Import(hp)
    keep(h, dh, hp)
    w.factory("Gaussian::sig(x, mean[4.5,2,8], sigma[0.6,0.1,3])")
    w.factory("SUM::model(f[0.3,0,1]*sig, bkg)")
    d = gen(w, "model", ["x"], s=1016)
    finish("histogram", w, "model", d,
           notes="f*Gaussian + (1-f)*RooHistPdf over a 4-bin template of different widths "
                 "(edges 0,1,3,6,10; contents 5,20,30,12): exported as histogram_dist with 'edges'.")


def f_histogram2d():
    """A two-dimensional Gaussian peak over a two-dimensional histogram template (RooHistPdf
    over x and y, x bins of different widths): the histogram is not a product of its axes."""
    w = ROOT.RooWorkspace("w")
    x = w.factory("x[0,10]")
    y = w.factory("y[0,5]")
    xe = array.array("d", [0.0, 1.0, 3.0, 6.0, 10.0])
    ye = array.array("d", [0.0, 2.0, 3.5, 5.0])
    h = ROOT.TH2D("template2d", "template2d", 4, xe, 3, ye)
    contents = [[5.0, 1.0, 0.5], [20.0, 8.0, 2.0], [30.0, 25.0, 4.0], [12.0, 3.0, 9.0]]
    for i, row in enumerate(contents):
        for j, c in enumerate(row):
            h.SetBinContent(i + 1, j + 1, c)
    dh = ROOT.RooDataHist("template2d_hist", "template2d_hist", ROOT.RooArgList(x, y), h)
    hp = ROOT.RooHistPdf("bkg", "bkg", ROOT.RooArgSet(x, y), dh)
    w.Import(hp)
    keep(h, dh, hp)
    w.factory("Gaussian::sigx(x, mx[4.5,2,8], sx[0.6,0.1,3])")
    w.factory("Gaussian::sigy(y, my[2.5,1,4], sy[0.5,0.1,3])")
    w.factory("PROD::sig(sigx, sigy)")
    w.factory("SUM::model(f[0.3,0,1]*sig, bkg)")
    d = gen(w, "model", ["x", "y"], s=1017)
    finish("histogram2d", w, "model", d,
           notes="f*Gaussian(x)Gaussian(y) + (1-f)*RooHistPdf over a 4x3-bin template (x edges "
                 "0,1,3,6,10; y edges 0,2,3.5,5; contents by x bin then y bin): histogram_dist "
                 "with two axes.")


def f_gamma():
    w = ROOT.RooWorkspace("w")
    w.factory("Gamma::model(x[0.5,30], gamma[3,1,10], beta[2,0.5,5], mu[0])")
    w.var("mu").setConstant(True)
    d = gen(w, "model", ["x"], s=1018)
    finish("gamma", w, "model", d,
           notes="RooGamma (gamma_dist) with mu const 0 below the range's low end 0.5.")


def f_power_sum():
    w = ROOT.RooWorkspace("w")
    x = w.factory("x[1,10]")
    cs = [w.factory("c1[1]"), w.factory("c2[0.5,0,10]")]
    es = [w.factory("e1[-2.5,-5,0]"), w.factory("e2[-1]")]
    w.var("c1").setConstant(True)
    w.var("e2").setConstant(True)
    pdf = ROOT.RooPowerSum("model", "model", x, ROOT.RooArgList(*cs), ROOT.RooArgList(*es))
    w.Import(pdf)
    d = gen(w, "model", ["x"], s=1019)
    finish("power_sum", w, "model", d,
           notes="RooPowerSum c1 x^e1 + c2 x^e2 (power_sum_dist): c1 = 1 const, e2 = -1 const (the "
                 "logarithmic integral), c2 and the exponent e1 free.")


def f_exp_poly():
    w = ROOT.RooWorkspace("w")
    x = w.factory("x[0,10]")
    a1, a2 = w.factory("a1[-0.3,-2,1]"), w.factory("a2[0.01,-0.5,0.5]")
    pdf = ROOT.RooLegacyExpPoly("model", "model", x, ROOT.RooArgList(a1, a2), 1)
    w.Import(pdf)
    d = gen(w, "model", ["x"], s=1020)
    finish("exp_poly", w, "model", d,
           notes="RooLegacyExpPoly exp(a1 x + a2 x^2) (legacy_exp_poly_dist; exported coefficients "
                 "['1.0', 'a1', 'a2'] from order 0).")


def f_weighted_sum():
    w = ROOT.RooWorkspace("w")
    x = w.factory("x[0,10]")
    a, b = w.factory("a[0.3,0.05,2]"), w.factory("b[0.02]")
    w.var("b").setConstant(True)
    f1 = ROOT.RooFormulaVar("f1", "f1", "exp(-a*x)", ROOT.RooArgList(x, a))
    f2 = ROOT.RooFormulaVar("f2", "f2", "1+b*x", ROOT.RooArgList(x, b))
    k1, k2 = w.factory("k1[300,0,3000]"), w.factory("k2[50,0,500]")
    keep(f1, f2)
    pdf = ROOT.RooRealSumPdf("model", "model", ROOT.RooArgList(f1, f2), ROOT.RooArgList(k1, k2), True)
    w.Import(pdf)
    d = gen(w, "model", ["x"], s=1021)
    finish("weighted_sum", w, "model", d, split_export=True,
           notes="RooRealSumPdf k1 exp(-a x) + k2 (1 + b x), extended (weighted_sum_dist): the expected "
                 "count is the sum's integral over [0, 10]; b const. ROOT 6.40 exports no distribution "
                 "from a workspace holding this model and its data: the model and the data exported "
                 "from separate workspaces, their documents merged.")


def f_fft_conv():
    w = ROOT.RooWorkspace("w")
    w.factory("Landau::lx(x[-10,30], ml[5,-5,15], sl[1,0.1,5])")
    w.factory("Gaussian::res(x, mg[0], sg[2,0.1,6])")
    w.var("mg").setConstant(True)
    x = w.var("x")
    # RooFFTConvPdf's result is displaced by half a cache bin (see the README): 100 000 bins make
    # that 2e-4, far inside the fit's uncertainties.
    x.setBins(100000, "cache")
    pdf = ROOT.RooFFTConvPdf("model", "model", x, w.pdf("lx"), w.pdf("res"))
    w.Import(pdf)
    d = gen(w, "model", ["x"], s=1022)
    finish("fft_conv", w, "model", d,
           notes="RooFFTConvPdf Landau (x) Gaussian (fft_conv_pdf), the resolution's mean 0 const; cache "
                 "binning 100 000 bins. -ln L at points is RooFit's FFT approximation: the test compares "
                 "with scripts/reference/fft_conv.py's exact convolution instead.")


FIXTURES = {
    "gauss_exp_ext": f_gauss_exp_ext,
    "cb_exp_ext": f_cb_exp_ext,
    "dcb": f_dcb,
    "argus": f_argus,
    "cheb_poly": f_cheb_poly,
    "bernstein": f_bernstein,
    "bifurgauss": f_bifurgauss,
    "lognormal": f_lognormal,
    "landau": f_landau,
    "generic": f_generic,
    "frac_mixture": f_frac_mixture,
    "prod2d": f_prod2d,
    "constrained": f_constrained,
    "constrained_ext": f_constrained_ext,
    "weighted": f_weighted,
    "constrained_pois_mvn": f_constrained_pois_mvn,
    "histogram": f_histogram,
    "histogram2d": f_histogram2d,
    "gamma": f_gamma,
    "power_sum": f_power_sum,
    "exp_poly": f_exp_poly,
    "weighted_sum": f_weighted_sum,
    "fft_conv": f_fft_conv,
}

if __name__ == "__main__":
    names = sys.argv[1:] or list(FIXTURES)
    for n in names:
        FIXTURES[n]()
    sys.stdout.flush()
    os._exit(0)  # avoid teardown-order segfaults in cppyy/ROOT
