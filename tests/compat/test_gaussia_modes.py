"""gaussia's StatisticalMode surface on both modes: ``get_result_type``,
``distribution_divergence``, ``rate_estimation``, ``aggregate_metrics`` and
``dispersion_metric``, as point estimates (FrequentistMode) and posterior summaries
(BayesianMode, with its Dirichlet and Beta priors)."""

import numpy as np
import pytest

from contextlens import BayesianMode, FrequentistMode

# -- FrequentistMode ----------------------------------------------------------------------------


def test_frequentist_results_are_point_estimates():
    mode = FrequentistMode()
    assert mode.get_result_type() == "point_estimate"
    assert isinstance(mode.distribution_divergence({"A": 0.3, "B": 0.7}, {"A": 0.5}), float)


@pytest.mark.parametrize(
    ("observed", "reference", "expected"),
    [
        ({"A": 0.3, "B": 0.7}, {"A": 0.5, "B": 0.5}, 0.2),
        ({"A": 0.5, "B": 0.5}, {"A": 0.5, "B": 0.5}, 0.0),
        ({"A": 1.0, "B": 0.0}, {"A": 0.0, "B": 1.0}, 1.0),
        ({"A": 0.5, "B": 0.3, "C": 0.2}, {"A": 0.5, "B": 0.5}, 0.2),  # C is 0 in the reference
        ({}, {}, 0.0),
    ],
)
def test_frequentist_divergence_is_the_total_variation(observed, reference, expected):
    assert FrequentistMode().distribution_divergence(observed, reference) == pytest.approx(expected)


@pytest.mark.parametrize("mode", [FrequentistMode(), BayesianMode(mc_samples=100)])
def test_a_divergence_other_than_total_variation_is_not_implemented(mode):
    with pytest.raises(NotImplementedError, match="kl_divergence"):
        mode.distribution_divergence({"A": 5}, {"A": 1.0}, divergence_type="kl_divergence")


@pytest.mark.parametrize(
    ("successes", "trials", "expected"),
    [(70, 100, 0.7), (100, 100, 1.0), (0, 100, 0.0), (0, 0, 0.0)],
)
def test_frequentist_rate_is_the_proportion(successes, trials, expected):
    assert FrequentistMode().rate_estimation(successes, trials) == pytest.approx(expected)


def test_frequentist_aggregation_is_the_normalised_weighted_sum():
    mode = FrequentistMode()
    assert mode.aggregate_metrics({"m1": 0.3, "m2": 0.7}, {"m1": 1, "m2": 1}) == pytest.approx(0.5)
    assert mode.aggregate_metrics({"m1": 0.0, "m2": 1.0}, {"m1": 1, "m2": 3}) == pytest.approx(0.75)
    assert mode.aggregate_metrics({"m1": 0.5}, {"m1": 0.0}) == 0.0
    # a posterior summary counts by its mean
    assert mode.aggregate_metrics({"m1": {"mean": 0.4}, "m2": 0.8}, {"m1": 1, "m2": 1}) == (
        pytest.approx(0.6)
    )


@pytest.mark.parametrize(
    ("values", "center", "expected"),
    [
        ({"v1": 0.2, "v2": 0.4, "v3": 0.6}, "mean", 0.4 / 3),
        ({"v1": 0.0, "v2": 0.5, "v3": 1.0}, "median", 1 / 3),
        ({"v1": 0.5}, "mean", 0.0),
        ({"v1": 0.5, "v2": 0.5, "v3": 0.5}, "mean", 0.0),
        ({}, "mean", 0.0),
    ],
)
def test_frequentist_dispersion_is_the_mean_absolute_deviation(values, center, expected):
    assert FrequentistMode().dispersion_metric(values, center=center) == pytest.approx(expected)


@pytest.mark.parametrize("mode", [FrequentistMode(), BayesianMode(mc_samples=100)])
def test_an_unknown_center_is_refused(mode):
    with pytest.raises(ValueError, match="Unknown center type"):
        mode.dispersion_metric({"v1": 0.5}, center="invalid")


# -- BayesianMode -------------------------------------------------------------------------------


