"""``python -m fred.bench testtime``: what ``make test`` costs, measured.

It runs ``make test`` itself (the Makefile's pytest command, with this module loaded as a pytest
plugin through ``PYTEST_PLUGINS``), measures its wall time and its CPU time (user + system of
``make`` and every process under it: pytest, its xdist workers, Verilator and the C++ compiler
of any build that is not cached), and the CPU time of every test (the worker's own and that of
the children it waited for, from setup to teardown). It prints them and rewrites the README
block between ``<!-- testtime:begin -->`` and ``<!-- testtime:end -->`` (when run from a checkout
that has the file): the figures there are this bench's output, never typed.

The figures depend on the machine and on its load (the block states both: cores and the load
average when the run started) and on the build cache (``~/.cache/fred``: a design built before
is not rebuilt; the block states how many Verilator builds the run made).

``--from DIR`` formats an earlier run's records (the JSON lines the plugin wrote into ``DIR``,
and ``DIR/run.json``) without running the tests again.

``--regress GROUP ...`` runs ``make regress-GROUP`` for each group named (``all``: every group of
:data:`GROUPS`) instead, measures each the same way, keeps the figures in
``build/regress-time.json`` (one entry per group, the latest run) and rewrites the README block
between ``<!-- regress-time:begin -->`` and ``<!-- regress-time:end -->`` from that file: a
group never measured on this machine says so.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import resource
import subprocess
import sys
import tempfile
import time

from .docblock import rewrite_block

__all__ = ["main", "measure", "report", "slowest", "regress", "regress_report", "GROUPS"]

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "README.md"
BEGIN, END = "<!-- testtime:begin -->", "<!-- testtime:end -->"
RBEGIN, REND = "<!-- regress-time:begin -->", "<!-- regress-time:end -->"
#: the groups of make regress (the Makefile's REGRESS_GROUPS, tests/conftest.py)
GROUPS = ("cells", "adders", "fabric", "wide", "switch", "links", "characterize", "model", "formal")
REGRESS_JSON = ROOT / "build" / "regress-time.json"
#: environment variable naming the folder the plugin writes its records into
ENV = "FRED_TESTTIME_DIR"
TOP = 10


# -- the pytest plugin (active only with FRED_TESTTIME_DIR set) ---------------------------------
def _cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _builds():
    """Number of Verilator build entries in the build cache (to count the builds a run made)."""
    from fred.contract.cache import cache_root
    root = cache_root() / "sim"
    return sum(1 for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else 0


try:
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        out = os.environ.get(ENV)
        if not out:
            yield
            return
        c0, t0 = _cpu(), time.perf_counter()
        yield
        rec = {"test": item.nodeid, "cpu": round(_cpu() - c0, 3), "wall": round(time.perf_counter() - t0, 3)}
        with open(pathlib.Path(out) / f"tests-{os.getpid()}.jsonl", "a") as fh:
            fh.write(json.dumps(rec) + "\n")
except ImportError:         # pragma: no cover -- the bench itself does not need pytest
    pass


# -- the bench ------------------------------------------------------------------------------------
def summary_line(text: str) -> str:
    """pytest's closing line in ``text`` (make's own lines after it skipped), or its last line."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    found = [ln for ln in lines if re.search(r"\d+ (passed|failed)|no tests ran", ln)]
    return (found or lines or [""])[-1]


