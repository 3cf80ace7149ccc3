"""Timing helper shared by the peer-comparison scripts."""
import statistics
import time


def median_time(fn, repeat):
    """Median wall time of `fn()` over `repeat` runs, after one warm-up run."""
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)
