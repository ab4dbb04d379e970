"""``fred collective``: simulate one collective (or one per parallel group) on a wafer fabric."""

from __future__ import annotations

import json
import re

HELP = "simulate a collective (all-reduce, all-gather, io-broadcast, ...) on a wafer fabric or a YAML network"

_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def parse_size(text) -> float:
    """"1GiB" -> 1073741824.0; "512MB" -> 5.12e8; plain numbers are bytes. Must be > 0."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        v = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError(f"bad size {text!r}; expected e.g. 1GiB, 256MiB, 1e9, 64KB")
        v = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not v > 0:
        raise ValueError(f"size must be > 0, got {text!r}")
    return v


def fmt_size(n: float) -> str:
    for unit, f in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= f * 0.9995:
            v = n / f
            return f"{v:.0f} {unit}" if v >= 100 else f"{v:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_time(t: float) -> str:
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    if t >= 1e-6:
        return f"{t * 1e6:.3f} us"
    return f"{t * 1e9:.1f} ns"


def fmt_bw(b: float) -> str:
    if b >= 1e12:
        return f"{b / 1e12:.2f} TB/s"
    return f"{b / 1e9:.1f} GB/s"


def _fmt_group(g) -> str:
    g = list(g)
    if len(g) > 1 and g == list(range(g[0], g[-1] + 1)):
        return f"{g[0]}-{g[-1]}"
    return ",".join(map(str, g)) if len(g) <= 6 else f"{g[0]},{g[1]},...,{g[-1]}"


def add_arguments(p):
    p.add_argument("--fabric", default="mesh",
                   help="mesh, fred-a, fred-b, fred-c, fred-d, a comma list, or 'all' (default mesh)")
    p.add_argument("--network", metavar="FILE.yml", help="ASTRA-sim analytical network YAML (instead of --fabric)")
    p.add_argument("--op", default="all-reduce",
                   help="all-reduce, reduce-scatter, all-gather, all-to-all, reduce, broadcast, multicast, p2p, "
                        "io-broadcast, io-reduce (default all-reduce)")
    p.add_argument("--group", action="append", metavar="NPUS",
                   help="NPU ids, e.g. 0-19 or 0,4,8 (repeat for concurrent groups; default: all NPUs)")
    p.add_argument("--strategy", metavar="MP(a)-DP(b)-PP(c)", help="run every group of --phase at once (placement rule)")
    p.add_argument("--phase", choices=("mp", "dp", "pp"), help="parallel dimension for --strategy")
    p.add_argument("--size", default="1GiB", help="bytes per NPU, e.g. 1GiB, 64MiB, 1e9 (default 1GiB)")
    p.add_argument("--algorithm", default="auto", help="auto (fabric default), ring, ring2, hier2d, hier-ring, "
                                                         "hierarchical, in-switch, direct, shift")
    p.add_argument("--chunks", type=int, default=None, help="pieces per stream (default: the algorithm's)")
    p.add_argument("--root", type=int, default=None, help="root NPU for reduce/broadcast/multicast (default first)")
    p.add_argument("--gb-bytes", type=float, default=None,
                   help="bytes per GB for --network bandwidths (default 1e9; 1073741824 = upstream ASTRA-sim)")
    p.add_argument("--timing", metavar="FILE",
                   help="switch timing from a `fred characterize` timing file ('default': the embedded one)")
    p.add_argument("--json", action="store_true", help="print JSON")


def _topologies(args):
    from fred.model.network_yaml import load_topology
    from fred.model.params import FABRICS, canonical_fabric
    from fred.model.topology import build_fabric

    if args.network:
        return [load_topology(args.network, args.gb_bytes)]
    names = str(args.fabric).strip()
    names = list(FABRICS) if names.lower() == "all" else [x for x in names.split(",") if x.strip()]
    if not names:
        raise ValueError("empty --fabric")
    return [build_fabric(canonical_fabric(n)) for n in names]


def _groups(args, topo):
    from fred.model.parallel_groups import format_strategy, groups, parse_group, parse_strategy

    if args.strategy:
        if args.group:
            raise ValueError("give either --group or --strategy, not both")
        if not args.phase:
            raise ValueError("--strategy needs --phase mp, dp or pp")
        abc = parse_strategy(args.strategy, topo.npus)
        return groups(abc, args.phase), f"{format_strategy(abc)} {args.phase.upper()}"
    if args.phase:
        raise ValueError("--phase needs --strategy")
    if not args.group:
        return [list(range(topo.npus))], None
    return [parse_group(g, topo.npus) for g in args.group], None


def run(args):
    from fred.model.collective_algorithms import canonical_algorithm, canonical_op
    from fred.model.collectives import collective_time

    op = canonical_op(args.op)
    nbytes = parse_size(args.size)
    alg = canonical_algorithm(args.algorithm)
    if args.chunks is not None and args.chunks < 1:
        raise ValueError(f"--chunks must be >= 1, got {args.chunks}")
    timing = None
    if args.timing:
        from fred.contract.timing import load_timing
        from fred.model.timing import switch_timing

        timing = switch_timing(load_timing(None if args.timing == "default" else args.timing))
    rows = []
    for topo in _topologies(args):
        groups, strat = _groups(args, topo)
        r = collective_time(topo, op, groups, nbytes, algorithm=alg, chunks=args.chunks, root=args.root,
                            timing=timing)
        d = r.as_dict()
        d["fabric"] = topo.fabric or topo.name
        d["strategy"] = strat
        d["group_text"] = strat or " + ".join(_fmt_group(g) for g in groups)
        rows.append(d)
    if args.json:
        print(json.dumps(rows if len(rows) > 1 else rows[0], indent=2))
        return 0
    head = ("fabric", "op", "groups", "size", "algorithm", "time", "sent/NPU", "alg BW", "NPU BW")
    lines = []
    for d in rows:
        ng = len(d["groups"])
        gtxt = d["group_text"] + (f" ({ng} groups)" if ng > 1 else "")
        alg_txt = d["algorithm"] if isinstance(d["algorithm"], str) else ",".join(sorted(set(d["algorithm"])))
        lines.append((d["topology"], d["op"], gtxt, fmt_size(d["nbytes"]), alg_txt, fmt_time(d["time_s"]),
                      fmt_size(d["bytes_sent_per_npu"]), fmt_bw(d["algorithm_bandwidth_Bps"]),
                      fmt_bw(d["npu_effective_bandwidth_Bps"])))
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    for l in lines:
        print("  ".join(c.ljust(w) for c, w in zip(l, widths)).rstrip())
    srcs = sorted({d["timing_source"] for d in rows})
    print(f"switch timing: {'; '.join(srcs)}")
    if len(rows) == 1:
        bl = rows[0]["busiest_links"][0]
        print(f"busiest link: {bl['link']} ({100 * bl['utilization']:.0f}% of {fmt_time(rows[0]['time_s'])}); "
              f"{rows[0]['flows']} flows, {rows[0]['events']} events")
    return 0
