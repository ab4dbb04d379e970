"""``fred verilog TARGET ... -o FILE``: write reproducible Verilog for a FRED block.

Targets are provided by the modules in :data:`TARGETS`. Such a module defines

* ``verilog_arguments(parser, target)`` -- target options (``--middle``, ``--lanes`` ...);
* ``verilog_build(args, target) -> (component, top_name)`` -- the elaboratable to convert, or
  ``(verilog_text, top_name)`` when the module writes its own (reproducible) Verilog, e.g. the
  fabric's form with one module per cell kind.
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


def add_arguments(parser):
    from fred.cli import Parser

    sub = parser.add_subparsers(dest="target", metavar="TARGET", parser_class=Parser)
    sub.required = True
    for target, (modname, help_) in TARGETS.items():
        mod = importlib.import_module(modname)
        p = sub.add_parser(target, help=help_, description=help_)
        mod.verilog_arguments(p, target)
        p.add_argument("-o", "--output", metavar="FILE", default="-",
                       help="output file, written atomically, missing folders created "
                            "(default: standard output)")
        p.set_defaults(_target_module=mod)


def run(args):
    from fred.contract.outputs import check_output_path, write_atomic
    from fred.hdl.verilog import emit

    if args.output != "-":
        check_output_path("--output", args.output)
    design, name = args._target_module.verilog_build(args, args.target)
    text = design if isinstance(design, str) else emit(design, name)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        path = write_atomic(args.output, text)
        print(f"wrote {path} (top module {name})", file=sys.stderr)
    return 0
