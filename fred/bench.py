"""``python -m fred.bench [NAME ...]`` (``make bench``): run the benchmarks.

A benchmark measures and prints figures (ratios measured in the same run); it does not pass or
fail (a crash still exits non-zero). :data:`BENCHMARKS` names each one and the function that
runs it; the cocotb *test benches* are ``fred.sim.tb_*`` modules, some of which also provide a
benchmark entry point.
"""

from __future__ import annotations

import importlib
import sys
import time

#: benchmark name -> "module:function" (run in this order)
BENCHMARKS = {
    "cli": "fred.benchmarks.cli:main",
    "adder": "fred.sim.benches.adder:main",
    "cells": "fred.sim.benches.cells:main",
    "soak": "fred.sim.soak.bench:main",
    "crossbar": "fred.sim.benches.crossbar:main",
    "network": "fred.benchmarks.network:main",
    "bounds": "fred.benchmarks.bounds:main",
    "overlap": "fred.benchmarks.overlap:main",
    "switch": "fred.sim.characterize.run.switch:main",
    "switch-online": "fred.sim.characterize.run.switch:main_online",
    "all-to-all": "fred.sim.characterize.run.all_to_all:main",
    "clock": "fred.benchmarks.clock:main",
    "verilog": "fred.benchmarks.verilog:main",
    "area-width": "fred.benchmarks.area_width:main",
    "training": "fred.benchmarks.training:main",
    "scale-out": "fred.benchmarks.training:scale_out",
    "wafers": "fred.benchmarks.wafers:main",
    "testtime": "fred.benchmarks.testtime:main",
    "runtime": "fred.benchmarks.runtime:main",
    "sensitivity": "fred.benchmarks.sensitivity:main",
}

USAGE = f"""usage: python -m fred.bench [NAME ...]

Run the benchmarks (all of them, or the NAMEs given): {', '.join(BENCHMARKS)}.
They report figures; they are not pass/fail tests."""


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    wanted = [a.removeprefix("bench_") for a in argv]
    unknown = [a for a in wanted if a not in BENCHMARKS]
    if unknown:
        print(f"fred.bench: error: no benchmark named {', '.join(unknown)} "
              f"(known: {', '.join(BENCHMARKS)})", file=sys.stderr)
        return 2
    for name, target in BENCHMARKS.items():
        if wanted and name not in wanted:
            continue
        modname, func = target.split(":")
        print(f"=== {name} ({modname}) ===", flush=True)
        t0 = time.perf_counter()
        getattr(importlib.import_module(modname), func)()
        print(f"--- {name}: {time.perf_counter() - t0:.1f} s wall\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
