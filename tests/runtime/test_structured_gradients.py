"""Gradients handed to the user mirror their inputs (issue 9 §6): a dict's gradient has the
input's keys in the input's order, a list or tuple its length (a named tuple stays one),
nested containers stay nested, a leaf that got no gradient is None in its place; an object
that got a gradient is a dict of all its fields.  Values are checked against central
finite differences (checks.check_stateful) or closed forms."""
import collections
import copy
import dataclasses
import functools
import math
import pathlib
import re
import sys
import typing

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytegrad
from checks import check_stateful, same_contents, shared_memory

Pair = collections.namedtuple("Pair", "a b")


def assert_mirrors(g, x, used=None, path=()):
    """``g`` has ``x``'s layout: dict keys in order, lengths, container types; a float
    or array leaf has a gradient exactly when its path is in ``used`` (if given)."""
    if isinstance(x, dict):
        assert type(g) is dict and list(g) == list(x), (path, g, x)
        for k in x:
            assert_mirrors(g[k], x[k], used, path + (k,))
    elif isinstance(x, (list, tuple)):
        assert type(g) is type(x) and len(g) == len(x), (path, g, x)
        for k, (gk, xk) in enumerate(zip(g, x)):
            assert_mirrors(gk, xk, used, path + (k,))
    elif used is not None:
        assert (g is not None) == (path in used), (path, g)
        if isinstance(x, np.ndarray) and g is not None:
            assert g.shape == x.shape and g.dtype == x.dtype


# -- random nested inputs, some leaves unused --------------------------------------------

_leaf = st.one_of(
    st.floats(-2, 2, allow_nan=False),
    st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=3).map(np.array))
_tree = st.recursive(
    _leaf,
    lambda kids: st.one_of(
        st.dictionaries(st.sampled_from("abcdefg"), kids, max_size=4),
        st.lists(kids, max_size=3),
        st.lists(kids, max_size=3).map(tuple),
        st.tuples(kids, kids).map(lambda t: Pair(*t))),
    max_leaves=8)


