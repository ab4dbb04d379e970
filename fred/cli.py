"""The ``fred`` command.

Each sub-command lives in its own module, named in :data:`COMMANDS`. A command module provides

* ``HELP`` -- one line for ``fred --help``;
* ``add_arguments(parser)`` -- declares its options (keep imports here light);
* ``run(args) -> int | None`` -- does the work (import heavy packages inside).

Start-up: command modules are imported for their ``HELP`` line only (they import nothing heavy at
top level); only the command being run declares its options, so ``fred --help``, ``fred
--version`` and ``fred route ...`` never import Amaranth, numpy or matplotlib unless the command
itself needs them.

Errors meant for the user are raised as :class:`fred.FredError` (or ``ValueError`` /
``TypeError`` from parameter validation, ``OSError`` from files) and printed as one line,
``fred: error: ...``, with exit status 2; never a traceback. ``fred`` (or ``fred verilog``,
``fred sim``) without a command prints the help on standard error and exits with status 2, the
argparse convention for a missing argument.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys

from . import FredError, __version__

#: command name -> module implementing it
COMMANDS = {
    "verilog": "fred.commands.verilog",
    "route": "fred.commands.route",
    "sim": "fred.commands.sim",
    "characterize": "fred.commands.characterize",
    "timing": "fred.commands.timing",
    "collective": "fred.commands.collective",
    "estimate": "fred.commands.estimate",
    "sweep": "fred.commands.sweep",
    "scan": "fred.commands.scan",
    "infer": "fred.commands.infer",
    "compare": "fred.commands.compare",
}

#: what the CLI turns into one ``fred: error:`` line (exit 2)
USER_ERRORS = (FredError, ValueError, TypeError, OSError)


class Parser(argparse.ArgumentParser):
    """``argparse`` parser whose errors are one line and exit status 2, like every fred error;
    sub-commands pass it as ``parser_class`` to their own sub-parsers.

    Stricter than ``argparse``: an option that takes one value (or a flag) given twice is
    refused (argparse keeps the last one silently), and so is ``--option=--``, which argparse
    turns into an empty list. Options meant to be repeated are ``append`` actions or
    :class:`fred.commands.options.ListOption`."""

    def parse_known_args(self, args=None, namespace=None):
        self._given = {}
        self._appended = {}
        return super().parse_known_args(args, namespace)

    def _parse_optional(self, arg_string):
        # a value that starts like a negative number ('-1GiB', '-1>0', '-.5', '-inf') is a value,
        # not an unknown option: the option it follows then names it ('expected one argument'
        # otherwise); argparse itself only takes plain negative numbers ('-1', '-.5') so
        if _NEGATIVE.match(arg_string) and arg_string not in self._option_string_actions:
            return None
        return super()._parse_optional(arg_string)

    def _get_values(self, action, arg_strings):
        if action.option_strings and not _repeatable(action):
            opt = max(action.option_strings, key=len)
            given = getattr(self, "_given", {})
            if id(action) in given:
                before, now = given[id(action)], list(arg_strings)
                shown = f" ({_shown(before)} and {_shown(now)})" if before or now else ""
                self.error(f"{opt} given twice{shown}; give it once")
            given[id(action)] = list(arg_strings)
            if action.nargs is None and list(arg_strings) == ["--"]:
                self.error(f"{opt} '--' is not a value")
        if action.option_strings and isinstance(action, argparse._AppendAction):
            # a value collected twice (the same --trace file, the same --flow) would run twice
            opt = max(action.option_strings, key=len)
            seen = getattr(self, "_appended", {}).setdefault(id(action), [])
            if list(arg_strings) in seen:
                self.error(f"{opt} {_shown(list(arg_strings))} given twice; give it once")
            seen.append(list(arg_strings))
        return super()._get_values(action, arg_strings)

    def error(self, message):  # one line, exit 2, like every other fred error
        self.exit(2, f"fred: error: {shorten_words(_tidy(message))}\n")


#: what starts a negative number as typed (digits, a point, or inf / nan), see Parser._parse_optional
_NEGATIVE = re.compile(r"-(?:\.?[0-9]|(?:inf|infinity|nan)$)", re.I)


def _repeatable(action) -> bool:
    """Actions that collect every occurrence (``append``, ``count``, comma lists) or end the parse."""
    return isinstance(action, (argparse._AppendAction, argparse._CountAction, argparse._HelpAction,
                               argparse._VersionAction)) or getattr(action, "repeatable", False)


def _shown(values) -> str:
    return repr(values[0]) if len(values) == 1 else repr(" ".join(values))


EPILOG = """\
bad input:
  one line 'fred: error: ...' naming the option and the value, exit status 2;
  every value is checked before any work starts. `fred COMMAND --help` lists a
  command's options with their ranges.

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


