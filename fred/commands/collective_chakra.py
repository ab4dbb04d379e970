"""``fred collective --chakra DIR --network FILE.yml``: run a Chakra execution trace's
collectives (one ``.et`` file per NPU, :mod:`fred.model.inputs.chakra_et`) on a YAML network and print
each one's time next to its NPU-port lower bound (:mod:`fred.model.collectives.bounds`)."""

from __future__ import annotations

__all__ = ["check", "run"]

#: options that describe the collective themselves, which the trace already gives
_TRACE_GIVES = ("--op", "--group", "--strategy", "--phase", "--size", "--size-is", "--root")


def check(args) -> None:
    """Rules across options for --chakra (before any work)."""
    from .options import refuse_unused

    import os

    if not args.network:
        raise ValueError("--chakra needs --network FILE.yml (the network to run the trace on)")
    if os.path.exists(args.chakra) and not os.path.isdir(args.chakra):
        raise ValueError(f"--chakra {args.chakra!r} is a file, not a directory (give the directory that holds the "
                         f"<name>.<npu>.et files)")
    for opt in _TRACE_GIVES:
        refuse_unused(opt, getattr(args, opt[2:].replace("-", "_")), "does not apply with --chakra (the trace gives it)")


def run(args, topo, timing) -> list[dict]:
    from fred.model.collectives import FACTORS, port_bound
    from fred.model.inputs import load_chakra, run_chakra

    trace = load_chakra(args.chakra)
    rows = run_chakra(trace, topo, algorithm=args.algorithm, chunks=args.chunks, timing=timing)
    for r in rows:
        r.update(trace=trace.name, npus=trace.npus, network=topo.name)
        r["port_bound_s"] = (port_bound(topo, r["op"], r["model_bytes_per_npu"]) if r["op"] in FACTORS else None)
    return rows


def print_table(rows, fmt_size, fmt_time) -> None:
    head = ("trace", "NPUs", "node", "op", "comm size", "algorithm", "time", "port bound", "bound/time")
    lines = []
    for r in rows:
        b = r["port_bound_s"]
        lines.append((r["trace"], str(r["npus"]), r["name"], r["op"] or "compute",
                      fmt_size(r["comm_size_bytes"]) if r["op"] else "-", r["algorithm"], fmt_time(r["time_s"]),
                      fmt_time(b) if b else "-", f"{b / r['time_s']:.2f}" if b and r["time_s"] > 0 else "-"))
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    for l in lines:
        print("  ".join(c.ljust(w) for c, w in zip(l, widths)).rstrip())
