"""Benchmark: training-model wall clock on this machine. Prints figures; not a pass/fail test.

:func:`main` (benchmark ``training``):

* the full ``fred estimate`` table (4 workloads x 5 fabrics; target < 10 s), serial;
* the Transformer-17B strategy sweep (target < 60 s), serial.

:func:`scale_out` (benchmark ``scale-out``):

* ``fred scan`` over 4 workloads x 5 fabrics x 20 k values with the paper-cell bisection
  (target < 120 s on 2 cores), on a local Dask cluster (one worker process per core);
* ``fred sweep --workload transformer-1t`` (target < 30 s), on the same kind of cluster.

The cluster's start-up is included in the last two (it is part of what a user waits for).
"""

from __future__ import annotations

import os
import time


def _load():
    return f"load average {os.getloadavg()[0]:.1f}"


def _worker_cpu(runner) -> float:
    """CPU seconds the runner's worker processes have used so far (this process when serial)."""
    if runner.client is None:
        return time.process_time()
    return sum(runner.client.run(time.process_time).values())


def _cpu_note(cpu, runner) -> str:
    n = max(1, runner.workers or 1)
    return (f"{cpu:.1f} s CPU in the workers, i.e. >= {cpu / n:.1f} s wall on {n} idle core{'s' if n > 1 else ''} "
            "(the wall time above includes waiting for other jobs on a shared machine)")


def main():
    from fred.commands.sweep import summary, sweep
    from fred.model.training import estimate_table

    t0, c0 = time.perf_counter(), time.process_time()
    rows = estimate_table()
    t_table, c_table = time.perf_counter() - t0, time.process_time() - c0
    print(f"bench_training: full estimate table, {len(rows)} cells (4 workloads x 5 fabrics): "
          f"{t_table:.2f} s wall, {c_table:.2f} s CPU (target < 10 s); {_load()}")
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
    print(f"bench_training: transformer-17b sweep, {len(res)} strategy x fabric cells ({ok} fit in HBM), serial: "
          f"{t_sweep:.2f} s wall, {c_sweep:.2f} s CPU (target < 60 s)")
    if s.get("strategies"):
        print(f"  Fred-D vs mesh, average over strategies: exposed comm {s['avg_exposed_comm_improvement']:.2f}x lower, "
              f"training {s['avg_training_improvement']:.2f}x faster (paper, Fig. 11: 4.22x, 1.63x)")
    return {"table_s": t_table, "table_cpu_s": c_table, "sweep_s": t_sweep, "sweep_cpu_s": c_sweep}


def scale_out():
    """``fred scan`` (default grid) and the Transformer-1T sweep on a local Dask cluster."""
    from fred.commands.sweep import sweep
    from fred.jobs import JobRunner
    from fred.model.training import k_grid, scan

    ks = k_grid()
    t0 = time.perf_counter()
    with JobRunner() as runner:
        t_up = time.perf_counter() - t0
        cpu0 = _worker_cpu(runner)
        jobs = []

        def counting_map(fn, items, **kw):
            jobs.append(len(items))
            return runner.map(fn, items, **kw)

        r = scan(k_values=ks, map_fn=counting_map)
        cpu_scan = _worker_cpu(runner) - cpu0
    t_scan = time.perf_counter() - t0
    print(f"bench_training: fred scan, {len(r.workloads)} workloads x {len(r.fabrics)} fabrics x {len(ks)} k = "
          f"{jobs[0]} estimates + {sum(jobs[1:])} in {len(jobs) - 1} bisection rounds, {runner.describe()}: "
          f"{t_scan:.1f} s wall incl. {t_up:.1f} s cluster start-up (target < 120 s on 2 cores); {_load()}")
    print(f"  {_cpu_note(cpu_scan, runner)}")
    for c in r.paper_cells:
        res_c = (f"k = {c.k:.3g} (speedup {c.speedup_at_k:.3f})" if c.reached
                 else f"not reached (max {c.max_speedup:.3f} at k = {c.k_at_max:.3g})")
        print(f"  {c.workload:16} {c.fabric}: paper {c.paper_speedup:.2f}, {res_c}")

    t0 = time.perf_counter()
    with JobRunner() as runner:
        cpu0 = _worker_cpu(runner)
        res = sweep("transformer-1t", ("mesh", "fred-d"), 40, map_fn=runner.map)
        cpu_1t = _worker_cpu(runner) - cpu0
    t_1t = time.perf_counter() - t0
    ok = [x["estimate"] for x in res if x["estimate"] is not None]
    slow = sorted(ok, key=lambda e: -e.sim_seconds)[:3]
    print(f"bench_training: fred sweep --workload transformer-1t, {len(res)} cells, {runner.describe()}: "
          f"{t_1t:.1f} s wall incl. cluster start-up (target < 30 s); {_load()}")
    print(f"  {_cpu_note(cpu_1t, runner)}")
    print("  slowest cells: " + ", ".join(f"{e.strategy}/{e.fabric} {e.sim_seconds:.2f} s" for e in slow)
          + f"; sum of simulation times {sum(e.sim_seconds for e in ok):.1f} s")
    return {"scan_s": t_scan, "scan_cpu_s": cpu_scan, "sweep_1t_s": t_1t, "sweep_1t_cpu_s": cpu_1t}


if __name__ == "__main__":
    main()
    scale_out()
