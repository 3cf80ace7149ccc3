#!/usr/bin/env python3
"""pyhf's validation workspaces (tests/fixtures/pyhf_validation.json) fitted in the pyhf setting
(codes 1/0) by histfit and by pyhf 0.7.6's scipy and Minuit fits, in one run; prints each and the
largest excess of histfit over the better of pyhf's two. Needs pyhf==0.7.6, iminuit and histfit.

    python scripts/validation_fits.py
"""
import json, warnings, logging, numpy as np, pyhf, histfit
logging.getLogger("pyhf").setLevel(logging.CRITICAL)
S = {"smooth": {"normsys": {"interpcode": "code4"}, "histosys": {"interpcode": "code4p"}},
     "pyhf": {"normsys": {"interpcode": "code1"}, "histosys": {"interpcode": "code0"}}}
d = json.load(open('tests/fixtures/pyhf_validation.json'))
worst = -np.inf
for c in d['cases']:
    spec = c['workspace']
    for setting in ["pyhf"]:
        refs = {}
        for label, opt in [("scipy", pyhf.optimize.scipy_optimizer()), ("minuit", pyhf.optimize.minuit_optimizer(tolerance=1e-4))]:
            pyhf.set_backend("numpy", opt)
            ws = pyhf.Workspace(spec); m = ws.model(modifier_settings=S[setting]); data = np.asarray(ws.data(m), float)
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore"); b = pyhf.infer.mle.fit(data, m)
                refs[label] = float(-2 * m.logpdf(b, data)[0])
            except Exception as e:
                refs[label] = None
        hm = histfit.Workspace(spec).model(interp=setting); r = histfit.fit(histfit.Workspace(spec).data(hm), hm)
        best = min(v for v in refs.values() if v is not None)
        worst = max(worst, r.twice_nll - best)
        print(f"{c['case']:40s} {setting:6s} histfit {r.twice_nll:.9f} conv={r.converged} scipy {refs['scipy']} minuit {refs['minuit']} diff {r.twice_nll-best:+.2e}")
print("largest histfit - best pyhf:", worst)
