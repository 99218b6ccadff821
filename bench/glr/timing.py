"""CUDA-event timing shared by bench/glr's scripts."""
import statistics
import time


def median_ms(fn, warmup, reps, budget_ms):
    """Median, min, max and count of CUDA-event timings of `reps` calls after `warmup` untimed ones; fewer reps
    (at least 3) where `reps` calls would take longer than budget_ms."""
    import torch
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        fn()
    torch.cuda.synchronize()
    one = (time.perf_counter() - t0) * 1e3 / max(warmup, 1)
    n = max(3, min(reps, int(budget_ms / max(one, 1e-3))))
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), min(times), max(times), n
