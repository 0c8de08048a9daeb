"""The timers of attention_core.models.measure: wall-clock minima and the thread's CPU time."""

import time

from attention_core.models.measure import min_cpu_seconds, min_seconds


def busy(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_cpu_time_counts_work_and_not_waiting():
    """A sleeping call takes wall-clock time but no CPU time; a busy one takes both."""
    assert min_seconds(lambda: time.sleep(0.05), repeats=2) >= 0.05
    assert min_cpu_seconds(lambda: time.sleep(0.05), repeats=2) < 0.01
    assert 0.02 <= min_cpu_seconds(lambda: busy(0.02), repeats=2) < 0.5
