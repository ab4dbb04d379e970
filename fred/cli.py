"""The ``fred`` command.

Each sub-command lives in its own module, named in :data:`COMMANDS`. A command module provides

* ``HELP`` -- one line for ``fred --help``;
* ``add_arguments(parser)`` -- declares its options (keep imports here light);
* ``run(args) -> int | None`` -- does the work (import heavy packages inside).

Errors meant for the user are raised as :class:`fred.FredError` (or ``ValueError`` from parameter
validation) and printed as one line, ``fred: error: ...``, with exit status 2; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import FredError, __version__

#: command name -> module implementing it
COMMANDS = {
    "verilog": "fred.commands.verilog",
    "route": "fred.commands.route",
    "sim": "fred.commands.sim",
    "characterize": "fred.commands.characterize",
    "collective": "fred.commands.collective",
    "estimate": "fred.commands.estimate",
    "sweep": "fred.commands.sweep",
    "scan": "fred.commands.scan",
    "compare": "fred.commands.compare",
}


def _load_commands():
    return {name: importlib.import_module(modname) for name, modname in COMMANDS.items()}


class Parser(argparse.ArgumentParser):
    """``argparse`` parser whose errors are one line and exit status 2, like every fred error;
    sub-commands pass it as ``parser_class`` to their own sub-parsers."""

    def error(self, message):  # one line, exit 2, like every other fred error
        self.exit(2, f"{self.prog}: error: {message}\n")


EPILOG = """\
output files:
  -o and --plot files are checked before any work starts and written atomically
  (a temporary file in the same folder, then a rename); missing parent folders
  are created. Plots take the format of their suffix (.png, .pdf, .svg, ...).

build cache:
  Verilator builds, yosys area runs and the compiler cache go to $FRED_BUILD if
  set, else $XDG_CACHE_HOME/fred, else ~/.cache/fred; an entry is renamed into
  place only when complete, so an interrupted build is redone by the next run.
  Delete the folder whenever no fred command runs. Here: {root}
"""


def build_parser():
    from fred.contract.cache import cache_root

    parser = Parser(prog="fred", description="FRED wafer-scale fabric: RTL, simulation and system model.",
                    epilog=EPILOG.format(root=cache_root()),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"fred {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, mod in _load_commands().items():
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        rc = args._run(args)
    except (FredError, ValueError, FileNotFoundError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"fred: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fred: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # e.g. the disk filled up while writing an output file
        print(f"fred: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
