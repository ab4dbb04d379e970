"""``fred collective``: simulate one collective (or one per parallel group) on a wafer fabric."""

from __future__ import annotations

HELP = "simulate a collective (all-reduce, all-gather, io-broadcast, ...) on a wafer fabric or a YAML network"

from .options import parse_size  # noqa: E402  (re-exported: the size syntax of --size)

__all__ = ["HELP", "add_arguments", "run", "parse_size", "fmt_size", "fmt_time", "fmt_bw"]

#: pieces per stream (each piece is a flow per step: the simulator caps the flows it creates);
#: a copy of fred.model.collectives.api.MAX_CHUNKS, kept here so the CLI starts without the model
#: (tests/cli/test_model_network_cli.py checks they agree)
MAX_CHUNKS = 1024
#: the ops that take a root NPU
ROOT_OPS = ("reduce", "broadcast", "multicast")
#: the ops meaningful for a single NPU (it exchanges data with the I/O controllers)
SINGLE_NPU_OPS = ("io-broadcast", "io-reduce")


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


def _fabric(text):
    from fred.model.system import canonical_fabric

    return "all" if text.strip().lower() == "all" else canonical_fabric(text)


def _op(text):
    from fred.model.collectives import canonical_op

    return canonical_op(text)


def _algorithm(text):
    from fred.model.collectives import canonical_algorithm

    return canonical_algorithm(text)


def a2a_method(text):
    """``--all-to-all-method``: precompiled or online (the timing file's all_to_all methods)."""
    from fred.contract.checks import check_choice
    from fred.model.system import A2A_METHODS

    return check_choice("--all-to-all-method", text, A2A_METHODS)


#: help of --all-to-all-method (estimate, sweep, scan and collective share it)
A2A_HELP = ("how the FRED switch routes an all-to-all, whose measured throughput (the timing file's "
            "all_to_all section) the model moves its bytes at: precompiled (permutation phases run back to "
            "back from the phase table) or online (routed round by round); default: the file's "
            "default_method; refused when the timing file has no all_to_all section (all-to-all then at "
            "line rate)")


def _refuse_without_fred(method, fabrics) -> None:
    """``--all-to-all-method`` refused when no fabric among ``fabrics`` is a FRED fabric."""
    from .options import refuse_unused

    if not any(str(f).startswith("fred-") for f in fabrics):
        refuse_unused("--all-to-all-method", method, "only applies with a FRED fabric (fred-a..fred-d), not "
                      + ", ".join(map(str, fabrics)))


def check_a2a_applies(method, workloads, fabrics, strategy=None) -> None:
    """``--all-to-all-method`` given to a training or inference command is refused, naming why,
    when nothing it runs has an all-to-all on a FRED switch: no FRED fabric among ``fabrics``,
    no mixture-of-experts model among ``workloads``, or a ``strategy`` without expert parallelism
    (``EP(1)``: the experts stay with their NPU, no dispatch or combine crosses the wafer)."""
    from .options import refuse_unused

    if method is None:
        return
    _refuse_without_fred(method, fabrics)
    from fred.model.workload import load_workload

    if not any(load_workload(w).is_moe for w in workloads):
        names = ", ".join(str(getattr(w, "name", w)) for w in workloads)
        refuse_unused("--all-to-all-method", method, f"only applies to a mixture-of-experts model (its expert "
                      f"all-to-alls), not {names}")
    if strategy is not None:
        from fred.model.collectives import expert_parallel

        if expert_parallel(strategy) == 1:
            refuse_unused("--all-to-all-method", method, f"only applies with expert parallelism EP(e > 1) in "
                          f"--strategy, not {strategy}")


def check_a2a_applies_to_traces(method, paths, fabrics, header=None) -> None:
    """``--all-to-all-method`` with ``fred estimate --trace``: refused, naming why, when no FRED
    fabric is among ``fabrics`` or no layer of the traces at ``paths`` has an ALLTOALL (a trace
    that cannot be read is left to the estimate, which names its problem)."""
    from fred.model.inputs import load_trace

    from .options import refuse_unused

    if method is None:
        return
    _refuse_without_fred(method, fabrics)
    from fred import FredError

    try:
        traces = [load_trace(p, header=header) for p in paths]
    except (OSError, ValueError, FredError):
        return
    if not any(layer.comm(ph)[0] == "ALLTOALL" for t in traces for layer in t.layers for ph in ("fwd", "ig", "wg")):
        refuse_unused("--all-to-all-method", method, "only applies to a trace with an ALLTOALL layer, not "
                      + ", ".join(map(str, paths)))


