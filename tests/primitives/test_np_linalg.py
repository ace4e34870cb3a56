"""NumPy products and np.linalg rules, checked with `bytegrad.testing.check_rule`."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
import bytegrad.primitives.np_linalg  # noqa: F401  (registers the rules)
from bytegrad.runtime.api import pullback
from bytegrad.runtime.rules import RULES, Lazy
from bytegrad.testing import check_rule
from checks import check_grad

SETTINGS = settings(max_examples=15, deadline=None)
DTYPES = [np.float64, np.float32, np.complex128]


def check(f, *args, **kw):
    """`check_rule`, with an absolute tolerance for the rounding noise of single
    precision finite differences."""
    def single(a):
        if isinstance(a, (list, tuple)):
            return any(map(single, a))
        return isinstance(a, np.ndarray) and a.dtype in (np.float32, np.complex64)

    if any(map(single, args)):
        kw.setdefault("atol", 1e-4)
        if not all(isinstance(a, np.ndarray) for a in args):   # check_rule sees no float32 in lists
            kw.setdefault("rtol", 3e-3)
            kw.setdefault("steps", (1e-2, 3e-3, 1e-3))
    return check_rule(f, *args, **kw)


def rand(rng, shape, dtype=np.float64):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def wellcond(rng, shape, dtype=np.float64):
    """A random square matrix (stack) far from singular: random + n I."""
    n = shape[-1]
    return (rand(rng, shape, dtype) + 2 * n * np.eye(n)).astype(dtype)


def spd(rng, shape, dtype=np.float64):
    """A Hermitian positive definite matrix (stack)."""
    x = rand(rng, shape, dtype)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


# The differentiated functions below use only operators and this module's rules.

def ct(a):
    """Conjugate transpose of the last two axes."""
    if a.dtype.kind == "c":
        return np.einsum("...ij->...ji", a.real) - 1j * np.einsum("...ij->...ji", a.imag)
    return np.einsum("...ij->...ji", a)


def separated(rng, shape, dtype=np.float64):
    """A random matrix (stack) with well separated singular values 1, 2, ..., min(m, n)."""
    m, n = shape[-2:]
    k = min(m, n)
    u = np.linalg.qr(rand(rng, shape[:-2] + (m, k), dtype))[0]
    vh = np.conj(np.swapaxes(np.linalg.qr(rand(rng, shape[:-2] + (n, k), dtype))[0], -1, -2))
    return ((u * np.arange(1.0, k + 1)) @ vh).astype(dtype)


def spectrum(rng, shape, dtype=np.float64):
    """A random Hermitian matrix (stack) with eigenvalues 1, 2, ..., n (well separated)."""
    q = np.linalg.qr(rand(rng, shape, dtype))[0]
    return ((q * np.arange(1.0, shape[-1] + 1)) @ np.conj(np.swapaxes(q, -1, -2))).astype(dtype)


def sym(a):
    return (a + ct(a)) / 2


# ---------------------------------------------------------------- matmul, dot

MATMUL_SHAPES = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((3,), (2, 3, 4)), ((2, 4, 3), (3,)),
                 ((2, 1, 2, 3), (5, 3, 4)), ((4, 4, 3), (3,)), ((3,), (2, 3, 2))]


@pytest.mark.parametrize("sa, sb", MATMUL_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul(sa, sb, dtype):
    rng = np.random.default_rng(1)
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    check(lambda a, b: np.matmul(a, b), a, b)
    check(lambda a, b: np.linalg.matmul(a, b), a, b)


@pytest.mark.parametrize("sa, sb", MATMUL_SHAPES)
def test_matmul_agrees_with_the_operator(sa, sb):
    rng = np.random.default_rng(2)
    a, b = rand(rng, sa, np.complex128), rand(rng, sb, np.complex128)
    d = rand(rng, np.matmul(a, b).shape, np.complex128)
    g1 = pullback(lambda a, b: np.matmul(a, b), a, b)[1](d)
    g2 = pullback(lambda a, b: a @ b, a, b)[1](d)
    for x, y in zip(g1, g2):
        assert np.allclose(x, y, rtol=1e-12, atol=1e-12)


@pytest.mark.regression
def test_matmul_of_a_sparse_or_structured_gradient():
    """``a @ b`` takes an `Eye` (from a trace) as it is; one element read of the product
    (a `OneHot`) or its mean (a `Fill`) reaches its pullback dense."""
    rng = np.random.default_rng(7)
    a, b = rand(rng, (3, 4)), rand(rng, (4, 2))
    g = bytegrad.gradient(lambda a, b: (a @ b)[1, 0], a, b)
    assert np.allclose(g[0], np.outer([0, 1, 0], b[:, 0]))
    assert np.allclose(g[1], np.outer(a[1], [1, 0]))
    g = bytegrad.gradient(lambda a, b: np.mean(a @ b), a, b)
    assert np.allclose(g[0], np.ones((3, 2)) @ b.T / 6)
    assert np.allclose(g[1], a.T @ np.ones((3, 2)) / 6)


def test_matmul_mixed_real_complex_and_int():
    rng = np.random.default_rng(3)
    a, b = rand(rng, (2, 3)), rand(rng, (3, 2), np.complex128)
    check(lambda a, b: np.matmul(a, b), a, b)
    i = rng.integers(-3, 3, (3, 2))
    g = check(lambda a, b: np.matmul(a, b), a, i)
    assert g[1] is None
    a32 = rand(rng, (2, 3), np.float32)
    g = check(lambda a, b: np.matmul(a, b), a32, rand(rng, (3, 2)))
    assert g[0].dtype == np.float32


@pytest.mark.parametrize("sa, sb", MATMUL_SHAPES[:5] + [((), (3, 2)), ((2, 3), ()),
                                                        ((2, 3, 4), (4,)), ((2, 3, 4), (5, 4, 2)),
                                                        ((3,), (2, 3, 4))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dot(sa, sb, dtype):
    rng = np.random.default_rng(4)
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    check(lambda a, b: np.dot(a, b), a, b)
    if a.ndim:
        check(lambda a, b: a.dot(b), a, b)


def test_dot_with_lists_and_scalars():
    rng = np.random.default_rng(5)
    w = rand(rng, (2, 3))
    g = check(lambda x, w: np.dot(x, w), [1.5, -2.0], w)
    assert type(g[0]) is list
    check(lambda s, w: np.dot(s, w), 1.5, w)


@SETTINGS
@given(st.data())
def test_matmul_broadcasting(data):
    batch = data.draw(st.lists(st.integers(1, 3), max_size=2))
    ba = [data.draw(st.sampled_from([1, n])) for n in batch]
    bb = [data.draw(st.sampled_from([1, n])) for n in batch]
    m, k, n = (data.draw(st.integers(1, 4)) for _ in range(3))
    rng = np.random.default_rng(data.draw(st.integers(0, 100)))
    a = rand(rng, tuple(data.draw(st.sampled_from([ba, ba[1:], []]))) + (m, k))
    b = rand(rng, tuple(bb) + (k, n))
    check(lambda a, b: np.matmul(a, b), a, b)


# ---------------------------------------------------------------- inner, outer, tensordot

@pytest.mark.parametrize("sa, sb", [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (4, 3)),
                                    ((2, 2, 3), (4, 3)), ((), (2, 3))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_inner(sa, sb, dtype):
    rng = np.random.default_rng(6)
    check(lambda a, b: np.inner(a, b), rand(rng, sa, dtype), rand(rng, sb, dtype))


@pytest.mark.parametrize("sa, sb", [((3,), (4,)), ((2, 3), (4,)), ((2,), (2, 2))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_outer(sa, sb, dtype):
    rng = np.random.default_rng(7)
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    check(lambda a, b: np.outer(a, b), a, b)
    if a.ndim == b.ndim == 1:
        check(lambda a, b: np.linalg.outer(a, b), a, b)


@pytest.mark.parametrize("sa, sb, axes", [
    ((2, 3, 4), (3, 4, 5), 2), ((2, 3), (3, 4), 1), ((2, 3), (4, 5), 0),
    ((2, 3, 4), (4, 2, 5), ([0, 2], [1, 0])), ((3, 4, 2), (2, 3), ([2, 0], [0, 1])),
    ((2, 3, 4), (4, 3), ([-1, -2], [0, 1])), ((3, 2), (3,), (0, 0)), ((2, 3), (3, 2), ((0, 1), (1, 0)))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_tensordot(sa, sb, axes, dtype):
    rng = np.random.default_rng(8)
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    check(lambda a, b: np.tensordot(a, b, axes), a, b)
    check(lambda a, b: np.tensordot(a, b, axes=axes), a, b)
    check(lambda a, b: np.linalg.tensordot(a, b, axes=axes), a, b)


def test_tensordot_default_axes():
    rng = np.random.default_rng(9)
    check(lambda a, b: np.tensordot(a, b), rand(rng, (2, 3, 4)), rand(rng, (3, 4, 2)))


# ---------------------------------------------------------------- einsum

EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ij,kj", [(2, 3), (4, 3)]),
    ("ba", [(2, 3)]), ("ab,bA", [(2, 3), (3, 4)]),
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("iji->j", [(3, 2, 3)]), ("iij,jk->ik", [(3, 3, 2), (2, 4)]),
    ("i,i", [(3,), (3,)]), ("i,i->i", [(3,), (3,)]), ("i,j->ij", [(2,), (3,)]),
    ("ij->", [(2, 3)]), ("ij->i", [(2, 3)]), ("ij,j->", [(2, 3), (3,)]),
    ("...ij,...jk->...ik", [(5, 2, 3), (5, 3, 4)]), ("...ij,...jk->...ik", [(2, 3), (5, 3, 4)]),
    ("...ij,...jk", [(1, 2, 3), (4, 3, 2)]), ("i...->...", [(2, 3, 4)]), ("...ii->...i", [(2, 3, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), ("ij,ij,ij->", [(2, 3), (2, 3), (2, 3)]),
    ("ij,j", [(1, 1), (3,)]), ("i,ii,i", [(3,), (3, 3), (3,)]), ("ij,ji", [(3, 3), (3, 3)]),
    (",ij->ij", [(), (2, 3)]), ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]), ("ij,jk->ki", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("subs, shapes", EINSUM)
@pytest.mark.parametrize("dtype", DTYPES)
def test_einsum(subs, shapes, dtype):
    rng = np.random.default_rng(10)
    ops = [rand(rng, s, dtype) for s in shapes]
    check(lambda *ops: np.einsum(subs, *ops), *ops)


def test_einsum_optimize_and_spaces():
    rng = np.random.default_rng(11)
    ops = [rand(rng, s) for s in [(2, 3), (3, 4), (4, 2)]]
    check(lambda *ops: np.einsum("ij, jk, kl -> il", *ops, optimize=True), *ops)
    check(lambda *ops: np.einsum("ij,jk,kl->il", *ops, optimize="greedy"), *ops)


def test_einsum_interleaved_format():
    rng = np.random.default_rng(12)
    a, b = rand(rng, (2, 3)), rand(rng, (3, 4))
    check(lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), a, b)
    check(lambda a, b: np.einsum(a, [0, 1], b, [1, 2]), a, b)
    check(lambda a: np.einsum(a, [Ellipsis, 0, 0], [Ellipsis, 0]), rand(rng, (2, 3, 3)))


def test_einsum_mixed_dtypes():
    rng = np.random.default_rng(13)
    a, b = rand(rng, (2, 3), np.float32), rand(rng, (3, 4), np.complex128)
    g = check(lambda a, b: np.einsum("ij,jk->ik", a, b), a, b)
    assert g[0].dtype == np.float32
    g = check(lambda a, b: np.einsum("ij,jk->ik", a, b), rand(rng, (2, 3)),
                   rng.integers(0, 3, (3, 4)))
    assert g[1] is None


@SETTINGS
@given(st.data())
def test_einsum_random_contractions(data):
    """Random two-operand contractions with repeated letters and implicit outputs."""
    letters = "abcd"
    sizes = {c: data.draw(st.integers(1, 3)) for c in letters}
    sa = data.draw(st.lists(st.sampled_from(letters), min_size=0, max_size=3))
    sb = data.draw(st.lists(st.sampled_from(letters), min_size=1, max_size=3))
    counts = {c: (sa + sb).count(c) for c in set(sa + sb)}
    out = [c for c in sorted(counts) if data.draw(st.booleans())]
    subs = "".join(sa) + "," + "".join(sb)
    if data.draw(st.booleans()):
        subs += "->" + "".join(out)
    rng = np.random.default_rng(data.draw(st.integers(0, 100)))
    a = rand(rng, tuple(sizes[c] for c in sa))
    b = rand(rng, tuple(sizes[c] for c in sb), data.draw(st.sampled_from([np.float64, np.complex128])))
    check(lambda a, b: np.einsum(subs, a, b), a, b)


# ---------------------------------------------------------------- trace, kron, vdot, cross, vecdot

@pytest.mark.parametrize("shape, kw", [((3, 3), {}), ((3, 4), {"offset": 1}), ((4, 3), {"offset": -2}),
                                       ((2, 3, 4), {"axis1": 1, "axis2": 2}),
                                       ((3, 2, 3), {"axis1": 2, "axis2": 0, "offset": 1}),
                                       ((3, 3), {"offset": 5})])
@pytest.mark.parametrize("dtype", DTYPES)
def test_trace(shape, kw, dtype):
    rng = np.random.default_rng(14)
    a = rand(rng, shape, dtype)
    check(lambda a: np.trace(a, **kw), a)
    check(lambda a: a.trace(**kw), a)
    check(lambda a: np.trace(a, *kw.values()) if list(kw) == ["offset"] else np.trace(a), a)


def test_linalg_trace():
    rng = np.random.default_rng(15)
    check(lambda a: np.linalg.trace(a), rand(rng, (2, 3, 3)))
    check(lambda a: np.linalg.trace(a, offset=1), rand(rng, (2, 3, 4), np.complex128))


@pytest.mark.parametrize("sa, sb", [((2,), (3,)), ((2, 3), (2, 2)), ((2, 1, 3), (2, 2)), ((), (2, 2)),
                                    ((3,), (2, 2, 2))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_kron(sa, sb, dtype):
    rng = np.random.default_rng(16)
    check(lambda a, b: np.kron(a, b), rand(rng, sa, dtype), rand(rng, sb, dtype))


@pytest.mark.parametrize("sa, sb", [((3,), (3,)), ((2, 3), (6,)), ((2, 2), (2, 2))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_vdot(sa, sb, dtype):
    rng = np.random.default_rng(17)
    check(lambda a, b: np.vdot(a, b), rand(rng, sa, dtype), rand(rng, sb, dtype))


def test_vdot_conjugates_its_first_argument():
    a, b = np.array([1 + 2j, 3 - 1j]), np.array([2 - 1j, 1j])
    _, back = pullback(lambda a, b: np.vdot(a, b), a, b)
    ga, gb = back(1.0 + 0j)
    assert np.allclose(ga, b) and np.allclose(gb, a)   # d/d conj(a) of conj(a)·b is b
    check(lambda a, b: np.vdot(a, b), a, rand(np.random.default_rng(0), (2,)))


def _crosses_2_vectors():
    """NumPy 2.5 and later refuse the 2-element vectors older releases deprecated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            np.cross(np.ones(2), np.ones(2))
        except ValueError:
            return False
    return True


