"""``python -m fred.bench bounds`` (``make bench``): the network model against closed-form bounds,
the Chakra microbenchmarks, and the mesh's pipeline pairs under two placements.

It prints three markdown tables and the routes, and rewrites the block of ``docs/network.md``
between ``<!-- bounds:begin -->`` and ``<!-- bounds:end -->`` with them (when run from a
checkout that has the file), so the documented figures are this code's output. Every time is
simulated by the flow model; every bound is a closed form (:mod:`fred.model.collectives.bounds`).
"""

from __future__ import annotations

import pathlib

from fred.commands.collective import fmt_time
from .docblock import rewrite_block
from fred.model.collectives import lower_bound, port_bound, ring_time
from fred.model.collectives import collective_time
from fred.model.network import parse_network_yaml
from fred.model.collectives import groups, parse_strategy
from fred.model.system import FABRICS, GiB, MiB
from fred.model.network import build_fabric

__all__ = ["main", "closed_form_rows", "size_rows", "off_wafer_rows", "chakra_rows", "placement_report", "WAFER_OPS",
           "WAFER_SIZES"]

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "network.md"
#: the ASTRA-sim microbenchmarks, next to the repository (absent: the table is skipped)
SHARED_ET = ROOT.parent / "shared" / "workloads" / "chakra-et"
BEGIN, END = "<!-- bounds:begin -->", "<!-- bounds:end -->"
#: the wafer fabrics' rows: these operations at these sizes per NPU (the table of the done-when)
WAFER_OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
WAFER_SIZES = (64 * MiB, GiB)
#: the sizes of the ratio-by-size table (latency dominates at the small ones)
SWEEP_SIZES = (MiB, 16 * MiB, 64 * MiB, 256 * MiB, GiB)


def _net(kinds, counts, bws, lat, extra=""):
    return parse_network_yaml(f"topology: [ {', '.join(kinds)} ]\nnpus_count: {list(counts)}\n"
                              f"bandwidth: {list(bws)}\nlatency: {[lat] * len(kinds)}\n{extra}").build()


def _size(nbytes):
    return f"{nbytes / GiB:g} GiB" if nbytes >= GiB else f"{nbytes / MiB:g} MiB"


def _row(case, topo, op, nbytes, bound, which, **kw):
    r = collective_time(topo, op, None, nbytes, **kw)
    return (case, op, _size(nbytes), r.algorithms[0], str(r.chunks), fmt_time(r.time), fmt_time(bound), which,
            f"{bound / r.time:.3f}")


def _wafer_bound(topo, op, nbytes):
    """(seconds, name) of the default collective's bound on a wafer fabric (in-network
    All-Reduce where the switches reduce)."""
    return lower_bound(topo, op, nbytes, in_network=topo.in_network_reduction)


def closed_form_rows():
    """(case, op, size, algorithm, pieces, simulated, bound, bound's name, bound/simulated)."""
    rows = []
    r8 = _net(["Ring"], [8], [100.0], 500.0)
    rows.append(_row("Ring(8) 100 GB/s 500 ns", r8, "all-reduce", GiB,
                     ring_time(8, GiB, 100e9, 500e-9), "one-way ring 2(p-1)/p D/B + 2(p-1)a", algorithm="ring"))
    rows.append(_row("Ring(8) 100 GB/s 500 ns", r8, "all-reduce", GiB, port_bound(r8, "all-reduce", GiB),
                     "ports: 2(p-1)/p D / 2B"))
    sw = _net(["Switch"], [16], [100.0], 500.0)
    rows.append(_row("Switch(16) 100 GB/s", sw, "all-reduce", GiB, port_bound(sw, "all-reduce", GiB),
                     "ports: 2(p-1)/p D / B"))
    swi = _net(["Switch"], [16], [100.0], 500.0, "in_network: [ true ]\n")
    rows.append(_row("Switch(16), in_network", swi, "all-reduce", GiB,
                     port_bound(swi, "all-reduce", GiB, in_network=True), "in-network: D / B"))
    for kinds, counts, bw in ((["Ring", "Ring"], [8, 8], 100.0), (["Ring"] * 3, [4, 4, 4], 50.0),
                              (["Ring", "Switch"], [4, 8], 100.0)):
        t = _net(kinds, counts, [bw] * len(kinds), 500.0)
        name = f"[{', '.join(kinds)}] {'x'.join(map(str, counts))} {bw:g} GB/s"
        for op in ("all-reduce", "reduce-scatter", "all-gather"):
            rows.append(_row(name, t, op, GiB, port_bound(t, op, GiB), "ports: f(p-1)/p D / sum B"))
    for f in FABRICS:
        t = build_fabric(f)
        for op in WAFER_OPS:
            for nb in WAFER_SIZES:
                rows.append(_row(f"{t.name} (20 NPUs)", t, op, nb, *_wafer_bound(t, op, nb)))
    return rows


