"""Programs whose state one function changes and another reads: a global object or
container, an object passed under two names, a mutable default, objects iterated by
their own __iter__ or __getitem__, writes of tuples into arrays, ``+=`` and ``|=`` on
lists and dicts.  Each ``cN(x)`` is a scalar function of a float; the tests differentiate
them in both modes against central differences."""
import numpy as np

# global instance of a user class, field set then read
class Model:
    def __init__(self): self.w = 1.0
    def predict(self, z): return self.w * z
MODEL = Model()
def c1(x):
    MODEL.w = x
    return MODEL.predict(2.0)
def pred(z): return MODEL.w * z
def c1b(x):
    MODEL.w = x
    return pred(2.0)

# the same object reaches a callee through two parameters
def g2(xs, ys, x):
    ys[0] = x
    return xs[0] * 3
def c2(x):
    l = [1.0, 2.0]
    return g2(l, l, x)
class O2:
    def __init__(self): self.w = 1.0
    def upd(self, other, x):
        other.w = x
        return self.w * 3
def c2b(x):
    o = O2()
    return o.upd(o, x)
def g2c(a, b, x):
    b[0] = x
    return a[0] * 3
def c2c(x):
    a = np.ones(3)
    return g2c(a, a[:], x)
def g2d(xs, ys, x):
    ys.append(x)
    a, b = xs
    return a * b
def c2d(x):
    l = [2.0]
    return g2d(l, l, x)

# user classes iterated (__iter__ / __getitem__ protocol)
class Seq:
    def __init__(self, xs): self.items = xs
    def __iter__(self): return iter(self.items)
def c3(x):
    t = 0.0
    for v in Seq([x, x * x]): t += v
    return t
class Vec:
    def __init__(self, a, b): self.a, self.b = a, b
    def __iter__(self): return iter((self.a, self.b))
def c3b(x):
    a, b = Vec(x, 2.0)
    return a * b
class Gen:
    def __init__(self, xs): self.xs = xs
    def __iter__(self):
        for v in self.xs: yield v
def c3c(x):
    return sum([v for v in Gen([x, x * x])])
class Seq2:
    def __init__(self, xs): self.items = xs
    def __len__(self): return len(self.items)
    def __getitem__(self, i): return self.items[i]
def c3d(x):
    t = 0.0
    for v in Seq2([x, x * x]): t += v
    return t
def c3e(x):
    return sum(list(Seq2([x, x * x])))

# a global container changed by the caller, read by a callee
G = {"w": 1.0}
def rd4(): return G["w"] * 3
def c4(x):
    G["w"] = x; r = rd4(); G["w"] = 1.0
    return r
GA = np.ones(2)
def rd4b(): return np.sum(GA)
def c4b(x):
    GA[0] = x; r = rd4b(); GA[0] = 1.0
    return r
GL = [1.0, 2.0]
def rd4c():
    a, b = GL
    return a * b
def c4c(x):
    GL[0] = x; r = rd4c(); GL[0] = 1.0
    return r

# a mutable default argument changed before the call
STATE = [1.0]
def rd5(xs=STATE): return xs[0] * 3
def c5(x):
    STATE[0] = x; r = rd5(); STATE[0] = 1.0
    return r

# array slice/row assigned a list/tuple holding a constant
def c6(x):
    a = np.ones(3); a[:2] = (x, 5.0)
    return np.sum(a * a)
def c6b(x):
    a = np.ones((2, 2)); a[0] = [x, 1.0]
    return np.sum(a * a)

# list += non-list iterable
def c7(x):
    xs = [1.0]; xs += (x, x * x)
    return sum(xs)
def c7b(x):
    xs = [x]; xs += map(float, [x])
    return sum(xs)

# list subclass
class ML(list): pass
def c8(x):
    l = ML(); l.append(x); l.append(2 * x)
    return l[0] * l[1]

# dict |=
def c10(x):
    d = {"a": x}; d |= {"b": x * 3}
    return d["a"] + d["b"]

PROGRAMS = [c1, c1b, c2, c2b, c2c, c2d, c3, c3b, c3c, c3d, c3e, c4, c4b, c4c, c5, c6, c6b, c7, c7b, c10]
