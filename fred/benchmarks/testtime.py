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

``--fresh`` (``python -m fred.benchmarks.testtime --fresh``) measures what a fresh machine pays, the figure the README states: it clones this
checkout's ``HEAD`` into a temporary folder, points ``XDG_CACHE_HOME`` at an empty folder there (so
the build cache, the compiler cache and YoWASP's compiled WebAssembly are all cold, as on a CI
machine; pip keeps its own download cache, so no package is downloaded twice) and runs ``make
venv`` and then ``make test`` in the clone, measuring each (wall and CPU time, as above). Its
report lists the Verilator builds the run made, slowest first (wall time of each, from its
cache entry's marker). The clone and its cache are removed afterwards unless ``--keep``.

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
GROUPS = ("cells", "adders", "fabric", "wide", "switch", "links", "characterize", "model", "synth", "formal")
REGRESS_JSON = ROOT / "build" / "regress-time.json"
#: environment variable naming the folder the plugin writes its records into
ENV = "FRED_TESTTIME_DIR"
TOP = 10


# -- the pytest plugin (active only with FRED_TESTTIME_DIR set) ---------------------------------
def _cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _sim_root(env=None) -> pathlib.Path:
    """The Verilator builds' folder of the build cache that ``env`` (default: this process's) selects."""
    from fred.contract.cache import cache_root
    if env is None:
        return cache_root() / "sim"
    saved = {k: os.environ.get(k) for k in ("FRED_BUILD", "XDG_CACHE_HOME", "HOME")}
    try:
        for k in saved:
            if env.get(k) is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = env[k]
        return cache_root() / "sim"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _builds(env=None):
    """Number of Verilator build entries in the build cache (to count the builds a run made)."""
    root = _sim_root(env)
    return sum(1 for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else 0


def build_entries(env=None) -> list:
    """``[(name, wall s)]`` of the complete Verilator build entries of the build cache, slowest first
    (the wall time each marker records)."""
    root, out = _sim_root(env), []
    if root.is_dir():
        for p in root.iterdir():
            try:
                info = json.loads((p / ".complete").read_text())
            except (OSError, ValueError):
                continue
            out.append((p.name, float(info.get("build_s", 0.0))))
    return sorted(out, key=lambda x: -x[1])


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


def _timed(cmd, env, cwd=None) -> tuple:
    """Run ``cmd``; ``(completed process, wall s, CPU s of it and every process under it)``."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, wall, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def measure(out: pathlib.Path, make: str = "make", target: str = "test", root: pathlib.Path = ROOT,
            env: dict | None = None) -> dict:
    """Run ``make TARGET`` in ``root`` with the plugin writing into ``out``; return the run's figures."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ if env is None else env, **{ENV: str(out), "PYTEST_PLUGINS": "fred.benchmarks.testtime"})
    load = os.getloadavg()[0]
    builds0 = _builds(env)
    proc, wall, cpu = _timed([make, "--no-print-directory", "-C", str(root), target], env)
    tail = [summary_line(proc.stdout)]
    run = {"wall": round(wall, 1), "cpu": round(cpu, 1),
           "exit": proc.returncode, "summary": tail[0].strip("= "), "cores": os.cpu_count(),
           "load": round(load, 2), "builds": _builds(env) - builds0, "revision": _revision(root),
           "target": target}
    (out / "run.json").write_text(json.dumps(run))
    (out / "pytest.log").write_text(proc.stdout)
    return run


def _revision(root=ROOT):
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], text=True,
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


def _slowest_table(recs: list) -> list:
    """The table of the :data:`TOP` slowest tests by CPU (Markdown lines)."""
    return (["| test | CPU s | wall s |", "|---|---|---|"]
            + [f"| `{r['test']}` | {r['cpu']:.1f} | {r['wall']:.1f} |" for r in slowest(recs)])


def report(run: dict, recs: list) -> str:
    total = sum(r["cpu"] for r in recs)
    lines = [f"`make test` measured by `python -m fred.bench testtime` on revision {run['revision']}: "
             f"**{run['wall']:,.0f} s wall, {run['cpu']:,.0f} s CPU** (make, pytest, its workers and every "
             f"build under them) for {len(recs):,} tests ({run['summary']}); {run['cores']} cores, load "
             f"average {run['load']} when it started (other work on the machine stretches the wall "
             f"time, not the CPU time), {run['builds']} Verilator builds made (the others were in "
             f"the build cache). Per test (setup to teardown, the worker and its children): "
             f"{total:,.0f} s CPU in all. The {min(TOP, len(recs))} slowest by CPU:", ""]
    return "\n".join(lines + _slowest_table(recs))


def fresh_report(venv: dict, run: dict, recs: list, builds: list) -> str:
    """The README block of a ``--fresh`` run: ``make venv`` and ``make test`` from a clone with an
    empty build cache, their sum, and the slowest tests."""
    total_wall, total_cpu = venv["wall"] + run["wall"], venv["cpu"] + run["cpu"]
    lines = [f"A fresh clone of revision {run['revision']}, measured by `python -m fred.benchmarks.testtime --fresh` "
             f"(a clone of `HEAD` in a temporary folder, `XDG_CACHE_HOME` an empty folder: no Verilator "
             f"build, compiler cache or compiled yosys to start from, as on a CI machine; pip's download "
             f"cache kept): **`make venv` + `make test`: {total_wall:,.0f} s wall, {total_cpu:,.0f} s CPU** "
             f"(`make venv` {venv['wall']:,.0f} s wall, {venv['cpu']:,.0f} s CPU; `make test` "
             f"{run['wall']:,.0f} s wall, {run['cpu']:,.0f} s CPU: make, pytest, its workers and every "
             f"build under them) for {len(recs):,} tests ({run['summary']}); {run['cores']} cores, load "
             f"average {run['load']} when `make test` started (other work on the machine stretches the wall "
             f"time, not the CPU time), {len(builds)} Verilator builds made. Per test (setup to teardown, "
             f"the worker and its children, builds included): {sum(r['cpu'] for r in recs):,.0f} s CPU in "
             f"all. The {min(TOP, len(recs))} slowest by CPU:", ""]
    return "\n".join(lines + _slowest_table(recs))


def fresh(keep: bool = False) -> int:
    """``--fresh``: clone ``HEAD``, empty caches, ``make venv`` + ``make test``; rewrite the README
    block (only when both succeeded)."""
    import shutil
    base = pathlib.Path(tempfile.mkdtemp(prefix="fred-fresh-"))
    clone, cache, out = base / "fred", base / "cache", base / "records"
    cache.mkdir()
    try:
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", _revision()], check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"fred: error: --fresh: cannot clone {ROOT} ({exc})", file=sys.stderr)
        return 2
    env = {k: v for k, v in os.environ.items()
           if k not in ("FRED_BUILD", "VIRTUAL_ENV", "CCACHE_DIR", "YOWASP_CACHE_DIR", "PYTHONPATH")
           and not k.startswith(("PYTEST", "FRED_"))}
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR") or _pip_cache_dir()
    env["XDG_CACHE_HOME"] = str(cache)
    print(f"fresh clone of {_revision()} in {clone}, build cache {cache}: make venv ...", flush=True)
    load = os.getloadavg()[0]
    proc, wall, cpu = _timed(["make", "--no-print-directory", "-C", str(clone), "venv"], env)
    venv = {"wall": round(wall, 1), "cpu": round(cpu, 1), "exit": proc.returncode, "load": round(load, 2)}
    (base / "venv.log").write_text(proc.stdout)
    if proc.returncode != 0:
        print(f"make venv failed (exit {proc.returncode}); log in {base / 'venv.log'}", file=sys.stderr)
        return 1
    print(f"make venv: {wall:,.0f} s wall, {cpu:,.0f} s CPU; make test ...", flush=True)
    run = measure(out, root=clone, env=env)
    run["venv"] = venv
    (out / "run.json").write_text(json.dumps(run))
    recs, builds = tests_of(out), build_entries(env)
    text = fresh_report(venv, run, recs, builds)
    print(text)
    print(f"\n{len(builds)} Verilator builds (wall s each, from the markers):")
    for name, s in builds:
        print(f"  {s:8.1f}  {name}")
    ok = run["exit"] == 0
    if ok:
        publish(text)
    else:
        print(f"make test failed (exit {run['exit']}): the README block is not rewritten; log in "
              f"{out / 'pytest.log'}", file=sys.stderr)
    if not keep:
        shutil.rmtree(clone, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
    print(f"(records in {out})")
    return 0 if ok else 1


def _pip_cache_dir() -> str:
    """pip's own download cache folder (the one it uses before ``XDG_CACHE_HOME`` is changed)."""
    r = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True)
    d = r.stdout.strip()
    return d if r.returncode == 0 and d else str(pathlib.Path.home() / ".cache" / "pip")


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
    if argv and argv[0] == "--fresh" and set(argv[1:]) <= {"--keep"}:
        return fresh(keep="--keep" in argv)
    if argv[:1] == ["--from"] and len(argv) == 2:
        out = pathlib.Path(argv[1])
        if not (out / "run.json").is_file():
            print(f"fred: error: --from {argv[1]}: no run.json there (not a testtime run folder)",
                  file=sys.stderr)
            return 2
        run = json.loads((out / "run.json").read_text())
    elif argv:
        print(f"fred: error: testtime takes no argument but --fresh [--keep], --from DIR or --regress GROUP..., "
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
