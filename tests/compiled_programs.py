"""Programs the compiled tier takes, shared by its tests: the three benchmark workloads
(`bench.compiled`'s) and one program for each kind of control flow and each eligible call,
with arguments."""
import math

import numpy as np

from bytegrad.bench.compiled import nested as matvec_sum, ode, rosenbrock  # noqa: F401  (the benchmark's)


def while_break_continue(x, n):
    s, i = 0.0, 0
    while True:
        if i >= n:
            break
        if x[i] > 0:
            s += math.exp(x[i])
        else:
            s -= x[i] * x[i]
            i += 1
            continue
        i += 1
        if s > 100:
            return s
    return s


def early_return(a, b):
    if a > b:
        return a * a / b
    for k in range(3):
        if a + k > 2.5:
            return b * k
        a = a * 1.5 + math.tanh(b)
    return a - b


def writes_in_place(x):
    y = 0.0
    for i in range(1, len(x)):
        x[i] = x[i] * x[i - 1] + 0.5
        y += x[i]
    return y + x[0]


def _helper(a, b):
    return a * b + max(a, b)


def calls_and_builtins(x):
    t = 0.0
    for xi in x:
        t += _helper(xi, 0.3) ** 1.5 + abs(xi - 0.6) + min(xi, 0.5, xi * xi)
    return t


def math_functions(a, b):
    return (math.sin(a) * math.cos(b) + math.exp(-a * a) + math.log(b) + math.sqrt(b)
            + math.tanh(a * b) + math.atan2(a, b) + math.hypot(a, b) + math.pow(b, a)
            + np.sin(a) + np.exp(b / 4) + np.arctan(a) + a ** b + b % 0.7 + a / b)


def tuple_argument(p, x):
    w, c = p
    s = 0.0
    for i in range(len(x)):
        s += (w * x[i] - c) ** 2
    return s


def three_d(T):
    s = 0.0
    for i in range(T.shape[0]):
        for j in range(T.shape[1]):
            for k in range(T.shape[2]):
                s += T[i, j, k] * T[i, j, k] * (i + j - k)
    return s


def triangular(x):
    s = 0.0
    for i in range(len(x)):
        for j in range(i, len(x), 2):
            s += x[i] * x[j] - 0.1 * j
    return s


def backwards_with_a_branch(x, y):
    s = 0.0
    for i in range(len(x) - 1, -1, -1):
        for k in range(2):
            if x[i] > k * 0.5:
                s = s * 0.9 + x[i] * y
            else:
                s -= math.cos(x[i] + k)
    return s


def step_given(x, k):
    s = 0.0
    for i in range(0, len(x), k):
        s += x[i] ** 3
    for i in range(len(x) - 1, -1, -k):
        for j in range(i, i):  # (no pass)
            s += x[j]
        s = s * 0.5 + x[i]
    return s


_r = np.random.default_rng(7)
PROGRAMS = [
    (rosenbrock, (_r.normal(size=12),), 0),
    (matvec_sum, (_r.normal(size=(5, 4)), _r.normal(size=4)), (0, 1)),
    (ode, (0.5, 1.2, 0.7), (0, 1, 2)),
    (while_break_continue, (_r.normal(size=9), 9), 0),
    (early_return, (0.3, 1.1), (0, 1)),
    (early_return, (2.0, 1.1), (0, 1)),
    (writes_in_place, (_r.uniform(0.1, 0.9, size=6),), 0),
    (calls_and_builtins, (_r.uniform(0.1, 2.0, size=7),), 0),
    (math_functions, (0.4, 1.3), (0, 1)),
    (tuple_argument, ((1.5, 0.2), _r.normal(size=5)), (0, 1)),
    (three_d, (_r.normal(size=(2, 3, 4)),), 0),
    (triangular, (_r.normal(size=7),), 0),
    (backwards_with_a_branch, (_r.uniform(-0.2, 1.2, size=6), 0.7), (0, 1)),
    (step_given, (_r.normal(size=7), 2), 0),
    (step_given, (_r.normal(size=7), 3), 0),
]
