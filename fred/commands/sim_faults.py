"""``fred sim faults``: Go-Back-N endpoints through the switch RTL under link faults.

Example::

    fred sim faults --ports 4 --rate 1e-3 --packets 64 --seed 7 --json

prints the packets delivered (summed over receivers), the retransmissions, the goodput relative
to a fault-free run of the same program (same seed) and the check result of the fault bench
(sim/faults/bench.py: every packet delivered exactly once, in order, bit-exact; control packets
fanned out; the switch's counters equal to the injected faults; no deadlock), and exits 0, or 1
when a check failed (the failure on one line). Options are declared in
:func:`fred.commands.sim._faults_arguments`.
"""

from __future__ import annotations

import sys

__all__ = ["run_faults_command", "fault_table"]


def fault_table(r: dict, base: dict, args) -> str:
    """The text report of one run ``r`` (with its fault-free ``base``)."""
    inj = r["injected"]
    sides = []
    for side in ("in", "out"):
        parts = [f"{k} {inj[f'{side}_{k}']}" for k in ("drop", "corrupt", "duplicate", "delay")]
        sides.append(f"{'to switch' if side == 'in' else 'from switch'}: " + ", ".join(parts))
    sw = r["switch"]
    rows = [
        ("delivered packets", f"{r['delivered']} (every receiver, every packet: exactly once, in "
                              f"order, bit-exact)"),
        ("retransmissions", f"{r['retransmissions']} of {r['packets_sent']} data packets sent"),
        ("go-backs / timeouts", f"{r['go_backs']} / {r['timeouts']}"),
        ("ACKs / NACKs / probes", f"{r['acks']} / {r['nacks']} / {r['probes']}"),
        ("goodput", f"{r['goodput']:.4g} (fault-free run {base['cycles']} cycles, this run "
                    f"{r['cycles']})"),
        ("injected faults", sides[0]),
        ("", sides[1]),
        ("switch counters", ", ".join(f"{k} {sw[k]}" for k in ("err_crc", "err_lost", "err_dup",
                                                               "err_stale", "poisoned"))),
        ("check", r["check"]),
    ]
    return "\n".join(f"  {a:24} {b}" for a, b in rows)


def run_faults_command(args):
    from fred import progress
    from fred.sim.faults import PHASE_KINDS
    from fred.sim.faults import FAULT_KINDS
    from fred.sim.characterize import run_faults

    from . import jsonout

    faults = args.faults or list(FAULT_KINDS)
    phases = args.phases or list(PHASE_KINDS)
    head = (f"fred sim faults: {args.ports} ports, rate {args.rate:g} per flit ({', '.join(faults)}), "
            f"{args.packets} packets x {len(phases)} phases ({', '.join(phases)}), seed {args.seed}")
    with progress.Progress(None, "fred sim faults", progress.enabled(args.quiet)) as bar:
        with bar.phase("Verilator build (cached), fault-free run and the faulty run"):
            res = run_faults(ports=args.ports, rates=(args.rate,), packets=args.packets,
                             seed=args.seed, faults=faults, kinds=phases)
    ok = res["check"] == "pass"
    if args.json:
        r = res["runs"][0] if ok else {}
        base = res["baseline"] or {}
        one = {"check": res["check"]}
        if ok:
            one.update(delivered_packets=r["delivered"], retransmissions=r["retransmissions"],
                       data_packets_sent=r["packets_sent"], go_backs=r["go_backs"],
                       timeouts=r["timeouts"], acks=r["acks"], nacks=r["nacks"], probes=r["probes"],
                       goodput=r["goodput"], cycles=r["cycles"], baseline_cycles=base["cycles"],
                       injected_faults=r["injected"], switch_counters=r["switch"],
                       endpoint_counters=r["endpoints"])
        print(jsonout.dumps(jsonout.document(
            "sim-faults", [one], ports=args.ports, rate_per_flit=args.rate,
            packets_per_phase=args.packets, seed=args.seed, faults=faults, phases=phases,
            switch=res["params"])))
    elif ok:
        print(head)
        print(fault_table(res["runs"][0], res["baseline"], args))
    if not ok:
        print(f"fred: sim faults: {res['check']}", file=sys.stderr)
        return 1
    return 0
