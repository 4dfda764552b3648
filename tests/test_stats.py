import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from contextlens.stats import (
    BayesianMode,
    Estimate,
    FrequentistMode,
    StatisticalMode,
    WeightWarning,
    bayesian_bootstrap_means,
    equal_tailed,
    resolve_weights,
    weighted_mean,
)
from contextlens.stats import bootstrap as stats

# --------------------------------------------------------------------------- resolve_weights


def _no_warning(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def test_all_none_gives_equal_weights_without_warning():
    w = _no_warning(resolve_weights, [None, None, None, None])
    assert w.dtype == np.float64
    np.testing.assert_array_equal(w, [0.25] * 4)


def test_all_given_summing_to_one_kept_as_is():
    w = _no_warning(resolve_weights, [0.5, 0.3, 0.2])
    np.testing.assert_array_equal(w, [0.5, 0.3, 0.2])
    # within the 1e-6 tolerance: still as is
    w = _no_warning(resolve_weights, [0.5, 0.5 + 5e-7])
    np.testing.assert_array_equal(w, [0.5, 0.5 + 5e-7])


def test_all_given_not_summing_to_one_warns_and_equalises():
    with pytest.warns(WeightWarning) as record:
        w = resolve_weights([2.0, 1.0, 1.0, 1.0], label="sess-42")
    np.testing.assert_array_equal(w, [0.25] * 4)
    assert len(record) == 1
    msg = str(record[0].message)
    assert "sess-42" in msg and "5" in msg
    assert record[0].filename == __file__  # stacklevel=2 points at the caller


def test_all_given_just_outside_tolerance_warns():
    with pytest.warns(WeightWarning, match="0.99999"):
        w = resolve_weights([0.5, 0.49999], label="s")
    np.testing.assert_array_equal(w, [0.5, 0.5])


def test_all_given_zero_warns():
    with pytest.warns(WeightWarning):
        w = resolve_weights([0.0, 0.0])
    np.testing.assert_array_equal(w, [0.5, 0.5])


def test_some_given_below_one_split_rest_equally():
    w = _no_warning(resolve_weights, [0.5, None, None])
    np.testing.assert_allclose(w, [0.5, 0.25, 0.25])
    w = _no_warning(resolve_weights, [None, 0.1, None, 0.3, None])
    np.testing.assert_allclose(w, [0.2, 0.1, 0.2, 0.3, 0.2])
    assert math.isclose(w.sum(), 1.0)
    w = _no_warning(resolve_weights, [0.0, None])
    np.testing.assert_array_equal(w, [0.0, 1.0])


@pytest.mark.parametrize("given", [[1.0, None], [0.6, 0.4, None], [0.9, 0.3, None, None]])
def test_some_given_summing_to_one_or_more_warns_and_equalises(given):
    with pytest.warns(WeightWarning) as record:
        w = resolve_weights(given, label="abc")
    np.testing.assert_allclose(w, np.full(len(given), 1 / len(given)))
    assert "abc" in str(record[0].message)


def test_some_given_within_tolerance_of_one_warns():
    with pytest.warns(WeightWarning):
        resolve_weights([1.0 - 1e-7, None])


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), float("-inf")])
def test_invalid_weight_names_index(bad):
    with pytest.raises(ValueError, match="index 2"):
        resolve_weights([0.2, None, bad, 0.1], label="s")


def test_empty_weights_raise():
    with pytest.raises(ValueError):
        resolve_weights([])


# --------------------------------------------------------------------------- helpers, frequentist


