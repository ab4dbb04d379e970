"""``fred sim cell r|d|rd ...``: run one microswitch regression under cocotb + Verilator.

Example::

    fred sim cell rd --dtype fp16 --lanes 4 --beats 10000 --seed 123 --waves

prints, per mode, the beats checked bit-exact against the golden model, the latency (cycles)
and the throughput (beats per cycle per port at zero back-pressure), and exits 0; a failing
regression prints the failure on one line (with the seed and the log file) and exits 1.
``--middle`` is validated but ignored for ``rd`` (always 2 x 2). ``--waves`` builds with tracing
and prints where ``dump.vcd`` is (Verilator writes it in the build folder, ``*-waves``). The seed is also taken from ``FRED_SEED``.
"""

from __future__ import annotations

import sys

HELP = "run a cocotb + Verilator regression of a microswitch cell"


def add_arguments(parser):
    from fred.cli import Parser
    from fred.hdl.dtypes import dtype_names

    sub = parser.add_subparsers(dest="sim_target", metavar="TARGET", parser_class=Parser)
    sub.required = True
    p = sub.add_parser("cell", help="one microswitch cell, every mode, random back-pressure",
                       description="regression of one microswitch cell: every mode in one "
                                   "simulation, random beats with special values, source "
                                   "idles and sink back-pressure 0/50/90%%, bit-exact")
    p.add_argument("kind", choices=("r", "d", "rd"), help="cell kind")
    p.add_argument("--middle", "-m", type=int, default=3, metavar="M",
                   help="m (outputs of r, inputs of d; validated but ignored for rd; default 3)")
    p.add_argument("--lanes", type=int, default=4, metavar="L", help="elements per beat (default 4)")
    p.add_argument("--dtype", default="fp16", metavar="T",
                   help="element type: " + ", ".join(dtype_names()) + " (default fp16)")
    p.add_argument("--beats", type=int, default=10_000, metavar="N",
                   help="random beats per mode (default 10000)")
    p.add_argument("--seed", type=lambda s: int(s, 0), default=None, metavar="S",
                   help="random seed (default: FRED_SEED, else a fresh one, logged)")
    p.add_argument("--all-modes", action="store_true",
                   help="every mode of the cell instead of the representative set (r, d)")
    p.add_argument("--waves", action="store_true", help="write dump.vcd (slower)")


def run(args):
    from pathlib import Path

    from fred.hdl.cells import CELL_CLASSES, check_cell_params
    from fred.sim.tb_cells import representative_modes, run_cell_regression

    # validate everything before the (slow) build: one-line errors for bad input
    check_cell_params(args.kind, args.middle, args.lanes, args.dtype)
    if args.beats < 1:
        raise ValueError(f"beats must be >= 1, got {args.beats}")
    middle = 2 if args.kind == "rd" else args.middle
    modes = (CELL_CLASSES[args.kind].all_modes(middle) if args.all_modes
             else representative_modes(args.kind, middle))
    try:
        rep = run_cell_regression(args.kind, middle=args.middle, lanes=args.lanes, dtype=args.dtype,
                                  beats=args.beats, seed=args.seed, modes=modes,
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