def _leaf_paths(x, path=()):
    """The path of each float and array inside ``x`` (not of array elements)."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _leaf_paths(v, path + (k,))
    elif isinstance(x, (list, tuple)):
        for k, v in enumerate(x):
            yield from _leaf_paths(v, path + (k,))
    else:
        yield path


def _reads(paths):
    """A loss reading the leaves at ``paths`` of its argument by indexing."""
    def loss(p):
        total = 0.0
        for path, c in paths:
            x = p
            for k in path:
                x = x[k]
            total = total + c * np.sum(np.sin(x) * x + x)
        return total
    return loss


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=st.dictionaries(st.sampled_from("pqrstuvw"), _tree, min_size=1, max_size=4),
       data=st.data())
def test_random_nested_structures_mirror_and_match_finite_differences(tree, data):
    leaves = list(_leaf_paths(tree))
    used = data.draw(st.lists(st.sampled_from(leaves), unique=True)) if leaves else []
    loss = _reads([(p, 1.0 + 0.5 * i) for i, p in enumerate(used)])
    before = copy.deepcopy(tree)
    (g,) = check_stateful(loss, tree)  # values against central differences, inputs kept
    assert same_contents(tree, before)
    assert_mirrors(g, tree, set(used))


# -- the examples of the issue ---------------------------------------------------------

def test_unused_key_is_none_and_order_is_the_inputs():
    g = bytegrad.grad(lambda p: p["W"] * 2 + p["b"])({"W": 1.0, "b": 2.0, "unused": 3.0})
    assert list(g.items()) == [("W", 2.0), ("b", 1.0), ("unused", None)]


def _mlp(p, x):
    h = np.tanh(p["W1"] @ x + p["b1"])
    return np.sum(h * p["w2"])


def _params():
    rng = np.random.default_rng(3)
    return {"w2": rng.standard_normal(4), "W1": rng.standard_normal((4, 3)),
            "b1": rng.standard_normal(4), "frozen": rng.standard_normal(2), "steps": 7}


def test_update_loop_over_the_parameters():
    p, x, lr = _params(), np.array([0.3, -1.0, 0.5]), 0.1
    ref = copy.deepcopy(p)
    g = bytegrad.grad(_mlp)(p, x)
    for k in p:
        if g[k] is not None:
            p[k] -= lr * g[k]
    h = np.tanh(ref["W1"] @ x + ref["b1"])  # closed form of the gradients
    dpre = ref["w2"] * (1 - h * h)
    assert np.allclose(p["w2"], ref["w2"] - lr * h)
    assert np.allclose(p["b1"], ref["b1"] - lr * dpre)
    assert np.allclose(p["W1"], ref["W1"] - lr * np.outer(dpre, x))
    assert np.array_equal(p["frozen"], ref["frozen"]) and p["steps"] == 7


def test_zip_of_values_pairs_each_parameter_with_its_gradient():
    p, x = _params(), np.array([0.3, -1.0, 0.5])
    g = bytegrad.grad(_mlp)(p, x)
    for (k, v), (kg, d) in zip(p.items(), g.items()):
        assert k == kg and (d is None or d.shape == np.shape(v)), (k, kg)
    check_stateful(_mlp, p, x)


# -- several arguments: argnums, wrt ---------------------------------------------------

def _two_dicts(p, x, q):
    return p["a"] * x + math.sin(q["z"]) * np.sum(q["v"] ** 2)


def _two_dict_args():
    return {"u": 2.0, "a": 1.5}, 3.0, {"v": np.array([1.0, -2.0]), "y": [1.0, 2.0], "z": 0.4}


@pytest.mark.parametrize("argnums", [(0, 2), (2, 0), (-1, 0)])
def test_dicts_through_argnums(argnums):
    p, x, q = _two_dict_args()
    got = dict(zip((i % 3 for i in argnums), bytegrad.grad(_two_dicts, argnums=argnums)(p, x, q)))
    full = check_stateful(_two_dicts, p, x, q)  # every argument against finite differences
    for i, g in got.items():
        assert_mirrors(g, (p, x, q)[i])
        assert all(same_contents(g[k], full[i][k]) for k in g)
    assert got[0] == {"u": None, "a": x} and got[2]["y"] == [None, None]


def test_pullback_with_wrt_mirrors_only_the_wanted_arguments():
    p, x, q = _two_dict_args()
    y, back = bytegrad.pullback(_two_dicts, p, x, q, wrt=(2,))
    gp, gx, gq = back(2.0)
    assert gp is None and gx is None  # not asked for: not computed
    assert_mirrors(gq, q, {("v",), ("z",)})
    assert np.allclose(gq["v"], 2.0 * 2 * math.sin(0.4) * q["v"])
    assert np.isclose(gq["z"], 2.0 * math.cos(0.4) * 5.0)
    _, back = bytegrad.pullback(_two_dicts, p, x, q, wrt=(0, 1))
    gp, gx, gq = back(1.0)
    assert gp == {"u": None, "a": 3.0} and gx == 1.5 and gq is None


def test_function_without_gradient_still_mirrors_containers():
    p = {"a": 1.0, "b": [2.0, (3.0, np.ones(2))], "n": 4}
    assert bytegrad.grad(lambda p: 1.0)(p) == {"a": None, "b": [None, (None, None)], "n": None}
    assert bytegrad.grad(lambda p: int(p["a"] > 0))(p) == {"a": None, "b": [None, (None, None)],
                                                          "n": None}
    assert bytegrad.gradient(lambda x, p: x * 2.0, 1.0, p)[1]["b"] == [None, (None, None)]
    assert bytegrad.gradient(lambda x: x * 2.0, 1.0) == (2.0,)  # a number's zero is None


# -- named tuples, objects -------------------------------------------------------------

class NT(typing.NamedTuple):
    w: np.ndarray
    b: float
    tag: str = "x"


@dataclasses.dataclass
class Layer:
    w: np.ndarray
    b: float
    cache: list
    name: str = "l"


class Plain:
    def __init__(self, scale, bias):
        self.scale, self.bias = scale, bias


def _objects(p):
    return np.sum(p["nt"].w * p["layer"].w) * p["layer"].b + p["plain"].scale ** 2


def _object_args():
    return {"nt": NT(np.array([1.0, 2.0]), 0.5),
            "layer": Layer(np.array([0.5, -1.0]), 3.0, [1.0, 2.0]),
            "plain": Plain(1.5, 0.2), "idle": Plain(1.0, 1.0)}


def test_named_tuples_stay_named_and_objects_give_dicts_of_all_fields():
    (g,) = check_stateful(_objects, _object_args())
    assert type(g["nt"]) is NT and g["nt"].b is None and g["nt"].tag is None
    assert list(g["layer"]) == ["w", "b", "cache", "name"]  # the fields, in their order
    assert g["layer"]["cache"] == [None, None] and g["layer"]["name"] is None
    assert g["plain"] == {"scale": 3.0, "bias": None}
    assert g["idle"] is None  # an object no gradient reached is a leaf: its fields may reach anything
    p = _object_args()
    assert np.allclose(g["nt"].w, p["layer"].w * p["layer"].b)
    assert np.isclose(g["layer"]["b"], np.sum(p["nt"].w * p["layer"].w))


# -- mutation, cycles, depth, sharing ----------------------------------------------------

def _pops(p, xs):
    v = p.pop("a")
    xs.append(xs[0] * v)
    return v * p["b"] + xs[-1] * xs[1]


def test_mutated_arguments_mirror_what_was_passed():
    p, xs = {"a": 1.5, "b": 2.0, "c": 1.0}, [0.5, 3.0]
    gp, gxs = check_stateful(_pops, p, xs)  # the plain call leaves p without "a", xs longer
    assert list(gp) == ["a", "b", "c"] and gp["c"] is None and len(gxs) == 2


def test_container_holding_itself():
    p = {"x": 1.0}
    p["self"] = p
    xs = [2.0]
    xs.append(xs)
    xs.append(xs)
    g = bytegrad.grad(lambda p, xs: p["x"] * xs[0], argnums=(0, 1))(p, xs)
    assert g[0]["x"] == 2.0 and list(g[0]) == ["x", "self"]
    assert g[1][0] == 1.0 and len(g[1]) == 3
    g = bytegrad.grad(lambda w, xs: np.sum(w * xs[0]))(np.ones(2), xs)  # xs not differentiated
    assert np.array_equal(g, [2.0, 2.0])


def test_deep_unused_structure_does_not_recurse_away():
    node = None
    for i in range(sys.getrecursionlimit() + 500):
        node = [float(i), node]
    g = bytegrad.grad(lambda p: p["a"] * 2.0)({"a": 1.0, "deep": node})
    assert g["a"] == 2.0 and g["deep"][0] is None and type(g["deep"][1]) is list


def test_mirrored_arrays_are_the_callers_to_change():
    w = np.array([1.0, 2.0])
    p = {"w": w, "same": w, "view": w[::-1], "unused": np.ones(2)}
    y, back = bytegrad.pullback(lambda p: p["w"] + p["same"] + p["view"], p)
    seed = np.array([1.0, -1.0])
    (g,) = back(seed)
    assert_mirrors(g, p, {("w",), ("same",), ("view",)})
    assert not shared_memory([g], [p, seed]), shared_memory([g], [p, seed])
    assert all(np.array_equal(g[k], seed) for k in ("w", "same", "view"))  # dy/dp[k] = I
    assert all(d is None or d.flags.writeable for d in g.values())


# -- the README ------------------------------------------------------------------------

def test_readme_examples_run():
    """Every Python block of the README but the one registering rules (its names are
    placeholders, and a rule registered here would stay for the other tests), the compiled
    tier's (`test_compiled.test_readme_compiled_tier_section_runs`) and those of "Parallel
    and distributed" (tests/primitives/test_threads_tasks.py, test_cluster.py)."""
    readme = (pathlib.Path(bytegrad.__file__).parent / "README.md").read_text()
    start = readme.index("## Parallel and distributed")
    readme = readme[:start] + readme[readme.index("\n## ", start):]
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    runnable = [b for b in blocks if "bytegrad.rule(" not in b and "jit=True" not in b]
    assert len(runnable) == 8 and any("for k in p:" in b for b in runnable)
    for b in runnable:
        exec(compile(b, "README.md", "exec"), {})