def test_weighted_mean():
    assert weighted_mean([1.0, 2.0, 4.0], [1.0, 1.0, 2.0]) == pytest.approx(2.75)
    assert weighted_mean([1.0, 3.0], np.array([0.25, 0.75])) == pytest.approx(2.5)
    with pytest.raises(ValueError):
        weighted_mean([], [])
    with pytest.raises(ValueError):
        weighted_mean([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        weighted_mean([1.0, 2.0], [0.0, 0.0])


def test_frequentist_mode():
    mode = FrequentistMode()
    assert isinstance(mode, StatisticalMode)
    assert mode.name == "frequentist"
    est = mode.estimate([0.2, 0.8, 1.0], np.array([0.5, 0.25, 0.25]), key="s")
    assert est == Estimate(pytest.approx(0.55), None, None, 3)
    assert est.ci_low is None and est.ci_high is None
    # positive but unnormalised weights are normalised
    assert mode.estimate([0.0, 1.0], np.array([1.0, 3.0])).value == pytest.approx(0.75)
    assert mode.estimate([], np.array([])) == Estimate(None, None, None, 0)


# --------------------------------------------------------------------------- Bayesian


def _equal(n: int) -> np.ndarray:
    return np.full(n, 1.0 / n)


def _sample(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).beta(2.0, 5.0, size=n)


def test_bayesian_is_a_mode():
    mode = BayesianMode()
    assert isinstance(mode, StatisticalMode)
    assert mode.name == "bayesian"


def test_point_is_exact_weighted_mean_and_inside_interval():
    x = _sample(40)
    w = np.random.default_rng(1).random(40)
    est = BayesianMode().estimate(x, w / w.sum(), key="s1")
    exact = float(np.dot(w, x) / w.sum())
    assert est.value == pytest.approx(exact, rel=0, abs=1e-12)
    assert est.n == 40
    assert est.ci_low < est.value < est.ci_high


def test_interval_narrows_as_n_grows():
    mode = BayesianMode()
    small = mode.estimate(_sample(10), _equal(10), key="a")
    large = mode.estimate(_sample(1000), _equal(1000), key="a")
    assert (large.ci_high - large.ci_low) < (small.ci_high - small.ci_low) / 4


def test_same_seed_same_result_and_helper_does_not_consume_seed():
    x, w = _sample(30), _equal(30)
    a = BayesianMode(rng_seed=7).estimate(x, w, key="s1")
    b = BayesianMode(rng_seed=7).estimate(x, w, key="s1")
    assert a == b
    seq = np.random.SeedSequence(5)
    np.testing.assert_array_equal(
        bayesian_bootstrap_means(x, w, 500, seq), bayesian_bootstrap_means(x, w, 500, seq)
    )
    c = BayesianMode(rng_seed=8).estimate(x, w, key="s1")
    assert (c.ci_low, c.ci_high) != (a.ci_low, a.ci_high)


def test_keys_give_different_draws_and_order_does_not_matter():
    x, w = _sample(30), _equal(30)
    m1 = BayesianMode()
    first = [m1.estimate(x, w, key=k) for k in ("s1", "s2", "s3")]
    m2 = BayesianMode()
    second = [m2.estimate(x, w, key=k) for k in ("s3", "s1", "s2")]
    assert first == [second[1], second[2], second[0]]
    assert len({(e.ci_low, e.ci_high) for e in first}) == 3
    # same mode, same key asked twice: same answer
    assert m1.estimate(x, w, key="s2") == first[1]


def test_key_stream_independent_of_python_hash_seed():
    code = (
        "import numpy as np; from contextlens.stats import BayesianMode;"
        "e = BayesianMode(mc_samples=200).estimate(np.linspace(0, 1, 7), np.ones(7) / 7, key='k');"
        "print(repr((e.ci_low, e.ci_high)))"
    )
    outs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        outs.add(done.stdout.strip())
    assert len(outs) == 1


def test_rng_seed_none_uses_fresh_entropy_but_is_consistent_per_instance():
    x, w = _sample(30), _equal(30)
    m = BayesianMode(rng_seed=None)
    assert m.estimate(x, w, key="s") == m.estimate(x, w, key="s")
    other = BayesianMode(rng_seed=None).estimate(x, w, key="s")
    assert other != m.estimate(x, w, key="s")


def test_single_value_gives_full_bounds():
    est = BayesianMode().estimate([0.7], np.array([1.0]), key="s")
    assert est == Estimate(0.7, 0.0, 1.0, 1)
    est = BayesianMode(bounds=(-1.0, 2.0)).estimate([0.7], np.array([1.0]))
    assert (est.ci_low, est.ci_high) == (-1.0, 2.0)
    # a value outside the bounds is still inside its interval
    est = BayesianMode().estimate([1.5], np.array([1.0]))
    assert est.ci_low == 0.0 and est.ci_high == 1.5


def test_no_values_gives_none():
    assert BayesianMode().estimate([], np.array([])) == Estimate(None, None, None, 0)


def test_identical_values_give_zero_width_interval():
    est = BayesianMode().estimate([0.4] * 5, _equal(5))
    assert est.value == pytest.approx(0.4)
    assert est.ci_low == pytest.approx(0.4) and est.ci_high == pytest.approx(0.4)


def test_weights_matter():
    x = np.array([0.0] * 9 + [1.0])
    mode = BayesianMode()
    flat = mode.estimate(x, _equal(10), key="s")
    heavy_w = np.array([0.1 / 9] * 9 + [0.9])
    heavy = mode.estimate(x, heavy_w, key="s")
    assert flat.value == pytest.approx(0.1)
    assert heavy.value == pytest.approx(0.9)
    assert heavy.ci_low > flat.ci_low and heavy.ci_high > flat.ci_high
    assert heavy.ci_high > 0.95 > flat.ci_high
    assert heavy.ci_low < heavy.value < heavy.ci_high


def test_zero_weight_items_are_ignored():
    x = np.array([0.2, 0.9, 0.4, 0.6])
    w = np.array([0.5, 0.0, 0.5, 0.0])
    draws = bayesian_bootstrap_means(x, w, 300, np.random.SeedSequence(3))
    assert draws.min() >= 0.2 - 1e-9 and draws.max() <= 0.4 + 1e-9
    only = bayesian_bootstrap_means(x, [0.0, 1.0, 0.0, 0.0], 300, np.random.SeedSequence(3))
    np.testing.assert_array_equal(only, np.full(300, 0.9))


def _reference_draws(x, w, mc, seq, chunk_elements):
    """Float64 reference on the same exponentials: fresh ``spawn`` children, one per chunk."""
    n = len(x)
    rows = max(1, min(mc, chunk_elements // n))
    starts = list(range(0, mc, rows))
    fresh = np.random.SeedSequence(seq.entropy, spawn_key=seq.spawn_key)
    children = fresh.spawn(len(starts))
    out = []
    for start, child in zip(starts, children, strict=True):
        r = min(rows, mc - start)
        gen = np.random.Generator(np.random.PCG64(child))
        e = gen.standard_exponential((r, n), dtype=np.float32).astype(np.float64)
        out.append((e @ (w * x)) / (e @ w))
    return np.concatenate(out)


@pytest.mark.parametrize("chunk_elements", [None, 997])
def test_draws_match_float64_reference(monkeypatch, chunk_elements):
    if chunk_elements is not None:  # many chunks, run on the thread pool
        monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", chunk_elements)
        monkeypatch.setattr(stats, "_PARALLEL_MIN_ELEMENTS", 0)
        monkeypatch.setattr(stats, "_workers", lambda: 2)
    x = _sample(60, seed=4) * 0.6 + 0.3  # far from 0: checks the centring, not luck
    w = np.random.default_rng(5).random(60) + 0.05
    w /= w.sum()
    seq = np.random.SeedSequence(11, spawn_key=(1, 2))
    got = bayesian_bootstrap_means(x, w, 3000, seq)
    ref = _reference_draws(x, w, 3000, seq, stats._CHUNK_ELEMENTS)
    assert got.shape == (3000,)
    assert np.max(np.abs(got - ref)) < 1e-6
    q_got = np.quantile(got, [0.025, 0.975])
    q_ref = np.quantile(ref, [0.025, 0.975])
    np.testing.assert_allclose(q_got, q_ref, rtol=0, atol=1e-6)


def test_interval_matches_independent_dirichlet_reference():
    x = _sample(50, seed=9)
    w = np.random.default_rng(10).random(50) + 0.2
    w /= w.sum()
    est = BayesianMode(mc_samples=20_000).estimate(x, w, key="s")
    g = np.random.default_rng(123).dirichlet(np.ones(50), size=20_000)
    ref = (g * w) @ x / ((g * w) @ np.ones(50))
    lo, hi = np.quantile(ref, [0.025, 0.975])
    # Monte Carlo error of each bound is about 1e-3 here
    assert est.ci_low == pytest.approx(lo, abs=5e-3)
    assert est.ci_high == pytest.approx(hi, abs=5e-3)


def test_threads_and_block_size_do_not_change_draws(monkeypatch):
    x, w = _sample(500, seed=2), _equal(500)
    seq = np.random.SeedSequence(1)
    monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", 50_000)
    monkeypatch.setattr(stats, "_PARALLEL_MIN_ELEMENTS", 0)
    monkeypatch.setattr(stats, "_workers", lambda: 1)
    serial = bayesian_bootstrap_means(x, w, 1000, seq)
    monkeypatch.setattr(stats, "_workers", lambda: 2)
    threaded = bayesian_bootstrap_means(x, w, 1000, seq)
    np.testing.assert_array_equal(serial, threaded)
    for block in (1_000, 128):  # several rows per block; then column blocks of one row
        monkeypatch.setattr(stats, "_BLOCK_ELEMENTS", block)
        blocked = bayesian_bootstrap_means(x, w, 1000, seq)
        np.testing.assert_allclose(blocked, serial, rtol=0, atol=1e-7)  # float32 sum order


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"mc_samples": 0}, ValueError),
        ({"mc_samples": 0}, ValueError),
        ({"mc_samples": 1000.0}, TypeError),
        ({"ci_level": 0.0}, ValueError),
        ({"ci_level": 1.0}, ValueError),
        ({"ci_level": float("nan")}, ValueError),
        ({"rng_seed": -1}, ValueError),
        ({"rng_seed": "42"}, TypeError),
        ({"bounds": (1.0, 0.0)}, ValueError),
        ({"bounds": (0.0, float("inf"))}, ValueError),
        ({"bounds": (0.0,)}, ValueError),
    ],
)
def test_bayesian_validates_arguments(kwargs, exc):
    with pytest.raises(exc):
        BayesianMode(**kwargs)


