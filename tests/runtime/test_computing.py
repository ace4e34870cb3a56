"""While a gradient is computed, and only then, the cyclic collector is paused and the
recursion limit scaled to bytegrad's frames per level of the user's recursion."""
import gc
import math
import sys
import threading

import pytest

import bytegrad
from bytegrad.runtime.computing import DepthError

from checks import fd_gradient


_freed = []


class _Node:
    def __del__(self):
        _freed.append(self.name)


def _with_a_cycle(x):
    a, b = _Node(), _Node()
    a.name, b.name = "a", "b"
    a.other, b.other = b, a  # garbage in a cycle once this returns
    return x * x


def test_cycles_made_while_differentiating_are_collected_afterwards():
    _freed.clear()
    assert bytegrad.grad(_with_a_cycle)(3.0) == 6.0
    assert gc.isenabled()
    gc.collect()
    assert sorted(_freed) == ["a", "b"]


def test_collector_is_off_during_the_forward_and_reverse_passes():
    seen = []  # (written by the hook, which runs plainly: f's own writes are undone)

    def f(x):
        on = gc.isenabled()
        return bytegrad.hook(lambda d: seen.append(gc.isenabled()) or d, x) * (3.0 if on else 2.0)
    y, back = bytegrad.pullback(f, 1.5)
    assert y == 3.0 and gc.isenabled()
    assert back(1.0) == (2.0,)
    assert seen == [False] and gc.isenabled()


def test_collector_is_restored_when_the_function_raises():
    def bad(x):
        raise ValueError("from the user")
    with pytest.raises(ValueError, match="from the user"):
        bytegrad.grad(bad)(1.0)
    assert gc.isenabled()


def test_a_collector_the_user_turned_off_stays_off():
    gc.disable()
    try:
        assert bytegrad.grad(lambda x: x * x)(2.0) == 4.0
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_threads_resume_the_collector_when_the_last_one_ends():
    start = threading.Barrier(4)

    def work():
        start.wait()
        for _ in range(50):
            assert bytegrad.grad(lambda x: x ** 3)(2.0) == 12.0
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert gc.isenabled()


def _nest(x, n):
    return x if n == 0 else math.sin(_nest(x, n - 1)) * 0.5 + x


@pytest.fixture
def default_limit():
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # Python's default (the suite's conftest raises it)
    yield 1000
    sys.setrecursionlimit(before)


def test_a_recursion_the_plain_call_can_run_differentiates(default_limit):
    g = bytegrad.grad(_nest)(0.3, 600)
    assert g == pytest.approx(fd_gradient(_nest, [0.3, 600], 0), rel=1e-6)
    assert sys.getrecursionlimit() == default_limit


@pytest.mark.regression
def test_the_reverse_pass_recurses_in_python_frames_only(default_limit):
    # CPython 3.12 caps a recursion through ``__call__`` near 500 levels, whatever the
    # limit: the adjoint calls a pullback's ``__call__`` as a method (ops.pull)
    g = bytegrad.grad(_nest)(0.3, 900)
    assert g == pytest.approx(fd_gradient(_nest, [0.3, 900], 0), rel=1e-6)


def _nest_kw(x, n, k=0.5):
    return x if n == 0 else math.sin(_nest_kw(x, n=n - 1)) * k + x


def test_a_recursion_binding_keywords_and_defaults_differentiates(default_limit):
    """(Such a call runs a frame more each way than a plain one: `forward._call`.)"""
    g = bytegrad.grad(_nest_kw)(0.3, 850)
    assert g == pytest.approx(fd_gradient(_nest_kw, [0.3, 850], 0), rel=1e-6)


def test_a_recursion_too_deep_says_where_and_what_to_do(default_limit):
    assert bytegrad.DepthError is DepthError
    with pytest.raises(DepthError, match=r"test_computing\.py:\d+: maximum recursion depth.*"
                                         r"sys\.setrecursionlimit"):
        bytegrad.grad(_nest)(0.3, 2000)  # (past the scaled limit at two frames per level)
    assert sys.getrecursionlimit() == default_limit and gc.isenabled()
    with pytest.raises(RecursionError):  # (what a user's except clause names still catches it)
        bytegrad.grad(_nest)(0.3, 2000)


_DEEP = """
import math, sys, threading, bytegrad
def p(x, n):
    return x if n == 0 else math.sin(p(x, n - 1)) * 0.5 + x
def run(depths):
    for d in depths:
        try:
            bytegrad.grad(p)(0.3, d)
            print(d, "ok")
        except RecursionError as e:
            print(d, type(e).__name__)
"""


def _deep(code):
    import subprocess
    return subprocess.run([sys.executable, "-c", _DEEP + code], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.regression
def test_a_raised_limit_gives_an_error_not_a_crash():
    r = _deep("sys.setrecursionlimit(20000)\nrun([5000, 12000, 15000])")
    assert r.returncode == 0, r.stderr[-2000:]  # (a scaled 60,000 overflowed the C stack)
    assert r.stdout.split() == ["5000", "ok", "12000", "DepthError", "15000", "DepthError"]


@pytest.mark.regression
def test_a_thread_with_a_small_stack_gives_an_error_not_a_crash():
    r = _deep("threading.stack_size(512 * 1024)\n"
              "t = threading.Thread(target=run, args=([300, 700, 900, 2000],))\nt.start(); t.join()")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["300", "ok", "700", "DepthError", "900", "DepthError",
                                "2000", "DepthError"]


@pytest.mark.regression
def test_a_small_stack_thread_computing_beside_the_main_thread_gives_an_error_not_a_crash():
    r = _deep("""
import time
threading.stack_size(256 * 1024)
done = []
def worker():
    time.sleep(0.2)  # (starts while the main thread is inside a gradient)
    run([700])  # (over the user's limit of 1000 at two frames per level; not the main's)
    done.append(1)
def longf(x):
    s = 0.0
    for i in range(50000):
        s = s + x * 1e-3
    return s
t = threading.Thread(target=worker); t.start()
while not done:
    bytegrad.gradient(longf, 0.5)
t.join()
""")
    assert r.returncode == 0, r.stderr[-2000:]  # (the main thread's scaled limit overflowed it)
    assert r.stdout.split() == ["700", "DepthError"]
