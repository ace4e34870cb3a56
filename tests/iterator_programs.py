"""Programs that take the items of generators and iterators in every way: again after
they ended, by star-unpacking, list.extend, slices, dict(pairs), dict.update, lazily
through enumerate/map/zip while the loop changes what they read, iterators of yours
(``__iter__`` returning self, ``__next__``), ``iter(f, sentinel)``.  Each is a scalar
function of a float, checked in both modes against central differences."""
import numpy as np

# a generator taken from again after it ended (or closed)
def exhausted_for_twice(x):
    g = (x * k for k in range(1, 4))
    out = [v for v in g]
    for v in g:          # Python: an empty loop
        out.append(v)
    return sum(out)


def exhausted_next_default_twice(x):
    g = (x * k for k in range(2))
    list(g)
    return next(g, x) + next(g, 2 * x)


def max_then_sum(x):
    g = (x * k for k in range(1, 5))
    return max(g) + sum(g)


def next_default_after_close(x):
    g = (x * k for k in range(1, 4))
    g.close()
    return next(g, x)


# rules that take all the items as a list
def star_unpack(x):
    a, *b = (x + k for k in range(4))
    return a * b[0] * b[-1]


def list_extend(x):
    lst = [x]
    lst.extend(x * k for k in range(2, 4))
    return lst[0] * lst[1] * lst[2]


def list_iadd(x):
    lst = [x]
    lst += (x * x for _ in range(1))
    return lst[0] * lst[1]


def slice_assign(x):
    lst = [1.0, 2.0, 3.0]
    lst[0:2] = (x * k for k in range(1, 3))
    return lst[0] * lst[1] * lst[2]


def dict_of_pairs(x):
    d = dict((k, x * k) for k in range(3))
    return d[2] * d[1]


def dict_update(x):
    d = {}
    d.update((str(k), x * k) for k in range(3))
    return d["1"] * d["2"]


# map, enumerate, zip: one item at a time, as the loop asks
def _first_item(s):
    """``s[0]`` four times, each read when the item is taken."""
    for _ in range(4):
        yield s[0]


def enumerate_reads_state_changed_by_loop(x):
    s = [x]
    t = 0.0
    for i, v in enumerate(_first_item(s)):
        t += v
        s[0] = s[0] * x
    return t


def map_reads_state_changed_by_loop(x):
    s = [x]
    t = 0.0
    for v in map(lambda u: 2 * u, _first_item(s)):
        t += v
        s[0] = s[0] * x
    return t


def zip_reads_state_changed_by_loop(x):
    s = [x]
    t = 0.0
    for v, _ in zip(_first_item(s), range(4)):
        t += v
        s[0] = s[0] * x
    return t


def enumerate_break_then_rest(x):
    g = (x * k for k in range(1, 6))
    t = 0.0
    for i, v in enumerate(g):
        t += v
        if i == 1:
            break
    return t + 10 * sum(g)


def next_of_map_then_rest(x):
    g = (x * k for k in range(1, 5))
    return next(map(lambda t: t * t, g)) + sum(g)


def enumerate_endless_generator(x):
    def gen():
        k = 1.0
        while True:
            yield x * k
            k += 1
    for i, v in enumerate(gen()):
        if i == 3:
            return v


def next_of_map_list_iterator_then_rest(x):
    it = iter([x, 2 * x, 3 * x])
    return next(map(lambda t: t * t, it)) + sum(it)


# iterators of yours (__iter__ returning self, __next__)
class Counter:
    def __init__(self, x, n):
        self.x, self.n, self.i = x, n, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.x * self.i


def iterator_class_for(x):
    t = 0.0
    for v in Counter(x, 3):
        t += v * v
    return t


def iterator_class_next(x):
    it = Counter(x, 3)
    return next(it) + next(it) * x


def iterator_class_sum(x):
    return sum(Counter(x, 3))


class Bag:
    def __init__(self, x):
        self.items = [x, 2 * x, x * x]

    def __iter__(self):
        return (v * 2 for v in self.items)


def iter_returns_genexpr_star_unpack(x):
    a, *b = Bag(x)
    return a * b[1]


# iter(f, sentinel); an iterator partly taken
def iter_callable_sentinel(x):
    g = (x * k for k in range(1, 4))
    return sum(iter(lambda: next(g, None), None))


def extend_partially_taken_list_iterator(x):
    lst = [x]
    it = iter([x, x * x, 3.0])
    next(it)
    lst.extend(it)
    return lst[1] * lst[0]


PROGRAMS = [exhausted_for_twice, exhausted_next_default_twice, max_then_sum,
            next_default_after_close, star_unpack, list_extend, list_iadd, slice_assign,
            dict_of_pairs, dict_update, enumerate_reads_state_changed_by_loop,
            map_reads_state_changed_by_loop, zip_reads_state_changed_by_loop,
            enumerate_break_then_rest, next_of_map_then_rest, enumerate_endless_generator,
            next_of_map_list_iterator_then_rest, iterator_class_for, iterator_class_next,
            iterator_class_sum, iter_returns_genexpr_star_unpack, iter_callable_sentinel,
            extend_partially_taken_list_iterator]


# an iterator of yours is its own iterator: iter(c) is c
def iter_of_own_iterator_is_itself(x):
    c = Counter(x, 3)
    it = iter(c)
    a = next(it)
    return a * it.x if it is c else 0.0


def sentinel_callable_that_raises_stop_iteration(x):
    g = (x * k for k in range(1, 4))
    return sum(iter(lambda: next(g), None))


NAN = float("nan")


def sentinel_compared_by_identity_first(x):
    vals = [x, 2 * x, NAN, 5 * x]
    return sum(iter(lambda: vals.pop(0), NAN))


def sentinel_list_iterator_method(x):
    it = iter([x, 2 * x])
    return sum(iter(it.__next__, None))


PROGRAMS += [iter_of_own_iterator_is_itself, sentinel_callable_that_raises_stop_iteration,
             sentinel_compared_by_identity_first, sentinel_list_iterator_method]