def size_rows(sizes=SWEEP_SIZES):
    """(fabric, op, bound/simulated at each size) of the default wafer-wide collectives."""
    rows = []
    for f in FABRICS:
        t = build_fabric(f)
        for op in WAFER_OPS:
            cells = []
            for nb in sizes:
                r = collective_time(t, op, None, nb)
                cells.append(f"{_wafer_bound(t, op, nb)[0] / r.time:.3f} ({r.chunks})")
            rows.append((t.name, op, *cells))
    return rows


#: the inter-wafer level's rows: wafers x per-wafer gradient bytes
OFF_WAFER_COUNTS = (2, 4, 16, 64)
OFF_WAFER_SIZES = (64 * MiB, GiB)


def off_wafer_rows():
    """(network, wafers, size, simulated, bound, bound's name, bound/simulated) of the gradient
    exchange between wafers (:mod:`fred.model.collectives.offwafer`) on each bundled off-wafer network."""
    from fred.model.collectives import NETWORKS, OffWaferLevel, off_wafer_network

    rows = []
    for name in NETWORKS:
        for w in OFF_WAFER_COUNTS:
            lv = OffWaferLevel(w, off_wafer_network(name))
            for nb in OFF_WAFER_SIZES:
                t = lv.exchange_time(nb)
                b, which = lv.bound(nb)
                rows.append((name, str(w), _size(nb), fmt_time(t), fmt_time(b), which, f"{b / t:.3f}"))
    return rows


def chakra_rows(directory=None, bw=50.0, lat=500.0):
    """Each ASTRA-sim microbenchmark on a Ring of its NPU count (bw GB/s, lat ns) and a Switch
    (``directory``: default :data:`SHARED_ET`, read when called)."""
    from fred.model.inputs import load_chakra, run_chakra

    directory = SHARED_ET if directory is None else directory
    rows = []
    for d in sorted(p for p in pathlib.Path(directory).glob("*/*") if p.is_dir()):
        tr = load_chakra(d)
        for kind in ("Ring", "Switch"):
            topo = _net([kind], [tr.npus], [bw], lat)
            for r in run_chakra(tr, topo):
                b, which = lower_bound(topo, r["op"], r["model_bytes_per_npu"])
                rows.append((f"{d.parent.name}/{d.name}", f"{kind}({tr.npus})", r["op"], r["algorithm"],
                             fmt_time(r["time_s"]), fmt_time(b), which, f"{b / r['time_s']:.3f}"))
    return rows


def _pairs_report(topo, pairs, label):
    """Routes of the pairs, the links two pairs share and the p2p time of all pairs at once."""
    out = [f"{label}:"]
    used = {}
    for a, b in pairs:
        links = topo.path(a, b)
        out.append(f"  {a:2d} -> {b:2d}: " + ", ".join(topo.link_name(int(l)) for l in links))
        for l in links:
            used.setdefault(int(l), []).append((a, b))
    shared = {l: ps for l, ps in used.items() if len(ps) > 1}
    for l, ps in sorted(shared.items()):
        out.append(f"  shared: {topo.link_name(l)} by " + ", ".join(f"{a}->{b}" for a, b in ps))
    alone = sum(1 for a, b in pairs if all(len(used[int(l)]) == 1 for l in topo.path(a, b)))
    out.append(f"  pairs on links of their own: {alone} of {len(pairs)}")
    r = collective_time(topo, "p2p", [list(p) for p in pairs], 2**28)
    out.append(f"  all pairs at once, 256 MiB each: {fmt_time(r.time)}, "
               f"{r.bytes_per_npu / r.time / 1e9:.0f} GB/s per sending NPU (payload)")
    return out


