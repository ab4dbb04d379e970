"""``fred verilog TARGET ... -o FILE``: write reproducible Verilog for a FRED block.

Targets are provided by the modules in :data:`TARGETS`; each defines ``verilog_build(args,
target) -> (component, top_name)`` (or ``(verilog_text, top_name)`` when the module writes its
own reproducible Verilog, e.g. the fabric's form with one module per cell kind). The options are
declared here, with their bounds (:data:`MAX_LANES` ...), so every value is checked before
Amaranth elaborates anything.

Bounds come from what generation costs on the 2-core machine (CPU time, measured): an R cell
takes ~0.06 s per fp16 lane (1,024 lanes: ~1 min); a fabric or crossbar is limited by its lane
slices (:data:`fred.hdl.fabric.recursive.MAX_RTL_WORK`, ~5 CPU minutes); switch buffers take ~2 ms per
flit of depth per port.
"""

from __future__ import annotations

import importlib
import sys

HELP = "write synthesizable Verilog for a microswitch cell, a FRED_m(P) fabric or a switch"

#: target -> (module, help)
TARGETS = {
    "r": ("fred.hdl.cells", "R-microswitch: 2 inputs x m outputs, optional reduction"),
    "d": ("fred.hdl.cells", "D-microswitch: m inputs x 2 outputs, optional broadcast"),
    "rd": ("fred.hdl.cells", "RD-microswitch: 2x2 with reduction and broadcast"),
    "fabric": ("fred.hdl.fabric", "FRED_m(P) recursive reduce/distribute fabric"),
    "switch": ("fred.hdl.switch", "full FRED switch: control unit, virtual channels, credits, fabric"),
    "crossbar": ("fred.hdl.crossbar", "baseline crossbar that reduces at the output port"),
}

#: elements per beat (a wider beat is not generated in reasonable time: ~1 CPU minute per R cell)
MAX_LANES = 1024
#: middle subnetworks of a cell or fabric, and ports of a fabric, switch or crossbar
MAX_MIDDLE = 64
MAX_PORTS = 64
#: flits per switch input buffer (the paper's data buffer is 48 flits; 4,096 flits of one port
#: take ~10 s to generate)
MAX_DEPTH = 4096
#: phase-table budget in bytes (the paper's is 1.5 KB; the table holds at most 255 entries,
#: which at 64 ports is ~160 KB)
MAX_TABLE_BYTES = 2**20
#: data flits per packet (the 8-bit length field of the header)
MAX_PACKET_FLITS = 255


def _dtype(text):
    from fred.hdl.dtypes import get_dtype

    return get_dtype(text).name


def _identifier(text):
    from fred.contract.checks import check_name

    name = check_name("--name", text)
    if not name.isidentifier() or not name.isascii():
        raise ValueError(f"--name {text!r} is not a Verilog module name (letters, digits, _; "
                         f"not starting with a digit)")
    return name


def _common(p, *, ports=False, middle=False, lanes_default=4):
    from fred.hdl.dtypes import dtype_names

    from .options import choice, integer

    if ports:
        p.add_argument("--ports", "-p", type=integer("--ports", 2, MAX_PORTS), required=True,
                       metavar="P", help=f"ports P (2..{MAX_PORTS})")
    if middle:
        p.add_argument("--middle", "-m", type=integer("--middle", 2, MAX_MIDDLE), default=3, metavar="M",
                       help=f"middle subnetworks m (2..{MAX_MIDDLE}, default 3)")
    p.add_argument("--lanes", type=integer("--lanes", 1, MAX_LANES), default=lanes_default, metavar="L",
                   help=f"elements per beat (1..{MAX_LANES}, default {lanes_default})")
    p.add_argument("--dtype", type=choice("--dtype", _dtype), default="fp16", metavar="T",
                   help="element type: " + ", ".join(dtype_names()) + " (default fp16)")