def test_bayesian_mode_keeps_its_priors_and_gives_distributions():
    mode = BayesianMode()
    assert (mode.mc_samples, mode.ci_level) == (5000, 0.95)
    assert (mode.dirichlet_prior, mode.beta_prior_a, mode.beta_prior_b) == (1.0, 1.0, 1.0)
    assert mode.get_result_type() == "distribution"
    custom = BayesianMode(10_000, 0.90, 0.5, 2.0, 2.0, 123)  # gaussia's order
    assert (custom.mc_samples, custom.ci_level, custom.dirichlet_prior) == (10_000, 0.9, 0.5)
    assert (custom.beta_prior_a, custom.beta_prior_b, custom.rng_seed) == (2.0, 2.0, 123)
    for bad in ({"dirichlet_prior": 0.0}, {"beta_prior_a": -1.0}, {"beta_prior_b": float("nan")}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            BayesianMode(**bad)


def test_bayesian_divergence_summarises_dirichlet_draws():
    mode = BayesianMode(mc_samples=1000, rng_seed=42)
    result = mode.distribution_divergence({"A": 30, "B": 70}, {"A": 0.5, "B": 0.5})
    assert set(result) == {"mean", "ci_low", "ci_high", "samples"}
    assert result["ci_low"] <= result["mean"] <= result["ci_high"]
    assert len(result["samples"]) == 1000
    assert result["mean"] == pytest.approx(0.2, abs=0.03)  # the counts' own total variation
    balanced = mode.distribution_divergence({"A": 50, "B": 50}, {"A": 0.5, "B": 0.5})
    assert balanced["mean"] < 0.2
    missing = mode.distribution_divergence({"A": 50, "B": 30, "C": 20}, {"A": 0.5, "B": 0.5})
    assert missing["mean"] >= 0
    empty = mode.distribution_divergence({}, {"A": 0.5, "B": 0.5})
    assert (empty["mean"], empty["ci_low"], empty["ci_high"]) == (0.0, 0.0, 0.0)


def test_the_dirichlet_prior_pulls_small_counts_toward_uniform():
    counts, reference = {"A": 3, "B": 1}, {"A": 0.5, "B": 0.5}
    weak = BayesianMode(mc_samples=4000, dirichlet_prior=0.1).distribution_divergence(
        counts, reference
    )
    strong = BayesianMode(mc_samples=4000, dirichlet_prior=50.0).distribution_divergence(
        counts, reference
    )
    assert strong["mean"] < weak["mean"]


def test_bayesian_rate_is_the_beta_binomial_posterior():
    mode = BayesianMode(mc_samples=1000, rng_seed=42)
    result = mode.rate_estimation(successes=70, trials=100)
    assert set(result) == {"mean", "ci_low", "ci_high", "samples"}
    assert 0 <= result["ci_low"] <= result["mean"] <= result["ci_high"] <= 1
    assert result["mean"] == pytest.approx(71 / 102, abs=0.01)  # Beta(1 + 70, 1 + 30)
    assert mode.rate_estimation(successes=100, trials=100)["mean"] > 0.9
    assert mode.rate_estimation(successes=0, trials=100)["mean"] < 0.1
    for trials in (0, -1):
        empty = mode.rate_estimation(successes=0, trials=trials)
        assert (empty["mean"], empty["ci_low"], empty["ci_high"]) == (0.0, 0.0, 0.0)
    # a strong prior pulls a few trials toward its own mean: Beta(20 + 9, 20 + 1)
    prior = BayesianMode(mc_samples=4000, beta_prior_a=20.0, beta_prior_b=20.0)
    assert prior.rate_estimation(9, 10)["mean"] == pytest.approx(29 / 50, abs=0.02)


def test_bayesian_aggregation_combines_the_draws():
    mode = BayesianMode(mc_samples=100, rng_seed=42)
    metrics = {
        "m1": {"mean": 0.3, "samples": np.full(100, 0.3)},
        "m2": {"mean": 0.7, "samples": np.full(100, 0.7)},
    }
    assert mode.aggregate_metrics(metrics, {"m1": 1.0, "m2": 1.0})["mean"] == pytest.approx(0.5)
    skewed = {"m1": {"samples": np.zeros(100)}, "m2": {"samples": np.ones(100)}}
    assert mode.aggregate_metrics(skewed, {"m1": 1.0, "m2": 3.0})["mean"] == pytest.approx(0.75)
    assert mode.aggregate_metrics(metrics, {"m1": 0.0})["mean"] == 0.0
    # a summary without draws, or a plain number, counts by its value
    mixed = {"m1": {"mean": 0.5}, "m2": 0.9}
    assert mode.aggregate_metrics(mixed, {"m1": 1.0, "m2": 1.0})["mean"] == pytest.approx(0.7)
    # draw by draw: the spread of the parts carries into the sum
    rates = {name: mode.rate_estimation(40, 100) for name in ("a", "b")}
    combined = mode.aggregate_metrics(rates, {"a": 1.0, "b": 1.0})
    assert combined["ci_low"] < 0.4 < combined["ci_high"]


def test_bayesian_dispersion_is_computed_draw_by_draw():
    mode = BayesianMode(mc_samples=100, rng_seed=42)
    spread = {k: {"samples": np.full(100, v)} for k, v in (("v1", 0.2), ("v2", 0.4), ("v3", 0.6))}
    assert mode.dispersion_metric(spread)["mean"] == pytest.approx(0.4 / 3)
    around_median = {k: {"samples": np.full(100, v)} for k, v in (("a", 0), ("b", 0.5), ("c", 1))}
    assert mode.dispersion_metric(around_median, center="median")["mean"] == pytest.approx(1 / 3)
    assert mode.dispersion_metric({})["mean"] == 0.0
    mixed = {"v1": {"mean": 0.2}, "v2": {"mean": 0.8, "samples": np.full(100, 0.8)}}
    assert mode.dispersion_metric(mixed)["mean"] == pytest.approx(0.3)


def test_the_summary_is_the_mean_and_equal_tailed_interval():
    mode = BayesianMode(mc_samples=1000, ci_level=0.95)
    draws = mode.aggregate_metrics({"x": {"samples": np.linspace(0, 1, 1000)}}, {"x": 1.0})
    assert draws["mean"] == pytest.approx(0.5, abs=0.01)
    assert draws["ci_low"] == pytest.approx(0.025, abs=0.01)
    assert draws["ci_high"] == pytest.approx(0.975, abs=0.01)


def test_draws_are_reproducible_by_seed_and_independent_from_call_to_call():
    observed, reference = {"A": 30, "B": 70}, {"A": 0.5, "B": 0.5}
    first = BayesianMode(mc_samples=100, rng_seed=42).distribution_divergence(observed, reference)
    again = BayesianMode(mc_samples=100, rng_seed=42).distribution_divergence(observed, reference)
    other = BayesianMode(mc_samples=100, rng_seed=123).distribution_divergence(observed, reference)
    np.testing.assert_array_equal(first["samples"], again["samples"])
    assert not np.array_equal(first["samples"], other["samples"])
    mode = BayesianMode(mc_samples=100, rng_seed=42)
    one, two = mode.rate_estimation(40, 100), mode.rate_estimation(40, 100)
    assert not np.array_equal(one["samples"], two["samples"])  # two groups, two draws
