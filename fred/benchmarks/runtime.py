"""``python -m fred.bench runtime``: what ``make run`` costs on a fresh machine, measured.

It clones this checkout's committed ``HEAD`` into a temporary folder, points the build cache at
an empty folder (``XDG_CACHE_HOME``; ``FRED_BUILD`` unset: no Verilator build, no compiler cache,
no pip or yowasp cache from earlier runs), and runs there ``make venv`` (the set-up ``make run``
does first on a fresh clone) and then ``make run``, measuring the wall time and the CPU time (user
+ system of ``make`` and every process under it: Python, pip, Verilator and the C++ compiler,
yosys, the scan's workers) of each. ``make run``'s own step lines (``[run k/N +W s, C s CPU]``
and the characterization's ``[characterize ...]`` lines, the CPU time of its process and its
children so far) give where the CPU goes. It prints the figures and rewrites the README block
between ``<!-- runtime:begin -->`` and ``<!-- runtime:end -->``: the figures there are this
bench's output, never typed.

The figures depend on the machine and its load (the block states the cores and the load average
when the run started; other work stretches the wall time, not the CPU time). A run takes several
minutes of both cores; the clone and the cache are removed afterwards (``--keep`` keeps them),
the log and the figures stay in the records folder it names.

``--from DIR`` formats an earlier run's records (``DIR/runtime.json``, ``DIR/make-run.log``)
without running it again.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from .docblock import rewrite_block

__all__ = ["main", "measure", "report", "breakdown", "BEGIN", "END"]

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "README.md"
BEGIN, END = "<!-- runtime:begin -->", "<!-- runtime:end -->"
#: a step line of make run (fred/run.py) or of its characterization (sim/characterize/run.py)
STEP = re.compile(r"^\[(run|characterize)(?: (\d+)/(\d+))?\s+\+\s*(\d+)s, +(\d+)s CPU\]\s+(.*)$")
DONE = re.compile(r"^\[run\] done in (\d+) s wall, (\d+) s CPU")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(cmd, cwd, env, log: pathlib.Path, echo) -> dict:
    """Run ``cmd``, its output (stdout and stderr) into ``log``, the lines ``echo`` keeps also
    on standard output; its wall and CPU seconds (it and every process under it)."""
    c0, t0 = _children_cpu(), time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            fh.write(line)
            if echo(line):
                print("  " + line.rstrip(), flush=True)
        rc = proc.wait()
    return {"wall": round(time.perf_counter() - t0, 1), "cpu": round(_children_cpu() - c0, 1),
            "exit": rc}


def _git(*args) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], text=True, capture_output=True,
                          check=True).stdout.strip()


def measure(out: pathlib.Path, keep: bool = False, make: str = "make") -> dict:
    """Clone ``HEAD`` into ``out/clone``, an empty cache in ``out/cache``; ``make venv`` then
    ``make run`` there; return the figures (also written to ``out/runtime.json``)."""
    out.mkdir(parents=True, exist_ok=True)
    rev = _git("rev-parse", "HEAD")
    clone, cache = out / "clone", out / "cache"
    cache.mkdir()
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", rev], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("FRED_BUILD", "VIRTUAL_ENV")}
    env["XDG_CACHE_HOME"] = str(cache)
    load = os.getloadavg()[0]
    run = {"revision": rev[:7], "cores": os.cpu_count(), "load": round(load, 2),
           "dirty": bool(_git("status", "--porcelain", "--untracked-files=no"))}
    try:
        run["venv"] = _timed([make, "--no-print-directory", "venv"], clone, env,
                             out / "make-venv.log", lambda ln: False)
        if run["venv"]["exit"] == 0:
            run["run"] = _timed([make, "--no-print-directory", "run"], clone, env,
                                out / "make-run.log", lambda ln: bool(STEP.match(ln) or DONE.match(ln)))
        sim = cache / "fred" / "sim"
        run["builds"] = sum(1 for p in sim.iterdir() if p.is_dir() and not p.name.startswith(".")) \
            if sim.is_dir() else 0
    finally:
        if not keep:
            shutil.rmtree(clone, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
    (out / "runtime.json").write_text(json.dumps(run, indent=1))
    return run


def breakdown(log_text: str) -> list:
    """``[(what, cpu s, wall s)]``: make run's step lines, each with the CPU and wall time until
    the next line (the last until make run's closing line)."""
    marks = []
    for ln in log_text.splitlines():
        m = STEP.match(ln.strip())
        if m:
            kind, k, n, wall, cpu, what = m.groups()
            label = f"{kind} {k}/{n}: {what}" if k else f"{kind}: {what}"
            marks.append([label, int(wall), int(cpu), kind])
            continue
        d = DONE.match(ln.strip())
        if d:
            marks.append(["end", int(d.group(1)), int(d.group(2)), "run"])
    # the characterization's clock starts at its own first line: its offsets are shifted onto
    # make run's (the CPU figures are of the same process, from its start: no shift)
    shift, rows = 0, []
    for i, (label, wall, cpu, kind) in enumerate(marks):
        if kind == "characterize" and i and marks[i - 1][3] == "run":
            shift = marks[i - 1][1]
        marks[i][1] = wall + (shift if kind == "characterize" else 0)
    for (label, wall, cpu, _), nxt in zip(marks, marks[1:]):
        rows.append((label, nxt[2] - cpu, nxt[1] - wall))
    return rows


def report(run: dict, log_text: str) -> str:
    v, r = run["venv"], run.get("run")
    if r is None or r["exit"] != 0 or v["exit"] != 0:
        raise ValueError("make run did not finish: nothing to report")
    total_cpu, total_wall = v["cpu"] + r["cpu"], v["wall"] + r["wall"]
    lines = [f"`make run` on a fresh machine, measured by `python -m fred.bench runtime` on revision "
             f"{run['revision']}: a fresh clone and an empty cache (no `.venv`, no Verilator build, no "
             f"compiler, pip or yowasp cache): **{total_cpu / 60:.1f} min of CPU, {total_wall / 60:.1f} min "
             f"wall** in all (make and every process under it), of which the set-up (`make venv`: "
             f"pip) {v['cpu']:,.0f} s CPU / {v['wall']:,.0f} s wall and `make run` itself "
             f"{r['cpu']:,.0f} s CPU / {r['wall']:,.0f} s wall; {run['builds']} Verilator builds made; "
             f"{run['cores']} cores, load average {run['load']} when it started (other work on the "
             f"machine stretches the wall time, not the CPU time). Where `make run`'s CPU goes (its "
             f"step lines; steps under 1 s left out):", "",
             "| step | CPU s | wall s |", "|---|---:|---:|"]
    for what, cpu, wall in breakdown(log_text):
        if cpu >= 1:
            lines.append(f"| {_md(what)} | {cpu:,} | {wall:,} |")
    return "\n".join(lines)


def _md(text: str) -> str:
    text = re.sub(r"(?:/[^\s/]+)*/?build/", "build/", text)     # no machine path in the README
    return text.replace("|", "\\|")


def main(argv=()) -> int:
    argv = list(argv)
    keep = "--keep" in argv
    argv = [a for a in argv if a != "--keep"]
    if argv[:1] == ["--from"] and len(argv) == 2:
        out = pathlib.Path(argv[1])
        if not (out / "runtime.json").is_file():
            print(f"fred: error: --from {argv[1]}: no runtime.json there (not a runtime run folder)",
                  file=sys.stderr)
            return 2
        run = json.loads((out / "runtime.json").read_text())
    elif argv:
        print(f"fred: error: runtime takes no argument but --keep or --from DIR, not {' '.join(argv)}",
              file=sys.stderr)
        return 2
    else:
        out = pathlib.Path(tempfile.mkdtemp(prefix="fred-runtime-"))
        print(f"running make venv and make run in a fresh clone with an empty cache (records in "
              f"{out}) ...", flush=True)
        run = measure(out, keep=keep)
        if run["dirty"]:
            print("note: the checkout has uncommitted changes; the clone measured its HEAD "
                  f"{run['revision']}", file=sys.stderr)
    log = out / "make-run.log"
    try:
        text = report(run, log.read_text() if log.is_file() else "")
    except ValueError as exc:
        print(f"fred: error: {exc}; logs in {out}", file=sys.stderr)
        return 1
    print(text)
    rewrite_block(DOC, BEGIN, END, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
