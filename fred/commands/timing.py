"""``fred timing``: gate levels per pipeline stage and FPGA fmax into a timing file's ``clock`` section."""

from __future__ import annotations

HELP = "measure logic depth per stage (yosys) and ECP5 place-and-route fmax into a timing file"

#: bounds from what a run costs: a 4-lane cell maps in ~5 s and places in ~25 s; FRED_3(12)
#: at 4 lanes maps in ~40 s; place and route grows with lanes x ports
MAX_LANES = 16
MAX_PORTS = 16
MAX_FPGA_FABRIC_LANES = 4
MAX_SEED = 2**31 - 1


def add_arguments(p):
    from fred.hdl.dtypes import dtype_names
    from fred.sim.characterize import CLOCK_DEFAULTS as D

    from .options import ListOption, choice, integer, name
    from .verilog import _dtype

    p.add_argument("--timing", type=name("--timing"), metavar="FILE", default=None,
                   help="timing file to add the clock section to ('default' or no option: the embedded one)")
    p.add_argument("-o", "--output", metavar="FILE", default="build/fred-timing.json",
                   help="timing file to write (default build/fred-timing.json)")
    p.add_argument("--lanes", type=integer("--lanes", 1, MAX_LANES), default=D["lanes"], metavar="L",
                   help=f"elements per beat of the cells and of the chiplet's gate levels, 1..{MAX_LANES} "
                        f"(default {D['lanes']})")
    p.add_argument("--dtypes", action=ListOption, item=choice("--dtypes", _dtype), default=None,
                   metavar="T,T", help="cell element types: " + ", ".join(dtype_names())
                                       + " (default all four)")
    p.add_argument("--fabric-ports", type=integer("--fabric-ports", 0, MAX_PORTS), default=D["fabric_ports"],
                   metavar="P", help=f"ports of the FRED_3(P) chiplet measured, 2..{MAX_PORTS}; 0 = no "
                                     f"fabric (default {D['fabric_ports']})")
    p.add_argument("--fpga-fabric-lanes", type=integer("--fpga-fabric-lanes", 1, MAX_FPGA_FABRIC_LANES),
                   default=None, metavar="L",
                   help=f"lanes of the chiplet placed and routed, 1..{MAX_FPGA_FABRIC_LANES} (default "
                        f"{D['fpga_fabric_lanes']}: each lane is the same pipeline)")
    p.add_argument("--no-fpga", action="store_true", help="gate levels only (no place and route)")
    p.add_argument("--seed", type=integer("--seed", 0, MAX_SEED), default=D["seed"], metavar="N",
                   help=f"nextpnr placement seed, 0..{MAX_SEED} (default {D['seed']})")
    p.add_argument("--json", action="store_true", help="print the clock section as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")


def _check(args):
    from .options import refuse_unused

    if args.fabric_ports == 1:
        raise ValueError("--fabric-ports 1: a fabric has at least 2 ports (0 = no fabric)")
    if args.no_fpga:
        refuse_unused("--fpga-fabric-lanes", args.fpga_fabric_lanes, "does not apply with --no-fpga")
    if not args.fabric_ports:
        refuse_unused("--fpga-fabric-lanes", args.fpga_fabric_lanes, "does not apply with --fabric-ports 0")
    if args.fabric_ports:
        from fred.hdl.fabric import check_fabric_params

        check_fabric_params(args.fabric_ports, 3, args.lanes, "fp16")


def format_clock(section: dict) -> str:
    """The clock section as a table: per cell and dtype, gate levels (stage) and fmax."""
    gl, fp = section["gate_levels"], section.get("fpga") or {}
    lines = [f"{'design':22s} {'levels':>6s}  {'limiting stage':34s} {'ECP5 MHz':>9s}"]
    for kind, by in gl["cells"].items():
        for t, rec in by.items():
            f = (fp.get("cells", {}).get(kind, {}).get(t) or {}).get("fmax_mhz")
            lines.append(f"{'cell ' + kind + ' ' + t:22s} {rec['levels']:6d}  {rec['limiting_stage'][:34]:34s} "
                         f"{'' if f is None else f'{f:9.1f}'}")
    for name, rec in gl["fabrics"].items():
        lines.append(f"{name + ' x' + str(rec['lanes']):22s} {rec['levels']:6d}  {rec['limiting_stage'][:34]:34s}")
    for name, rec in fp.get("fabrics", {}).items():
        lines.append(f"{name + ' x' + str(rec['lanes']):22s} {'':6s}  {'(place and route)':34s} "
                     f"{rec['fmax_mhz']:9.1f}")
    lim = section["limiting"]
    lines.append(f"deepest: {lim['gate_levels']} gate levels in {lim['gate_levels_design']} "
                 f"({lim['gate_levels_stage']})")
    if "fpga_fmax_mhz" in lim:
        lines.append(f"lowest ECP5 fmax: {lim['fpga_fmax_mhz']:.1f} MHz ({lim['fpga_fmax_design']}, "
                     f"{fp['device']}, out of context)")
    return "\n".join(lines)


def run(args):
    from fred import progress
    from fred.contract.outputs import check_output_path
    from fred.contract.timing import load_timing, write_timing
    from fred.sim.characterize import CLOCK_DEFAULTS, measure_clock

    check_output_path("--output", args.output)
    _check(args)
    base = load_timing(None if args.timing in (None, "default") else args.timing)
    dtypes = tuple(args.dtypes or CLOCK_DEFAULTS["dtypes"])
    total = len(dtypes) * 3 * (1 if args.no_fpga else 2) + (0 if not args.fabric_ports else
                                                           (1 if args.no_fpga else 2))
    bar = progress.Progress(total, "fred timing", progress.enabled(args.quiet), unit="run")
    try:
        section = measure_clock(lanes=args.lanes, dtypes=dtypes, fabric_ports=args.fabric_ports,
                                fabric_lanes=args.lanes, fpga=not args.no_fpga,
                                fpga_fabric_lanes=args.fpga_fabric_lanes, seed=args.seed,
                                step=bar.start)
    finally:
        bar.close()
    doc = dict(base.data, clock=section)
    path = write_timing(doc, args.output)
    if args.json:
        from .jsonout import document, dumps

        print(dumps(document("timing-clock", [section], output=str(path))))
    else:
        print(format_clock(section))
        print(f"wrote {path} (clock section added to {base.path})")
    return 0