def _tidy(message: str) -> str:
    """argparse's ``argument --lanes: --lanes 0 is too small ...`` -> ``--lanes 0 is too small
    ...`` (our option types name the option themselves); one line."""
    m = re.match(r"argument ([^:]+): (.*)", message, re.S)
    if m and any(m.group(2).startswith(o) for o in m.group(1).split("/")):
        message = m.group(2)
    return " ".join(message.splitlines())


def _selected(argv) -> str:
    """The command named on the command line (its first word), or "" when there is none."""
    return argv[0] if argv and argv[0] in COMMANDS else ""


def build_parser(only: str | None = None):
    """The ``fred`` parser. ``only``: declare the options of that command alone (the others get
    their one-line help, enough for ``fred --help``; ``""``: none); ``None``: every command.
    The top-level epilog (it names the build cache) is written only when no command is chosen."""
    epilog = None
    if not only:
        from fred.contract.cache import cache_root

        epilog = EPILOG.format(root=cache_root())
    parser = Parser(prog="fred", description="FRED wafer-scale fabric: RTL, simulation and system model.",
                    epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"fred {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, modname in COMMANDS.items():
        mod = importlib.import_module(modname)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        if only is None or name == only:
            mod.add_arguments(p)
            p.set_defaults(_run=mod.run)
    return parser


def _subparsers(parser):
    """The sub-parser actions of ``parser`` (for help on a missing sub-command)."""
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]


def _help_parser(parser, argv):
    """The deepest parser named by ``argv`` (for ``fred verilog`` -> the verilog parser)."""
    p = parser
    for word in argv:
        nxt = None
        for act in _subparsers(p):
            nxt = act.choices.get(word)
        if nxt is None:
            break
        p = nxt
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    if argv[:1] == ["--version"] and len(argv) > 1:   # argparse prints the version and ignores the rest
        print(f"fred: error: --version takes nothing after it, got {_shown(argv[1:])}", file=sys.stderr)
        return 2
    parser = build_parser(only=_selected(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and argparse errors: argparse printed them
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    if not getattr(args, "_run", None) or _missing_target(args):
        _help_parser(parser, argv).print_help(sys.stderr)
        return 2
    try:
        rc = args._run(args)
    except BrokenPipeError:  # `fred ... | head`: the reader has gone, stop quietly
        _silence_stdout()
        return 0
    except USER_ERRORS as exc:
        print(f"fred: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _silence_leftovers()
        print("fred: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


def _silence_leftovers():
    """After an interrupt: no warnings about objects the interrupted work left behind (Amaranth
    warns at exit about every design element created but never elaborated; it does the same
    itself after an uncaught exception)."""
    import warnings

    warnings.simplefilter("ignore")
    unused = sys.modules.get("amaranth._unused")
    if unused is not None:
        unused.MustUse._MustUse__silence = True


def _silence_stdout():
    """Point stdout at /dev/null so the interpreter's final flush does not complain."""
    import os

    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError):
        pass


def _missing_target(args) -> bool:
    """A command with sub-commands (verilog, sim) given none."""
    return any(getattr(args, d, False) is None for d in ("target", "sim_target"))


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when empty), every word longer
    than :data:`LONG_WORD` characters shortened (a 10,000-character value stays readable)."""
    text = str(exc).strip()
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    return shorten_words(text.splitlines()[0] if text else type(exc).__name__)


#: words of an error message longer than this are shortened
LONG_WORD = 1000


def shorten_words(text: str) -> str:
    """``text`` with every word longer than :data:`LONG_WORD` characters cut to its ends."""
    def cut(m):
        w = m.group(0)
        return f"{w[:60]}...{w[-20:]} ({len(w):,} characters)"
    return re.sub(r"\S{%d,}" % LONG_WORD, cut, text)


if __name__ == "__main__":
    sys.exit(main())
