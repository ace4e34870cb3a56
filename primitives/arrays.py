"""Rules for building and converting arrays, and the NumPy functions that carry no
gradient by nature.

``np.array`` / ``np.asarray`` (and ``asanyarray``, ``ascontiguousarray``,
``asfortranarray``) of anything — arrays, numbers, (nested, mixed) lists and
tuples of them — give each differentiable leaf its part of the gradient, in the
leaf's own form (a float for a float, an array of its dtype for an array, a list
for a list); ints and bools get None.  ``copy``, ``astype`` and NumPy's scalar
types (``np.float64(x)``, ``np.float32(x)``, ``np.complex128(x)``, …) pass the
gradient through, cast back to the argument's dtype (none through a cast to an
integer type).  ``x.item()`` and ``x.tolist()`` pass it back into an array.

``np.full`` / ``np.full_like`` give ``fill_value`` the sum of the gradient;
``np.linspace`` gives ``start`` and ``stop`` theirs (also through ``retstep``);
``np.arange`` gives ``start`` the sum and ``step`` the index-weighted sum (``stop``
only decides the length: zero).

Random sampling: ``normal``, ``laplace``, ``logistic``, ``gumbel`` (``loc``,
``scale``), ``uniform`` (``low``, ``high``), ``exponential``, ``rayleigh``,
``gamma`` (``scale``), ``lognormal`` (``mean``, ``sigma``) and
``multivariate_normal`` (``mean``) have pathwise (reparameterization)
gradients at the drawn sample: ``d normal(loc, scale) / d scale = (y - loc) / scale``.
Every other parameter of a sampling function, when it is differentiated, raises
NotImplementedError (``shuffle`` of a float array too: it works in place);
integer and parameterless samplers and the generators' housekeeping run plainly.
Both the ``np.random.*`` functions (``RandomState``) and ``Generator`` methods
(``np.random.default_rng().normal(...)``) are covered.

A NumPy function without a rule whose implementation is Python is differentiated through
it (`array_function`), with rules for what that code uses: ``ndarray.__array_wrap__``,
``_array_converter`` (``np.insert``, ``np.apply_along_axis``) and the C implementations of
functions that have rules (``np.concatenate``'s, which ``np.block`` calls).
"""
from __future__ import annotations

import types

from ._frozen import np

from ..runtime.api import stop_gradient
from ..runtime.forward import forward, run_plain
from ..runtime.mutation import wrapping
from ..runtime.frules import FRULES
from ..runtime.rules import RULES, Lazy, called_as, nograd, nondifferentiable, rule
from ._util import _sum_to
from .np_linalg import _parts
from .np_shape import _arg, differentiable_input, grad_for

_FLOAT = frozenset("fc")


# ---------------------------------------------------------------- building arrays

def _array_rule(f, npos):
    """``f(x, *args)``, where ``args`` has at most ``npos`` positional options."""
    def r(x, *args, **kw):
        y = f(x, *args, **kw)
        rest = (None,) * len(args)
        if y.dtype.kind not in _FLOAT:
            return y, nograd(1 + len(args))
        if type(x) is np.ndarray:
            if x.dtype.kind not in _FLOAT:
                return y, nograd(1 + len(args))
            shape = x.shape
            if y.shape == shape:
                return y, lambda d: (None, grad_for(x, np.asarray(d))) + rest
            return y, lambda d: (None, grad_for(x, np.asarray(d).reshape(shape))) + rest
        ndmin = kw.get("ndmin", 0)

        def back(d):
            d = np.asarray(d)
            if ndmin:
                d = d.reshape(np.shape(x))
            return (None, grad_for(x, d)) + rest
        return y, back
    return r


rule(np.array)(_array_rule(np.array, 1))
for _f in (np.asarray, np.asanyarray, np.ascontiguousarray, np.asfortranarray):
    rule(_f)(_array_rule(_f, 2))


@rule(np.copy)
def _copy(a, *args, **kw):
    y = np.copy(a, *args, **kw)
    if not differentiable_input(a):
        return y, nograd(1 + len(args))
    rest = (None,) * len(args)
    return y, lambda d: (None, grad_for(a, np.asarray(d))) + rest


@rule(np.ndarray.copy)
def _copy_method(x, *args, **kw):
    y = x.copy(*args, **kw)
    if x.dtype.kind not in _FLOAT:
        return y, nograd(1 + len(args))
    rest = (None,) * len(args)
    return y, lambda d: (None, grad_for(x, np.asarray(d))) + rest