@pytest.mark.parametrize("sa, sb, kw", [((3,), (3,), {}), ((4, 3), (3,), {}), ((2, 1, 3), (4, 3), {}),
                                        ((3, 4), (4, 3), {"axisa": 0}),
                                        ((3, 2), (3, 2), {"axis": 0}),
                                        ((2, 3), (3, 2), {"axisb": 0, "axisc": 0}),
                                        ((2,), (3,), {}), ((4, 3), (2,), {}), ((2,), (2,), {}),
                                        ((5, 2), (2,), {})])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cross(sa, sb, kw, dtype):
    rng = np.random.default_rng(18)
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # 2-vectors
        if 2 in (sa[-1], sb[-1]) and not kw and not _crosses_2_vectors():
            with pytest.raises(ValueError, match="3-dimensional"):  # NumPy's own error
                check(lambda a, b: np.cross(a, b, **kw), a, b)
        else:
            check(lambda a, b: np.cross(a, b, **kw), a, b)
    if not kw and sa[-1] == sb[-1] == 3:
        check(lambda a, b: np.linalg.cross(a, b), a, b)


@pytest.mark.parametrize("sa, sb, kw", [((3,), (3,), {}), ((2, 3), (3,), {}),
                                        ((3, 2), (3, 1), {"axis": 0})])
