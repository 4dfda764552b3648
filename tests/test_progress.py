"""The progress a run shows: its rate and time left come from recent completions, so slow
first cases do not make a short run look long."""

import re

from contextlens.cli.options import ProgressLines
from contextlens.runner.progress import ProgressBar, Throughput, left_text


def warm_start(total: int = 200, first_s: float = 20.0, each_s: float = 0.02):
    """A run whose first case takes ``first_s`` (a model loading), then one case every
    ``each_s``: the (done, elapsed) of each completion."""
    return [(1, first_s)] + [(i, first_s + (i - 1) * each_s) for i in range(2, total + 1)]


def test_the_time_left_after_slow_first_cases_is_that_of_the_recent_pace():
    meter = Throughput()
    done_at = warm_start()
    for done, elapsed in done_at[:50]:
        meter.update(done, elapsed)
    done, elapsed = done_at[49]
    truth = (200 - done) * 0.02  # 3 s
    left = meter.left(200)
    assert left is not None and 0.8 * truth <= left <= 1.25 * truth
    from_the_start = (200 - done) / (done / elapsed)  # what the run's mean pace would say
    assert from_the_start > 10 * truth


def test_no_rate_before_two_completions_and_a_stall_lengthens_the_time_left():
    meter = Throughput()
    meter.update(0, 5.0)
    meter.update(1, 20.0)
    assert meter.rate() is None and meter.left(100) is None and left_text(None) == "-:--:--"
    for i in range(2, 12):
        meter.update(i, 20.0 + (i - 1) * 0.1)
    steady = meter.left(100)
    meter.update(11, 40.0)  # nothing completes for 19 s
    stalled = meter.left(100)
    assert steady is not None and stalled is not None and stalled > 10 * steady


def test_the_window_moves_past_old_completions_but_keeps_the_last_few():
    meter = Throughput(seconds=30.0, least=10)
    for i in range(1, 101):  # one a second for 100 s, then one every 0.1 s
        meter.update(i, float(i))
    for i in range(101, 401):
        meter.update(i, 100.0 + (i - 100) * 0.1)
    rate = meter.rate()
    assert rate is not None and 9.0 <= rate <= 10.5  # the recent 10 items/s, not the mean
    slow = Throughput(seconds=30.0, least=10)
    for i in range(1, 21):  # one a minute: the window holds 10 completions, not 30 s
        slow.update(i, 60.0 * i)
    assert abs(slow.rate() - 1 / 60) < 1e-9


def test_log_lines_give_the_recent_rate_and_time_left(capsys):
    progress = ProgressLines("run", every_s=1e9, steps=4)
    for done, elapsed in warm_start(total=40, first_s=20.0, each_s=0.05):
        progress(done, 40, elapsed)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "run: 1/40 items (2%), 20 s elapsed"  # no rate from one completion
    half = next(x for x in lines if x.startswith("run: 20/40"))
    left = float(re.search(r"about (\d+) s left", half).group(1))
    assert left <= 2  # 20 more at 0.05 s each, not the 40 s the first case suggests
    assert re.search(r"20\.0 items/s", half)


def test_the_bar_shows_the_time_left_at_the_recent_pace():
    bar = ProgressBar(total=200)
    done_at = warm_start()
    previous = 0
    for done, elapsed in done_at[:50]:
        bar.advance(done - previous, elapsed, None)
        previous = done
    task = bar.bar.tasks[0]
    assert task.completed == 50
    assert task.fields["left"] == "0:00:03" and task.fields["rate"] == "50.0 items/s"