@pytest.mark.regression
def test_dict_subclasses_are_mirrored():
    import collections
    for d in (collections.defaultdict(float, {"a": 2.0, "b": 3.0}),
              collections.OrderedDict([("b", 3.0), ("a", 2.0)])):
        (g,) = bytegrad.gradient(lambda d: d.get("a") * 2.0, d)
        assert list(g) == list(d) and g["a"] == 2.0 and g["b"] is None


def _quadratic(x, w):
    return w * x ** 2


def _quadratic_with_default(x, w, b=1.0):
    return w * x ** 2 + b


@pytest.mark.regression
def test_a_partials_gradient_has_its_fields_in_order():
    """``{"func", "args", "keywords"}`` in that order, func None when nothing reaches it (it
    came back ``keywords, args`` with func missing)."""
    g = bytegrad.gradient(lambda p, x: p(x), functools.partial(_quadratic, w=2.0), 3.0)
    assert list(g[0]) == ["func", "args", "keywords"]
    assert g[0]["func"] is None and g[0]["args"] == () and g[0]["keywords"] == {"w": 9.0}  # x²
    assert g[1] == 12.0  # 2 w x
    g = bytegrad.gradient(lambda p, x: p(x), functools.partial(_quadratic_with_default, 3.0), 2.0)
    assert list(g[0]) == ["func", "args", "keywords"]
    assert g[0]["args"] == (2.0 * 2.0 * 3.0,) and g[0]["keywords"] == {}  # d/dx of w x² at x = 3
    assert g[0]["func"]["__defaults__"] == (1.0,)  # d/db


