"""Library code a differentiated function calls, unmodified: SciPy and NumPy functions
written in Python (with ``try``, ``with`` and dtype logic inside) are differentiated
through their code, their C calls by rules."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import scipy.stats

from checks import check_grad

X = np.array([1.2, 0.7, -0.3, 0.4])


@pytest.mark.parametrize("f", [
    lambda x: scipy.optimize.rosen(x),
    lambda x: np.sum(np.r_[x, x * 2.0] ** 2),
    lambda x: np.sum(scipy.stats.norm.logpdf(x, loc=0.1, scale=1.3)),
    lambda x: np.sum(scipy.linalg.expm(np.outer(x, x) * 0.1)),
], ids=["scipy.optimize.rosen", "np.r_", "scipy.stats.norm.logpdf", "scipy.linalg.expm"])
def test_library_functions_differentiate_unmodified(f):
    check_grad(f, X)
