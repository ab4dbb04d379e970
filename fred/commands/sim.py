"""``fred sim cell r|d|rd ...``: run one microswitch regression under cocotb + Verilator;
``fred sim faults ...``: Go-Back-N through the switch under link faults (sim/characterize/faults.py).

Example::

    fred sim cell rd --dtype fp16 --lanes 4 --beats 10000 --seed 123 --waves

prints, per mode, the beats checked bit-exact against the golden model, the latency (cycles)
and the throughput (beats per cycle per port at zero back-pressure), and exits 0; a failing
regression prints the failure on one line (with the seed and the log file) and exits 1.
``--middle`` does not apply to ``rd`` (always 2 x 2). ``--waves`` builds with tracing and prints
where ``dump.vcd`` is (Verilator writes it in the build folder, ``*-waves``). The seed is also
taken from ``FRED_SEED`` (checked like ``--seed``). Every value is checked before the build.
"""

from __future__ import annotations

import sys

HELP = "run a cocotb + Verilator regression of a microswitch cell"

#: bounds: cells as in `fred verilog`; lanes and beats by simulation time (cocotb drives every
#: beat from Python: 10,000 beats per mode of a 4-lane cell take about a minute with the build)
MAX_MIDDLE = 64
MAX_LANES = 256
MAX_BEATS = 200_000
#: seeds are 32-bit (cocotb's RANDOM_SEED)
MAX_SEED = 2**32 - 1


def _seed(text):
    """Decimal (the shared ASCII integer parser of ``fred.commands.options``) or 0x hex."""
    import re

    from .options import integer

    check = integer("--seed", 0, MAX_SEED)
    m = re.fullmatch(r"([+-]?)0[xX]([0-9a-fA-F]+)", str(text).strip(), re.ASCII)
    return check(str(int(m.group(1) + m.group(2), 16))) if m else check(text)


def env_seed(name: str = "FRED_SEED"):
    """The seed from the environment variable ``name`` (None when unset), checked like --seed."""
    import os

    text = os.environ.get(name)
    if text is None or not text.strip():
        return None
    try:
        return _seed(text)
    except Exception as exc:  # ArgumentTypeError
        raise ValueError(f"{name}: {exc}") from None