@pytest.mark.parametrize("dtype", DTYPES)
def test_vecdot(sa, sb, kw, dtype):
    rng = np.random.default_rng(19)
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    check(lambda a, b: np.vecdot(a, b, **kw), a, b)
    check(lambda a, b: np.linalg.vecdot(a, b, **kw), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matvec_vecmat(dtype):
    rng = np.random.default_rng(20)
    check(lambda a, x: np.matvec(a, x), rand(rng, (2, 3, 4), dtype), rand(rng, (4,), dtype))
    check(lambda a, x: np.matvec(a, x), rand(rng, (3, 4), dtype), rand(rng, (2, 4), dtype))
    check(lambda x, a: np.vecmat(x, a), rand(rng, (3,), dtype), rand(rng, (2, 3, 4), dtype))
    check(lambda x, a: np.vecmat(x, a), rand(rng, (2, 3), dtype), rand(rng, (3, 4), dtype))


def test_products_are_lazy():
    """Every product's pullback defers its gradients, so data is never differentiated."""
    rng = np.random.default_rng(21)
    a, b, v = rand(rng, (3, 3)), rand(rng, (3, 3)), rand(rng, (3,))
    calls = [(np.matmul, a, b), (np.dot, a, b), (np.ndarray.dot, a, b), (np.inner, a, b),
             (np.outer, a, b), (np.tensordot, a, b), (np.einsum, "ij,jk", a, b), (np.trace, a),
             (np.kron, a, b), (np.vdot, a, b), (np.cross, v, v), (np.vecdot, a, b),
             (np.linalg.solve, a + 5 * np.eye(3), b), (np.linalg.inv, a + 5 * np.eye(3)),
             (np.linalg.det, a), (np.linalg.pinv, a + 5 * np.eye(3))]
    for f, *args in calls:
        y, back = RULES[f](*args)
        assert isinstance(back(np.ones_like(y)), Lazy), f


# ---------------------------------------------------------------- solve, inv, det, slogdet

@pytest.mark.parametrize("sa, sb", [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 2)),
                                    ((2, 3, 3), (3,)), ((2, 3, 3), (1, 3, 2)), ((1, 1), (1,))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_solve(sa, sb, dtype):
    rng = np.random.default_rng(22)
    check(lambda a, b: np.linalg.solve(a, b), wellcond(rng, sa, dtype), rand(rng, sb, dtype))


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (5, 5), (2, 3, 3)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_inv_det(shape, dtype):
    rng = np.random.default_rng(23)
    a = wellcond(rng, shape, dtype)
    check(lambda a: np.linalg.inv(a), a)
    check(lambda a: np.linalg.det(a) / shape[-1] ** shape[-1], a)


def test_inv_det_of_lists_and_ints():
    g = check(lambda a: np.linalg.det(a), [[2.0, 1.0], [0.5, 3.0]])
    assert type(g[0]) is list
    g = check(lambda a: np.linalg.inv(a), 2 * np.eye(2, dtype=int))
    assert g == (None,)


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 4, 4)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_slogdet(shape, dtype):
    rng = np.random.default_rng(24)
    a = wellcond(rng, shape, dtype)
    a[..., 0, :] *= -1          # a negative determinant (real case)

    def both(a):
        sign, logdet = np.linalg.slogdet(a)
        return sign, logdet

    def logabs(a):
        sign, logdet = np.linalg.slogdet(a)
        return logdet

    check(both, a)
    check(logabs, a)
    check(lambda a: np.linalg.slogdet(a).logabsdet, a)


