"""``fred characterize -o FILE``: measure the RTL in simulation and write the timing file."""

from __future__ import annotations

HELP = "measure cells and switch chiplets (latency, beats/cycle, load sweep, area) into a timing file"


#: bounds (what a run costs: the default characterization takes ~6 minutes of CPU)
MAX_MIDDLE = 64
MAX_LANES = 64
MAX_CHIPLET_PORTS = 64
MAX_BEATS = 100_000
#: the switch measurement builds a whole switch: 8 ports take ~10 s of CPU to generate, 16 ports
#: ~100 s and 1.5 GB (growing faster than P^3)
MAX_SWITCH_PORTS = 16
#: --area-lanes: the hierarchical form's lanes (fred verilog --lanes); each design is further
#: bounded by the port bits of one module (fred.hdl.fabric.recursive.MAX_MODULE_PORT_BITS)
MAX_AREA_LANES = 1024


def add_arguments(p):
    from fred.hdl.dtypes import dtype_names
    from fred.sim.characterize import DEFAULTS

    from .options import ListOption, choice, integer
    from .sim import MAX_SEED
    from .verilog import _dtype

    p.add_argument("-o", "--output", metavar="FILE", default="build/fred-timing.json",
                   help="timing file to write (default build/fred-timing.json)")
    p.add_argument("--chiplets", action=ListOption, item=integer("--chiplets", 2, MAX_CHIPLET_PORTS), default=None,
                   metavar="P,P", help=f"switch chiplet port counts, 2..{MAX_CHIPLET_PORTS} each (default 12,10: "
                                       f"FRED_3(12) at L1, FRED_3(10) at L2)")
    p.add_argument("--middle", type=integer("--middle", 2, MAX_MIDDLE), default=DEFAULTS["middle"], metavar="M",
                   help=f"middle subnetworks, 2..{MAX_MIDDLE} (default {DEFAULTS['middle']})")
    p.add_argument("--lanes", type=integer("--lanes", 1, MAX_LANES), default=DEFAULTS["lanes"], metavar="L",
                   help=f"elements per beat, 1..{MAX_LANES} (default {DEFAULTS['lanes']})")
    p.add_argument("--dtype", type=choice("--dtype", _dtype), default=DEFAULTS["dtype"], metavar="T",
                   help="element type: " + ", ".join(dtype_names()) + f" (default {DEFAULTS['dtype']})")
    p.add_argument("--seed", type=integer("--seed", 0, MAX_SEED), default=None, metavar="N",
                   help=f"random seed, 0..{MAX_SEED} (default FRED_SEED or {DEFAULTS['seed']})")
    p.add_argument("--beats", type=integer("--beats", 2, MAX_BEATS), default=DEFAULTS["beats"], metavar="N",
                   help=f"beats per port per zero-back-pressure run, 2..{MAX_BEATS:,} (default {DEFAULTS['beats']})")
    p.add_argument("--sweep-beats", type=integer("--sweep-beats", 2, MAX_BEATS), default=DEFAULTS["sweep_beats"],
                   metavar="N", help=f"beats per port per load point, 2..{MAX_BEATS:,} (default "
                                     f"{DEFAULTS['sweep_beats']})")
    p.add_argument("--cell-beats", type=integer("--cell-beats", 0, MAX_BEATS), default=DEFAULTS["cell_beats"],
                   metavar="N", help=f"beats per cell mode, 0 = skip the cell benches, at most {MAX_BEATS:,} "
                                     f"(default {DEFAULTS['cell_beats']})")
    p.add_argument("--area", choices=("hier", "flatten", "none"), default="hier",
                   help="chiplet synthesis: hier (deduplicated modules, seconds; default), "
                        "flatten (whole chiplet flattened; very slow), none (no area at all)")
    p.add_argument("--area-lanes", type=integer("--area-lanes", 1, MAX_AREA_LANES), default=None, metavar="L",
                   help=f"also the area of the cells, chiplets and switch at L lanes (the real width: 256 "
                        f"fp16 lanes, a 512-byte flit), each distinct module synthesized once; 1..{MAX_AREA_LANES} "
                        f"and within what one generated module can hold (FRED_3(12): up to 338 fp16 lanes)")
    p.add_argument("--switch-ports", type=integer("--switch-ports", 4, MAX_SWITCH_PORTS), default=None, metavar="P",
                   help=f"ports of the switch measured for phase-switch/preemption figures, 4..{MAX_SWITCH_PORTS} "
                        f"(default: the largest --chiplets port count, 12; 4 = the small unit-bench switch, a "
                        f"much faster build)")
    p.add_argument("--switch-packet-flits", type=integer("--switch-packet-flits", 1, 255), default=None,
                   metavar="N", help=f"data flits per packet in the switch measurement, 1..255 (default "
                                     f"{DEFAULTS['switch_packet_flits']}: 4 KB in 512 B flits)")
    p.add_argument("--no-switch", action="store_true", help="skip the switch measurements")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")


