"""Adversarial review of in-place mutation support.

Every gradient is compared with central finite differences taken on deep copies of the
arguments (`check_stateful` / `check_pullback` of test_stateful_programs.py), and every
mutating program must leave its arguments as a plain call leaves them.

The tests after the "failures found in the review" line are minimal reproducers of
silent wrong gradients, crashes and wrong values the review found, kept as regression
tests now that they are fixed.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import bytegrad
from bytegrad.runtime import shadow as _shadow
from checks import check_pullback, check_stateful


# ---------------------------------------------------------------------------
# arrays: views, overlap, dtypes
# ---------------------------------------------------------------------------

def view_of_strided_view(a, x):
    w = a[1:][::2]
    w[0] = x * a[0]
    w[1] *= x
    return np.sum(a ** 2)


def test_write_through_a_strided_view_of_a_view():
    check_stateful(view_of_strided_view, np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 0.7)


def overlapping_self_assignments(a, x):
    a[1:] = a[:-1]          # NumPy buffers overlapping copies
    a[:-1] += a[1:] * x
    a[::-1] = a
    a += a
    a *= a
    return np.sum(a * np.array([1.0, 2.0, 3.0, 4.0])) * x


def test_overlapping_self_assignments():
    check_stateful(overlapping_self_assignments, np.array([1.0, -2.0, 3.0, 0.5]), 0.7)


def swap_rows_through_views(a, x):
    a[0], a[1] = a[1], a[0]   # views: NumPy leaves both rows equal to the old a[1]
    return np.sum(a[0] * x + a[1] ** 2)


def test_row_swap_through_views_follows_numpy():
    check_stateful(swap_rows_through_views, np.array([[1.0, 2.0], [3.0, 4.0]]), 0.7)


def zero_d_writes(a, x):
    a[...] = a * x
    a[()] = a[()] ** 2 + x
    return float(a) * 3.0


def test_zero_d_array_written_with_ellipsis_and_empty_tuple():
    check_stateful(zero_d_writes, np.array(1.5), 0.7)


def complex_writes(z, x):
    z[0] = z[1] * x
    z += 1j * x
    z[1] = z[1] * z[0].imag
    return np.sum(np.abs(z) ** 2)


def test_complex_array_written_in_place():
    z = np.array([1 + 2j, 3 - 1j])
    gz, gx = bytegrad.gradient(complex_writes, z.copy(), 0.7)
    h = 1e-6
    fd = lambda dz, dx: complex_writes(z + dz, 0.7 + dx)
    for k in range(2):
        e = np.zeros(2, complex)
        e[k] = h
        want = (fd(e, 0) - fd(-e, 0)) / (2 * h) + 1j * (fd(1j * e, 0) - fd(-1j * e, 0)) / (2 * h)
        assert np.isclose(gz[k], want, rtol=1e-5, atol=1e-6)
    assert np.isclose(gx, (fd(0, h) - fd(0, -h)) / (2 * h), rtol=1e-5)


def mixed_int_bool_arrays(a, mask, idx, x):
    a[mask] = a[mask] * x
    a[idx] += x
    counts = np.zeros(3, dtype=int)
    counts[idx] = 7                      # an integer array written: no gradient to carry
    flags = np.zeros(3, dtype=bool)
    flags[0] = x > 0
    return np.sum(a ** 2) + counts[0] * x + np.sum(a[flags])


def test_integer_and_boolean_arrays_mixed_in():
    check_stateful(mixed_int_bool_arrays, np.array([1.0, 2.0, 3.0]),
                   np.array([True, False, True]), np.array([0, 2]), 0.7)


def index_add_at_repeats(a, x):
    np.add.at(a, [0, 0, 2], x * a[1])
    return np.sum(a ** 2)


def test_np_add_at_with_repeated_indices():
    check_stateful(index_add_at_repeats, np.array([1.0, 2.0, 3.0]), 0.7)


def sort_in_place(a, x):
    a.sort()
    return a[0] * x + a[-1] ** 2


def test_ndarray_sort_in_place_is_right_or_refused():
    try:
        check_stateful(sort_in_place, np.array([3.0, 1.0, 2.0]), 0.7)
    except NotImplementedError as e:
        assert "np.sort" in str(e)


# ---------------------------------------------------------------------------
# arrays inside containers and objects, writes in callees, loops, recursion
# ---------------------------------------------------------------------------

class Holder:
    def __init__(self, w):
        self.w = w


def nested_array_updates(xs, d, o, x):
    xs[0][1] = x * xs[1][0]
    d["w"][0] *= x
    o.w[1] += x * o.w[0]
    xs[1] += d["w"]
    return np.sum(xs[0] ** 2) + np.sum(xs[1] ** 3) + np.sum(d["w"] * o.w)


def test_arrays_inside_list_dict_and_object_arguments():
    check_stateful(nested_array_updates, [np.array([1.0, 2.0]), np.array([3.0, 4.0])],
                   {"w": np.array([0.5, -1.0])}, Holder(np.array([1.5, 2.0])), 0.7)


def _scale_first(a, x):
    a[0] = a[0] * x


def _scale_and_return(a, x):
    a *= x
    return a


def _recursive_scale(a, i, x):
    if i == len(a):
        return 0.0
    a[i] = a[i] * x
    return a[i] + _recursive_scale(a, i + 1, x)


def callee_writes(a, x):
    _scale_first(a, x)
    _scale_first(a[1:], x)           # a callee writing through a view
    b = _scale_and_return(a, x)      # the result aliases the argument
    s = _recursive_scale(a, 0, x)
    return s + np.sum(b ** 2) + np.sum(a)


def test_callees_and_recursion_writing_into_an_argument():
    check_stateful(callee_writes, np.array([1.0, 2.0, 3.0]), 0.7)


def return_view_of_mutated_argument(a):
    v = a[1:]
    v *= 3.0
    return v, a


def test_pullback_of_a_returned_view_twice():
    check_pullback(return_view_of_mutated_argument, (np.array([1.0, -2.0]), np.array([0.5, 1.0, 2.0])),
                   np.array([1.0, 2.0, 3.0]))


def mixed_state(o, d, a, x):
    o.w = o.w * x
    o.xs.append(o.w)
    d["k"] = d["k"] + o.xs[0]
    a[1:] = a[:-1] * d["k"]
    a += x
    return np.sum(a ** 2) + o.w * d["k"], [o.xs[-1], a[0]]


def test_pullback_of_a_program_mutating_object_dict_and_array_twice():
    check_pullback(mixed_state, (1.0, [0.5, -1.0]), Holder2(1.5, [2.0]), {"k": 0.3},
                   np.array([1.0, 2.0, 3.0]), 0.7)


class Holder2:
    def __init__(self, w, xs):
        self.w, self.xs = w, xs


def test_pullback_called_after_another_gradient_computation():
    a = np.array([1.0, 2.0])
    y, back = bytegrad.pullback(_scale_and_return, a, 0.7)
    bytegrad.gradient(lambda b, x: np.sum(_scale_and_return(b, x)), np.array([5.0, 6.0]), 2.0)
    ga, gx = back(np.array([1.0, 1.0]))
    np.testing.assert_allclose(ga, [0.7, 0.7])
    assert np.isclose(gx, 3.0)
    np.testing.assert_array_equal(a, [0.7, 1.4])


# ---------------------------------------------------------------------------
# closures, nonlocal, comprehensions, map
# ---------------------------------------------------------------------------

def closures_mutating_captured_state(a, x):
    acc, d = [], {}
    total = 0.0

    def push(v):
        acc.append(v * x)

    def put(k, v):
        d[k] = v

    def scale(i):
        a[i] = a[i] * x

    def add(v):
        nonlocal total
        total = total + v

    for i in range(2):
        push(a[i] + x)
        scale(i)
        add(a[i] * a[i])
    put("a", acc[0] * 2)
    put("a", d["a"] * acc[1])
    return total + sum(v * v for v in acc) + d["a"] + np.sum(a)


def test_closures_mutating_captured_lists_dicts_arrays_and_nonlocals():
    check_stateful(closures_mutating_captured_state, np.array([1.0, 2.0, 3.0]), 0.7)


def appends_in_map_and_generators(xs, x):
    ys, out = [], []
    list(map(lambda v: ys.append(v * x), xs))
    s = sum(out.append(v * x) or v for v in xs)
    return s + sum(y * y for y in ys) + sum(out)


def test_appends_inside_map_and_generator_expressions():
    check_stateful(appends_in_map_and_generators, [1.0, 2.0], 0.7)


# ---------------------------------------------------------------------------
# objects: __new__, properties with inheritance, class vs instance attributes
# ---------------------------------------------------------------------------

class WithNew:
    def __new__(cls, w):
        obj = super().__new__(cls)
        obj.w0 = w * 2.0
        return obj

    def __init__(self, w):
        self.w = w

    @classmethod
    def make(cls, w):
        return cls(w * 2)

    def scaled(self, s):
        self.w = self.w * s
        return self


def new_override_and_chaining(x):
    n = WithNew.make(x).scaled(x)
    n.w = n.w * n.w0
    return n.w + n.w0


def test_new_override_classmethod_factory_and_returned_self():
    check_stateful(new_override_and_chaining, 0.7)


class Base:
    scale = 2.0
    bias = 1.0

    def __init__(self, v):
        self._v = v

    @property
    def v(self):
        return self._v * self.scale

    @v.setter
    def v(self, val):
        self._v = val / self.scale


class Derived(Base):
    scale = 3.0

    @property
    def sq(self):
        return self.v ** 2


def inherited_property_and_class_attributes(b, x):
    b.v = b.v * x
    b.bias = b.bias + x          # an instance attribute now shadows the class's
    return b.sq + b._v * b.bias + Base.bias


def test_inherited_property_setter_and_shadowed_class_attribute():
    check_stateful(inherited_property_and_class_attributes, Derived(1.5), 0.7)


def structures_of_structures(dl, ld, do, x):
    dl["a"].append(x * dl["a"][0])
    dl["b"][0] = dl["a"][-1] ** 2
    for d in ld:
        d["v"] = d["v"] * x + d.get("c", 0.0)
    ld[0]["c"] = ld[1]["v"]
    do["o"].w = do["o"].w * x
    return (sum(dl["a"]) + sum(dl["b"]) + sum(d["v"] * d.get("c", 1.0) for d in ld)
            + do["o"].w ** 2)


def test_dict_of_lists_list_of_dicts_object_in_dict():
    check_stateful(structures_of_structures, {"a": [1.0, 2.0], "b": [3.0]},
                   [{"v": 1.0}, {"v": 2.0, "c": 0.5}], {"o": Holder(2.0)}, 0.7)


# ---------------------------------------------------------------------------
# list operations
# ---------------------------------------------------------------------------

def list_slices_sort_delete(xs, L, w):
    xs[::2] = [w, w * xs[1]]
    xs[::-1] = [v * w for v in xs]
    xs.sort(key=lambda v: v * w)        # a key computed from differentiable values
    del L[::2]
    L[0] *= w
    return xs[0] * 2 + xs[1] * w + xs[2] ** 2 + np.sum(L[0] ** 2)


def test_step_slices_differentiable_sort_key_and_del_on_list_of_arrays():
    check_stateful(list_slices_sort_delete, [3.0, -1.0, 2.0],
                   [np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([5.0, 6.0])], 0.7)


def list_swap(xs, x):
    xs[0], xs[1] = xs[1], xs[0] * x
    return xs[0] * xs[1] ** 2


def test_list_swap():
    check_stateful(list_swap, [1.0, 2.0], 0.7)


# ===========================================================================
# failures found in the review (fixed): silent wrong gradients first
# ===========================================================================

# -- a local buffer aliased by anything but an item, attribute or method ------------
# transforms/activity.py `_Hazards`: only getitem/getattr/a method's object/block
# arguments lead back to the object; `a` stays inactive, so reads of it carry nothing.

def test_rows_of_a_local_grid_written_in_a_for_loop():
    def f(x):
        grid = np.zeros((2, 2))
        for row in grid:
            row[0] = x
        return grid[1, 0] * 3.0
    assert bytegrad.gradient(f, 0.7) == (3.0,)


def test_rows_of_a_local_list_of_lists_written_in_a_for_loop():
    def f(x):
        rows = [[0.0, 0.0] for _ in range(2)]
        for r in rows:
            r[0] = x
        return rows[1][0] * 3.0
    assert bytegrad.gradient(f, 0.7) == (3.0,)


def _reshape_write(a, x):
    np.reshape(a, (len(a) // 2, 2))[0, 1] = x


def _asarray_write(a, x):
    v = np.asarray(a)
    v[1] = x


def _ravel_add(a, x):
    v = np.ravel(a)
    v += x


@pytest.mark.parametrize("write", [_reshape_write, _asarray_write, _ravel_add])
def test_write_through_a_numpy_view_function_of_a_local_buffer(write):
    def f(x):
        a = np.zeros(4)
        write(a, x)
        return a[1] * 3.0
    assert bytegrad.gradient(f, 0.7) == (3.0,)


def _tail(a):
    return a[1:]


def test_write_through_a_view_made_by_a_helper_function():
    def f(x):
        a = np.zeros(3)
        v = _tail(a)
        v[0] = x
        return a[1] * 3.0
    assert bytegrad.gradient(f, 0.7) == (3.0,)


def test_write_through_a_list_literal_holding_a_local_array():
    def f(x):
        a = np.zeros(3)
        lst = [a]
        lst[0][2] = x
        return a[2] * 3.0
    assert bytegrad.gradient(f, 0.7) == (3.0,)


def test_store_through_a_list_literal_holding_a_local_object():
    def f(x):
        o = Holder(0.0)
        lst = [o]
        lst[0].w = x
        return o.w * 3.0
    assert bytegrad.gradient(f, 0.7) == (3.0,)


# -- iteration over a container the loop body changes ----------------------------------

def test_for_loop_over_a_list_written_ahead_of_the_loop():
    def f(xs, x):
        s = 0.0
        for v in xs:
            xs[-1] = x          # the loop reads x, not the old xs[-1], on its second step
            s = s + v
        return s
    check_stateful(f, [1.0, 2.0], 0.7)  # expected ([1, 0], 1); bytegrad ([1.0, 1.0], None)


def test_iterator_made_before_a_write():
    def f(xs, x):
        it = iter(xs)
        xs[1] = x
        return next(it) + next(it)
    check_stateful(f, [1.0, 2.0], 0.7)  # expected ([1, 0], 1); bytegrad ([1.0, 1.0], None)


def test_for_loop_over_an_array_written_ahead():
    def f(a, x):
        i = 0
        for v in a:
            if i + 1 < len(a):
                a[i + 1] = a[i + 1] * x + v
            i += 1
        return np.sum(a)
    check_stateful(f, np.array([1.0, 2.0, 3.0]), 0.7)  # bytegrad da[0] 2.0, expected 3.0


def test_for_loop_over_a_growing_local_list():
    def f(x):
        xs = [x]
        for v in xs:
            if len(xs) < 3:
                xs.append(v * x)
        return xs[-1]
    assert np.isclose(bytegrad.gradient(f, 0.7)[0], 3 * 0.7 ** 2)  # IndexError


def test_loops_over_eager_iterators_of_a_container_changed_ahead_are_refused():
    """zip, enumerate, items and values take their items when the loop begins: a loop
    that changes items it has not reached yet is refused (plain Python would see the
    new items), rather than computing with the old ones."""
    def over_enumerate(xs, x):
        for i, v in enumerate(xs):
            xs[-1] = x
        return v

    def over_zip(a, x):
        s = 0.0
        for u, v in zip(a, a):
            a[-1] = x
            s = s + u * v
        return s

    def over_items(d, x):
        s = 0.0
        for k, v in d.items():
            d["b"] = x
            s = s + v
        return s

    def growing(xs, x):
        for i, v in enumerate(xs):
            if i == 0:
                xs.append(x)
        return v
    for f, arg in ((over_enumerate, [1.0, 2.0]), (over_zip, np.array([1.0, 2.0])),
                   (over_items, {"a": 1.0, "b": 2.0}), (growing, [1.0, 2.0])):
        with pytest.raises(NotImplementedError, match=r"test_mutation_review\.py:\d+: this loop changes"):
            bytegrad.gradient(f, arg, 0.7)


def test_loops_over_eager_iterators_may_change_what_they_have_passed():
    def scale(xs, a, d, x):
        for i, v in enumerate(xs):
            xs[i] = v * x
        for u, w in zip(a, xs):
            a[0] = a[0] + u * w
        for k, v in d.items():
            d[k] = v * x
        return sum(xs) + a.sum() + d["a"] * d["b"]
    check_stateful(scale, [1.0, 2.0], np.array([0.5, -1.0]), {"a": 1.0, "b": 2.0}, 0.7)


# -- objects -------------------------------------------------------------------------

class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


def test_slots_object_argument_keeps_the_gradient_of_an_unwritten_field():
    def f(s, x):
        s.a = x
        return s.b * 2.0
    gs, gx = bytegrad.gradient(f, Slotted(1.5, 2.0), 0.7)
    assert gs == {"b": 2.0}


def test_slots_object_argument_left_as_the_plain_call_leaves_it():
    def f(s, x):
        s.a = s.a * x
        return s.a + s.b
    s = Slotted(1.5, 2.0)
    bytegrad.gradient(f, s, 0.7)
    assert s.a == 1.5 * 0.7                 # bytegrad restores 1.5 (seal/reapply use vars())


def test_write_into_an_instance_dict():
    def f(o, x):
        o.__dict__["w"] = x * o.w
        return o.w ** 2
    check_stateful(f, Holder(2.0), 0.7)     # bytegrad do.w 2.8 (and a '__dict__' key), expected 1.96


def test_cached_property():
    class C:
        def __init__(self, w):
            self.w = w

        @functools.cached_property
        def sq(self):
            return self.w ** 2

    def f(c, x):
        return c.sq * x + c.sq
    gc, gx = bytegrad.gradient(f, C(1.5), 0.7)
    assert np.isclose(gc.get("w", 0.0), 2 * 1.5 * 1.7)


class Delegating:
    def __init__(self, d):
        self._d = d

    def __getattr__(self, k):
        try:
            return self.__dict__["_d"][k]
        except KeyError:
            raise AttributeError(k) from None


class Forwarding:
    def __init__(self, d):
        self._d = d

    def __getattr__(self, k):
        if k.startswith("__"):  # copy.deepcopy asks for __deepcopy__
            raise AttributeError(k)
        return self.__dict__["_d"][k]


def test_getattr_delegation():
    check_stateful(lambda g, x: g.w ** 2 * x, Forwarding({"w": 1.5}), 0.7)
    # a __getattr__ with try/except cannot be transformed: a clear error, not a made-up field
    with pytest.raises(bytegrad.UnsupportedError, match="try/except"):
        bytegrad.gradient(lambda g, x: g.w ** 2 * x, Delegating({"w": 1.5}), 0.7)


# -- module globals and class attributes -------------------------------------------

_G_LIST: list = []
_G_ARRAY = np.zeros(2)


def test_global_list_mutated_and_read():
    def f(x):
        _G_LIST.append(x)
        return _G_LIST[-1] * 3.0
    try:
        assert bytegrad.gradient(f, 0.7) == (3.0,)
    finally:
        _G_LIST.clear()


def test_global_array_written_and_read():
    def f(x):
        _G_ARRAY[0] = x
        return np.sum(_G_ARRAY) * 3.0
    try:
        assert bytegrad.gradient(f, 0.7) == (3.0,)
    finally:
        _G_ARRAY[:] = 0.0


class _Config:
    flag = False
    count = 0


def test_class_attribute_store():
    def f(x):
        _Config.flag = True          # no differentiable value involved at all
        _Config.count += 1
        return x * 2.0
    try:
        assert bytegrad.gradient(f, 0.7) == (2.0,)
    finally:
        _Config.flag, _Config.count = False, 0


def test_write_through_the_real_view_of_a_complex_array():
    def f(z, x):
        z.real[1] = x
        return np.sum(np.abs(z) ** 2)
    gz, gx = bytegrad.gradient(f, np.array([1 + 2j, 3 - 1j]), 0.7)
    np.testing.assert_allclose(gz, [2 + 4j, -2j])


# -- crashes with unclear errors ----------------------------------------------------

def test_write_through_the_imag_view_of_a_complex_array():
    def f(z, x):
        z.imag[0] = x
        return np.sum(z.imag)
    gz, gx = bytegrad.gradient(f, np.array([1 + 2j, 3 - 1j]), 0.7)
    assert np.isclose(gx, 1.0)


# -- performance -----------------------------------------------------------------------

def test_reads_of_a_list_after_an_unrelated_write_are_linear():
    def f(L, x):
        tmp = np.zeros(1)
        tmp[0] = x
        s = 0.0
        for i in range(len(L)):
            s = s + L[i] * tmp[0]
        return s

    calls = [0]
    orig = _shadow.Shadow.holds_mutated

    def counting(self, v):
        calls[0] += 1
        return orig(self, v)
    _shadow.Shadow.holds_mutated = counting
    try:
        n = 300
        bytegrad.gradient(f, [1.0] * n, 0.5)
    finally:
        _shadow.Shadow.holds_mutated = orig
    assert calls[0] < 40 * n, calls[0]      # about n * n today


class _Model:
    def __init__(self, w):
        self.params = {"w": w}

    def __call__(self, x):
        return self.params["w"] * x


def test_callable_object_argument_changed_in_place():
    def f(m, x):
        y = m(x)
        m.params["w"] = m.params["w"] * 2.0  # an in-place update of a model passed in
        return y + m(x)
    check_stateful(f, _Model(1.5), 0.7)


def test_the_refusal_holds_after_many_loops_left_by_break():
    """The registry of taken items forgets the oldest of more than 256 loops left by
    break; the loop running now is still checked."""
    def f(xs, x):
        for _ in range(300):
            for i, v in enumerate(xs):
                break
        for i, v in enumerate(xs):
            xs[-1] = x
        return v
    with pytest.raises(NotImplementedError, match="zip/enumerate/items/values"):
        bytegrad.gradient(f, [1.0, 2.0], 0.5)