def _cast_rule(f):
    """A conversion ``f(x, *args)``: the gradient cast back to ``x``'s dtype and form."""
    def r(x, *args, **kw):
        y = f(x, *args, **kw)
        rest = (None,) * len(args)
        if np.asarray(y).dtype.kind not in _FLOAT or not differentiable_input(x):
            return y, nograd(1 + len(args))
        return y, lambda d: (None, grad_for(x, np.asarray(d))) + rest
    return r


for _f in (np.ndarray.astype, np.astype, np.float64, np.float32, np.float16, np.longdouble,
           np.complex128, np.complex64, np.clongdouble):
    rule(_f, note="gradient cast back to the argument's dtype; none through a cast to an "
                  "integer type")(_cast_rule(_f))


@rule(np.generic.item)
def _scalar_item(x):
    """``np.float64(v).item()``: the Python number; its gradient, in ``x``'s type."""
    y = x.item()
    if x.dtype.kind not in _FLOAT:
        return y, nograd(1)
    return y, lambda d: (None, x.dtype.type(np.real(d) if x.dtype.kind == "f" else d))


@rule(np.ndarray.item, note="a dense gradient: O(x.size) a call")
def _item(x, *args):
    y = x.item(*args)
    if x.dtype.kind not in _FLOAT:
        return y, nograd(1 + len(args))
    at = args[0] if len(args) == 1 else args

    def back(d):
        g = np.zeros(x.shape, x.dtype)
        if x.dtype.kind == "f":
            d = np.real(d)
        if not args:
            g.reshape(-1)[0] = d
        elif type(at) is tuple:
            g[at] = d
        else:
            g.reshape(-1)[at] = d
        return (None, g) + (None,) * len(args)
    return y, back


def _dense(d, shape, dtype):
    """A nested list gradient (None where zero) as an array."""
    if d is None:
        return np.zeros(shape, dtype)
    if isinstance(d, np.ndarray) or not shape:
        return np.asarray(d)
    return np.stack([_dense(e, shape[1:], dtype) for e in d]) if shape[0] else np.zeros(shape, dtype)


@rule(np.ndarray.tolist)
def _tolist(x):
    y = x.tolist()
    if x.dtype.kind not in _FLOAT:
        return y, nograd(1)
    return y, lambda d: (None, grad_for(x, _dense(d, x.shape, x.dtype).reshape(x.shape)))


# ---------------------------------------------------------------- filled arrays and ranges

def _fill_grad(fill_value, d):
    if not differentiable_input(fill_value):
        return None
    return grad_for(fill_value, _sum_to(np.asarray(d), np.shape(fill_value)))


@rule(np.full, note="fill_value gets the summed gradient")
def _full(shape, fill_value, *args, **kw):
    y = np.full(shape, fill_value, *args, **kw)
    if y.dtype.kind not in _FLOAT:
        return y, nograd(2 + len(args))
    rest = (None,) * len(args)
    return y, lambda d: (None, None, _fill_grad(fill_value, d)) + rest


@rule(np.full_like, note="fill_value gets the summed gradient (a: none, only its shape counts)")
def _full_like(a, fill_value, *args, **kw):
    y = np.full_like(a, fill_value, *args, **kw)
    if y.dtype.kind not in _FLOAT:
        return y, nograd(2 + len(args))
    rest = (None,) * len(args)
    return y, lambda d: (None, None, _fill_grad(fill_value, d)) + rest


@rule(np.linspace, note="start and stop (also through retstep)")
def _linspace(start, stop, *args, **kw):
    y = np.linspace(start, stop, *args, **kw)
    num = int(_arg(args, kw, 0, "num", 50))
    endpoint = _arg(args, kw, 1, "endpoint", True)
    retstep = _arg(args, kw, 2, "retstep", False)
    axis = _arg(args, kw, 4, "axis", 0)
    samples = y[0] if retstep else y
    if samples.dtype.kind not in _FLOAT:
        return y, nograd(2 + len(args))
    div = (num - 1) if endpoint else num
    ax = axis + samples.ndim if axis < 0 else axis
    t = np.arange(num, dtype=float) / div if div > 0 else np.zeros(num)
    t = t.reshape((num,) + (1,) * (samples.ndim - ax - 1))
    rest = (None,) * len(args)

    def back(d):
        dy, dstep = d if retstep else (d, None)
        gstart = gstop = 0.0
        if dy is not None:
            dy = np.asarray(dy)
            gstop = (dy * t).sum(axis=ax)
            gstart = dy.sum(axis=ax) - gstop
        if dstep is not None and div > 0:
            gstart = gstart - dstep / div
            gstop = gstop + dstep / div
        return (None, _fill_grad(start, gstart), _fill_grad(stop, gstop)) + rest
    return y, back