def test_slogdet_real_sign_has_no_gradient():
    a = np.array([[-2.0, 1.0], [0.5, 3.0]])
    y, back = RULES[np.linalg.slogdet](a)
    assert back((1.0, None))[1] is None
    assert np.allclose(back((7.0, 1.0))[1], back((None, 1.0))[1])


# ---------------------------------------------------------------- cholesky, eigh

@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (5, 5), (2, 3, 3)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky(shape, dtype):
    rng = np.random.default_rng(25)
    a = spd(rng, shape, dtype)
    check(lambda a: np.linalg.cholesky(sym(a)), a)
    check(lambda a: np.linalg.cholesky(sym(a), upper=True), a)


def test_cholesky_gradient_is_hermitian():
    rng = np.random.default_rng(26)
    a = spd(rng, (3, 3), np.complex128)
    d = rand(rng, (3, 3), np.complex128)
    (g,) = pullback(lambda a: np.linalg.cholesky(a), a)[1](d)
    assert np.allclose(g, g.conj().T)


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (5, 5), (2, 3, 3)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh(shape, dtype):
    rng = np.random.default_rng(27)
    a = spectrum(rng, shape, dtype) + 0.1 * rand(rng, shape, dtype)

    def values(a):
        w, v = np.linalg.eigh(sym(a))
        return w

    def invariant(a):   # functions of the eigenvectors that do not depend on their phases
        w, v = np.linalg.eigh(sym(a))
        return v @ ((w * w)[..., None] * ct(v)), abs(v) ** 2

    def both(a):
        w, v = np.linalg.eigh(sym(a))
        return w * 2, abs(v) ** 2

    for f in (values, invariant, both):
        check(f, a)
    check(lambda a: np.linalg.eigh(sym(a), UPLO="U").eigenvalues, a)
    check(lambda a: np.linalg.eigvalsh(sym(a)), a)