class _Fields:
    pass


def _delete_and_set_again(o):
    del o.a
    o.b = 2.0
    o.a = 5.0 * o.c
    return o.c * 2.0 + o.a * o.b


@pytest.mark.regression
def test_an_objects_gradient_keeps_its_fields_order_through_del():
    """A field deleted and set again came back last in the gradient (and in the object)."""
    o = _Fields()
    o.a, o.c = 1.0, 3.0
    g = bytegrad.gradient(_delete_and_set_again, o)[0]
    assert list(g) == ["a", "c"] and list(vars(o))[:2] == ["a", "c"]
    assert g["a"] is None and g["c"] == 2.0 + 5.0 * 2.0  # d/dc: 2 + 5 b


@pytest.mark.regression
@pytest.mark.parametrize("f, slopes", [
    (lambda x, y: x + y, lambda x, y: (1.0, 1.0)), (lambda x, y: x - y, lambda x, y: (1.0, -1.0)),
    (lambda x, y: x * y, lambda x, y: (y, x)), (lambda x, y: x + y + x, lambda x, y: (2.0, 1.0)),
    (lambda x, y: np.sin(x) - y, lambda x, y: (np.cos(x), -1.0))])
def test_a_0d_array_argument_gets_a_0d_array_gradient(f, slopes):
    """As every other shape: the gradient mirrors the argument (``+`` and ``-`` of two 0-d
    arrays gave Python floats, other operations 0-d arrays)."""
    x, y = np.array(1.5), np.array(-0.7)
    for g, a, want in zip(bytegrad.gradient(f, x, y), (x, y), slopes(x, y)):
        assert type(g) is np.ndarray and g.shape == () and g.dtype == np.float64
        assert not np.shares_memory(g, a) and g.flags.writeable and g == pytest.approx(want)