@rule(np.arange, note="start gets the summed gradient, step the index-weighted sum, stop none")
def _arange(*args, **kw):
    y = np.arange(*args, **kw)
    if y.dtype.kind not in _FLOAT or len(args) < 2:
        return y, nograd(len(args))
    # arange(stop, step=s) is bound as arange(stop, None, s): then the first is the stop
    start = args[0] if args[1] is not None else None

    def back(d):
        d = np.asarray(d)
        gs = (None, _fill_grad(start, d.sum()), None)
        if len(args) > 2:
            gs += (_fill_grad(args[2], d @ np.arange(d.size)),)
        return gs + (None,) * (len(args) - 3)
    return y, back


# ---------------------------------------------------------------- unique values, counts

def _by_value(x, values, d):
    """The gradient of ``x`` whose items were reduced to their distinct ``values`` with
    gradient ``d``: each item gets its value's, split equally among equal items (as
    the ties of np.max split theirs)."""
    v = np.asarray(values).ravel()
    order = np.argsort(v, kind="stable")
    at = order[np.searchsorted(v[order], np.ravel(x))]
    share = np.bincount(at, minlength=v.size)
    return grad_for(x, (np.asarray(d).ravel()[at] / share[at]).reshape(np.shape(x)))


def _unique_rule(f):
    """``np.unique`` and NumPy 2's ``unique_*``: the values are items of ``x``; indices,
    inverses and counts are ints."""
    def r(x, *args, **kw):
        if kw.get("axis") is not None or len(args) > 3 and args[3] is not None:
            raise NotImplementedError(f"np.{f.__name__}(..., axis=...): the unique rows or "
                                      f"columns of an array are not differentiable yet; flatten it")
        y = f(x, *args, **kw)
        if not differentiable_input(x):
            return y, nograd(1 + len(args))
        tup = isinstance(y, tuple)
        values = y[0] if tup else y

        def back(d):
            dv = _parts(d, y)[0] if tup else d
            return (None, None if dv is None else _by_value(x, values, dv)) + (None,) * len(args)
        return y, back
    return r


for _f in (np.unique, np.unique_values, np.unique_counts, np.unique_inverse, np.unique_all):
    rule(_f, note="flattened (axis=None); equal items share their value's gradient")(_unique_rule(_f))


@rule(np.bincount, note="w.r.t. weights (x holds ints)")
def _bincount(x, *rest):
    y = np.bincount(x, *rest)
    weights = rest[0] if rest else None
    if weights is None or not differentiable_input(weights):
        return y, nograd(1 + len(rest))
    at = np.asarray(x)
    return y, lambda d: (None, None, grad_for(weights, np.asarray(d)[at])) + (None,) * (len(rest) - 1)


# ---------------------------------------------------------------- no gradient by nature

nondifferentiable(
    stop_gradient, np.zeros, np.ones, np.empty, np.eye, np.identity, np.tri,
    np.zeros_like, np.ones_like, np.empty_like,
    np.argmax, np.argmin, np.argsort, np.argpartition, np.searchsorted, np.nonzero,
    np.flatnonzero, np.argwhere, np.count_nonzero, np.digitize,
    np.isnan, np.isinf, np.isfinite, np.isclose, np.allclose, np.array_equal, np.array_equiv,
    np.isreal, np.iscomplex, np.isrealobj, np.iscomplexobj, np.isscalar, np.shape, np.ndim,
    np.size, np.result_type, np.can_cast, np.min_scalar_type, np.broadcast_shapes,
    np.indices, np.ravel_multi_index, np.unravel_index, np.diag_indices, np.tril_indices,
    np.triu_indices, np.ndarray.argmax, np.ndarray.argmin, np.ndarray.argsort,
    np.ndarray.argpartition, np.ndarray.nonzero, np.ndarray.searchsorted,
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.intp, np.bool_)
# what a dtype is made from and asked: a dtype, a type, a bool or limits, never a value of x
nondifferentiable(np.dtype, np.promote_types, np.issubdtype, np.finfo, np.iinfo, np.common_type)


# ---------------------------------------------------------------- random sampling

def _params(f):
    """The distribution parameters of a sampler, from its signature line."""
    head = (f.__doc__ or "").strip().split("\n", 1)[0]
    inside = head[head.find("(") + 1:head.rfind(")")]
    names = [p.split("=")[0].strip() for p in inside.split(",") if p.strip()]
    return [n for n in names[:names.index("size")] if n not in ("self",)] if "size" in names else None


