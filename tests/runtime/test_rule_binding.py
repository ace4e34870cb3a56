"""A value passed to a NumPy function by keyword gets the gradient it gets by position.

The table below holds a sample call for NumPy rules in the registry; the test made from
it calls each with every keyword-capable parameter (and those after it) by keyword and
compares value and gradients with the positional call.  Every such rule either has a
sample or is listed with the reason it has none, so the coverage cannot shrink silently.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import bytegrad
from bytegrad.primitives.coverage import _public_names
from bytegrad.runtime.rules import RULES

from checks import check_grad

v = np.array([0.5, 2.0, -1.0])
w = np.array([1.5, -0.5, 0.25])
A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
M = np.arange(6.0).reshape(2, 3) / 3 + 0.1
B = np.arange(24.0).reshape(2, 3, 4) / 7 - 1.0
Mn = np.where(np.eye(2, 3) > 0, np.nan, M)  # with NaNs, for the nan* reductions

SAMPLES = {
    "np.amax": (v, 0, None, False, 3.0), "np.amin": (v, 0, None, False, -3.0),
    "np.max": (v, 0, None, False, 3.0), "np.min": (v, 0, None, False, -3.0),
    "np.sum": (M, 1, None, None, False, 2.5), "np.prod": (M, 1, None, None, False, 1.5),
    "np.mean": (M, 1, None, None, True), "np.var": (M, 1, None, None, 1, True),
    "np.std": (M, 1, None, None, 1, True), "np.ptp": (M, 1, None, True),
    "np.cumsum": (M, 1), "np.cumprod": (M, 1), "np.diff": (v, 1, -1, 2.0, -1.5),
    "np.angle": (v + 1j * w, False), "np.append": (v, w, 0),
    "np.arange": (0.0, 1.0, 0.25), "np.array": (v, float), "np.asarray": (v, float, "C"),
    "np.asanyarray": (v, float, "C"), "np.ascontiguousarray": (M, float),
    "np.asfortranarray": (M, float), "np.broadcast_to": (v, (2, 3)),
    "np.clip": (v, 0.0, 1.0), "np.column_stack": ([v, w],), "np.compress": ([1, 0, 1], v, 0),
    "np.concat": ([v, w], 0), "np.convolve": (v, w, "same"), "np.copy": (v, "K", False),
    "np.corrcoef": (M, M[::-1] ** 2, True), "np.correlate": (v, w, "full"),
    "np.cov": (M, M[::-1] ** 2, True, False, 1), "np.cross": (v, w, -1, -1, -1),
    "np.diag": (A, 1), "np.diagonal": (B, 1, 1, 2), "np.dot": (v, w),
    "np.dsplit": (B, 2), "np.dstack": ([M, M ** 2],), "np.expand_dims": (v, 1),
    "np.extract": ([True, False, True], v), "np.flip": (M, 1), "np.fliplr": (M,),
    "np.flipud": (M,), "np.full": ((2, 2), 1.5, float, "C"),
    "np.full_like": (M, 1.5, float, "K", True, (3,)), "np.hsplit": (M, 3),
    "np.hstack": ([v, w],), "np.imag": (v + 1j * w,), "np.interp": ([0.5, 1.5, 9.0, -3.0], [0.0, 1.0, 2.0], v, -4.0, 5.0),
    "np.kron": (v, w), "np.linalg.det": (A,), "np.linalg.eigh": (A, "U"),
    "np.linalg.eigvalsh": (A, "U"), "np.linalg.inv": (A,), "np.linalg.lstsq": (A, v, None),
    "np.linalg.matrix_power": (A, 3), "np.linalg.multi_dot": ([A, A, v],),
    "np.linalg.norm": (M, "fro", None, False), "np.linalg.pinv": (A, 1e-12, True),
    "np.linalg.qr": (A, "reduced"), "np.linalg.slogdet": (A,), "np.linalg.solve": (A, v),
    "np.linalg.svd": (A, True, True, False),
    "np.linspace": (0.5, 2.0, 5, False, False, float, 0),
    "np.moveaxis": (B, 0, 2), "np.nan_to_num": (np.array([np.nan, 1.0, np.inf, -np.inf]), True, 0.5, 2.0, -3.0),
    "np.outer": (v, w), "np.pad": (v, 1, "edge"), "np.permute_dims": (B, (2, 0, 1)),
    "np.ravel": (M, "C"), "np.real": (v + 1j * w,), "np.repeat": (v, 2, 0),
    "np.reshape": (M, (3, 2), "C"), "np.roll": (M, 1, 1), "np.rollaxis": (B, 2, 0),
    "np.rot90": (M, 1, (0, 1)), "np.sinc": (v,), "np.sort": (M, 1, "stable"),
    "np.split": (v, 3, 0), "np.array_split": (v, 2, 0), "np.squeeze": (M[None], 0),
    "np.stack": ([v, w], 1), "np.swapaxes": (B, 0, 2), "np.take": (v, [2, 0], 0),
    "np.take_along_axis": (M, np.array([[2, 0], [1, 1]]), 1), "np.tensordot": (M, M.T, 1),
    "np.tile": (v, 2), "np.trace": (B, 1, 1, 2), "np.tril": (A, -1), "np.triu": (A, 1),
    "np.vsplit": (M, 2), "np.vstack": ([v, w],),
    "ndarray.clip": (v, 0.0, 1.0), "ndarray.compress": (v, [1, 0, 1], 0),
    "ndarray.copy": (M, "F"), "ndarray.cumprod": (M, 1), "ndarray.cumsum": (M, 1),
    "ndarray.diagonal": (B, 1, 1, 2), "ndarray.flatten": (M, "F"), "ndarray.max": (M, 1),
    "ndarray.min": (M, 1), "ndarray.mean": (M, 1), "ndarray.prod": (M, 1),
    "ndarray.ravel": (M, "F"), "ndarray.repeat": (v, 2, 0), "ndarray.squeeze": (M[None], 0),
    "ndarray.std": (M, 1, None, None, 1), "ndarray.sum": (M, 1), "ndarray.take": (v, [2, 0], 0),
    "ndarray.trace": (B, 1, 1, 2), "ndarray.var": (M, 1, None, None, 1),
    "ndarray.astype": (M, np.float32, "K"),
    "np.fft.fft": (v + 1j * w, 4, 0, "ortho"), "np.fft.ifft": (v, 2, -1, "forward"),
    "np.fft.rfft": (v, 5, 0, "ortho"), "np.fft.irfft": (v + 1j * w, 5, 0, "forward"),
    "np.fft.fft2": (B + 1j, (3, 2), (2, 0), "ortho"), "np.fft.ifft2": (M, (2, 4), (0, 1), None),
    "np.fft.fftn": (B, (2, 5), (0, 2), "forward"), "np.fft.ifftn": (B * 1j, None, (1,), "ortho"),
    "np.fft.rfft2": (M, (3, 3), (1, 0), "ortho"), "np.fft.irfft2": (M + 1j, (2, 3), (0, 1), None),
    "np.fft.rfftn": (B, (2, 4), (0, 2), "forward"), "np.fft.irfftn": (B - 1j, (3, 5), (2, 1), "ortho"),
    "np.fft.fftshift": (M, 1), "np.fft.ifftshift": (B, (0, 2)),
    "scipy.special.logsumexp": (M, 1, M[::-1] - 0.5, True, True),
    "scipy.special.polygamma": (2, v + 3),
    "np.linalg.eig": (A,), "np.linalg.eigvals": (A,), "np.linalg.cond": (A, "fro"),
    "scipy.linalg.expm": (A * 0.3,), "scipy.linalg.solve": (A, v), "scipy.linalg.inv": (A,),
    "scipy.linalg.det": (A,),
    "np.unique": (v, True, True, True), "np.unique_values": (v,), "np.unique_all": (v,),
    "np.unique_counts": (v,), "np.unique_inverse": (v,), "np.bincount": (np.array([0, 2, 1]), v[:3], 4),
    "np.real_if_close": (v + 1e-20j, 50),
    "np.nansum": (Mn, 1, None, None, False, 2.5), "np.nanprod": (Mn, 1, None, None, False, 1.5),
    "np.nanmax": (Mn, 1, None, False, 3.0), "np.nanmin": (Mn, 1, None, False, -3.0),
    "np.nanmean": (Mn, 1, None, None, True), "np.nanvar": (Mn, 1, None, None, 1, True),
    "np.nanstd": (Mn, 0, None, None, 0, True), "np.nancumsum": (Mn, 1), "np.nancumprod": (Mn, 0),
    "np.median": (M, 1, None, False, True), "np.nanmedian": (Mn, 1, None, False, True),
    "np.quantile": (M, np.array([0.2, 0.7]), 1, None, False, "hazen", True),
    "np.percentile": (M, np.array([20.0, 70.0]), 0, None, False, "weibull", True),
    "np.nanquantile": (Mn, np.array([0.2, 0.7]), 1, None, False, "linear", True),
    "np.nanpercentile": (Mn, 33.0, None, None, False, "median_unbiased", False),
    "np.partition": (B, 1, 1), "np.select": ([v > 0, w > 0], [v, w * 2], 0.5),
    "np.choose": (np.array([0, 1, 0]), [v, w]), "np.piecewise": (v, [v > 0], [np.sin, np.cos]),
    "np.gradient": (M,), "np.trapezoid": (M, np.array([0.0, 0.5, 2.0]), 1.0, 1),
    "np.polyval": (v, w), "np.polyfit": (np.array([0.0, 0.5, 2.0, 3.0]), np.arange(4.0) ** 2 / 3, 1, None, False,
                   np.array([1.0, 2.0, 0.5, 1.5])),
    "np.average": (M, 1, np.array([0.5, 1.0, 2.0]), True),
}

# Rules with keyword-capable parameters and no sample, and why.
WITHOUT_SAMPLE = {
    **dict.fromkeys(
        ["np.abs", "np.acos", "np.acosh", "np.add", "np.arcsin", "np.arcsinh", "np.arctan",
         "np.arctan2", "np.arctanh", "np.cbrt", "np.conj", "np.copysign", "np.cos", "np.cosh",
         "np.deg2rad", "np.degrees", "np.divide", "np.exp", "np.exp2", "np.expm1", "np.float_power",
         "np.fmax", "np.fmin", "np.fmod", "np.hypot", "np.log", "np.log10", "np.log1p", "np.log2",
         "np.logaddexp", "np.logaddexp2", "np.matmul", "np.matvec", "np.maximum", "np.minimum",
         "np.mod", "np.multiply", "np.negative", "np.positive", "np.pow", "np.rad2deg",
         "np.radians", "np.reciprocal", "np.sign", "np.sin", "np.sinh", "np.sqrt", "np.square",
         "np.subtract", "np.tan", "np.tanh", "np.vecdot", "np.vecmat", "ndarray.dot",
         "np.divmod", "np.fabs", "np.frexp", "np.heaviside", "np.ldexp", "np.modf"],
        "only out= can be a keyword: a write, tested with the mutation rules"),
    **dict.fromkeys(["np.copyto", "np.fill_diagonal", "np.place", "np.put", "np.putmask", "ndarray.fill",
                     "ndarray.put", "ndarray.sort", "ndarray.partition", "np.random.shuffle"], "writes into an argument"),
}
RANDOM = "np.random."


def _keyword_rules():
    """Public name → callable for every NumPy rule with a positional-or-keyword parameter."""
    out = {}
    for f, name in ((f, _public_names().get(id(f))) for f, r in RULES.items() if r.fn is not None):
        if name is None:
            continue
        try:
            ps = inspect.signature(RULES[f].like or f).parameters.values()
        except (TypeError, ValueError):
            continue
        if any(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in ps):
            out[name] = f
    return out


RULED = _keyword_rules()


def test_every_keyword_capable_numpy_rule_has_a_sample_or_a_reason():
    random = {n for n in RULED if n.startswith(RANDOM)}
    # scipy.special's ufuncs: only out= can be a keyword, as for NumPy's (listed above)
    special_ufuncs = {n for n, f in RULED.items() if n.startswith("scipy.") and isinstance(f, np.ufunc)}
    missing = set(RULED) - set(SAMPLES) - set(WITHOUT_SAMPLE) - random - special_ufuncs
    assert not missing, f"add sample calls (or a reason) for {sorted(missing)}"
    assert set(SAMPLES) <= set(RULED), sorted(set(SAMPLES) - set(RULED))
    assert len(SAMPLES) >= 110 and len(RULED) >= 199


def _scalar(y):
    """A real scalar that depends on every float in ``y`` (also tuples, lists)."""
    if isinstance(y, (tuple, list)):
        total = 0.0
        for i in range(len(y)):
            total = total + _scalar(y[i])
        return total
    y = np.asarray(y)
    if y.dtype.kind not in "fc":
        return 0.0
    return np.sum(np.sin(np.real(y)) + 0.5 * np.imag(y))


def _calls(name, f, args):
    """``(positional, [keyword variants])``: functions of the sample's arguments that call
    ``f`` with parameters ``k..`` by keyword, for each keyword-capable ``k``."""
    ps = [p for p in inspect.signature(RULES[f].like or f).parameters.values()
          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    params = [f"a{i}" for i in range(len(args))]
    env = {"F": f, "scalar": _scalar}

    def make(k):
        given = params[:k] + [f"{p.name}={a}" for p, a in zip(ps[k:], params[k:])]
        return eval(f"lambda {', '.join(params)}: scalar(F({', '.join(given)}))", env)
    ks = [k for k in range(len(args)) if all(p.kind is p.POSITIONAL_OR_KEYWORD for p in ps[k:len(args)])]
    return make(len(args)), [(ps[k].name, make(k)) for k in ks]


def _same(a, b):
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(map(_same, a, b))
    if a is None or b is None:
        return a is None and b is None
    return np.allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_keyword_gets_the_gradient_its_position_gets(name):
    f, args = RULED[name], SAMPLES[name]
    positional, variants = _calls(name, f, args)
    y, g = bytegrad.value_and_gradient(positional, *args)
    assert any(d is not None for d in g), f"{name}: the sample has no gradient to compare"
    assert variants, f"{name}: no parameter of the sample can be a keyword"
    for first, kwcall in variants:
        y2, g2 = bytegrad.value_and_gradient(kwcall, *args)
        assert _same(y, y2), (name, first)
        assert _same(g, g2), f"{name} with {first}= and after by keyword: {g2} != {g}"


PATHWISE = {"normal": ("loc", "scale"), "laplace": ("loc", "scale"), "logistic": ("loc", "scale"),
            "gumbel": ("loc", "scale"), "uniform": ("low", "high"), "exponential": ("scale",),
            "rayleigh": ("scale",), "lognormal": ("mean", "sigma")}


@pytest.mark.parametrize("name", sorted(PATHWISE))
def test_a_random_draws_parameters_by_keyword(name):
    f = RULED[RANDOM + name]
    params = ", ".join(f"a{i}" for i in range(len(PATHWISE[name])))
    named = ", ".join(f"{n}=a{i}" for i, n in enumerate(PATHWISE[name]))
    env = {"F": f, "np": np}
    pos = eval(f"lambda {params}: np.sum(F({params}, size=4) ** 2)", env)
    kw = eval(f"lambda {params}: np.sum(F({named}, size=4) ** 2)", env)
    values = (0.5, 1.5)[:len(PATHWISE[name])]
    np.random.seed(7)
    y, g = bytegrad.value_and_gradient(pos, *values)
    np.random.seed(7)
    y2, g2 = bytegrad.value_and_gradient(kw, *values)
    assert all(d is not None for d in g) and y == y2 and _same(g, g2), name


# -- the keyword calls the issue found, against finite differences ---------------------

x = np.array([0.5, 2.0, -1.0])


@pytest.mark.parametrize("f, args", [
    (lambda x, hi: np.sum(np.clip(x, 0, a_max=hi) ** 2), (x, 1.0)),
    (lambda x, hi: np.sum(np.clip(x, max=hi) ** 2), (x, 1.0)),
    (lambda x, lo: np.sum(x.clip(min=lo) ** 2), (x, 0.7)),
    (lambda s: np.sum(np.arange(0, 1, step=s) ** 2), (0.25 + 1e-3,)),
    (lambda b, s: np.sum(np.arange(b, step=s) ** 2), (2.0, 0.5 + 1e-3)),
    (lambda c: np.sum(np.pad(x, 1, constant_values=c) ** 2), (2.0,)),
    (lambda c: np.sum(np.pad(np.outer(x, x), ((1, 2), (0, 1)), constant_values=c) ** 2),
     (np.array([[1.0, 2.0], [3.0, 4.0]]),)),
    (lambda b: np.sum(np.linalg.solve(np.eye(3) * 2, b=b) ** 2), (x,)),
    (lambda x: np.sum(a=x ** 3), (x,)),
    (lambda v: np.sum(np.full(3, fill_value=v) ** 2), (2.0,)),
    (lambda x: np.linalg.norm(x=x), (x,)),
    (lambda s: np.sum(np.linspace(0, stop=s, num=5) ** 2), (2.0,)),
    (lambda x, y: np.dot(a=x, b=y), (x, x[::-1].copy())),
    (lambda x: np.sum(np.stack(arrays=[x, x ** 2]) ** 2), (x,)),
    (lambda x, m: np.var(x, mean=m), (x, 0.3)),
    (lambda x, i: x.sum(initial=i) ** 2, (x, 0.5)),
    (lambda n, p: np.sum(np.nan_to_num(np.array([np.nan, 1.0, np.inf]), nan=n, posinf=p) ** 2), (0.5, 3.0)),
])
def test_keyword_gradients_match_finite_differences(f, args):
    check_grad(f, *args)


def test_pad_constant_values_closed_form():
    g, = bytegrad.gradient(lambda c: np.sum(np.pad(x, 1, constant_values=c)), 2.0)
    assert g == 2.0  # two padded entries


def test_a_keyword_a_rule_cannot_differentiate_is_an_error_naming_it():
    @bytegrad.rule(_scaled)
    def _(x, *, scale=1.0):
        return _scaled(x, scale=scale), lambda dy: (None, dy * scale)
    with pytest.raises(bytegrad.KeywordGradientError, match=r"_scaled\(\.\.\., scale=\.\.\.\).*override=True"):
        bytegrad.gradient(lambda x, s: _scaled(x, scale=s), 1.5, 2.0)
    # not asked for (a constant): no error
    assert bytegrad.gradient(lambda x: _scaled(x, scale=2.0), 1.5) == (2.0,)


def _scaled(x, *, scale=1.0):
    return scale * x


def test_a_second_rule_is_refused_and_override_replaces_it():
    def f(x):
        return 2 * x
    bytegrad.rule(f)(lambda x: (f(x), lambda dy: (None, 2 * dy)))
    with pytest.raises(bytegrad.DuplicateRuleError, match="override=True"):
        bytegrad.rule(f)(lambda x: (f(x), lambda dy: (None, 3 * dy)))
    with pytest.raises(bytegrad.DuplicateRuleError):
        bytegrad.defrule(np.sin, lambda x: (np.sin(x), lambda dy: (None, dy)))
    bytegrad.defrule(f, lambda x: (f(x), lambda dy: (None, 3 * dy)), override=True)
    assert bytegrad.gradient(lambda x: f(x), 1.0) == (3.0,)