def test_eigh_gradient_is_hermitian():
    rng = np.random.default_rng(28)
    a = sym(rand(rng, (4, 4), np.complex128))

    def f(a):
        w, v = np.linalg.eigh(a)
        return abs(v) ** 2

    (g,) = pullback(f, a)[1](rand(rng, (4, 4)))
    assert np.allclose(g, g.conj().T)


# ---------------------------------------------------------------- svd

SVD_SHAPES = [(1, 1), (3, 3), (4, 2), (2, 4), (5, 5), (2, 3, 2), (2, 2, 3)]


@pytest.mark.parametrize("shape", SVD_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_svd(shape, dtype):
    rng = np.random.default_rng(29)
    a = separated(rng, shape, dtype)

    def values(a):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return s

    def product(a):     # invariant to the phases of the singular vectors
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return (u * (s ** 0.5)[..., None, :]) @ vh

    def projectors(a):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return abs(u) ** 2, s ** 2, abs(vh) ** 3

    def left_only(a):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return abs(u) ** 2

    def right_only(a):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return abs(vh) ** 2

    for f in (values, product, projectors, left_only, right_only):
        check(f, a)
    check(lambda a: np.linalg.svd(a, compute_uv=False), a)
    check(lambda a: np.linalg.svd(a, False, False), a)


@pytest.mark.parametrize("shape", [(4, 2), (2, 4), (3, 3)])
def test_svd_full_matrices(shape):
    rng = np.random.default_rng(30)
    a = rand(rng, shape)
    k = min(shape)

    def f(a):
        u, s, vh = np.linalg.svd(a)     # full_matrices=True: only the first k vectors count
        return (u[:, :k] * s) @ vh[:k, :]

    check(f, a)


# ---------------------------------------------------------------- qr

@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (4, 2), (5, 3), (2, 4),
                                   (2, 4, 3), (2, 3, 3), (2, 2, 4)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_qr(shape, dtype):
    rng = np.random.default_rng(31)
    a = rand(rng, shape, dtype)
    n = min(shape[-2:])
    a[..., :n, :n] += 2 * n * np.eye(n)     # full rank, leading block nonsingular

    def both(a):
        q, r = np.linalg.qr(a)
        return q, r

    check(both, a)
    check(lambda a: np.linalg.qr(a).Q, a)
    check(lambda a: np.linalg.qr(a).R, a)
    check(lambda a: np.linalg.qr(a, mode="r"), a)


def test_qr_complete():
    rng = np.random.default_rng(32)
    a = rand(rng, (4, 2))

    def f(a):
        q, r = np.linalg.qr(a, mode="complete")
        return q[:, :2] * 2.0, r

    check(f, a)


# ---------------------------------------------------------------- lstsq, pinv

@pytest.mark.parametrize("sa, sb", [((4, 2), (4,)), ((5, 3), (5, 2)), ((2, 4), (2,)), ((2, 3), (2, 2)),
                                    ((3, 3), (3,))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq(sa, sb, dtype):
    rng = np.random.default_rng(33)
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)

    def solution(a, b):
        x, res, rank, s = np.linalg.lstsq(a, b)
        return x

    def everything(a, b):
        x, res, rank, s = np.linalg.lstsq(a, b, rcond=None)
        return x, res, s

    check(solution, a, b)
    check(everything, a, b)


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (4, 2), (2, 4), (2, 3, 2), (2, 2, 4)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_pinv(shape, dtype):
    rng = np.random.default_rng(34)
    a = rand(rng, shape, dtype)
    n = min(shape[-2:])
    a[..., :n, :n] += 2 * np.eye(n)
    check(lambda a: np.linalg.pinv(a), a)


def test_notes_state_the_conditions():
    for f in (np.linalg.solve, np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky,
              np.linalg.eigh, np.linalg.eigvalsh, np.linalg.svd, np.linalg.qr, np.linalg.lstsq,
              np.linalg.pinv):
        assert RULES[f].note


def test_user_style_program():
    """A least-squares fit with a ridge term, through several rules at once."""
    rng = np.random.default_rng(35)
    X, y = rand(rng, (5, 3)), rand(rng, (5,))

    def loss(w, lam):
        A = X.T @ X + lam * np.eye(3)
        w_star = np.linalg.solve(A, X.T @ y)
        r = np.dot(X, w) - y
        sign, logdet = np.linalg.slogdet(A)
        return np.einsum("i,i", r, r) + np.vdot(w - w_star, w - w_star) + logdet

    check(loss, rand(rng, (3,)), 0.7)


@pytest.mark.parametrize("n", [0, 1, 2, 3, -1, -2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_power(n, dtype):
    rng = np.random.default_rng(36)
    check(lambda a: np.linalg.matrix_power(a, n), wellcond(rng, (3, 3), dtype) / 6)
    check(lambda a: np.linalg.matrix_power(a, n), wellcond(rng, (2, 3, 3), dtype) / 6)


@pytest.mark.parametrize("shapes", [[(2, 3), (3, 4)], [(2, 3), (3, 4), (4, 2)],
                                    [(3,), (3, 4), (4, 2), (2,)],
                                    [(3,), (3, 2), (2, 4)], [(2, 3), (3, 4), (4,)]])
@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_dot(shapes, dtype):
    rng = np.random.default_rng(37)
    mats = [rand(rng, s, dtype) for s in shapes]
    g = check(lambda ms: np.linalg.multi_dot(ms), mats)
    assert type(g[0]) is list
    g = check(lambda *ms: np.linalg.multi_dot(ms), *mats)
    assert all(x.dtype == dtype for x in g)


def general(rng, shape, dtype=np.float64, real_spectrum=False):
    """A random non-normal matrix (stack) with eigenvalues 1, 2, ..., n (``real_spectrum``)
    or random ones, well separated in either case."""
    n = shape[-1]
    if not real_spectrum:
        return rand(rng, shape, dtype)
    s = wellcond(rng, shape, dtype)
    return (s @ (np.arange(1.0, n + 1)[:, None] * np.linalg.inv(s))).astype(dtype)


def eigenvector_invariants(a):
    """Functions of eig(a) invariant to the eigenvectors' phases: each vector's moduli, each
    scaled to a first entry of 1, and the eigenvalues."""
    w, v = np.linalg.eig(a)
    return np.abs(v) ** 2, v / v[..., :1, :], w


@pytest.mark.parametrize("dtype, real_spectrum", [(np.float64, False), (np.float64, True),
                                                  (np.complex128, False)])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_eig_and_eigvals(dtype, real_spectrum, shape):
    a = general(np.random.default_rng(41), shape, dtype, real_spectrum)
    check(lambda a: np.linalg.eigvals(a), a)
    check(lambda a: eigenvector_invariants(a), a)
    # two calls: each alone is not phase-invariant, together they are
    check(lambda a: np.linalg.eig(a).eigenvectors[..., 1:, :] / np.linalg.eig(a).eigenvectors[..., :1, :], a)
    check(lambda a: np.linalg.eig(a)[0] * 2, a)  # eigenvalues only


def test_eig_closed_forms():
    rng = np.random.default_rng(42)
    a = general(rng, (4, 4), np.complex128)
    w, v = np.linalg.eig(a)
    vi = np.linalg.inv(v)
    # d w_k = (v^-1 da v)_kk = sum_ij v^-1[k, i] da_ij v[j, k]: Re w_k has the gradient
    # conj(outer(v^-1[k], v[:, k]))
    for k in range(4):
        g, = bytegrad.gradient(lambda a: np.real(np.linalg.eigvals(a)[k]), a)
        np.testing.assert_allclose(g, np.conj(np.outer(vi[k], v[:, k])), atol=1e-10)
    # v diag(w) v^-1 is a itself, whatever the gauge: its gradient is the cotangent
    u = rand(rng, (4, 4), np.complex128)

    def rebuilt(a):
        w, v = np.linalg.eig(a)
        return np.real(np.sum(np.conj(u) * ((v * w) @ np.linalg.inv(v))))
    np.testing.assert_allclose(bytegrad.gradient(rebuilt, a)[0], u, atol=1e-9)
    # the trace is the sum of the eigenvalues
    g, = bytegrad.gradient(lambda a: np.real(np.sum(np.linalg.eigvals(a))), general(rng, (3, 3)))
    np.testing.assert_allclose(g, np.eye(3), atol=1e-12)


def test_eig_follows_lapacks_normalisation():
    # NumPy's eigenvectors of a complex matrix have unit norm and their entry of largest
    # modulus real and positive (what LAPACK's zgeev documents); the gradient is that of
    # exactly these vectors, so it agrees with finite differences even for functions that
    # are not phase-invariant.  (Those of a real matrix have signs that LAPACK's
    # arithmetic picks, which jump: only sign-invariant functions of them are smooth.)
    rng = np.random.default_rng(43)
    for a in (general(rng, (3, 3), np.complex128), general(rng, (2, 4, 4), np.complex128)):
        w, v = np.linalg.eig(a)
        np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1)
        top = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
        assert np.all(top.imag == 0) and np.all(top.real > 0)
        check(lambda a: np.linalg.eig(a)[1], a)
        check(lambda a: np.linalg.eig(a), a)


@pytest.mark.parametrize("p", [None, 2, -2, "fro", 1, -1, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cond(p, dtype):
    rng = np.random.default_rng(44)
    check(lambda a: np.linalg.cond(a, p), rand(rng, (3, 3), dtype))
    check(lambda a: np.linalg.cond(a, p), rand(rng, (2, 4, 4), dtype))
    if p in (None, 2, -2):
        check(lambda a: np.linalg.cond(a, p), rand(rng, (3, 5), dtype))
        check(lambda a: np.linalg.cond(a, p), rand(rng, (5, 2), dtype))


def test_cond_closed_form():
    # cond_2 of diag(s) is max s / min s
    s = np.array([3.0, 0.5, 2.0])
    g, = bytegrad.gradient(lambda a: np.linalg.cond(a), np.diag(s))
    np.testing.assert_allclose(g, np.diag([1 / 0.5, -3.0 / 0.25, 0.0]), atol=1e-12)
    g, = bytegrad.gradient(lambda a: np.linalg.cond(a, -2), np.diag(s))
    np.testing.assert_allclose(g, np.diag([-0.5 / 9, 1 / 3.0, 0.0]), atol=1e-12)


def test_trace_of_a_product_skips_the_backward_products():
    # d trace(A @ B) = (B^T, A^T): the trace's structured gradient lets the product's
    # pullback return scaled transposes instead of multiplying by a dense identity
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((5, 4)), rng.standard_normal((4, 5))
    for f in (lambda A, B: np.trace(A @ B), lambda A, B: np.trace(np.matmul(A, B)),
              lambda A, B: (A @ B).trace()):
        gA, gB = bytegrad.gradient(f, A, B)
        np.testing.assert_array_equal(gA, B.T)
        np.testing.assert_array_equal(gB, A.T)
    # every other consumer of the trace's gradient sees a dense array
    check_rule(lambda A, B: np.trace(A @ B) + (A @ B).sum() + np.trace(np.sin(A @ B)), A, B)
    g, = bytegrad.gradient(lambda X: np.trace(X), A[:4])
    assert type(g) is np.ndarray
    np.testing.assert_array_equal(g, np.eye(4))


@pytest.mark.parametrize("shape, dtype", [((3, 3), np.float64), ((2, 3, 3), np.float64),
                                          ((3, 3), np.complex128), ((4, 4), np.float32)])
def test_scipy_expm(shape, dtype):
    import scipy.linalg
    a = rand(np.random.default_rng(7), shape, dtype) * 0.5
    check_rule(scipy.linalg.expm, a, rtol=1e-3 if dtype == np.float32 else 1e-5)


def test_scipy_expm_of_a_diagonal_matrix_has_the_closed_form():
    import scipy.linalg
    d = np.array([0.3, -0.2, 1.1])
    g = bytegrad.gradient(lambda d: np.trace(scipy.linalg.expm(np.diag(d))), d)[0]
    assert np.allclose(g, np.exp(d))


@pytest.mark.regression
@pytest.mark.parametrize("b_shape", [(3,), (3, 2)])
def test_scipy_solve_inv_det(b_shape):
    """scipy.linalg's solve, inv and det, with their default options, by position and by
    keyword (they raised NoRuleError: SciPy's checks, then its C solver)."""
    import scipy.linalg
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal(b_shape)
    check_rule(scipy.linalg.solve, a, b)
    check_rule(lambda a, b: scipy.linalg.solve(a, b=b, check_finite=False), a, b)
    check_rule(scipy.linalg.inv, a)
    check_rule(lambda a: scipy.linalg.det(a=a), a)
    with pytest.raises(NotImplementedError, match="assume_a general"):
        bytegrad.grad(lambda a: np.sum(scipy.linalg.solve(a, b, assume_a="pos")))(a)


def test_matmul_of_real_matrices_against_finite_differences():
    """Real matrices take the short path (no conjugation, nothing summed back, products
    into reused arrays once large): the same array on both sides, a transposed view, a
    product large enough for the cache of arrays, mixed dtypes (which do not), float32."""
    rng = np.random.default_rng(3)
    a, b, sq = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal((3, 3))
    check_grad(lambda a, b: np.sum(np.sin(a @ b)), a, b)
    check_grad(lambda s: np.sum((s @ s) ** 2), sq)
    check_grad(lambda s: np.sum(np.tanh(s.T @ s)), sq)
    ga, gb = bytegrad.gradient(lambda a, b: np.sum(a @ b), a, b.astype(np.float32))  # (mixed dtypes)
    assert gb.dtype == np.float32 and np.allclose(ga, np.ones((4, 5)) @ b.T, rtol=1e-6)
    assert np.allclose(gb, a.T @ np.ones((4, 5)), rtol=1e-6)
    g32 = bytegrad.gradient(lambda a, b: np.sum(np.sin(a @ b)), a.astype(np.float32), b.astype(np.float32))
    g64 = bytegrad.gradient(lambda a, b: np.sum(np.sin(a @ b)), a, b)
    for x, y in zip(g32, g64):
        assert x.dtype == np.float32 and np.allclose(x, y, rtol=1e-4, atol=1e-5)
    big = rng.standard_normal((128, 128))
    g = bytegrad.gradient(lambda x, y: np.sum((x @ y) * big), big, big.T.copy())
    assert np.allclose(g[0], big @ big) and np.allclose(g[1], big.T @ big)
