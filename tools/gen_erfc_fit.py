#!/usr/bin/env python3
"""Print the coefficients of `ERFC_MIDDLE` in src/tensor/transcendental.rs: a degree-16 polynomial
in `s = z - 1` for `erfc(z) exp(z^2)` on `0.5 <= z <= 1.5`, the middle of float64's erfc (below
0.5 erfc is `1 - erf` by erf's Taylor series, above 1.5 a continued fraction).

The fit is a Chebyshev least-squares fit to 300 Chebyshev nodes, the function evaluated with
mpmath at 50 digits, converted to monomials (highest power first, as `polyn` takes them). Its
relative error, evaluated in float64 by Horner's rule, is printed too (about 4e-16).

Usage: python3 tools/gen_erfc_fit.py  (runs inside tools/.venv-torch, which has mpmath and numpy)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from venv_bootstrap import ensure_torch_venv  # noqa: E402

if __name__ == "__main__":
    ensure_torch_venv(__file__)

import mpmath as mp  # noqa: E402
import numpy as np  # noqa: E402

DEGREE, NODES, HALF_WIDTH = 16, 300, 0.5


def scaled_erfc(z):
    z = mp.mpf(z)
    return mp.erfc(z) * mp.exp(z * z)


def main():
    mp.mp.dps = 50
    nodes = [1 + HALF_WIDTH * mp.cos(mp.pi * (k + 0.5) / NODES) for k in range(NODES)]
    s = np.array([float(z - 1) for z in nodes])
    values = np.array([float(scaled_erfc(z)) for z in nodes])
    chebyshev = np.polynomial.chebyshev.chebfit(s / HALF_WIDTH, values, DEGREE)
    monomial = np.polynomial.Chebyshev(chebyshev, domain=[-HALF_WIDTH, HALF_WIDTH]).convert(
        kind=np.polynomial.Polynomial
    ).coef
    grid = np.linspace(-HALF_WIDTH, HALF_WIDTH, 2001)
    horner = np.zeros_like(grid)
    for c in monomial[::-1]:
        horner = horner * grid + c
    exact = np.array([float(scaled_erfc(1 + g)) for g in grid])
    print(f"// max relative error {np.max(np.abs(horner - exact) / exact):.1e}")
    print(f"const ERFC_MIDDLE: [f64; {DEGREE + 1}] = [")
    for c in monomial[::-1]:
        print(f"    {float(c)!r},")
    print("];")


if __name__ == "__main__":
    main()
