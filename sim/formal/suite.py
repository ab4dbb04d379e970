"""``make formal``: every formal property on every design, as a table (docs/formal.md).

``python -m fred.sim.formal.suite [--out DIR] [--jobs N] [--quick] [--only cells|fabric|switch]`` runs the jobs of :func:`jobs`
(SymbiYosys through :mod:`fred.sim.formal.runner`, harnesses from :mod:`fred.sim.formal.cells`)
and prints one row per property x design: *proved by induction (k=N)*, *bounded to depth N*, or
*FAILED* with the counterexample's trace file. ``DIR/formal.txt`` gets the same table plus
one line per job (each mode separately). Exit status 1 when any job failed or stayed unknown.

Designs: the R and D cells (``middle`` 2) and the RD cell, each in every mode the cell has
(``all_modes``), for int32, fp16, bf16 and fp32 at 1 lane and int32 at 2 lanes
(:mod:`fred.sim.formal.cells`); the switch's input port with its smallest buffers, its phase
activation and an output port's queued rounds against its receiver's credits
(:mod:`fred.sim.formal.switch`); FRED_2(4) in six flow sets (:mod:`fred.sim.formal.fabric`):
stream rule, conservation and routing.
``--quick`` keeps the int32 cells at 1 lane.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

from fred.hdl.cells import CELL_CLASSES, cell_latency
from fred.hdl.netlist import parse_flow
from fred.hdl.netlist import mode_str
from fred.hdl.routing import route

from .cells import GROUPS, CellHarness
from .runner import Result, check
from .fabric import FabricHarness
from .switch import ActivationHarness, InputPortHarness, OutputPortHarness

__all__ = ["Job", "jobs", "run_job", "table", "main"]

#: (dtype, lanes) of the cell designs checked
CELL_DESIGNS = (("int32", 1), ("int32", 2), ("fp16", 1), ("bf16", 1), ("fp32", 1))
#: the middle (m) of the R and D cells checked: the smallest the generator builds
CELL_MIDDLE = 2
#: the switch input port checked: 48-bit flits (one header), data VCs of 3 flits, control VC of
#: 1, packets of at most 2 data flits (the smallest the port accepts)
SWITCH_PORT = {"flit_bits": 48, "depths": (3, 3, 3, 1), "max_len": 2}
#: BMC depth of the switch input port (cycles from reset): 10 cycles fill and drain a 3-flit
#: buffer more than twice (about 5 minutes of CPU with Yices)
SWITCH_BMC_DEPTH = 10
#: the whole switch whose phase activation is proved: 3 ports (the scanner, an odd port count),
#: the ideal fabric (2 int32 lanes: 64-bit flits, online routing on), VC buffers 3/3/3/1 flits,
#: packets of at most 2 data flits, 2 table entries
SWITCH_ACTIVATION = {"ports": 3, "depths": (3, 3, 3, 1), "max_len": 2, "entries": 2}
#: its induction depth (the property holds in every state the logic can be in, so k = 2)
SWITCH_ACTIVATION_K = 2
#: the switch output port checked: 3 rounds held (the one sent + 2 queued), receiver buffers
#: 3/3/3/1 flits, packets of at most 2 data flits
SWITCH_OUTPUT = {"rounds": 3, "init": (3, 3, 3, 1), "max_len": 2}
#: BMC depth of the output port (its induction step fails without helper invariants): 16
#: cycles queue 3 rounds and drain them several times (about a minute of CPU with Yices)
SWITCH_OUTPUT_DEPTH = 16


@dataclass(frozen=True)
class Job:
    """One solver run: ``build()`` makes the harness; ``mode`` (prove | bmc) to ``depth``."""

    design: str
    group: str
    name: str
    build: Callable
    mode: str
    depth: int
    label: str = ""          # the cell mode, for the per-job lines

    def run(self, out: Path) -> Result:
        return check(self.build(), out / "jobs", self.name, mode=self.mode, depth=self.depth)


def cell_job(kind, dtype, lanes, mode, group, fault=None) -> Job:
    """The cell ``kind`` in ``mode``: k-induction with k = latency + 3 (the pipeline, the skid,
    the count and one spare)."""
    m = "" if kind == "rd" else f" m={CELL_MIDDLE}"
    label = mode_str(mode)
    tag = "".join(c if c.isalnum() else "_" for c in label)
    name = f"{kind}_m{CELL_MIDDLE}_{dtype}_l{lanes}_{tag}_{group}" + \
        (f"_{fault.replace('-', '_')}" if fault else "")
    return Job(f"{kind.upper()}{m} {dtype} x{lanes}", group, name,
               partial(CellHarness, kind, dtype, lanes, mode, group, middle=CELL_MIDDLE,
                       fault=fault),
               "prove", cell_latency(dtype) + 3, label)


def switch_jobs() -> list:
    """The switch input port (smallest buffers): bounded model checking to
    :data:`SWITCH_BMC_DEPTH` (its induction step fails, see docs/formal.md); the whole switch's
    phase activation (:data:`SWITCH_ACTIVATION`) by k-induction."""
    design = "switch InputPort " + "/".join(map(str, SWITCH_PORT["depths"]))
    a = SWITCH_ACTIVATION
    o = SWITCH_OUTPUT
    return [Job(design, "credits", "switch_inport_credits",
                partial(InputPortHarness, group="credits", **SWITCH_PORT), "bmc", SWITCH_BMC_DEPTH),
            Job(f"switch P={a['ports']} ideal int32 x2", "activation", "switch_activation",
                partial(ActivationHarness, **a), "prove", SWITCH_ACTIVATION_K),
            Job(f"switch OutputPort {o['rounds']} rounds " + "/".join(map(str, o["init"])),
                "output-credits", "switch_outport_credits", partial(OutputPortHarness, **o), "bmc",
                SWITCH_OUTPUT_DEPTH)]


#: the fabric checked (FRED_2(4), int32 x 1) and its flow sets: reduce, a permutation through
#: both middle copies, multicast, all-reduce, a reduce beside a multicast, the reverse permutation
FABRIC = (4, 2, 1, "int32")
FABRIC_FLOWS = (("0-3>0",), ("0>1", "1>0", "2>3", "3>2"), ("0>0-3",), ("0-3>0-3",),
                ("0,1>2", "2>0,1"), ("0>3", "1>2", "2>1", "3>0"))
#: induction depth of the fabric jobs (every property is inductive at 4 with the helper
#: invariants; a base case of 6 cycles takes Yices minutes on the multicast's stream rule)
FABRIC_K = 4


def fabric_jobs() -> list:
    """FRED_2(4), each flow set: the stream rule and conservation by induction, and routing by
    induction with one job per output (one tracked beat each keeps the solver's problem small)."""
    P, mid, lanes, dtype = FABRIC
    design = f"FRED_{mid}({P}) {dtype} x{lanes}"
    out = []
    for k, flows in enumerate(FABRIC_FLOWS):
        label = " ".join(flows)
        for group in ("stream", "conservation"):
            out.append(Job(design, group, f"fabric_p{P}_m{mid}_{k}_{group}",
                           partial(FabricHarness, P, mid, lanes, dtype, list(flows), group),
                           "prove", FABRIC_K, label))
        outputs = sorted({p for f in route(P, mid, [parse_flow(x) for x in flows]).flows
                          for p in f.outputs})
        for p in outputs:
            out.append(Job(design, "routing", f"fabric_p{P}_m{mid}_{k}_routing_o{p}",
                           partial(FabricHarness, P, mid, lanes, dtype, list(flows), "routing",
                                   track=(p,)), "prove", FABRIC_K, f"{label} (output {p})"))
    return out


def jobs(quick: bool = False) -> list:
    designs = CELL_DESIGNS[:1] if quick else CELL_DESIGNS
    out = []
    for dtype, lanes in designs:
        for kind, cls in CELL_CLASSES.items():
            for mode in cls.all_modes(CELL_MIDDLE):
                for group in GROUPS:
                    out.append(cell_job(kind, dtype, lanes, mode, group))
    return out if quick else out + fabric_jobs() + switch_jobs()


def run_job(job: Job, out: Path) -> Result:
    return job.run(out)


def table(results) -> str:
    """Rows property x design; a row sums up the design's modes."""
    rows = {}
    for job, res in results:
        rows.setdefault((job.group, job.design), []).append((job, res))
    lines = [f"{'property':<14} {'design':<22} result", "-" * 78]
    for (group, design), items in rows.items():
        bad = [(j, r) for j, r in items if r.status not in ("proved", "bounded")]
        depths = sorted({r.describe() for _, r in items if r.status in ("proved", "bounded")})
        if bad:
            text = "; ".join(f"{j.label or j.name}: {r.describe()}" for j, r in bad)
        else:
            text = ", ".join(depths)
        lines.append(f"{group:<14} {design:<22} {text} ({len(items) - len(bad)}/{len(items)} {'jobs' if len(items) > 1 else 'job'})")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fred.sim.formal.suite", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="build/formal", help="work folder (default build/formal)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel solver runs (default 2)")
    ap.add_argument("--quick", action="store_true", help="int32 x1 cells only")
    ap.add_argument("--only", choices=("cells", "fabric", "switch"),
                    help="only the jobs of these designs")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        print(f"formal: --jobs {args.jobs} must be >= 1", file=sys.stderr)
        return 2
    out = Path(args.out)
    todo = jobs(args.quick)
    if args.only:
        pick = {"cells": lambda j: not j.design.startswith(("FRED", "switch")),
                "fabric": lambda j: j.design.startswith("FRED"),
                "switch": lambda j: j.design.startswith("switch")}[args.only]
        todo = [j for j in todo if pick(j)]
    print(f"[formal] {len(todo)} jobs, {args.jobs} at a time, work in {out}", flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(zip(todo, pool.map(lambda j: run_job(j, out), todo)))
    text = table(results)
    detail = "\n".join(f"{j.name:<64} {r.describe()} [{r.seconds:.1f} s]" for j, r in results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "formal.txt").write_text(text + "\n\nper job:\n" + detail + "\n")
    print(text)
    print(f"[formal] table and per-job results in {out / 'formal.txt'}")
    return 0 if all(r.status in ("proved", "bounded") for _, r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
