"""What the cluster shares through Redis: keys, the gate and its seen filters,
the per-host limiter, the store queue, claims, crawl registry and counters."""