def test_estimate_rejects_bad_inputs():
    mode = BayesianMode()
    with pytest.raises(ValueError):
        mode.estimate([0.1, 0.2], np.array([1.0]))
    with pytest.raises(ValueError, match="index 1"):
        mode.estimate([0.1, 0.2], np.array([0.5, -0.5]))
    with pytest.raises(ValueError):
        mode.estimate([0.1, float("nan")], np.array([0.5, 0.5]))
    with pytest.raises(ValueError):
        bayesian_bootstrap_means([0.1, 0.2], [0.5, 0.5], 0, np.random.SeedSequence(0))


def _ungrouped(monkeypatch):
    monkeypatch.setattr(stats, "_groups", lambda *a, **k: None)


@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_merged_draws_match_the_per_interaction_draws(monkeypatch, kind):
    rng = np.random.default_rng(3)
    n = 4000
    x = rng.choice([0.0, 0.4, 1.0], n) if kind == "discrete" else rng.beta(2, 5, n)
    w = np.full(n, 1.0 / n)
    merged = stats.bayesian_bootstrap_means(x, w, 5000, np.random.SeedSequence(9))
    _ungrouped(monkeypatch)
    exact = stats.bayesian_bootstrap_means(x, w, 5000, np.random.SeedSequence(9))
    # Different random numbers, same distribution: quantiles agree to Monte Carlo error.
    q = [0.025, 0.5, 0.975]
    width = np.ptp(np.quantile(exact, [0.025, 0.975]))
    assert np.allclose(np.quantile(merged, q), np.quantile(exact, q), atol=0.05 * width)
    assert abs(merged.std() / exact.std() - 1) < 0.05


