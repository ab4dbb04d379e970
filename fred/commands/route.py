"""``fred route``: compile flows (or a collective's phases) for FRED_m(P); ``--study`` runs the
routability study of 3D-parallel phases."""

from __future__ import annotations

import json

HELP = "compile flows for FRED_m(P) into microswitch modes (or --study: routability of 3D parallelism)"


def add_arguments(parser):
    parser.add_argument("--ports", "-p", type=int, metavar="P", help="fabric ports P (>= 2)")
    parser.add_argument("--middle", "-m", type=int, default=3, metavar="M",
                        help="middle subnetworks m (>= 2, default 3)")
    parser.add_argument("--flow", "-f", action="append", default=[], metavar="INS>OUTS",
                        help="a flow, e.g. '0,1,2>0,1,2' or '0-3>4' (repeat for concurrent flows)")
    parser.add_argument("--collective", "-c", metavar="NAME",
                        help="expand a collective into phases: all-reduce, reduce, multicast, broadcast, "
                             "reduce-scatter, all-gather, all-to-all, gather, scatter")
    parser.add_argument("--group", "-g", metavar="PORTS", help="ports of the collective, e.g. 0-7 or 0,2,4")
    parser.add_argument("--root", type=int, metavar="PORT", help="root port (reduce, multicast, gather, scatter)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--show-idle", action="store_true", help="also list idle cells")
    parser.add_argument("--study", action="store_true",
                        help="print the routability table of MP/DP/PP phases for P in 8, 12, 16, 20")
    parser.add_argument("--samples", type=int, default=None, metavar="N",
                        help="random placements per strategy in --study (default 20)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random placements (--study)")


def _study(args):
    from fred.hdl.study import DEFAULT_PORTS, DEFAULT_SAMPLES, format_study, study, study_json

    samples = DEFAULT_SAMPLES if args.samples is None else args.samples
    if samples < 0:
        raise ValueError(f"--samples {samples} must be >= 0")
    ports = DEFAULT_PORTS if args.ports is None else (args.ports,)
    rows = study(ports=ports, middles=(2, 3), samples=samples, seed=args.seed)
    if args.json:
        print(json.dumps(study_json(rows)))
    else:
        print(format_study(rows))
    return 0


def run(args):
    if args.study:
        if args.flow or args.collective:
            raise ValueError("--study takes no --flow or --collective")
        return _study(args)
    from fred.hdl.flows import Phase, expand
    from fred.hdl.routing import route_phases

    if args.ports is None:
        raise ValueError("--ports is required (e.g. --ports 8)")
    if args.flow and args.collective:
        raise ValueError("give either --flow ... or --collective NAME --group PORTS, not both")
    if args.collective:
        if args.group is None:
            raise ValueError(f"--collective {args.collective} needs --group PORTS (e.g. --group 0-7)")
        phases = expand(args.collective, args.group, args.root)
    elif args.flow:
        if args.group is not None or args.root is not None:
            raise ValueError("--group/--root only apply with --collective")
        phases = None
    else:
        raise ValueError("nothing to route: give --flow INS>OUTS (repeatable) or --collective NAME --group PORTS")
    if phases is None:
        from fred.hdl.routing import route

        results = [(Phase("flows", tuple(args.flow)), route(args.ports, args.middle, args.flow))]
    else:
        results = route_phases(args.ports, args.middle, phases)
    if args.json:
        doc = {"ports": args.ports, "middle": args.middle,
               "phases": [{"label": ph.label, **res.to_dict()} for ph, res in results]}
        print(json.dumps(doc))
        return 0
    for n, (ph, res) in enumerate(results):
        if len(results) > 1 or args.collective:
            print(f"== phase {n}: {ph.label}")
        print(res.format(show_idle=args.show_idle))
        if n + 1 < len(results):
            print()
    return 0
