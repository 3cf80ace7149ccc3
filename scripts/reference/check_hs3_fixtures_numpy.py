#!/usr/bin/env python3
"""Independent numpy/scipy cross-check of some fixtures (NLL conventions, weighted-fit error recipes).
Writes tests/fixtures/hs3/weighted.numpy_check.json (the weighted fit's three error recipes in numpy, at RooFit's fitted point)."""
import json, numpy as np
from scipy.stats import norm
import os
F = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tests', 'fixtures', 'hs3') + '/'
def gexp_nll(x, p, lo, hi, ext):
    m, s, l = p['mean'], p['sigma'], p['lambda']
    gs = norm.pdf(x, m, s) / (norm.cdf(hi, m, s) - norm.cdf(lo, m, s))
    eb = np.exp(l * x) / ((np.exp(l * hi) - np.exp(l * lo)) / l)
    if ext:
        nt = p['nsig'] + p['nbkg']
        return -np.sum(np.log((p['nsig'] * gs + p['nbkg'] * eb) / nt)) + nt - len(x) * np.log(nt)
    return gs, eb
d = json.load(open(F + 'gauss_exp_ext.json')); r = json.load(open(F + 'gauss_exp_ext.roofit.json'))
x = np.array([e[0] for e in d['data'][0]['entries']])
print('gauss_exp_ext nll init numpy/roofit', gexp_nll(x, r['initial_values'], 60, 120, True), r['nll_at_initial'])
d = json.load(open(F + 'constrained.json')); r = json.load(open(F + 'constrained.roofit.json'))
x = np.array([e[0] for e in d['data'][0]['entries']]); p = r['nll_point2']['values']
print('constrained nll pt2 numpy/roofit', gexp_nll(x, p, 60, 120, True) - norm.logpdf(91, p['mean'], 0.5), r['nll_point2']['nll'])

d = json.load(open(F + 'weighted.json')); r = json.load(open(F + 'weighted.roofit.json'))
x = np.array([e[0] for e in d['data'][0]['entries']]); w = np.array(d['data'][0]['weights'])
names = sorted(r['fit']['parameters']); p0 = np.array([r['fit']['parameters'][n]['value'] for n in names])
def logpdf(pv):
    P = dict(zip(names, pv)); gs, eb = gexp_nll(x, P, 0, 10, False)
    return np.log(P['f'] * gs + (1 - P['f']) * eb)
n = len(p0); h = 1e-5
G = np.zeros((len(x), n))
for i in range(n):
    e = np.zeros(n); e[i] = h; G[:, i] = (logpdf(p0 + e) - logpdf(p0 - e)) / (2 * h)
def hess(f, hh=1e-4):
    H = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            ei = np.zeros(n); ej = np.zeros(n); ei[i] = hh; ej[j] = hh
            H[i, j] = (f(p0 + ei + ej) - f(p0 + ei - ej) - f(p0 - ei + ej) + f(p0 - ei - ej)) / (4 * hh * hh)
    return H
H = hess(lambda pv: -np.sum(w * logpdf(pv))); Hi = np.linalg.inv(H)
H2 = hess(lambda pv: -np.sum(w * w * logpdf(pv)))
D = (G * (w ** 2)[:, None]).T @ G
out = {"parameters": names,
       "plain_hesse": dict(zip(names, np.sqrt(np.diag(Hi)).tolist())),
       "sumw2_H1inv_H2_H1inv": dict(zip(names, np.sqrt(np.diag(Hi @ H2 @ Hi)).tolist())),
       "asymptotic_H1inv_D_H1inv": dict(zip(names, np.sqrt(np.diag(Hi @ D @ Hi)).tolist())),
       "roofit": {k: {n_: v['parameters'][n_]['error'] for n_ in names} for k, v in r['fits'].items()},
       "note": "numpy at RooFit's fitted point; H1 = Hessian of -sum w log p, H2 = Hessian of -sum w^2 log p, "
               "D = sum w^2 grad(log p) grad(log p)^T. ROOT's AsymptoticError differs (cf. root-project/root#11660)."}
json.dump(out, open(F + 'weighted.numpy_check.json', 'w'), indent=1)
print(json.dumps(out, indent=1))