def placement_report():
    """The mesh's PP pairs of MP(2)-DP(5)-PP(2): the placement rule and the 2x2-block one."""
    topo = build_fabric("mesh")
    abc = parse_strategy("MP(2)-DP(5)-PP(2)", topo.npus)
    rule_pp = [tuple(g) for g in groups(abc, "pp")]
    rule_mp = [tuple(g) for g in groups(abc, "mp")]
    # 2x2 blocks: MP along a row, PP down a column (rows 0-1 and 2-3); row 4 as the rule
    block_pp = [(4 * r + c, 4 * (r + 1) + c) for r in (0, 2) for c in range(4)] + [(16, 18), (17, 19)]
    block_mp = [(4 * r + c, 4 * r + c + 1) for r in range(4) for c in (0, 2)] + [(16, 17), (18, 19)]
    out = _pairs_report(topo, rule_pp, "placement rule (MP consecutive, then PP, then DP), PP pairs")
    out += _pairs_report(topo, rule_mp, "placement rule, MP pairs")
    out += _pairs_report(topo, block_pp, "2x2 blocks (rows 0-3) + rule (row 4), PP pairs")
    out += _pairs_report(topo, block_mp, "2x2 blocks (rows 0-3) + rule (row 4), MP pairs")
    return out


def _table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def report() -> str:
    out = ["Default collectives (model's sizes per NPU: All-Gather = output) against closed-form lower "
           "bounds (`fred.model.collectives.bounds`: NPU ports, L1 uplinks, cuts for All-to-All); YAML latencies 500 ns per "
           "hop; wafer fabrics with their 0.883 payload share:", ""]
    out += _table(("network", "op", "size", "algorithm", "pieces", "simulated", "bound", "bound is",
                   "bound/simulated"), closed_form_rows())
    out += ["", "The wafer fabrics' default collectives by size: bound/simulated (pieces). The bounds count "
            "bandwidth only; below 64 MiB the hop latencies each piece pays weigh in:", ""]
    out += _table(("fabric", "op", *(_size(n) for n in SWEEP_SIZES)), size_rows())
    out += ["", "The inter-wafer level (`fred.model.collectives.offwafer`): an All-Reduce of each wafer's gradient bytes "
            "across W wafers on the bundled off-wafer networks (18 I/O controllers x 128 GB/s per wafer; ndr: "
            "switched, endpoint ring, 1,000 ns per link; ndr-sharp: the same switches reducing; ring: a ring of "
            "wafers, 9 controllers to each neighbour, 500 ns per link). The bound is B_wafer = 2.304 TB/s "
            "through the wafer's controllers, bandwidth only:", ""]
    out += _table(("off-wafer network", "wafers", "bytes per wafer", "simulated", "bound", "bound is",
                   "bound/simulated"), off_wafer_rows())
    if SHARED_ET.is_dir():
        out += ["", "ASTRA-sim's Chakra ET microbenchmarks (`fred collective --chakra DIR --network FILE`; 1 MB "
                "comm_size = each NPU's input; a Ring / a Switch of the trace's NPU count, 50 GB/s, 500 ns; "
                "the bounds ignore latency, which dominates at 1 MB):", ""]
        out += _table(("trace", "network", "op", "algorithm", "simulated", "bound", "bound is", "bound/simulated"),
                      chakra_rows())
    out += ["", "Mesh, MP(2)-DP(5)-PP(2): routes (X-Y) of the pipeline and model-parallel pairs, printed by "
            "`fred.benchmarks.bounds.placement_report`:", "", "```"] + placement_report() + ["```"]
    return "\n".join(out)


def main(argv=None) -> int:
    text = report()
    print(text)
    rewrite_block(DOC, BEGIN, END, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
