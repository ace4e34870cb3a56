"""Review round 2: combinations of features with mutation (hooks, checkpoints,
stop_gradient, custom rules, partials, map/sorted/filter, closures, recursion,
properties, dataclasses, optimizer/EMA/RNN objects, float32, np.int64 indices,
pullback with structured seeds, argnums).

Passing tests compare with central finite differences on deep copies
(`check_stateful`/`check_pullback`).  The minimal reproducers of the bugs this
review found are kept as regression tests.
"""
import dataclasses, functools, math
import numpy as np, pytest, bytegrad
from checks import check_pullback, check_stateful, fd_gradient


# hook on mutated array
def f_hook(x):
    a = x.copy()
    a[0] = a[1] * 3.0
    b = bytegrad.hook(lambda g: 2 * g, a)
    a[2] = 5.0 * a[0]
    return np.sum(b * b)


def f_stop(x):
    a = x * 1.0
    b = bytegrad.stop_gradient(a)
    a[0] = 2.0 * a[1]
    return np.sum(a * a) + np.sum(b)


def f_stop2(x):
    b = bytegrad.stop_gradient(x)
    b[0] = 0.0   # mutates user's x too
    return np.sum(x * x)


def blk(a, w):
    return np.tanh(a * w)

def f_ckpt(x, w):
    a = x.copy()
    a[1] = a[0] * 2
    y = bytegrad.checkpoint(blk, a, w)
    a[0] = 7.0 * w
    y[2] = y[2] * a[0]
    return np.sum(y * y) + np.sum(a)

def test_checkpoint_mutated():
    check_stateful(f_ckpt, np.array([0.3, -0.2, 0.5]), 0.7)

def f_ckpt2(x, w):
    a = x.copy()
    y = bytegrad.checkpoint(blk, a, w)
    a *= 3.0
    return np.sum(y) + np.sum(a * a)

def test_checkpoint_arg_mutated_after():
    check_stateful(f_ckpt2, np.array([0.3, -0.2, 0.5]), 0.7)

# custom rule on user function receiving mutable object
def scale_sum(v):
    return float(np.sum(v * v))

@bytegrad.rule(scale_sum)
def _ss(v):
    return scale_sum(v), lambda dy: (None, 2 * dy * v)

def f_rule_mut(x):
    a = x.copy()
    s = scale_sum(a)
    a[0] = 10.0
    return s + np.sum(a)

def test_rule_arg_mutated_after():
    check_stateful(f_rule_mut, np.array([1., 2., 3.]))

def f_rule_mut_user(x):
    s = scale_sum(x)
    x[0] = 3.0 * x[1]
    return s + np.sum(x * x)

def test_rule_user_arg_mutated_after():
    check_stateful(f_rule_mut_user, np.array([1., 2., 3.]))

def make_pair(v):
    return [v * 2.0, v * 3.0]

@bytegrad.rule(make_pair)
def _mp(v):
    return make_pair(v), lambda dy: (None, 2 * (0 if dy[0] is None else dy[0]) + 3 * (0 if dy[1] is None else dy[1]))

def f_rule_ret_list(x):
    p = make_pair(x)
    p[0] = p[0] * p[1]
    p.append(x)
    return p[0] + p[1] + p[2]

def test_rule_returns_list_mutated():
    check_stateful(f_rule_ret_list, 1.3)

def make_arr(v):
    return np.array([v, 2 * v])

@bytegrad.rule(make_arr)
def _ma(v):
    return make_arr(v), lambda dy: (None, dy[0] + 2 * dy[1])

def f_rule_ret_arr(x):
    a = make_arr(x)
    a[0] = a[1] * a[0]
    a += 1.0
    return np.sum(a * a)

def test_rule_returns_array_mutated():
    check_stateful(f_rule_ret_arr, 1.3)

# rule that mutates its input? rule on method of class mutating self
class Acc:
    def __init__(self):
        self.t = 0.0
    def add(self, v):
        self.t = self.t + v * v
        return self.t

def f_map_method(xs):
    acc = Acc()
    ys = list(map(acc.add, xs))
    return acc.t + sum(ys)

