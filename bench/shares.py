"""What bench/table.py and bench/pool.py both compute from bench/run.sh's
bench.json: the model's FLOPs and each timed run's share of the GEMM peaks
measured around it."""


def flops(d, D, H, L, loops, window, points, batch):
    """Model FLOPs (multiply-adds x 2) of one forward over `loops` iterations
    and of one training step (forward over b, backward over the last T at
    twice the forward cost); layer norms, softmax and GELU are O(nD) and left
    out. Per block and token: QKV 6D^2, projection 2D^2, MLP 16D^2; attention
    scores and weighted sum 4nD per token."""
    n = 2 * points
    it = L * (24 * n * D * D + 4 * n * n * D)
    io = 2 * n * d * D + 2 * n * D
    return batch * (loops * it + io), batch * ((loops + 2 * window) * it + io)


def bracket_shares(r, side, key, f):
    """Each timed run's share of the GEMM peak of its own seconds: f / its
    time against the mean of the peaks measured right before and after it
    (unroll-bench --bracket-peak); None without them."""
    times = r[side][key.replace("_median", "")] if side in r else None
    peaks = r[side].get(key.replace("_median_s", "_peaks_gflops")) if side in r else None
    if not peaks or not times or len(times) != len(peaks):
        return None
    return [f / t / 1e9 / ((a + b) / 2) for t, (a, b) in zip(times, peaks)]