def _arguments(p, target):
    from .options import integer

    if target in ("r", "d"):
        _common(p, middle=True)
    elif target == "rd":
        _common(p)
        p.add_argument("--middle", "-m", type=integer("--middle", 2, MAX_MIDDLE), default=None, metavar="M",
                       help="refused: the RD cell is always 2 x 2 (accepted by r and d)")
    elif target == "fabric":
        _common(p, ports=True, middle=True)
        _form(p, "shared")
        p.add_argument("--name", type=_Name, default=None, metavar="NAME",
                       help="top module name (default fred<M>_p<P>)")
    elif target == "switch":
        from fred.hdl.switch import FABRICS, PAPER_CTRL_DEPTH, PAPER_DATA_DEPTH, PAPER_MAX_LEN, TABLE_BUDGET_BYTES

        _common(p, ports=True, middle=True)
        _form(p, "flat")
        p.add_argument("--data-depth", type=integer("--data-depth", 2, MAX_DEPTH), default=PAPER_DATA_DEPTH,
                       metavar="N", help=f"flits per data-VC input buffer (2..{MAX_DEPTH}, default "
                                         f"{PAPER_DATA_DEPTH}: 24 KB of 512 B flits)")
        p.add_argument("--ctrl-depth", type=integer("--ctrl-depth", 1, MAX_DEPTH), default=PAPER_CTRL_DEPTH,
                       metavar="N", help=f"flits per control-VC input buffer (1..{MAX_DEPTH}, default "
                                         f"{PAPER_CTRL_DEPTH}: 2 KB)")
        p.add_argument("--max-len", type=integer("--max-len", 1, MAX_PACKET_FLITS), default=PAPER_MAX_LEN,
                       metavar="N", help=f"data flits per packet at most (1..{MAX_PACKET_FLITS} and below "
                                         f"--data-depth; default {PAPER_MAX_LEN}: 4 KB)")
        p.add_argument("--table-entries", type=integer("--table-entries", 1, 255), default=None, metavar="N",
                       help="phase-table capacity, 1..255 (default: what fits --table-bytes)")
        p.add_argument("--table-bytes", type=integer("--table-bytes", 1, MAX_TABLE_BYTES),
                       default=None, metavar="B",
                       help=f"phase-table budget in bytes (1..{MAX_TABLE_BYTES}, default {TABLE_BUDGET_BYTES})")
        p.add_argument("--fabric", default="fred", choices=FABRICS,
                       help="fabric inside the switch: the FRED fabric (default) or an ideal "
                            "crossbar (int32 only)")
    elif target == "crossbar":
        from fred.hdl.crossbar import VARIANTS

        _common(p, ports=True)
        p.add_argument("--variant", choices=VARIANTS, default="tree",
                       help="tree: P-1 adders per output, line rate; serial: one adder per output "
                            "(default tree)")


def _form(p, narrow):
    from fred.hdl.fabric import AUTO_HIER_LANES, FORMS

    p.add_argument("--form", choices=("auto",) + FORMS, default="auto",
                   help=f"Verilog form: flat (every instance its own module), shared (one module "
                        f"per cell kind), hier (also one per lane adder, sub-fabric size and "
                        f"port kind: the form for real widths); auto (default): {narrow} up to "
                        f"{AUTO_HIER_LANES} lanes, hier above")


def _Name(text):  # argparse type of --name
    import argparse

    try:
        return _identifier(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser):
    from fred.cli import Parser

    sub = parser.add_subparsers(dest="target", metavar="TARGET", parser_class=Parser)
    for target, (modname, help_) in TARGETS.items():
        p = sub.add_parser(target, help=help_, description=help_)
        _arguments(p, target)
        p.add_argument("-o", "--output", metavar="FILE", default="-",
                       help="output file, written atomically, missing folders created "
                            "(default: standard output)")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
        p.set_defaults(_target_module=modname)


def check(args) -> None:
    """Rules across options (each option's own range is checked while parsing): the size of
    what would be generated, the packet against its buffer."""
    from fred.hdl.fabric import MAX_RTL_WORK, check_fabric_params
    from fred.hdl.dtypes import get_dtype

    from .options import refuse_unused

    t = args.target
    if t == "rd":
        refuse_unused("--middle", args.middle, "does not apply to rd (the RD cell is always 2 x 2)")
        args.middle = 2
    if t in ("fabric", "switch"):
        from fred.hdl.fabric import resolve_form

        check_fabric_params(args.ports, args.middle, args.lanes, args.dtype,
                            resolve_form(t, args.lanes, args.form))
    if t == "switch":
        if args.max_len > args.data_depth - 1:
            raise ValueError(f"--max-len {args.max_len} does not fit --data-depth {args.data_depth} "
                             f"(header + data: at most {args.data_depth - 1} data flits)")
        if args.table_entries is not None and args.table_bytes is not None:
            raise ValueError("give --table-entries or --table-bytes, not both")
        if args.fabric == "ideal" and args.dtype != "int32":
            raise ValueError(f"--fabric ideal adds lanes as integers: it needs --dtype int32, "
                             f"not {args.dtype}")
        if args.table_bytes is None:
            from fred.hdl.switch import TABLE_BUDGET_BYTES

            args.table_bytes = TABLE_BUDGET_BYTES
    if t == "crossbar":
        adders = args.ports * (args.ports - 1 if args.variant == "tree" else 1)
        work = adders * args.lanes * get_dtype(args.dtype).width // 16
        if work > MAX_RTL_WORK:
            raise ValueError(f"crossbar/{args.variant} with --ports {args.ports} and --lanes {args.lanes} "
                             f"{args.dtype} is too large to generate in reasonable time ({adders} adders x "
                             f"{args.lanes} lanes = {work:,} lane slices, limit {MAX_RTL_WORK:,})")


def run(args):
    from fred import progress
    from fred.contract.outputs import check_output_path, write_atomic
    from fred.hdl.verilog import emit

    if args.output != "-":
        check_output_path("--output", args.output)
    check(args)
    mod = importlib.import_module(args._target_module)
    show = progress.enabled(args.quiet or args.output == "-")
    with progress.Progress(2, f"fred verilog {args.target}", show) as bar:
        args.progress = bar.show if show else None  # names each module while it is converted
        with bar.phase("elaborating (Amaranth)"):
            design, name = mod.verilog_build(args, args.target)
        with bar.phase("converting to Verilog (Yosys)"):
            text = design if isinstance(design, str) else emit(design, name)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        path = write_atomic(args.output, text)
        print(f"wrote {path} (top module {name})", file=sys.stderr)
    return 0