def test_map_method_mutating_self():
    check_stateful(f_map_method, [1.0, 2.0, 3.0])

def f_sorted_key_method(xs):
    acc = Acc()
    ys = sorted(xs, key=acc.add)
    return acc.t + ys[0]


def f_partial_method(xs, w):
    acc = Acc()
    g = functools.partial(Acc.add, acc)
    for x in xs:
        g(x * w)
    return acc.t


def f_partial_list(xs, w):
    out = []
    app = functools.partial(out.append)
    for x in xs:
        app(x * w)
    return sum(out)


def f_genexp_mut(xs):
    xs[0] = xs[1] * 2
    s = sum(x * x for x in xs)
    xs[1] = 5.0 * xs[2]
    return s + sum(x for x in xs)

def test_genexp_list_mutated():
    check_stateful(f_genexp_mut, [1.0, 2.0, 3.0])

def f_genexp_arr(x):
    a = x.copy()
    g = [v * v for v in a]
    a[0] = 4.0 * a[2]
    s = sum(v * 2 for v in a)
    return s + sum(g)

def test_genexp_arr():
    check_stateful(f_genexp_arr, np.array([1.0, 2.0, 3.0]))

# closure capturing mutated object
def f_closure(x, w):
    st = {"s": x}
    def upd(v):
        st["s"] = st["s"] * w + v
    for v in [1.0, 2.0]:
        upd(v)
    return st["s"]

def test_closure_dict():
    check_stateful(f_closure, 0.7, 1.3)

def f_closure_arr(x, w):
    buf = np.zeros(3)
    def put(i, v):
        buf[i] = v * w
    for i in range(3):
        put(i, x[i])
    return np.sum(buf * buf)

def test_closure_arr():
    check_stateful(f_closure_arr, np.array([1.0, 2.0, 3.0]), 0.5)

def f_closure_obj(x):
    acc = Acc()
    f = lambda v: acc.add(v)
    f(x); f(2 * x)
    return acc.t

def test_closure_obj():
    check_stateful(f_closure_obj, 0.7)

def build(xs, n, out):
    if n == 0:
        return out
    out.append(xs[n - 1] * out[-1])
    return build(xs, n - 1, out)

def f_rec(xs):
    out = build(xs, len(xs), [1.0])
    return out[-1] + sum(out)

def test_recursion_list():
    check_stateful(f_rec, [1.5, 2.0, 0.5])

def build2(x, n):
    if n == 0:
        return [x]
    l = build2(x, n - 1)
    l.append(l[-1] * x)
    l[0] = l[0] + 1.0
    return l

def f_rec2(x):
    return sum(build2(x, 3))

def test_recursion_list2():
    check_stateful(f_rec2, 1.1)

class Base:
    def __init__(self, v):
        self._v = v
        self.log = []
    @property
    def v(self):
        self.log.append(self._v)
        return self._v * 2
    @v.setter
    def v(self, val):
        self._v = val * 0.5

class Child(Base):
    @property
    def v(self):
        return super().v + 1.0
    @v.setter
    def v(self, val):
        Base.v.fset(self, val * 3)

def f_props(x):
    c = Child(x)
    a = c.v
    c.v = a * a
    return c.v + sum(c.log)


@dataclasses.dataclass
class DC:
    xs: list = dataclasses.field(default_factory=list)
    w: float = 1.0

def f_dc(x):
    d = DC(w=x)
    for i in range(3):
        d.xs.append(d.w * i)
    d.w = d.w * 2
    return sum(d.xs) * d.w

def test_dataclass_default_factory():
    check_stateful(f_dc, 0.7)

def f_dc_arg(d):
    d.xs.append(d.w * 3)
    d.xs[0] = d.xs[0] * d.w
    return sum(d.xs)

def test_dataclass_arg():
    check_stateful(f_dc_arg, DC([1.0, 2.0], 0.5))


# ----- optimizer / EMA / RNN / dtypes / pullback / argnums -----

class SGD:
    def __init__(self, params, lr):
        self.params = params
        self.lr = lr
        self.vel = {k: np.zeros_like(v) for k, v in params.items()}
    def step(self, grads):
        for k in self.params:
            self.vel[k] *= 0.9
            self.vel[k] += grads[k]
            self.params[k] -= self.lr * self.vel[k]

