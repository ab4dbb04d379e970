"""Benchmark: the full ``fred estimate`` table (target < 10 s) and a whole strategy sweep
(target < 60 s) on this machine. Prints wall-clock figures; not a pass/fail test."""

from __future__ import annotations

import time


def main():
    from fred.commands.sweep import summary, sweep
    from fred.model.estimate import estimate_table

    import os

    t0, c0 = time.perf_counter(), time.process_time()
    rows = estimate_table()
    t_table, c_table = time.perf_counter() - t0, time.process_time() - c0
    print(f"bench_training: full estimate table, {len(rows)} cells (4 workloads x 5 fabrics): "
          f"{t_table:.2f} s wall, {c_table:.2f} s CPU (target < 10 s); load average {os.getloadavg()[0]:.1f}")
    print(f"  switch timing: {rows[0].timing_source if rows else ''}")
    slow = sorted(rows, key=lambda e: -e.sim_seconds)[:3]
    print("  slowest cells: " + ", ".join(f"{e.workload}/{e.fabric} {e.sim_seconds:.2f} s ({e.tasks} tasks)" for e in slow))
    for e in rows:
        if e.fabric in ("fred-c", "fred-d"):
            print(f"  {e.workload:16} {e.fabric}: speedup {e.speedup:.3f} (paper {e.paper_speedup})")

    t0, c0 = time.perf_counter(), time.process_time()
    res = sweep("transformer-17b", ("mesh", "fred-d"), 40)
    t_sweep, c_sweep = time.perf_counter() - t0, time.process_time() - c0
    ok = sum(1 for r in res if r["estimate"] is not None)
    s = summary(res)
    print(f"bench_training: transformer-17b sweep, {len(res)} strategy x fabric cells ({ok} fit in HBM): "
          f"{t_sweep:.2f} s wall, {c_sweep:.2f} s CPU (target < 60 s)")
    if s.get("strategies"):
        print(f"  Fred-D vs mesh, average over strategies: exposed comm {s['avg_exposed_comm_improvement']:.2f}x lower, "
              f"training {s['avg_training_improvement']:.2f}x faster (paper, Fig. 11: 4.22x, 1.63x)")
    return {"table_s": t_table, "table_cpu_s": c_table, "sweep_s": t_sweep, "sweep_cpu_s": c_sweep}


if __name__ == "__main__":
    main()