def apply_a2a_method(timing, method):
    """``timing`` (None: the embedded default's) with the all-to-all figures of ``method``
    (None: unchanged); ValueError naming the option when the timing has no such figures."""
    if method is None:
        return timing
    if timing is None:
        from fred.model.system import default_params

        timing = default_params().switch
    if timing.all_to_all is None:
        raise ValueError(f"--all-to-all-method {method}: the switch timing has no all_to_all section (a timing "
                         f"file of schema 5 from `fred characterize` has; give it with --timing): "
                         f"{timing.source}")
    try:
        return timing.with_all_to_all_method(method)
    except ValueError as exc:
        raise ValueError(f"--all-to-all-method {method}: {exc}") from None


def add_arguments(p):
    from .options import MAX_BYTES, ListOption, choice, integer, name, number, size

    p.add_argument("--fabric", "-f", action=ListOption, item=choice("--fabric", _fabric), metavar="NAMES",
                   help="mesh, fred-a, fred-b, fred-c, fred-d, a comma list, or all (default mesh)")
    p.add_argument("--network", type=name("--network"), metavar="FILE.yml",
                   help="ASTRA-sim analytical network YAML (instead of --fabric)")
    p.add_argument("--in-network-dims", action=ListOption, item=integer("--in-network-dims", 0, 63),
                   metavar="DIMS",
                   help="dimensions of --network (0-based, a comma list) whose Switch reduces and multicasts "
                        "in-network, as the YAML key in_network (then --algorithm in-switch runs)")
    p.add_argument("--chakra", type=name("--chakra"), metavar="DIR",
                   help="run a Chakra execution trace (ASTRA-sim 2.x: one <name>.<npu>.et file per NPU in DIR) on "
                        "--network and print each collective's time; the trace gives op and size")
    p.add_argument("--op", type=choice("--op", _op), default=None,
                   help="all-reduce, reduce-scatter, all-gather, all-to-all, reduce, broadcast, multicast, p2p, "
                        "io-broadcast, io-reduce (default all-reduce)")
    p.add_argument("--group", "-g", action="append", type=name("--group"), metavar="NPUS",
                   help="NPU ids, e.g. 0-19 or 0,4,8, at least 2 (repeat for concurrent groups; default: all NPUs)")
    p.add_argument("--strategy", "-s", type=name("--strategy"), metavar="MP(a)-DP(b)-PP(c)",
                   help="run every group of --phase at once (placement rule)")
    p.add_argument("--phase", choices=("mp", "dp", "pp"), help="parallel dimension for --strategy")
    p.add_argument("--size", type=size("--size"), default=None,
                   help=f"bytes per NPU, a whole number: 1GiB, 64MiB, 1e9, 4096 (1 B to 2^50 B = "
                        f"{MAX_BYTES / 2**50:.0f} PiB; default 1GiB)")
    p.add_argument("--size-is", choices=("input", "output"), default=None,
                   help="what --size counts for all-gather and reduce-scatter: each NPU's input or output "
                        "buffer (default: input with --network, as ASTRA-sim; output with --fabric); refused "
                        "for the other ops, whose input and output are the same size")
    p.add_argument("--algorithm", type=choice("--algorithm", _algorithm), default="auto",
                   help="auto (fabric default; on a whole YAML network the best of hierarchical, multi-ring, in-switch), "
                        "ring, ring2, hier2d, hier-ring, hier-direct, hierarchical, multi-ring, in-switch, "
                        "direct, shift")
    p.add_argument("--chunks", type=integer("--chunks", 1, MAX_CHUNKS), default=None, metavar="N",
                   help=f"pieces per stream, 1..{MAX_CHUNKS} (default: the algorithm's)")
    p.add_argument("--root", type=integer("--root", 0), default=None, metavar="NPU",
                   help="root NPU of reduce, broadcast or multicast (default: the group's first)")
    p.add_argument("--gb-bytes", type=number("--gb-bytes", 1, 2**40), default=None, metavar="B",
                   help="bytes per GB for --network bandwidths (default 1e9; 1073741824 = upstream ASTRA-sim)")
    p.add_argument("--timing", type=name("--timing"), metavar="FILE",
                   help="switch timing from a `fred characterize` timing file ('default': the embedded one)")
    p.add_argument("--all-to-all-method", "--a2a-method", type=choice("--all-to-all-method", a2a_method),
                   dest="a2a_method", metavar="METHOD", default=None, help=A2A_HELP + " (only --op all-to-all)")
    from .estimate import MAX_BER, bit_error_help

    p.add_argument("--bit-error-rate", type=number("--bit-error-rate", 0, MAX_BER), metavar="BER",
                   help=bit_error_help("every wafer link of --fabric"))
    p.add_argument("--json", action="store_true", help="print JSON (README: JSON output)")