def loss_fn(p, x):
    return np.sum((p["w"] * x + p["b"]) ** 2)

def train(p, x, lr):
    opt = SGD(p, lr)
    for _ in range(3):
        g = {"w": 2 * (opt.params["w"] * x + opt.params["b"]) * x,
             "b": 2 * (opt.params["w"] * x + opt.params["b"])}
        opt.step(g)
    return loss_fn(opt.params, x)

def test_optimizer_dict_arrays():
    p = {"w": np.array([0.5, -0.3]), "b": np.array([0.1, 0.2])}
    check_stateful(train, p, np.array([1.0, 2.0]), 0.05)

class EMA:
    def __init__(self, decay):
        self.decay = decay
        self.avg = None
    def update(self, v):
        if self.avg is None:
            self.avg = v.copy()
        else:
            self.avg *= self.decay
            self.avg += (1 - self.decay) * v
        return self.avg

def f_ema(xs, d):
    e = EMA(d)
    for x in xs:
        e.update(x)
    return np.sum(e.avg ** 2)

def test_ema():
    xs = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.2])]
    check_stateful(f_ema, xs, 0.8)

def f_ema_float(xs, d):
    e = EMA(d)
    avgs = [e.update(x) for x in xs]
    return sum(np.sum(a) for a in avgs)

def test_ema_aliasing_returned():
    xs = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.2])]
    check_stateful(f_ema_float, xs, 0.8)

class RNN:
    def __init__(self, W, U):
        self.W = W; self.U = U
        self.h = np.zeros(W.shape[0])
        self.hs = []
    def __call__(self, x):
        self.h = np.tanh(self.W @ self.h + self.U @ x)
        self.hs.append(self.h)
        return self.h

def f_rnn(W, U, xs):
    cell = RNN(W, U)
    for x in xs:
        cell(x)
    return np.sum(cell.h) + sum(np.sum(h * h) for h in cell.hs)

def test_rnn_cell():
    r = np.random.default_rng(1)
    check_stateful(f_rnn, r.standard_normal((3, 3)) * 0.5, r.standard_normal((3, 2)), [r.standard_normal(2) for _ in range(3)])

class RNN2:
    def __init__(self, W):
        self.W = W
        self.h = np.zeros(W.shape[0])
    def step(self, x):
        self.h[:] = np.tanh(self.W @ self.h + x)   # in place on the hidden state
        return self.h

def f_rnn2(W, xs):
    cell = RNN2(W)
    out = 0.0
    for x in xs:
        out = out + np.sum(cell.step(x) ** 2)
    return out

def test_rnn_inplace_hidden():
    r = np.random.default_rng(2)
    check_stateful(f_rnn2, r.standard_normal((3, 3)) * 0.5, [r.standard_normal(3) for _ in range(3)])

def f_f32(x):
    a = x.copy()
    for i in range(1, len(a)):
        a[i] = a[i] * a[i - 1]
    a *= np.float32(2.0)
    return float(np.sum(a))

def test_float32_mutated():
    x = np.array([1.1, 0.9, 1.2], dtype=np.float32)
    g, = bytegrad.gradient(f_f32, x)
    assert g.dtype == np.float32
    x64 = x.astype(np.float64)
    g64, = bytegrad.gradient(f_f32, x64)
    assert np.allclose(g, g64, rtol=1e-5)

def f_f32_mix(x, w):
    a = x.copy()
    a[0] = w * 3.0    # float64 into a float32 array: rounded
    return float(np.sum(a * a))

def test_float32_write_float():
    x = np.array([1.1, 0.9], dtype=np.float32)
    gx, gw = bytegrad.gradient(f_f32_mix, x, 0.5)
    assert np.allclose(gw, 2 * np.float32(1.5) * 3, rtol=1e-5)
    assert np.allclose(gx, [0, 1.8], rtol=1e-5)

def f_int64(x, idx):
    a = np.zeros(4)
    for j in idx:
        a[j] = a[j] + x[j] * x[j]
    for k in range(len(idx)):
        a[idx[k]] += x[0]
    return np.sum(a * a)

