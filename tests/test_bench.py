"""The benchmark harness (bench/): the timer's records, the targets' workloads and their
table.  Nothing here is timed against a limit: speed is measured by the benchmarks."""
import gc
import math

import numpy as np
import pytest

import bytegrad
from bytegrad.bench import targets, timer
from bytegrad.bench.case import max_rel_error
from bytegrad.bench.cases import BY_NAME, TARGET_CASES


def test_compare_keeps_gc_on_and_reports_median_and_spread():
    assert gc.isenabled()
    m = timer.compare({"a": lambda: sum(range(50)), "b": lambda: sum(range(100))},
                      ratios=[("b", "a")], budget=0.0, min_time=1e-4, min_rounds=5)
    for s in (*m["times"].values(), m["ratios"]["b/a"]):
        assert s["samples"] == 5 and s["gc"] is True
        assert s["min"] <= s["q1"] <= s["median"] <= s["q3"] <= s["max"]
    assert m["times"]["a"]["number"] >= 1
    assert gc.isenabled()


def test_stats_of_one_sample():
    s = timer.stats([2.0])
    assert s["median"] == s["q1"] == s["q3"] == s["min"] == s["max"] == 2.0


@pytest.mark.parametrize("case", TARGET_CASES, ids=lambda c: c.name)
def test_target_cases_gradients_match_their_references(case):
    args = case.make_args()
    g = bytegrad.grad(case.fn, argnums=tuple(case.wrt))(*args)
    assert max_rel_error([np.asarray(v) for v in g], case.reference(*args)) < 1e-9


def test_forms_of_rosenbrock_agree():
    (x,) = BY_NAME["rosenbrock_iadd"].make_args()
    # s += a + b adds (a + b) to s; s = s + a + b adds a, then b: the sums differ in rounding
    assert math.isclose(BY_NAME["rosenbrock_iadd"].fn(x), BY_NAME["rosenbrock_loop"].fn(x),
                        rel_tol=1e-12)
    assert math.isclose(BY_NAME["method"].fn(x), BY_NAME["method_loop"].fn(x), rel_tol=1e-12)


def test_branchy_is_fresh_code_with_a_branch_per_statement():
    f, g = targets.branchy(3, 0), targets.branchy(3, 1)
    assert f.__code__ is not g.__code__
    s = 0.3
    for i in range(3):
        s = math.sin(s) * 0.5 + 0.3 if s > (i % 5) * 0.2 - 0.4 else s * 0.75 - (i % 3 + 1) * 0.3
    assert math.isclose(f(0.3), s)


def test_targets_table_shows_misses():
    s = timer.stats([30.0, 31.0, 29.0, 30.5, 29.5])
    data = {"meta": {"implementation": "CPython", "python": "3.x", "live_objects": 10,
                     "ballast": 5, "elapsed": 1.0},
            "rows": [targets.row("w", s, "≤ 12×", targets.met(s["median"] <= 12)),
                     targets.row("t", None, "≤ 1 s", "NOT met", kind="seconds",
                                 note="more than 10 s")]}
    text = targets.markdown(data)
    assert "| w | 30.0× (IQR 29.5–30.5, 5 samples) | ≤ 12× | **NOT met** |" in text
    assert "| t | more than 10 s | ≤ 1 s | **NOT met** |" in text


def test_peak_memory_row_measures_the_gradient_against_the_primal():
    rows, raw = [], {}
    targets.peak_memory(rows, raw)
    peaks = raw["peak_memory"]
    assert 0 < peaks["primal"] and 0 < peaks["gradient"] <= 1.3 * peaks["primal"]
    assert targets.fmt_measured(rows[0]) == \
        f"{peaks['gradient']:,} B (1 sample); the primal's {peaks['primal']:,} B"


@pytest.mark.parametrize("name", ["rosenbrock n=1000", "nested 30x30"])
def test_compiled_bench_hand_written_gradients_match_bytegrads(name):
    from bytegrad.bench import compiled
    f, args, argnums = compiled.workloads()[name]
    y, *hand = compiled.BY_HAND[name](*args)
    y0, g = bytegrad.value_and_grad(f, argnums)(*args)
    g = (g,) if isinstance(argnums, int) else g
    assert math.isclose(y, y0, rel_tol=1e-12)
    assert max_rel_error(list(hand), [np.asarray(v) for v in g]) < 1e-12


def test_parallel_workload_gradient_matches_serial_on_one_and_two_workers():
    from concurrent.futures import ProcessPoolExecutor
    from bytegrad.bench import parallel
    data, w = parallel.shards(50, 4), np.array([0.5, -0.2, 0.1])
    ref = bytegrad.gradient(parallel.serial, w, data)[0]
    for n in (1, 2):
        with ProcessPoolExecutor(n) as pool:
            g = bytegrad.gradient(parallel.loss, w, data, pool)[0]
        assert parallel.rel_error(g, ref) < parallel.AGREE


def test_hvp_bench_checks_its_products_and_its_closed_form_is_the_gradient_s_derivative():
    from bytegrad.bench import hvp as hb
    x = np.array([0.3, -1.2, 0.8, 1.5])
    v = np.array([1.0, 0.5, -2.0, 0.25])
    g, h = bytegrad.grad(hb.rosenbrock), 1e-6
    assert np.allclose(hb.rosenbrock_hessian_times(x, v), (g(x + h * v) - g(x - h * v)) / (2 * h),
                       rtol=1e-6, atol=1e-6)
    work = hb.workloads()  # (each checked once: a wrong product raises)
    assert len(work) == 3 and all(callable(f) for fns in work.values() for f in fns.values())
    assert all(callable(f) for f in hb.jacfwd_pair())  # (its batched Jacobian checked by column)
    with pytest.raises(AssertionError):
        hb._check("wrong", np.ones(3), np.zeros(3) + 2.0, 1e-12)