def test_snapping_offset_keeps_draws_centred():
    rng = np.random.default_rng(4)
    n = 5000
    x, w = rng.beta(2, 5, n), np.full(n, 1.0 / n)
    d = x - x.mean()
    groups = stats._groups(d, w, snap=True, step=np.abs(d).max() / stats._SNAP_LEVELS)
    assert groups is not None
    gd, gw, counts, offset = groups
    assert counts.sum() == n
    assert np.dot(gw * counts, gd) + offset == pytest.approx(0.0, abs=1e-12)


def test_normal_limit_matches_the_exact_draws_for_many_distinct_weights(monkeypatch):
    rng = np.random.default_rng(5)
    n = stats.NORMAL_LIMIT_MIN
    x, w = rng.beta(2, 5, n), rng.random(n) + 0.5
    fast = stats.bayesian_bootstrap_means(x, w, 2000, np.random.SeedSequence(1))
    monkeypatch.setattr(stats, "NORMAL_LIMIT_MIN", 10**9)
    exact = stats.bayesian_bootstrap_means(x, w, 2000, np.random.SeedSequence(1))
    q = [0.025, 0.5, 0.975]
    width = np.ptp(np.quantile(exact, [0.025, 0.975]))
    assert np.allclose(np.quantile(fast, q), np.quantile(exact, q), atol=0.06 * width)
    assert abs(fast.std() / exact.std() - 1) < 0.06


