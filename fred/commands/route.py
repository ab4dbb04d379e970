"""``fred route``: compile flows (or a collective's phases) for FRED_m(P); ``--study`` runs the
routability study of 3D-parallel phases."""

from __future__ import annotations

HELP = "compile flows for FRED_m(P) into microswitch modes (or --study: routability of 3D parallelism)"

#: ports of a fabric the compiler takes (fred.hdl.netlist.structure.MAX_PORTS; routing stays in seconds)
MAX_PORTS = 1024
#: middle subnetworks (more than a few are never needed: m = 3 routes every 3D-parallel phase)
MAX_MIDDLE = 64
#: --study: ports (the strategies of P x random placements, each routed for m = 2 and 3;
#: P = 32 takes ~3 s of CPU) and random placements per strategy (~35 ms each at P = 20)
MAX_STUDY_PORTS = 32
MAX_SAMPLES = 1000
#: seeds are 32-bit
MAX_SEED = 2**32 - 1
#: the collectives that take a root port
ROOTED = ("reduce", "multicast", "broadcast", "gather", "scatter")


def _collective(text):
    from fred.hdl.netlist import COLLECTIVES

    key = str(text).strip().lower().replace("_", "-")
    if key not in COLLECTIVES:
        raise ValueError(f"--collective {text!r} is unknown; known: {', '.join(COLLECTIVES)}")
    return key


def add_arguments(parser):
    from .options import choice, integer

    parser.add_argument("--ports", "-p", type=integer("--ports", 2, MAX_PORTS), metavar="P",
                        help=f"fabric ports P (2..{MAX_PORTS}; with --study 2..{MAX_STUDY_PORTS}, "
                             f"default 8, 12, 16 and 20)")
    parser.add_argument("--middle", "-m", type=integer("--middle", 2, MAX_MIDDLE), default=None, metavar="M",
                        help=f"middle subnetworks m (2..{MAX_MIDDLE}, default 3; the study uses 2 and 3)")
    parser.add_argument("--flow", action="append", default=[], metavar="INS>OUTS",
                        help="a flow, e.g. '0,1,2>0,1,2' or '0-3>4' (repeat for concurrent flows)")
    parser.add_argument("--collective", "-c", type=choice("--collective", _collective), metavar="NAME",
                        help="expand a collective into phases: all-reduce, reduce, multicast, broadcast, "
                             "reduce-scatter, all-gather, all-to-all, gather, scatter")
    parser.add_argument("--group", "-g", metavar="PORTS",
                        help="ports of the collective (at least 2), e.g. 0-7 or 0,2,4")
    parser.add_argument("--root", type=integer("--root", 0, MAX_PORTS - 1), metavar="PORT",
                        help="root port (reduce, multicast, broadcast, gather, scatter)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--show-idle", action="store_true", help="also list idle cells (text output)")
    parser.add_argument("--study", action="store_true",
                        help="print the routability table of MP/DP/PP phases for P in 8, 12, 16, 20")
    parser.add_argument("--samples", type=integer("--samples", 0, MAX_SAMPLES), default=None, metavar="N",
                        help=f"random placements per strategy in --study (0..{MAX_SAMPLES}, default 20)")
    parser.add_argument("--seed", type=integer("--seed", 0, MAX_SEED), default=None, metavar="N",
                        help="seed of the random placements in --study (default 1)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar (--study)")


def _check(args):
    """Rules across options, before any work."""
    from .options import refuse_unused

    if args.study:
        for opt, val in (("--flow", args.flow), ("--collective", args.collective), ("--group", args.group),
                         ("--root", args.root), ("--middle", args.middle), ("--show-idle", args.show_idle)):
            refuse_unused(opt, val, "does not apply to --study (it routes every strategy for m = 2 and 3)")
        if args.ports is not None and args.ports > MAX_STUDY_PORTS:
            raise ValueError(f"--ports {args.ports} is too large for --study: must be <= {MAX_STUDY_PORTS}")
        return
    refuse_unused("--samples", args.samples, "only applies with --study")
    refuse_unused("--seed", args.seed, "only applies with --study")
    if args.ports is None:
        raise ValueError("--ports is required (e.g. --ports 8)")
    if args.flow and args.collective:
        raise ValueError("give either --flow ... or --collective NAME --group PORTS, not both")
    if args.json:
        refuse_unused("--show-idle", args.show_idle, "only applies to the text output, not --json")
    if args.collective:
        if args.collective not in ROOTED:
            refuse_unused("--root", args.root, f"does not apply to {args.collective} (only to {', '.join(ROOTED)})")
        if args.group is None:
            raise ValueError(f"--collective {args.collective} needs --group PORTS (e.g. --group 0-7)")
    elif args.flow:
        refuse_unused("--group", args.group, "only applies with --collective")
        refuse_unused("--root", args.root, "only applies with --collective")
    else:
        raise ValueError("nothing to route: give --flow INS>OUTS (repeatable) or --collective NAME --group PORTS")


def _study(args):
    from fred import progress
    from fred.hdl.routing import DEFAULT_PORTS, DEFAULT_SAMPLES, format_study, study, study_json

    samples = DEFAULT_SAMPLES if args.samples is None else args.samples
    seed = 1 if args.seed is None else args.seed
    ports = DEFAULT_PORTS if args.ports is None else (args.ports,)
    rows = []
    with progress.Progress(len(ports), "fred route --study", progress.enabled(args.quiet), unit="P") as bar:
        for P in ports:  # one study per port count (each is seeded by P: the same rows as all at once)
            bar.start(f"P = {P}")
            rows += study(ports=(P,), middles=(2, 3), samples=samples, seed=seed)
    if args.json:
        from .jsonout import document, dumps

        print(dumps(document("route-study", study_json(rows), ports=list(ports), middles=[2, 3],
                             samples=samples, seed=seed)))
    else:
        print(format_study(rows))
    return 0


def run(args):
    _check(args)
    if args.study:
        return _study(args)
    from fred.hdl.netlist import Phase, expand, parse_ports, validate_flows
    from fred.hdl.routing import route, route_phases

    middle = 3 if args.middle is None else args.middle
    if args.collective:
        if args.root is not None and args.root >= args.ports:
            raise ValueError(f"--root {args.root}: output port {args.root} is out of range for {args.ports} ports "
                             f"(0..{args.ports - 1})")
        group = sorted(parse_ports(args.group, "--group"))
        if len(group) < 2:
            raise ValueError(f"--group {args.group!r} has one port: a collective needs at least 2 "
                             f"(use --flow for a single transfer)")
        phases = expand(args.collective, group, args.root)
        results = route_phases(args.ports, middle, phases)
    else:
        try:
            flows = validate_flows(args.flow, args.ports)
        except ValueError as exc:
            raise ValueError(f"--flow: {exc}") from None
        results = [(Phase("flows", flows), route(args.ports, middle, flows))]
    if args.json:
        from fred.hdl.fabric import annotate

        from .jsonout import document, dumps

        print(dumps(document("route", [annotate({"label": ph.label, **res.to_dict()}, res)
                                       for ph, res in results], ports=args.ports, middle=middle)))
        return 0
    for n, (ph, res) in enumerate(results):
        if len(results) > 1 or args.collective:
            print(f"== phase {n}: {ph.label}")
        print(res.format(show_idle=args.show_idle))
        if n + 1 < len(results):
            print()
    return 0