def _loc(p, y, d):
    return d


def _scale(p, y, d):  # y = loc + scale * z
    with np.errstate(divide="ignore", invalid="ignore"):
        return d * (y - p.get("loc", 0.0)) / p["scale"]


def _low(p, y, d):
    with np.errstate(divide="ignore", invalid="ignore"):
        return d * (p["high"] - y) / (p["high"] - p["low"])


def _high(p, y, d):
    with np.errstate(divide="ignore", invalid="ignore"):
        return d * (y - p["low"]) / (p["high"] - p["low"])


def _pure_scale(p, y, d):  # y = scale * z
    with np.errstate(divide="ignore", invalid="ignore"):
        return d * y / p["scale"]


def _lognormal_mean(p, y, d):
    return d * y


def _lognormal_sigma(p, y, d):
    with np.errstate(divide="ignore", invalid="ignore"):
        return d * y * (np.log(y) - p.get("mean", 0.0)) / p["sigma"]


_LOC_SCALE = {"loc": _loc, "scale": _scale}
PATHWISE = {
    "normal": _LOC_SCALE, "laplace": _LOC_SCALE, "logistic": _LOC_SCALE, "gumbel": _LOC_SCALE,
    "uniform": {"low": _low, "high": _high},
    "exponential": {"scale": _pure_scale}, "rayleigh": {"scale": _pure_scale},
    "gamma": {"scale": _pure_scale},
    "lognormal": {"mean": _lognormal_mean, "sigma": _lognormal_sigma},
    "multivariate_normal": {"mean": _loc},
}
_DEFAULTS = {"loc": 0.0, "scale": 1.0, "low": 0.0, "high": 1.0, "mean": 0.0, "sigma": 1.0}


class _LazyKeywords:
    """The gradients of keyword arguments, each computed when asked for."""

    __slots__ = ("thunks",)

    def __init__(self, thunks):
        self.thunks = thunks

    def get(self, name, default=None):
        t = self.thunks.get(name)
        return default if t is None else t()


def _sampler(f, name, names, method):
    derivs = PATHWISE.get(name, {})

    def r(*args, **kw):
        y = f(*args, **kw)
        if np.asarray(y).dtype.kind not in _FLOAT:
            return y, nograd(len(args))
        pos = args[1:] if method else args
        given = dict(zip(names, pos))
        given.update((k, v) for k, v in kw.items() if k in names)
        p = {n: given.get(n, _DEFAULTS.get(n)) for n in names}

        def thunk(n):
            v = given[n]
            if not differentiable_input(v):
                return None
            fn = derivs.get(n)
            if fn is None:
                def refuse():
                    raise NotImplementedError(
                        f"bytegrad: no gradient for the {n!r} parameter of the sampler {name}; "
                        f"only pathwise gradients are implemented ("
                        + ", ".join(f"{s}: {', '.join(ps)}" for s, ps in PATHWISE.items()) + ")")
                return refuse
            return lambda: _back(n, v, fn)

        def _back(n, v, fn):
            return grad_for(v, _sum_to(np.asarray(fn(p, np.asarray(y), np.asarray(_d[0]))),
                                       np.shape(v)))

        _d = [None]
        thunks = [None] * (1 + len(args))
        for i, n in enumerate(names[:len(pos)]):
            thunks[1 + i + (1 if method else 0)] = thunk(n)
        kwthunks = {n: thunk(n) for n in kw if n in names}
        if kwthunks:
            thunks.append(lambda: _LazyKeywords(kwthunks))

        def back(d):
            _d[0] = d
            return Lazy(*thunks)
        return y, back
    return r


def _in_place(f, name):
    def r(*args, **kw):
        x = args[-1] if args else kw.get("x")
        if isinstance(x, np.ndarray) and x.dtype.kind in _FLOAT:
            raise NotImplementedError(
                f"bytegrad: {name} shuffles a differentiable array in place, which cannot be "
                f"differentiated; index it with a permutation instead: x[rng.permutation(len(x))]")
        return f(*args, **kw), nograd(len(args))
    return r


def _sampler_note(name, names):
    has = [n for n in names if n in PATHWISE.get(name, {})]
    rest = [n for n in names if n not in has]
    out = f"pathwise gradient in {', '.join(has)}" if has else ""
    if rest:
        out += ("; " if out else "") + f"{', '.join(rest)}: raises when differentiated"
    return out


