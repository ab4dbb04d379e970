"""``fred characterize -o FILE``: measure the RTL in simulation and write the timing file."""

from __future__ import annotations

HELP = "measure cells and switch chiplets (latency, beats/cycle, load sweep, area) into a timing file"


def _ports_list(text):
    try:
        ports = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--chiplets {text!r} must be comma-separated port counts, e.g. 12,10") from None
    if not ports:
        raise ValueError(f"--chiplets {text!r} names no chiplet")
    return ports


def add_arguments(p):
    from fred.sim.characterize import DEFAULTS

    p.add_argument("-o", "--output", metavar="FILE", default="build/fred-timing.json",
                   help="timing file to write (default build/fred-timing.json)")
    p.add_argument("--chiplets", default=",".join(str(x) for x in DEFAULTS["chiplets"]),
                   metavar="P,P", help="switch chiplet port counts (default 12,10: FRED_3(12) at "
                                       "L1, FRED_3(10) at L2)")
    p.add_argument("--middle", type=int, default=DEFAULTS["middle"], metavar="M",
                   help=f"middle subnetworks (default {DEFAULTS['middle']})")
    p.add_argument("--lanes", type=int, default=DEFAULTS["lanes"], metavar="L",
                   help=f"elements per beat (default {DEFAULTS['lanes']})")
    p.add_argument("--dtype", default=DEFAULTS["dtype"], metavar="T",
                   help=f"element type (default {DEFAULTS['dtype']})")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help=f"random seed (default FRED_SEED or {DEFAULTS['seed']})")
    p.add_argument("--beats", type=int, default=DEFAULTS["beats"], metavar="N",
                   help=f"beats per port per zero-back-pressure run (default {DEFAULTS['beats']})")
    p.add_argument("--sweep-beats", type=int, default=DEFAULTS["sweep_beats"], metavar="N",
                   help=f"beats per port per load point (default {DEFAULTS['sweep_beats']})")
    p.add_argument("--cell-beats", type=int, default=DEFAULTS["cell_beats"], metavar="N",
                   help=f"beats per cell mode, 0 = skip the cell benches (default {DEFAULTS['cell_beats']})")
    p.add_argument("--area", choices=("hier", "flatten", "none"), default="hier",
                   help="chiplet synthesis: hier (deduplicated modules, seconds; default), "
                        "flatten (whole chiplet flattened; very slow), none (no area at all)")
    p.add_argument("--switch-ports", type=int, default=DEFAULTS["switch_ports"], metavar="P",
                   help="ports of the switch measured for phase-switch/preemption figures "
                        "(default: the largest --chiplets port count, 12; 4 = the small unit-bench "
                        "switch, a much faster build)")
    p.add_argument("--switch-packet-flits", type=int, default=DEFAULTS["switch_packet_flits"],
                   metavar="N", help=f"data flits per packet in the switch measurement (default "
                                     f"{DEFAULTS['switch_packet_flits']}: 4 KB in 512 B flits)")
    p.add_argument("--no-switch", action="store_true", help="skip the switch measurements")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def run(args):
    import os

    from fred import FredError

    from fred.contract.outputs import check_output_path
    from fred.contract.timing import write_timing
    from fred.sim.characterize import characterize

    check_output_path("--output", args.output)
    chiplets = _ports_list(args.chiplets)
    for name in ("beats", "sweep_beats"):
        if getattr(args, name) < 2:
            raise FredError(f"--{name.replace('_', '-')} {getattr(args, name)} must be >= 2")
    if args.cell_beats < 0:
        raise FredError(f"--cell-beats {args.cell_beats} must be >= 0")
    seed = args.seed
    if seed is None:
        seed = int(os.environ["FRED_SEED"], 0) if os.environ.get("FRED_SEED") else None
    doc = characterize(lanes=args.lanes, dtype=args.dtype, middle=args.middle, chiplets=chiplets,
                       seed=seed, beats=args.beats, sweep_beats=args.sweep_beats,
                       cell_beats=args.cell_beats, switch_ports=args.switch_ports,
                       switch_packet_flits=args.switch_packet_flits,
                       area=args.area, switch=not args.no_switch,
                       cells=True, progress=not args.quiet)
    path = write_timing(doc, args.output)
    s = doc["summary"]
    print(f"wrote {path}: {', '.join(s['chiplets'])}; switch latency {s['switch_latency_cycles']} "
          f"cycles, {s['beats_per_cycle_per_port']:g} beats/cycle/port "
          f"(rev {doc['source']['revision'][:12]}{'+dirty' if doc['source']['dirty'] else ''}, "
          f"{doc['elapsed_s']:.0f} s)")
    return 0
