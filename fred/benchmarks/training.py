"""Benchmark: what the training model's commands cost on this machine. Prints figures and writes
them into ``docs/training.md``; not a pass/fail test.

Each command runs as its own process, as a user runs it (``python -m fred ...``, output
discarded); its cost is the CPU seconds (user + system) of that process and every process it
waited for -- the local worker processes included -- from the operating system's
resource usage of children (what ``/usr/bin/time`` reports). CPU seconds, unlike wall time, do
not grow when other jobs load a shared machine.

:func:`main` (benchmark ``training``): the ``fred estimate`` table (4 workloads x 5 fabrics) and
the Transformer-17B strategy sweep, both serial (``--workers 0``).

:func:`scale_out` (benchmark ``scale-out``): the default ``fred scan`` (4 workloads x 5 fabrics x
20 k with the paper-cell bisection) and ``fred sweep --workload transformer-1t``, each as a user
runs it: on the default local workers (one process per core, forked once the model is loaded;
:mod:`fred.jobs`), their CPU included.

Before the rows, unmeasured: the package's bytecode is compiled (``compileall``: what an install
does; a checkout run with ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module in every
process) and one small estimate loads the compiled engine (or compiles it, the first time after an
install or a change of its source).

Each writes its rows between ``<!-- speed-NAME:begin -->`` and ``<!-- speed-NAME:end -->`` in
``docs/training.md`` (when run from a checkout that has the file), so the documented figures are
this code's measurements.
"""

from __future__ import annotations

import os
import pathlib
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "training.md"

#: CPU-second targets (issue 24): the command, its target
TARGETS = {
    "estimate": ("`fred estimate` (4 workloads x 5 fabrics), serial", 3.0),
    "sweep-17b": ("`fred sweep` (Transformer-17B, 36 cells), serial", None),
    "scan": ("`fred scan` (4 workloads x 5 fabrics x 20 k, bisection), local workers", 60.0),
    "sweep-1t": ("`fred sweep --workload transformer-1t` (36 cells), local workers", 20.0),
}
COMMANDS = {
    "estimate": ["estimate"],
    "sweep-17b": ["sweep", "--workers", "0", "--quiet"],
    "scan": ["scan", "--quiet"],
    "sweep-1t": ["sweep", "--workload", "transformer-1t", "--quiet"],
}


def measure(args) -> dict:
    """Run ``python -m fred ARGS`` to completion; its wall seconds and CPU seconds (user + system,
    with every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fred", *args], check=True, stdout=subprocess.DEVNULL,
                   stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "load": os.getloadavg()[0]}


def _row(name, m) -> str:
    what, target = TARGETS[name]
    tgt = f"<= {target:g} s" if target is not None else "-"
    return (f"| {what} | `fred {' '.join(COMMANDS[name])}` | {tgt} | **{m['cpu_s']:.1f} s** | {m['wall_s']:.1f} s "
            f"| {m['load']:.1f} |")


def write_block(block: str, rows: list[str]) -> None:
    """Rewrite the ``speed-BLOCK`` block of docs/training.md with ``rows`` (a markdown table)."""
    from .docblock import rewrite_block

    table = ["| what | command | target (CPU) | CPU | wall | load average |", "|---|---|---|---|---|---|"] + rows
    rewrite_block(DOC, f"<!-- speed-{block}:begin -->", f"<!-- speed-{block}:end -->", "\n".join(table))


def compile_bytecode() -> None:
    """Compile the bytecode of the packages the commands import (fred, fred.contract, fred.model),
    where it is missing or stale, as an install does."""
    import compileall

    import fred.contract
    import fred.model

    for mod in (sys.modules["fred"], fred.contract, fred.model):
        compileall.compile_dir(str(pathlib.Path(mod.__file__).parent), quiet=1)


def _run(names, block):
    rows, out = [], {}
    compile_bytecode()
    # a small estimate first, not counted: it loads the compiled engine (or compiles it, the first
    # time after an install or a change of its source), so the rows measure the commands alone
    m = measure(["estimate", "--workload", "resnet-152", "--fabric", "mesh"])
    print(f"bench_training: warm-up (fred estimate -w resnet-152 -f mesh): {m['cpu_s']:.1f} s CPU", flush=True)
    for name in names:
        m = measure(COMMANDS[name])
        what, target = TARGETS[name]
        tgt = f" (target <= {target:g} s)" if target is not None else ""
        print(f"bench_training: {what}: {m['cpu_s']:.1f} s CPU{tgt}, {m['wall_s']:.1f} s wall; "
              f"load average {m['load']:.1f}", flush=True)
        rows.append(_row(name, m))
        out[name] = m
    write_block(block, rows)
    return out


def main():
    """The estimate table and the Transformer-17B sweep, serial."""
    return _run(["estimate", "sweep-17b"], "training")


def scale_out():
    """``fred scan`` (default grid) and the Transformer-1T sweep on the default local workers."""
    return _run(["scan", "sweep-1t"], "scale-out")


if __name__ == "__main__":
    main()
    scale_out()