def test_int64_indices():
    check_stateful(f_int64, np.array([1.0, 2.0, 3.0, 4.0]), np.array([2, 0, 2, 3], dtype=np.int64))

def f_int64_list(xs, idx):
    for j in idx:
        xs[j] = xs[j] * 2.0
    return xs[np.int64(0)] * xs[1]

def test_int64_list_index():
    check_stateful(f_int64_list, [1.0, 2.0, 3.0], np.array([0, 1, 0], dtype=np.int64))

def f_ret_obj(x, w):
    acc = {"a": x * w, "b": [x, w]}
    acc["b"].append(acc["a"] * 2)
    acc["a"] = acc["a"] + 1.0
    return acc


class Box:
    def __init__(self, v):
        self.v = v
        self.arr = np.array([v, 2 * v])

def f_ret_box(x):
    b = Box(x)
    b.arr[0] = b.arr[1] * b.v
    b.v = b.v * 3
    return b


def f_ret_arr_mut(x):
    a = x * 2.0
    a[0] = a[1] * a[2]
    return a

def test_pullback_twice_array():
    check_pullback(f_ret_arr_mut, np.array([1.0, -1.0, 2.0]), np.array([0.5, 1.5, 2.0]))

def f_ret_arg(x):
    x[0] = x[1] * 2.0
    return x

def test_pullback_returns_mutated_arg():
    check_pullback(f_ret_arg, np.array([1.0, -1.0, 2.0]), np.array([0.5, 1.5, 2.0]))

def f_mut_two(a, b, s):
    a[0] = b[1] * s
    b[1] = a[0] * a[2]
    return np.sum(a) * np.sum(b)

def test_argnums():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0])
    a0, b0 = a.copy(), b.copy()
    gb, gs = bytegrad.grad(f_mut_two, argnums=(1, 2))(a, b, 0.7)
    ga, gb2, gs2 = check_stateful(f_mut_two, a0.copy(), b0.copy(), 0.7)
    assert np.allclose(gb, gb2) and np.allclose(gs, gs2)
    aa, bb = a0.copy(), b0.copy(); f_mut_two(aa, bb, 0.7)
    assert np.array_equal(a, aa) and np.array_equal(b, bb)
    v, ga3 = bytegrad.value_and_grad(f_mut_two, argnums=0)(a0.copy(), b0.copy(), 0.7)
    assert np.allclose(ga3, ga)
    v2, (gb4,) = bytegrad.value_and_grad(f_mut_two, argnums=(1,))(a0.copy(), b0.copy(), 0.7)
    assert np.allclose(gb4, gb2)


# ---------------------------------------------------------------------------
# open bugs: minimal reproducers (expected values from finite differences or by hand)
# ---------------------------------------------------------------------------

def _stop_alias_write(x):
    b = bytegrad.stop_gradient(x)   # b is x itself
    b[0] = 0.0                      # writes x[0]
    return np.sum(x * x)


def test_stop_gradient_alias_then_write_is_refused():
    """stop_gradient hands on the object itself, and after a change in place a read of
    either alias sends its gradient to the object: the stopped old contents would get
    one (see test_review_round6), so a change after stop_gradient is refused."""
    with pytest.raises(NotImplementedError, match=r"went through stop_gradient"):
        bytegrad.gradient(_stop_alias_write, np.array([1.0, 2.0, 3.0]))


def _stop_then_write(x):
    a = x * 1.0
    bytegrad.stop_gradient(a)
    a[0] = 1.0
    return np.sum(a)


def test_stop_gradient_then_write_is_refused():
    with pytest.raises(NotImplementedError, match=r"_review_round2.py:\d+: this changes in place"):
        bytegrad.gradient(_stop_then_write, np.array([1.0, 2.0, 3.0]))


def _hook_after_write(x):
    a = x.copy()
    a[0] = 2.0 * a[1]
    b = bytegrad.hook(lambda g: 10 * g, a)
    return np.sum(b)