def add_arguments(parser):
    from fred.cli import Parser
    from fred.hdl.dtypes import dtype_names

    from .options import choice, integer
    from .verilog import _dtype

    sub = parser.add_subparsers(dest="sim_target", metavar="TARGET", parser_class=Parser)
    p = sub.add_parser("cell", help="one microswitch cell, every mode, random back-pressure",
                       description="regression of one microswitch cell: every mode in one "
                                   "simulation, random beats with special values, source "
                                   "idles and sink back-pressure 0/50/90%, bit-exact")
    p.add_argument("kind", choices=("r", "d", "rd"), help="cell kind")
    p.add_argument("--middle", "-m", type=integer("--middle", 2, MAX_MIDDLE), default=None, metavar="M",
                   help=f"m, 2..{MAX_MIDDLE}: outputs of r, inputs of d (default 3; not for rd, always 2 x 2)")
    p.add_argument("--lanes", type=integer("--lanes", 1, MAX_LANES), default=4, metavar="L",
                   help=f"elements per beat (1..{MAX_LANES}, default 4)")
    p.add_argument("--dtype", type=choice("--dtype", _dtype), default="fp16", metavar="T",
                   help="element type: " + ", ".join(dtype_names()) + " (default fp16)")
    p.add_argument("--beats", type=integer("--beats", 1, MAX_BEATS), default=10_000, metavar="N",
                   help=f"random beats per mode (1..{MAX_BEATS:,}, default 10000)")
    p.add_argument("--seed", type=_Seed, default=None, metavar="S",
                   help=f"random seed, 0..{MAX_SEED} (decimal or 0x hex; default: FRED_SEED, else a fresh "
                        f"one, logged)")
    p.add_argument("--all-modes", action="store_true",
                   help="every mode of the cell instead of the representative set (r, d)")
    p.add_argument("--waves", action="store_true", help="write dump.vcd (slower)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    _faults_arguments(sub)


#: `fred sim faults` bounds: ports by the endpoints' ACK encoding and the builds (8 ports and
#: more build the characterized fp16 chiplet switch, about 5 minutes of Verilator once);
#: rates by what Go-Back-N still completes in bounded time; packets by simulation time (about
#: 1 s per 100 packets of 4 phases on 4 ports)
FAULT_PORTS = (4, 16)
MAX_RATE = 0.05
MAX_PACKETS = 4096


def _list_item(option, known):
    from .options import choice

    def canonical(t):
        k = t.strip().lower()
        if k not in known:
            raise ValueError(f"{option} {t!r} is not one of {', '.join(known)}")
        return k
    return choice(option, canonical)


def _faults_arguments(sub):
    from .options import ListOption, integer, number

    kinds = ("drop", "corrupt", "duplicate", "delay")
    phases = ("all-reduce", "reduce", "multicast", "unicast")
    p = sub.add_parser("faults", help="Go-Back-N endpoints through the switch under link faults",
                       description="drive the switch RTL with Go-Back-N endpoints over links that "
                                   "drop, corrupt, duplicate and delay flits; print delivered "
                                   "packets, retransmissions, goodput relative to a fault-free "
                                   "run and the check (exit 1 when a check fails)")
    p.add_argument("--ports", "-p", type=integer("--ports", *FAULT_PORTS), default=4, metavar="P",
                   help=f"switch ports, {FAULT_PORTS[0]}..{FAULT_PORTS[1]} (default 4: 2 x int32 "
                        f"lanes, 4-flit packets; 8 and more: the characterized 4 x fp16 switch, "
                        f"8-flit packets)")
    p.add_argument("--rate", type=number("--rate", 0, MAX_RATE), default=1e-3, metavar="R",
                   help=f"faults per flit on every link, each direction, 0..{MAX_RATE:g} (default 1e-3)")
    p.add_argument("--packets", type=integer("--packets", 1, MAX_PACKETS), default=64, metavar="N",
                   help=f"packets per phase, 1..{MAX_PACKETS} (default 64)")
    p.add_argument("--seed", type=_Seed, default=1, metavar="S",
                   help=f"random seed of data and faults, 0..{MAX_SEED} (default 1)")
    p.add_argument("--faults", action=ListOption, item=_list_item("--faults", kinds), default=None,
                   metavar="KINDS", help="fault kinds, comma list of " + ", ".join(kinds) + " (default all)")
    p.add_argument("--phases", action=ListOption, item=_list_item("--phases", phases), default=None,
                   metavar="KINDS", help="phases run at once, comma list of " + ", ".join(phases)
                                         + " (default all; each its own VC or ports)")
    p.add_argument("--json", action="store_true", help="print a JSON document (fred.commands.jsonout)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")


def _Seed(text):  # argparse type of --seed
    import argparse

    try:
        return _seed(text)
    except argparse.ArgumentTypeError:
        raise
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args):
    if args.sim_target == "faults":
        from .sim_faults import run_faults_command

        return run_faults_command(args)
    from fred import progress

    from .options import refuse_unused

    # every value is checked before the (slow) build
    if args.kind == "rd":
        refuse_unused("--middle", args.middle, "does not apply to rd (the RD cell is always 2 x 2)")
    middle = 2 if args.kind == "rd" else (3 if args.middle is None else args.middle)
    seed = args.seed if args.seed is not None else env_seed()

    from pathlib import Path

    from fred.hdl.cells import CELL_CLASSES, check_cell_params
    from fred.sim.benches import representative_modes, run_cell_regression

    check_cell_params(args.kind, middle, args.lanes, args.dtype)
    modes = (CELL_CLASSES[args.kind].all_modes(middle) if args.all_modes
             else representative_modes(args.kind, middle))
    with progress.Progress(None, f"fred sim cell {args.kind}", progress.enabled(args.quiet)) as bar:
        try:
            with bar.phase(f"Verilator build and {args.beats} beats x {len(modes)} modes"):
                rep = run_cell_regression(args.kind, middle=middle, lanes=args.lanes, dtype=args.dtype,
                                          beats=args.beats, seed=seed, modes=modes,
                                          waves=args.waves or None)
        except AssertionError as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else "regression failed"
            print(f"fred: sim cell {args.kind}: FAILED: {msg}", file=sys.stderr)
            return 1
    print(rep.table())
    print(f"run folder: {rep.run_dir}")
    if args.waves:
        run_dir = Path(rep.run_dir)
        vcd = [p for p in (run_dir / "dump.vcd", run_dir.parent / "dump.vcd") if p.exists()]
        print(f"waves: {vcd[0] if vcd else 'dump.vcd not found'}")
    return 0