def measure(out: pathlib.Path, make: str = "make", target: str = "test") -> dict:
    """Run ``make TARGET`` with the plugin writing into ``out``; return the run's figures."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, **{ENV: str(out), "PYTEST_PLUGINS": "fred.benchmarks.testtime"})
    load = os.getloadavg()[0]
    builds0 = _builds()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([make, "--no-print-directory", "-C", str(ROOT), target], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    tail = [summary_line(proc.stdout)]
    run = {"wall": round(wall, 1),
           "cpu": round(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, 1),
           "exit": proc.returncode, "summary": tail[0].strip("= "), "cores": os.cpu_count(),
           "load": round(load, 2), "builds": _builds() - builds0, "revision": _revision(),
           "target": target}
    (out / "run.json").write_text(json.dumps(run))
    (out / "pytest.log").write_text(proc.stdout)
    return run


def _revision():
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def tests_of(out: pathlib.Path) -> list:
    recs = []
    for f in sorted(out.glob("tests-*.jsonl")):
        recs += [json.loads(ln) for ln in f.read_text().splitlines() if ln.strip()]
    return recs


def slowest(recs, n=TOP) -> list:
    return sorted(recs, key=lambda r: -r["cpu"])[:n]


def report(run: dict, recs: list) -> str:
    total = sum(r["cpu"] for r in recs)
    lines = [f"`make test` measured by `python -m fred.bench testtime` on revision {run['revision']}: "
             f"**{run['wall']:,.0f} s wall, {run['cpu']:,.0f} s CPU** (make, pytest, its workers and every "
             f"build under them) for {len(recs):,} tests ({run['summary']}); {run['cores']} cores, load "
             f"average {run['load']} when it started (other work on the machine stretches the wall "
             f"time, not the CPU time), {run['builds']} Verilator builds made (the others were in "
             f"the build cache). Per test (setup to teardown, the worker and its children): "
             f"{total:,.0f} s CPU in all. The {min(TOP, len(recs))} slowest by CPU:", "",
             "| test | CPU s | wall s |", "|---|---|---|"]
    lines += [f"| `{r['test']}` | {r['cpu']:.1f} | {r['wall']:.1f} |" for r in slowest(recs)]
    return "\n".join(lines)


def publish(text: str, begin: str = BEGIN, end: str = END):
    rewrite_block(DOC, begin, end, text)


def regress_report(runs: dict) -> str:
    """The README table of ``make regress-GROUP`` runs (``runs``: group -> figures)."""
    lines = ["`make regress-GROUP` as measured by `python -m fred.benchmarks.testtime --regress GROUP` "
             "(wall and CPU time of make and every process under it; 2 workers):", "",
             "| target | tests | wall | CPU | cores, load at start | builds made | revision |",
             "|---|---|---|---|---|---|---|"]
    for g in GROUPS:
        r = runs.get(g)
        if r is None:
            lines.append(f"| `make regress-{g}` | not measured yet | | | | | |")
            continue
        lines.append(f"| `make regress-{g}` | {r['summary']} | {r['wall'] / 60:,.1f} min | "
                     f"{r['cpu'] / 60:,.1f} min | {r['cores']}, {r['load']} | {r['builds']} | "
                     f"{r['revision']}{'' if r['exit'] == 0 else ' (FAILED)'} |")
    return "\n".join(lines)


def regress(groups) -> int:
    unknown = [g for g in groups if g not in GROUPS + ("all",)]
    if unknown or not groups:
        print(f"fred: error: --regress {' '.join(unknown) or '(nothing)'}: the groups are "
              f"{', '.join(GROUPS)} or all", file=sys.stderr)
        return 2
    groups = GROUPS if "all" in groups else tuple(groups)
    runs = json.loads(REGRESS_JSON.read_text()) if REGRESS_JSON.is_file() else {}
    failed = 0
    for g in groups:
        out = pathlib.Path(tempfile.mkdtemp(prefix=f"fred-regress-{g}-"))
        print(f"running make regress-{g} (records in {out}) ...", flush=True)
        run = measure(out, target=f"regress-{g}")
        failed |= run["exit"] != 0
        runs[g] = run
        REGRESS_JSON.parent.mkdir(parents=True, exist_ok=True)
        REGRESS_JSON.write_text(json.dumps(runs, indent=1))
        recs = tests_of(out)
        print(f"make regress-{g}: {run['wall']:,.0f} s wall, {run['cpu']:,.0f} s CPU, {run['summary']}")
        for r in slowest(recs, 5):
            print(f"  {r['cpu']:8.1f} s CPU  {r['test']}")
    text = regress_report(runs)
    print(text)
    publish(text, RBEGIN, REND)
    return 1 if failed else 0


def main(argv=()) -> int:
    argv = list(argv)
    if argv[:1] == ["--regress"]:
        return regress(argv[1:])
    if argv[:1] == ["--from"] and len(argv) == 2:
        out = pathlib.Path(argv[1])
        if not (out / "run.json").is_file():
            print(f"fred: error: --from {argv[1]}: no run.json there (not a testtime run folder)",
                  file=sys.stderr)
            return 2
        run = json.loads((out / "run.json").read_text())
    elif argv:
        print(f"fred: error: testtime takes no argument but --from DIR or --regress GROUP..., "
              f"not {' '.join(argv)}",
              file=sys.stderr)
        return 2
    else:
        out = pathlib.Path(tempfile.mkdtemp(prefix="fred-testtime-"))
        print(f"running make test (records in {out}) ...", flush=True)
        run = measure(out)
    text = report(run, tests_of(out))
    print(text)
    if run["exit"] != 0:
        print(f"make test failed (exit {run['exit']}): the README block is not rewritten; "
              f"log in {out / 'pytest.log'}", file=sys.stderr)
        return 1
    publish(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