def _check(args):
    """Rules across options, before any work."""
    from .options import refuse_unused

    if args.chakra:
        from . import collective_chakra

        collective_chakra.check(args)
    args.op = args.op or "all-reduce"
    args.size = args.size or 2**30

    if args.network:
        refuse_unused("--fabric", args.fabric, "does not apply with --network (the YAML file is the network)")
        if args.op in SINGLE_NPU_OPS:
            raise ValueError(f"--op {args.op} needs a wafer fabric's I/O controllers (--fabric); an ASTRA-sim "
                             f"network (--network) has none")
        refuse_unused("--bit-error-rate", args.bit_error_rate, "only applies with --fabric (the wafer's links)")
    else:
        refuse_unused("--gb-bytes", args.gb_bytes, "only applies with --network")
        refuse_unused("--in-network-dims", args.in_network_dims, "only applies with --network")
        if args.fabric and "all" in args.fabric and len(args.fabric) > 1:
            raise ValueError(f"--fabric {','.join(args.fabric)}: 'all' already names every fabric")
    if args.op != "all-to-all" and not args.chakra:
        refuse_unused("--all-to-all-method", args.a2a_method, f"only applies to --op all-to-all, not {args.op}")
    if args.network:
        refuse_unused("--all-to-all-method", args.a2a_method, "only applies with --fabric (the FRED switches)")
    if args.op not in ROOT_OPS:
        refuse_unused("--root", args.root, f"does not apply to {args.op} (only to {', '.join(ROOT_OPS)})")
    if args.op not in SIZED_OPS and not args.chakra:
        refuse_unused("--size-is", args.size_is, f"does not apply to {args.op}: its input and output per NPU are "
                                                 f"the same size (only all-gather and reduce-scatter differ)")
    if args.strategy:
        if args.group:
            raise ValueError("give either --group or --strategy, not both")
        if not args.phase:
            raise ValueError("--strategy needs --phase mp, dp or pp")
    elif args.phase:
        raise ValueError("--phase needs --strategy")


#: ops whose input and output per NPU differ by the group size (input x p = output for all-gather)
SIZED_OPS = {"all-gather": "output", "reduce-scatter": "input"}


def size_is(args) -> str:
    """What ``--size`` counts: ``input`` or ``output`` (default input with --network, as
    ASTRA-sim's comm sizes; output with --fabric, the model's own convention)."""
    return args.size_is or ("input" if args.network else "output")


def model_bytes(args, groups) -> int:
    """The model's per-NPU size (All-Gather: output, Reduce-Scatter: input; other ops: --size)
    for the user's ``--size`` under ``--size-is``."""
    native = SIZED_OPS.get(args.op)
    if native is None or size_is(args) == native:
        return args.size
    sizes = {len(g) for g in groups}
    if len(sizes) > 1:
        raise ValueError(f"--size-is {size_is(args)}: groups of different sizes ({', '.join(map(str, sorted(sizes)))} "
                         f"NPUs) give different {native} sizes for {args.op}; give groups of one size")
    # all-gather: output = p x input; reduce-scatter: input = p x output
    return args.size * sizes.pop()


def _topologies(args, timing=None):
    from fred.model.system import FABRICS, default_params
    from fred.model.network import build_fabric

    if args.network:
        from fred.model.network import load_network_yaml  # (PyYAML: only for --network)

        spec = load_network_yaml(args.network)
        if args.gb_bytes is not None:
            spec.gb_bytes = args.gb_bytes
        if args.in_network_dims:
            try:
                spec.mark_in_network(args.in_network_dims)
            except ValueError as exc:
                raise ValueError(f"--in-network-dims {','.join(map(str, args.in_network_dims))}: {exc} "
                                 f"(in {args.network})") from None
        return [spec.build()]
    names = args.fabric or ["mesh"]
    params = None
    if args.bit_error_rate is not None:      # checked against the measured curve before any work
        params = default_params().replace(bit_error_rate=args.bit_error_rate,
                                          **({"switch": timing} if timing else {}))
    return [build_fabric(n, params) for n in (FABRICS if names == ["all"] else names)]


def _groups(args, topo):
    """(groups, strategy text or None), every group of at least 2 NPUs (1 for the I/O ops)."""
    from fred.model.collectives import format_strategy, groups, parse_group, parse_strategy

    least = 1 if args.op in SINGLE_NPU_OPS else 2
    if args.strategy:
        try:
            abc = parse_strategy(args.strategy, topo.npus)
        except ValueError as exc:
            raise ValueError(f"--strategy: {exc}") from None
        gs = groups(abc, args.phase)
        if len(gs[0]) < least:
            raise ValueError(f"--strategy {format_strategy(abc)} --phase {args.phase}: every "
                             f"{args.phase.upper()} group has one NPU, so {args.op} has nothing to do")
        return gs, f"{format_strategy(abc)} {args.phase.upper()}"
    if not args.group:
        return [list(range(topo.npus))], None
    out = []
    for text in args.group:
        g = parse_group(text, topo.npus)
        if len(g) < least:
            raise ValueError(f"--group {text!r} has one NPU: {args.op} needs at least 2")
        out.append(g)
    return out, None


