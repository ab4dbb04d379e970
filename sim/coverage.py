"""``make coverage``: run the cell, fabric and switch benches with functional coverage on, merge
their coverage (:mod:`fred.sim.benches.cover`), print the table, write it under ``build/coverage/``
and exit 1 when a bin stays empty.

    python -m fred.sim.coverage [--out DIR] [--seed N]

Runs (cocotb builds of the cells and fabrics are its own: ``make test`` soaks them on the
compiled path):

* cells, every representative mode, 1,000 beats per mode over the three stall patterns:
  RD fp16 x 4 lanes, R m=3 bf16 x 4, R m=2 fp32 x 1, D m=3 fp16 x 2;
* fabric FRED_m(P) for each (P, m) of ``FABRIC_CASES``: one all-port phase per flow kind
  (unicast, reduce, multicast, all-reduce) and two mixed phases, random idling and stalls;
* the 4- and 5-port bench switch (2 x int32 lanes), random traffic over the phase tables
  below with skew, back-pressure, credit starvation and ACK/NACK packets.

Writes ``DIR/runs/*.yml`` (one export per bench run), ``DIR/coverage.yml`` (merged) and
``DIR/coverage.txt`` (the table). ``DIR`` defaults to ``build/coverage``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from pathlib import Path

from fred.contract import packet as pk
from fred.hdl.netlist import Flow
from fred.hdl.routing import route
from fred.sim.benches import cover as coverage
from fred.sim.characterize import KINDS, kind_flows, run_fabric

#: (kind, middle, dtype, lanes) of the cell runs
CELLS = (("rd", 2, "fp16", 4), ("r", 3, "bf16", 4), ("r", 2, "fp32", 1), ("d", 3, "fp16", 2))
#: lanes and dtype of each fabric case (as tests/sim/test_fabric_sim.py's subset builds them)
FABRIC_BUILDS = {(3, 2): (2, "bf16"), (5, 3): (1, "fp32"), (8, 2): (1, "fp16")}
#: rounds per phase and seeds per switch run
SWITCH_ROUNDS, SWITCH_SEEDS = 40, 2
SWITCH_PHASES = {
    4: {0: (pk.VC_DP, [Flow({0, 1, 2, 3}, {0, 1, 2, 3})]),
        1: (pk.VC_DP, [Flow({0, 1}, {2}), Flow({2, 3}, {3})]),
        2: (pk.VC_MP, [Flow({0, 1}, {0, 1}), Flow({2, 3}, {2, 3})]),
        3: (pk.VC_PP, [Flow({0}, {2}), Flow({1}, {3}), Flow({2}, {0, 1})]),
        4: (pk.VC_PP, [Flow({3}, {1})])},
    5: {0: (pk.VC_DP, [Flow({0, 1, 2, 3, 4}, {0, 1, 2, 3, 4})]),
        1: (pk.VC_MP, [Flow({0, 1}, {0, 1}), Flow({2, 3, 4}, {2, 3, 4})]),
        2: (pk.VC_PP, [Flow({4}, {0, 1}), Flow({0}, {4}), Flow({2}, {3})]),
        3: (pk.VC_MP, [Flow({3, 4}, {3})]),
        5: (pk.VC_DP, [Flow({1}, {2})])},
}


def _mixed(P, m, rng):
    """A routable phase of concurrent flows of different kinds on disjoint ports."""
    for _ in range(500):
        ins, outs = list(range(P)), list(range(P))
        rng.shuffle(ins)
        rng.shuffle(outs)
        a, b = rng.randint(2, max(2, P // 2)), rng.randint(2, max(2, P // 2))
        flows = [f"{ins[0]}>{outs[0]}",                                       # unicast
                 ",".join(map(str, sorted(ins[1:1 + a]))) + f">{outs[1]}"]    # reduce
        if 1 + a < P and 2 + b <= P:
            flows.append(f"{ins[1 + a]}>" + ",".join(map(str, sorted(outs[2:2 + b]))))  # multicast
        try:
            res = route(P, m, flows)
        except ValueError:
            continue
        if len({f.kind for f in res.flows}) > 1:
            return flows
    raise RuntimeError(f"no routable mixed phase found for FRED_{m}({P})")


def run_cells(seed):
    from fred.sim.benches import representative_modes, run_cell_regression
    for kind, m, dtype, lanes in CELLS:
        run_cell_regression(kind, middle=m, lanes=lanes, dtype=dtype, beats=1000, seed=seed,
                            modes=representative_modes(kind, m))


def run_fabrics(seed):
    for (P, m) in coverage.FABRIC_CASES:
        lanes, dtype = FABRIC_BUILDS[(P, m)]
        rng = random.Random(seed + P)
        phases = [kind_flows(k, P, rng) for k in KINDS] + [_mixed(P, m, rng) for _ in range(2)]
        run_fabric(P, m, lanes, dtype, phases, seed=seed, beats=24, idle=0.2, stall=0.3)


def run_switches(seed):
    from fred.sim.characterize import switch as measure
    from fred.sim.toolchain import run_bench
    for P, phases in SWITCH_PHASES.items():
        verilog, sw = measure._build(P, 3, 2, "int32", "fred")
        cfg = dict(measure._base_config(sw, phases), rounds=SWITCH_ROUNDS, ctrl_rate=0.5, bad_rate=0.0,
                   skew=40, idle=0.2, stall=0.3, rx_credits=[8, 8, 8, 2], credit_delay=12,
                   starve=0.01, starve_len=60, bound=20_000, max_cycles=1_000_000)
        for s in range(SWITCH_SEEDS):
            run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.benches.switch",
                      tag=f"switch-p{P}-int32-fred", config=cfg, seed=seed + s,
                      testcase="switch_random")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fred.sim.coverage", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="build/coverage", help="output folder (default build/coverage)")
    ap.add_argument("--seed", type=int, default=1, help="seed of every bench (default 1)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    runs = out / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    os.environ[coverage.ENV] = str(runs.resolve())
    t0 = time.monotonic()
    for name, step in (("cells", run_cells), ("fabric", run_fabrics), ("switch", run_switches)):
        t = time.monotonic()
        step(args.seed)
        print(f"[coverage] {name} benches: {time.monotonic() - t:.0f} s", file=sys.stderr)
    table, empty = coverage.report(sorted(runs.glob("*.yml")), out / "coverage.yml")
    (out / "coverage.txt").write_text(table + "\n")
    print(table)
    print(f"[coverage] {time.monotonic() - t0:.0f} s; table in {out / 'coverage.txt'}, merged "
          f"coverage in {out / 'coverage.yml'}", file=sys.stderr)
    if empty:
        print(f"coverage: {len(empty)} empty bin(s), first: {empty[0][0]} {empty[0][1]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