def test_a_pass_rate_has_the_interval_of_its_beta_posterior():
    """All of five passing is not certainty: Beta(1 + 5, 1 + 0) puts the lower bound at
    0.025 ** (1 / 6), and the interval reaches 1, the share itself; none passing mirrors it;
    otherwise the interval is equal-tailed; the same key draws the same interval."""
    mode = BayesianMode(mc_samples=20000)
    every = mode.rate(5, 5, key="m:pass")
    assert every.value == every.ci_high == 1.0
    assert every.ci_low == pytest.approx(0.025 ** (1 / 6), abs=0.01)
    none = mode.rate(0, 5, key="m:pass")
    assert none.value == none.ci_low == 0.0
    assert none.ci_high == pytest.approx(1 - 0.025 ** (1 / 6), abs=0.01)
    for passed in range(0, 6):  # the share is never outside its interval
        rate = mode.rate(passed, 5, key="m")
        assert rate.ci_low <= rate.value <= rate.ci_high
    half = mode.rate(1, 2, key="m")  # Beta(2, 2): equal tails
    assert (half.ci_low, half.ci_high) == pytest.approx((0.094, 0.906), abs=0.01)
    assert mode.rate(3, 5, key="k") == mode.rate(3, 5, key="k")
    assert mode.rate(0, 0).value is None
    assert FrequentistMode().rate(3, 4) == Estimate(0.75, None, None, 4)


@pytest.mark.parametrize("n", [2, 3, 7, 100, 5000, 20001])
@pytest.mark.parametrize("level", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 1 - 1e-16])
def test_the_equal_tailed_interval_is_numpys_quantiles_exactly(n, level):
    rng = np.random.default_rng(n)
    for draws in (rng.random(n), rng.standard_normal(n) * 1e3, np.round(rng.random(n), 1)):
        tail = (1.0 - level) / 2.0
        expected = tuple(float(q) for q in np.quantile(draws, [tail, 1.0 - tail]))
        before = draws.copy()
        assert equal_tailed(draws, level) == expected
        np.testing.assert_array_equal(draws, before)  # the draws are left as they were
    with_nan = np.append(rng.random(n), np.nan)
    expected = np.quantile(with_nan, [0.025, 0.975])
    assert np.isnan(expected).all() and np.isnan(equal_tailed(with_nan, 0.95)).all()
