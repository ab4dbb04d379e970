"""``verilator --lint-only -Wall`` for every FRED block, with the project's ONE list of waivers.

:func:`lint` (verilog_text, top) returns the warnings and errors that remain after the waivers
(an empty list means lint clean). Every block's tests call it: the cells, the fabric and the
switch.

Waivers (:data:`WAIVERS`) are *filters on messages*, not ``-Wno-`` switches, so each one is as
narrow as the generated code allows. They all concern idioms of the Verilog that Amaranth
(through Yosys ``write_verilog``) generates, never a property of the design:

* ``PROCASSINIT`` -- Amaranth declares every register with its initial value
  (``reg x = 1'h0;``) *and* assigns it in its ``always @(posedge clk)`` process; the initial
  value is the power-on value Amaranth's simulator also uses, reset is explicit logic in the
  process. Not a bug in generated code.
* ``WIDTHEXPAND`` / ``WIDTHTRUNC`` -- Yosys writes operands at their natural widths and relies
  on Verilog's context-width rules (``! x[14:10]`` for "no bit set", ``a[4:0] >= 4'he``,
  ``x << sh[3:0]``); widths in the design are fixed by Amaranth's typed IR, where the arithmetic
  is width-checked. A real truncation would show up as a bit-exactness failure in the benches.
* ``UNUSEDSIGNAL`` on *internal* nets only -- Amaranth keeps a named wire for every named
  signal and for every lane of an array view (``i__0__payload[2]``, ``y[3]``) as a debug alias
  even after Yosys inlined its logic, and Yosys temporaries (``$46``) of which only some bits
  are consumed. The waiver never covers a port of the top module: an unused *input port* is
  still reported.

* ``DECLFILENAME`` for submodules only -- Amaranth writes the whole hierarchy into one file
  and names submodules ``<top>.<sub>``; the top module is linted as ``<top>.v`` and matches.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from fred.hdl.physical import module_tree, port_stub

__all__ = ["lint", "lint_modules", "WAIVERS", "LintError"]

#: (warning code, regex the message must match or None for any, justification)
WAIVERS = (
    ("PROCASSINIT", None, "Amaranth emits registers with a declaration initial value and a "
                          "clocked process; the initial value is the power-on value"),
    ("WIDTHEXPAND", None, "Yosys write_verilog relies on Verilog context widths; design widths "
                          "are checked in Amaranth's IR"),
    ("WIDTHTRUNC", None, "as WIDTHEXPAND (e.g. '! x[14:10]' for a reduce-NOR)"),
    ("DECLFILENAME", "submodule", "Amaranth writes the whole hierarchy into one file and names "
                                  "submodules '<top>.<sub>'; only the top module can match the "
                                  "file name (and does)"),
    ("UNUSEDSIGNAL", "internal", "Amaranth debug aliases of inlined signals and of array-view "
                                 "lanes, and partly used Yosys temporaries; never a top-level "
                                 "port"),
)


class LintError(RuntimeError):
    """Verilator could not be run."""


def _top_ports(text: str, top: str) -> set:
    m = re.search(r"^module\s+" + re.escape(top) + r"\s*\((.*?)\);", text, re.S | re.M)
    if not m:
        return set()
    return {p.strip().lstrip("\\").strip() for p in m.group(1).split(",")}


def _message_signal(msg: str):
    m = re.search(r"not used: '([^']+)'", msg)
    return m.group(1) if m else None


def _waived(code: str, msg: str, instance: str, top: str, ports: set) -> bool:
    for wcode, pattern, _why in WAIVERS:
        if code != wcode:
            continue
        if pattern is None:
            return True
        if pattern == "submodule":
            mm = re.search(r"MODULE name: '([^']+)'", msg)
            return bool(mm) and mm.group(1) != top
        if pattern == "internal":
            sig = _message_signal(msg)
            at_top = instance in ("", top)
            if sig is None:
                return False
            if at_top and sig.lstrip("\\") in ports:
                return False
            return True
        if re.search(pattern, msg):
            return True
    return False


def lint(verilog_text: str, top: str, extra_args=()) -> list:
    """Lint ``verilog_text`` (top module ``top``); return the un-waived messages, one line each.

    Each returned line is ``CODE: file:line: message`` (``%Error`` lines too). Runs
    ``verilator --lint-only -Wall`` with the environment of
    :func:`fred.sim.toolchain.verilator_env`.
    """
    from fred.sim.toolchain import verilator_env

    env = verilator_env()
    with tempfile.TemporaryDirectory(prefix="fred-lint-") as tmp:
        src = Path(tmp) / f"{top}.v"
        src.write_text(verilog_text)
        cmd = ["verilator", "--lint-only", "-Wall", "--top-module", top, *extra_args, src.name]
        try:
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=600)
        except FileNotFoundError as exc:
            raise LintError(f"cannot run verilator: {exc}") from None
    ports = _top_ports(verilog_text, top)
    out = []
    seen = 0
    lines = proc.stderr.splitlines()
    for k, line in enumerate(lines):
        m = re.match(r"%(Warning|Error)(?:-([A-Z0-9_]+))?:\s*(.*)$", line)
        if not m:
            continue
        kind, code, msg = m.group(1), m.group(2) or "", m.group(3)
        if kind == "Error" and code == "" and msg.startswith("Exiting due to"):
            continue
        seen += 1
        instance = ""
        if k + 1 < len(lines):
            im = re.search(r"note: In instance '([^']+)'", lines[k + 1])
            if im:
                instance = im.group(1)
        if kind == "Warning" and _waived(code, msg, instance, top, ports):
            continue
        out.append(f"{code or kind}: {msg}")
    if proc.returncode != 0 and not seen:
        out.append(f"verilator exited with {proc.returncode}: {proc.stderr.strip()[:500]}")
    return out


def lint_modules(verilog_text: str, top: str, extra_args=()) -> dict:
    """Lint a hierarchical design one distinct module at a time; return ``{module: messages}``
    for the modules with un-waived messages (empty: every module lint clean).

    Verilator lints a design flattened, so a chiplet at its real width (FRED_3(12) at 256 lanes)
    needs more than 7 GB; here each distinct module of the text (:func:`fred.hdl.physical.area_hier.module_tree`)
    is linted alone, its children replaced by port-only stubs (:func:`fred.hdl.physical.area_hier.port_stub`),
    so the connections to them are checked at their exact widths. Messages inside the stubs are
    dropped, and as in a whole-design lint only the design's ``top`` has ports of its own (an
    unused input of a submodule is an internal signal, :data:`WAIVERS`)."""
    bodies, children = module_tree(verilog_text)
    if top not in bodies:
        raise ValueError(f"top module {top!r} is not in the Verilog text")
    found = {}
    for name in sorted(bodies):
        own = bodies[name]
        text = own + "\n" + "\n".join(port_stub(bodies[c]) for c in sorted(children[name]))
        last = own.count("\n") + 1          # lines past this are the stubs
        plain = name
        if name.startswith("\\"):         # an escaped name (Amaranth's 'cell.A_add'): a plain one
            plain = re.sub(r"\W", "_", name[1:])
            text = text.replace(f"module {name} ", f"module {plain} ", 1)
        ports = _top_ports(text, plain) if name != top else set()
        keep = []
        for msg in lint(text, plain, extra_args):
            at = re.search(r":(\d+):\d+:", msg)
            if at and int(at.group(1)) > last:
                continue
            sig = _message_signal(msg)
            if msg.startswith("UNUSEDSIGNAL") and sig and sig.lstrip("\\") in ports:
                continue
            keep.append(msg)
        if keep:
            found[name] = keep
    return found
