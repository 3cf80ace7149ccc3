#!/usr/bin/env python3
"""Writes crates/histfit-unbinned/tests/fixtures/wofz_reference.in: SciPy's Faddeeva function
w(z) = exp(-z^2) erfc(-iz) at points spread over both of histfit's regions (|z| < 8 and beyond),
as (x, y, Re w, Im w) tuples for `faddeeva.rs`'s test. Needs scipy."""
import os

from scipy.special import wofz

XS = [-30, -12.5, -8.1, -7.9, -6.5, -6, -4.2, -3, -2, -1.3, -0.5, 0, 0.25, 0.9, 1.7, 2.6, 3.5, 5, 6.5, 7, 7.5, 8.2, 8.213000895598281, 8.2130009, 10, 15, 26, 40]
YS = [0.0, 1e-30, 1e-12, 1e-8, 1e-6, 1e-4, 5e-4, 1e-3, 3e-3, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.2, 2.5, 4, 6, 7.9, 8.1, 12, 25]

rows = []
for x in XS:
    for y in YS:
        w = wofz(complex(x, y))
        rows.append(f"({float(x)!r}, {float(y)!r}, {float(w.real)!r}, {float(w.imag)!r}),")
out = os.path.join(os.path.dirname(__file__), "../../crates/histfit-unbinned/tests/fixtures/wofz_reference.in")
with open(out, "w") as f:
    f.write("// SciPy 1.17 scipy.special.wofz(x + 1j*y): (x, y, Re w, Im w). Made by scripts/reference/wofz.py.\n[\n")
    f.write("\n".join(rows) + "\n]\n")