def _register_random():
    plain = {"seed", "get_state", "set_state", "rand", "randn", "random", "random_sample", "ranf",
             "sample", "randint", "random_integers", "integers", "bytes", "standard_normal",
             "standard_exponential", "standard_cauchy", "spawn", "get_bit_generator",
             "set_bit_generator", "default_rng", "binomial", "poisson", "geometric",
             "hypergeometric", "logseries", "multinomial", "negative_binomial", "zipf",
             "multivariate_hypergeometric"}
    sources = [(np.random, False), (np.random.RandomState, True), (np.random.Generator, True)]
    for where, method in sources:
        for name in dir(where):
            if name.startswith("_"):
                continue
            f = getattr(where, name)
            if not callable(f) or isinstance(f, type):
                continue
            if name in plain:
                nondifferentiable(f)
            elif name == "shuffle":
                rule(f, note="in place: refused for a float array")(_in_place(f, f"np.random.{name}"))
            else:
                names = _params(f)
                if name in ("choice", "permutation", "permuted"):
                    names = ["x" if name != "choice" else "a"]
                if names is None:
                    continue
                rule(f, note=_sampler_note(name, names))(_sampler(f, name, names, method))
    nondifferentiable(np.random.default_rng, np.random.SeedSequence, np.random.PCG64,
                      np.random.MT19937, np.random.Philox, np.random.SFC64, np.random.Generator,
                      np.random.RandomState)


_register_random()


# ---------------------------------------------------------------- NumPy functions in Python

# A NumPy function without a rule whose implementation is Python code (``np.meshgrid``,
# ``np.insert``, ``np.linalg.vector_norm``, …) is differentiated through that code, as
# library code is, unless an argument overrides ``__array_function__`` (then the call
# is the override's, which has no rule: it runs plainly or is refused by name).
_DISPATCHER = type(np.meshgrid)


def _overridden(args, kw) -> bool:
    """Whether an argument's ``__array_function__`` is not the ndarray's own."""
    own = np.ndarray.__array_function__
    return any(getattr(type(a), "__array_function__", own) is not own for a in (*args, *kw.values()))


def array_function(f, /, *args, **kw):
    """``f(*args, **kw)`` for the NumPy function ``f``: its Python implementation."""
    return f._implementation(*args, **kw)


@rule(array_function)
def _array_function(f, *args, **kw):
    if _overridden(args, kw) or not isinstance(getattr(f, "_implementation", None), types.FunctionType):
        y, pb = run_plain(f, args, kw)
    else:
        y, pb = forward(f._implementation, *args, **kw)
    return y, wrapping(pb, lambda d: (None,) + tuple(pb(d)))


called_as(_DISPATCHER, array_function)


@rule(np.ndarray.__array_wrap__)
def _array_wrap(a, b, *rest):
    """``a.__array_wrap__(b)``: ``b`` as ``a``'s type (or a scalar), which NumPy's Python
    code returns through (``np.linalg.tensorsolve``)."""
    y = a.__array_wrap__(b, *rest)
    return y, lambda d: (None, None, np.reshape(d, np.shape(b))) + (None,) * len(rest)


# NumPy's Python code takes its arguments as arrays through an `_array_converter`
# (``np.insert``): the converter's gradient is the tuple of its arrays' gradients.
_CONVERTER = getattr(np._core._multiarray_umath, "_array_converter", None)


if _CONVERTER is not None:
    @rule(_CONVERTER)
    def _converter(*xs):
        pbs = [forward(np.asarray, x)[1] for x in xs]  # (each input's gradient in its own form)

        def back(d):
            d = (None,) * len(xs) if d is None else d
            return (None,) + tuple(None if g is None else pb(g)[1] for pb, g in zip(pbs, d))
        return _CONVERTER(*xs), back

    @rule(_CONVERTER.as_arrays)
    def _as_arrays(c, **kw):
        return c.as_arrays(**kw), lambda d: (None, tuple(d))

    @rule(_CONVERTER.__getitem__)
    def _converted(c, i):
        n = len(c.as_arrays())
        return c[i], lambda d: (None, tuple(d if j == i % n else None for j in range(n)), None)

    @rule(_CONVERTER.wrap)
    def _wrap(c, a, **kw):
        return c.wrap(a, **kw), lambda d: (None, None, np.reshape(d, np.shape(a)))


def rules_for_implementations():
    """Give the C implementation of each NumPy function with rules (``np.concatenate``'s,
    which ``np.block`` calls) the same rules, where it has none: it does what the function
    does, without the ``__array_function__`` dispatch.  Run once every rule is registered."""
    for table in (RULES, FRULES):
        for f in [f for f in table if type(f) is _DISPATCHER]:
            impl = f._implementation
            if type(impl) is not types.FunctionType and impl not in table:
                table[impl] = table[f]