def _check(args):
    """Rules across options, before any work: the chiplets as fabrics, the switch options."""
    from fred.hdl.fabric import check_fabric_params
    from fred.sim.characterize import DEFAULTS

    from .options import refuse_unused

    chiplets = tuple(args.chiplets or DEFAULTS["chiplets"])
    for P in chiplets:
        try:
            check_fabric_params(P, args.middle, args.lanes, args.dtype)
        except ValueError as exc:
            raise ValueError(f"--chiplets {P}: {exc}") from None
        if args.area_lanes:
            try:
                check_fabric_params(P, args.middle, args.area_lanes, args.dtype, "hier")
            except ValueError as exc:
                raise ValueError(f"--area-lanes {args.area_lanes} (chiplet of {P} ports): {exc}") from None
    if args.no_switch:
        refuse_unused("--switch-ports", args.switch_ports, "does not apply with --no-switch")
        refuse_unused("--switch-packet-flits", args.switch_packet_flits, "does not apply with --no-switch")
    elif args.switch_ports is None and max(chiplets) > MAX_SWITCH_PORTS:
        raise ValueError(f"the switch is measured at the largest chiplet, {max(chiplets)} ports, more than "
                         f"{MAX_SWITCH_PORTS}: give --switch-ports (4..{MAX_SWITCH_PORTS}) or --no-switch")
    return chiplets


def _progress_factory(enabled, made):
    """``characterize(progress=...)`` takes a factory of step/note objects: ours makes tqdm bars
    (appended to ``made``, for the caller to close)."""
    from fred import progress

    class Steps(progress.Progress):
        def step(self, what="", n=1):  # sim.characterize names each step as it starts
            self.start(what)

    def make(total):
        made.append(Steps(total, "fred characterize", enabled, unit="step"))
        return made[-1]
    return make


def run(args):
    from fred import progress
    from fred.contract.outputs import check_output_path
    from fred.contract.timing import write_timing
    from fred.sim.characterize import characterize

    from .sim import env_seed

    check_output_path("--output", args.output)
    chiplets = _check(args)
    seed = args.seed if args.seed is not None else env_seed()
    bars = []
    try:
        doc = characterize(lanes=args.lanes, dtype=args.dtype, middle=args.middle, chiplets=chiplets,
                           seed=seed, beats=args.beats, sweep_beats=args.sweep_beats,
                           cell_beats=args.cell_beats, switch_ports=args.switch_ports,
                           switch_packet_flits=args.switch_packet_flits,
                           area=args.area, switch=not args.no_switch, cells=True,
                           area_lanes=args.area_lanes,
                           progress=_progress_factory(progress.enabled(args.quiet), bars))
    finally:
        for bar in bars:
            bar.close()
    path = write_timing(doc, args.output)
    s = doc["summary"]
    print(f"wrote {path}: {', '.join(s['chiplets'])}; switch latency {s['switch_latency_cycles']} "
          f"cycles, {s['beats_per_cycle_per_port']:g} beats/cycle/port "
          f"(rev {doc['source']['revision'][:12]}{'+dirty' if doc['source']['dirty'] else ''}, "
          f"{doc['elapsed_s']:.0f} s)")
    return 0