def _result(topo, r, strat, groups, args) -> dict:
    """One result of the JSON document (units in the key names): ``size_bytes`` is ``--size`` as
    given, ``size_is`` what it counts, ``model_bytes_per_npu`` the model's per-NPU size."""
    d = r.as_dict()
    return {
        "fabric": topo.fabric or topo.name, "topology": d["topology"], "op": d["op"],
        "strategy": strat, "groups": d["groups"], "size_bytes": args.size, "size_is": size_is(args),
        "model_bytes_per_npu": d["nbytes"],
        "algorithm": d["algorithm"], "chunks": d["chunks"], "time_s": d["time_s"],
        "bytes_sent_per_npu": d["bytes_sent_per_npu"], "bytes_sent_max": d["bytes_sent_max"],
        "bytes_received_per_npu": d["bytes_received_per_npu"],
        "algorithm_bandwidth_Bps": d["algorithm_bandwidth_Bps"],
        "npu_effective_bandwidth_Bps": d["npu_effective_bandwidth_Bps"],
        "flows": d["flows"], "events": d["events"], "switch_timing_source": d["timing_source"],
        **({k: d[k] for k in ("all_to_all_source", "all_to_all_method", "all_to_all_fraction_of_line_rate",
                               "all_to_all_config_s")} if "all_to_all_source" in d else {}),
        "busiest_links": [{"link": b["link"], "utilization": b["utilization"], "bytes": b["bytes"]}
                          for b in d["busiest_links"]],
        "group_text": strat or " + ".join(_fmt_group(g) for g in groups),
    }


def _run_chakra(args, timing):
    from . import collective_chakra

    (topo,) = _topologies(args)
    rows = collective_chakra.run(args, topo, timing)
    if args.json:
        from .jsonout import document, dumps

        print(dumps(document("collective", rows)))
    else:
        collective_chakra.print_table(rows, fmt_size, fmt_time)
    return 0


def run(args):
    _check(args)
    timing = None
    if args.timing:
        from fred.contract.timing import load_timing
        from fred.model.system import switch_timing

        timing = switch_timing(load_timing(None if args.timing == "default" else args.timing))
    timing = apply_a2a_method(timing, args.a2a_method)
    if args.chakra:
        return _run_chakra(args, timing)
    plan = []
    for topo in _topologies(args, timing):
        groups, strat = _groups(args, topo)
        if args.root is not None and args.root >= topo.npus:
            raise ValueError(f"--root {args.root} is not an NPU of {topo.name} (0..{topo.npus - 1})")
        plan.append((topo, groups, strat, model_bytes(args, groups)))
    from fred.model.collectives import collective_time

    rows = []
    for topo, groups, strat, nb in plan:
        r = collective_time(topo, args.op, groups, nb, algorithm=args.algorithm, chunks=args.chunks,
                            root=args.root, timing=timing)
        rows.append(_result(topo, r, strat, groups, args))
    if args.json:
        from .jsonout import document, dumps

        print(dumps(document("collective", rows)))
        return 0
    head = ("fabric", "op", "groups", "size", "algorithm", "time", "sent/NPU", "alg BW", "NPU BW")
    lines = []
    for d in rows:
        ng = len(d["groups"])
        gtxt = d["group_text"] + (f" ({ng} groups)" if ng > 1 else "")
        alg_txt = d["algorithm"] if isinstance(d["algorithm"], str) else ",".join(sorted(set(d["algorithm"])))
        stxt = fmt_size(d["size_bytes"]) + (f" {d['size_is'][:-3]}" if d["op"] in SIZED_OPS else "")
        lines.append((d["topology"], d["op"], gtxt, stxt, alg_txt, fmt_time(d["time_s"]),
                      fmt_size(d["bytes_sent_per_npu"]), fmt_bw(d["algorithm_bandwidth_Bps"]),
                      fmt_bw(d["npu_effective_bandwidth_Bps"])))
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    for l in lines:
        print("  ".join(c.ljust(w) for c, w in zip(l, widths)).rstrip())
    srcs = sorted({d["switch_timing_source"] for d in rows})
    print(f"switch timing: {'; '.join(srcs)}")
    a2a = sorted({d["all_to_all_source"] for d in rows if "all_to_all_source" in d})
    if a2a:
        print(f"all-to-all: {'; '.join(a2a)}")
    if len(rows) == 1 and rows[0]["busiest_links"]:
        bl = rows[0]["busiest_links"][0]
        print(f"busiest link: {bl['link']} ({100 * bl['utilization']:.0f}% of {fmt_time(rows[0]['time_s'])}); "
              f"{rows[0]['flows']} flows, {rows[0]['events']} events")
    return 0