def test_hook_or_stop_gradient_of_an_array_written_before_is_refused():
    """Their argument passes through as itself; once changed in place, its gradient
    travels through the shadow past them, so they refuse clearly (a copy works)."""
    with pytest.raises(NotImplementedError, match=r"hook of an object that was changed in place"):
        bytegrad.gradient(_hook_after_write, np.array([1.0, 2.0, 3.0]))

    def stopped(x):
        a = x * 1.0
        a[0] = 2.0 * a[1]
        return np.sum(bytegrad.stop_gradient(a) * x)
    with pytest.raises(NotImplementedError, match=r"stop_gradient of an object that was changed"):
        bytegrad.gradient(stopped, np.array([1.0, 2.0, 3.0]))


class _Acc:
    def __init__(self):
        self.t = 0.0

    def add(self, v):
        self.t = self.t + v
        return self.t


def _partial_method(x):
    acc = _Acc()
    functools.partial(_Acc.add, acc)(x)
    return acc.t


def test_partial_of_mutating_method():
    check_stateful(_partial_method, 2.0)


def _partial_bound_method(x):
    acc = _Acc()
    functools.partial(acc.add)(x)
    return acc.t


def test_partial_of_bound_mutating_method():
    check_stateful(_partial_bound_method, 2.0)


def _partial_append(x):
    out = []
    functools.partial(out.append)(x)
    return out[0]


def test_partial_of_list_append():
    check_stateful(_partial_append, 2.0)


def _sorted_key_side_effect(x):
    acc = _Acc()
    sorted([x, 2 * x], key=acc.add)
    return acc.t


def test_sorted_key_side_effect():
    check_stateful(_sorted_key_side_effect, 2.0)


def _filter_pred_side_effect(x):
    acc = _Acc()
    list(filter(acc.add, [x, x]))
    return acc.t


def test_filter_predicate_side_effect():
    check_stateful(_filter_pred_side_effect, 2.0)


class _PBase:
    def __init__(self, v):
        self._v = v

    @property
    def v(self):
        return self._v * 2


class _PChild(_PBase):
    @property
    def v(self):
        return super().v + 1.0


def _super_property(x):
    return _PChild(x).v


def test_super_property_getter():
    check_stateful(_super_property, 0.7)


def _property_side_effect(x):
    c = Base(x)
    a = c.v
    return a + sum(c.log)


def test_property_getter_runs_once():
    check_stateful(_property_side_effect, 0.7)


def _logged_arg(c):
    return c.v


def test_property_getter_once_argument_state():
    check_stateful(_logged_arg, Base(0.7))


class _ArrBox:
    def __init__(self, v):
        self.arr = np.array([v, v])


def _return_object_field_written(x):
    b = _ArrBox(x)
    b.arr[0] = 3.0 * x
    return b


def test_pullback_returned_object_field_written():
    y, back = bytegrad.pullback(_return_object_field_written, 0.7)
    g, = back({"arr": np.array([1.0, 0.0])})
    fd = fd_gradient(lambda t: _return_object_field_written(t).arr[0], (0.7,), 0)
    assert np.allclose(g, fd)


def _dict_key_overwritten(x):
    d = {"a": x}
    d["a"] = 2 * x
    return d


def test_pullback_leaves_the_dict_seed():
    y, back = bytegrad.pullback(_dict_key_overwritten, 0.7)
    seed = {"a": 1.0}
    g1 = back(seed)
    assert seed == {"a": 1.0}
    g2 = back(seed)
    assert np.allclose(g1[0], 2.0) and np.allclose(g2[0], 2.0)


def _dict_key_overwritten_list_appended(x):
    b = [x]
    d = {"a": x, "b": b}
    d["a"] = 5.0
    b.append(x * 2)
    return d


def test_pullback_dict_overwrite_and_inner_append():
    check_pullback(_dict_key_overwritten_list_appended, {"a": 0.0, "b": [0.0, 1.0]}, 0.7)


class _SBase:
    def __init__(self, v):
        self._v = v

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, val):
        self._v = val * 0.5


class _SChild(_SBase):
    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, val):
        super(_SChild, type(self)).v.fset(self, val * 3)


def _super_fset(x):
    c = _SChild(x)
    c.v = x
    return c.v


def test_super_type_property_fset():
    check_stateful(_super_fset, 0.7)
