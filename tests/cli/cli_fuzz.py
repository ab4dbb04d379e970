"""Fuzz harness of the ``fred`` command line: bad option values and malformed input files.

Every case runs in process through :func:`fred.cli.main` (a watchdog per case, standard output
and error captured) and is judged by :func:`problems`:

* ``traceback``: an exception escaped ``main`` (anything but the exit status);
* ``hang``: the case ran longer than its time limit;
* ``exit N``: an exit status other than 0 (done) or 2 (refused);
* ``error form``: a refusal that is not exactly one line ``fred: error: ...`` with nothing on
  standard output;
* ``unnamed``: a refusal whose line does not name what was bad (the option and the value, or
  the input file);
* ``accepted``: a value that must be refused (out of its documented range, not a number ...)
  was taken;
* ``non-finite``: a result with ``nan``/``inf`` (text or JSON), or a negative time;
* ``ignored``: (option cases) a value that differs from the default changed nothing in the
  output: the option does not apply to that command line and was silently dropped.

Slow work never starts: the Verilator, yosys and nextpnr runs and the Dask cluster of the
command being fuzzed are replaced by a stand-in that stops the case as "accepted, work started"
(:func:`heavy_work_stopped`), after every option has been checked.

Cases come from :mod:`cli_fuzz_cases` (options found by walking the real parsers, nasty values
per option type) and :mod:`cli_fuzz_files` (real example files, mutated). Run it as a script for
the big run (``python tests/cli/cli_fuzz.py --help``); tests/cli/test_cli_bad_inputs.py runs a fixed
sample in ``make test`` and the whole set under ``@pytest.mark.regress``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import os
import re
import resource
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field

#: CPU seconds a case may take (most accepted cases here take ~1 s; the largest documented
#: value of an option may take more: `collective --chunks 1024` on the mesh is ~45 s), and the
#: wall time, as a multiple of it
LIMIT_S = 60.0
WALL_FACTOR = 10
#: memory a case may use (the harness sets it on its own process: a blow-up is a failure, not
#: a dead machine)
MEMORY_LIMIT = 6 * 2**30

#: words of a refusal by a rule across options
ACROSS = ("needs", "does not apply", "only applies", "exclude each other", "give either", "given twice",
          "takes no", "not both", "is only for")
NONFINITE = re.compile(r"(?<![A-Za-z_])(nan|inf|infinity)(?![A-Za-z_])", re.I)


class WorkStarted(BaseException):
    """Raised by the stand-in of slow work: every check before it passed."""


class Hang(BaseException):
    pass


#: (module, attribute) of the slow work of each command; "Class.method" patches a method
HEAVY = [
    ("fred.sim.characterize.run", "characterize"),
    ("fred.sim.characterize.clock", "measure_clock"),
    ("fred.commands.compare", "compare"),
    ("fred.sim.benches.cells", "run_cell_regression"),
    ("fred.sim.characterize.faults", "run_faults"),
    ("fred.jobs", "JobRunner.__enter__"),
    ("fred.hdl.cells.microswitches", "verilog_build"),
    ("fred.hdl.fabric.recursive", "verilog_build"),
    ("fred.hdl.switch.top", "verilog_build"),
    ("fred.hdl.crossbar", "verilog_build"),
    ("fred.hdl.routing.placement", "study"),
    # the same functions where the commands read them: their subpackages export them
    ("fred.sim.characterize", "characterize"),
    ("fred.sim.characterize", "measure_clock"),
    ("fred.sim.benches", "run_cell_regression"),
    ("fred.sim.characterize", "run_faults"),
    ("fred.hdl.cells", "verilog_build"),
    ("fred.hdl.fabric", "verilog_build"),
    ("fred.hdl.switch", "verilog_build"),
    ("fred.hdl.routing", "study"),
]


def _stand_in(*args, **kwargs):
    raise WorkStarted()


@contextlib.contextmanager
def heavy_work_stopped():
    """Replace the slow work of every command by :func:`_stand_in` (restored on exit)."""
    saved = []
    try:
        for modname, attr in HEAVY:
            obj = importlib.import_module(modname)
            *owner, name = attr.split(".")
            for part in owner:
                obj = getattr(obj, part)
            saved.append((obj, name, obj.__dict__[name] if name in vars(obj) else getattr(obj, name)))
            setattr(obj, name, _stand_in)
        yield
    finally:
        for obj, name, old in reversed(saved):
            setattr(obj, name, old)


@dataclass
class Case:
    """One command line. ``{d}`` in ``argv`` is the folder of the case's files."""

    argv: list
    #: the refusal must contain one string of each group (e.g. [["--size"], ["'0.5'", "0.5"]])
    names: list = field(default_factory=list)
    #: True: must be refused; None: either way
    must_fail: bool | None = None
    #: environment variables set for the case
    env: dict = field(default_factory=dict)
    #: argv of a reference run: when both succeed with the same output, the case's option was ignored
    reference: list | None = None
    limit: float = LIMIT_S
    label: str = ""

    def line(self) -> str:
        import shlex

        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        cmd = " ".join(shlex.quote(a if len(a) < 80 else a[:60] + "...") for a in self.argv)
        return (env + " " if env else "") + "fred " + cmd


@dataclass
class Outcome:
    rc: int | None
    out: str
    err: str
    seconds: float         # wall time
    crash: str = ""        # traceback text, or "hang"
    started: bool = False  # the slow work was reached


def _alarm(signum, frame):
    raise Hang()


@contextlib.contextmanager
def _environment(env):
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(argv, env=None, limit=LIMIT_S) -> Outcome:
    """Run ``fred argv`` in process (the slow work must already be stopped, see
    :func:`heavy_work_stopped`)."""
    from fred.cli import main

    out, err = io.StringIO(), io.StringIO()
    # CPU time (the machine may be shared: wall time says little) and, for a case blocked in a
    # read, wall time
    old = signal.signal(signal.SIGALRM, _alarm), signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, limit)
    signal.setitimer(signal.ITIMER_REAL, limit * WALL_FACTOR)
    t0 = time.perf_counter()
    rc, crash, started = None, "", False
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _environment(env or {}):
            rc = main(list(argv))
    except WorkStarted:
        started, rc = True, 0
    except Hang:
        crash = "hang"
    except SystemExit as exc:  # main returns its status; it never exits
        crash = f"SystemExit({exc.code!r}) escaped main"
    except BaseException:  # noqa: BLE001  (that is what is looked for)
        crash = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, old[0])
        signal.signal(signal.SIGPROF, old[1])
    return Outcome(rc, out.getvalue(), err.getvalue(), time.perf_counter() - t0, crash, started)


def _json_bad(out: str) -> str:
    """A non-finite number or a negative time in JSON output ("" when fine or not JSON)."""
    try:
        doc = json.loads(out)
    except ValueError:
        return ""
    todo = [("", doc)]
    while todo:
        key, v = todo.pop()
        if isinstance(v, dict):
            todo += [(str(k), x) for k, x in v.items()]
        elif isinstance(v, list):
            todo += [(key, x) for x in v]
        elif isinstance(v, float):
            if not math.isfinite(v):
                return f"{key} = {v}"
            if v < 0 and (key.endswith("_s") or "time" in key):
                return f"{key} = {v}"
    return ""


def problems(case: Case, o: Outcome, reference: Outcome | None = None) -> list[str]:
    """What is wrong with ``o``, the outcome of ``case`` (empty: nothing)."""
    if o.crash == "hang":
        return [f"hang (> {case.limit:g} s of CPU or {case.limit * WALL_FACTOR:g} s)"]
    if o.crash:
        last = [ln for ln in o.crash.strip().splitlines() if ln.strip()][-1]
        return [f"traceback: {last[:200]}"]
    found = []
    if o.rc not in (0, 2):
        found.append(f"exit {o.rc}")
    if o.rc == 2:
        lines = o.err.splitlines()
        if len(lines) != 1 or not lines[0].startswith("fred: error: ") or o.out:
            found.append(f"error form: {o.err[:200]!r} / stdout {o.out[:80]!r}")
        else:
            msg = lines[0]
            # a rule across options names the options; the value is named once it is reached
            across = any(w in msg for w in ACROSS)
            for group in case.names:
                if across and any(n in msg for g in case.names for n in g):
                    break  # a rule across options: naming one of them, or the value, is enough
                if group and not any(n in msg for n in group):
                    found.append(f"unnamed: expected one of {group[:3]!r} in {msg[:240]!r}")
                    break
    if o.rc == 0:
        if case.must_fail:
            found.append("accepted" + (" (work started)" if o.started else ""))
        bad = _json_bad(o.out)
        if bad:
            found.append(f"non-finite: {bad}")
        elif not o.out.lstrip().startswith("{") and NONFINITE.search(o.out):  # text: (names may say nan)
            found.append(f"non-finite: {NONFINITE.search(o.out).group(0)!r} in the output")
        try:
            o.out.encode("utf-8")
        except UnicodeEncodeError:
            found.append("output cannot be encoded as UTF-8")
        if (reference is not None and reference.rc == 0 and not o.started and not reference.started
                and reference.out == o.out and reference.err == o.err):
            found.append("ignored: the output is the same without the option")
    return found


def limit_memory(limit=MEMORY_LIMIT):
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


@dataclass
class Report:
    cases: int = 0
    seconds: float = 0.0
    failures: list = field(default_factory=list)  # (case, outcome, problems)

    def classes(self) -> dict:
        by = {}
        for case, o, ps in self.failures:
            for p in ps:
                by.setdefault(p.split(":")[0], []).append((case, o, p))
        return by

    def summary(self, examples=3) -> str:
        lines = [f"{self.cases} cases, {len(self.failures)} with problems, {self.seconds:.0f} s"]
        for cls, items in sorted(self.classes().items()):
            lines.append(f"  {cls}: {len(items)}")
            for case, o, p in items[:examples]:
                lines.append(f"    {case.line()[:300]}")
                lines.append(f"      -> {p[:300]}")
        return "\n".join(lines)


def run_cases(cases, folder, report=None, progress=None) -> Report:
    """Run ``cases`` (their ``{d}`` is ``folder``) with the slow work stopped."""
    report = report or Report()
    t0 = time.perf_counter()
    refs = {}
    with heavy_work_stopped():
        for i, case in enumerate(cases):
            argv = [a.replace("{d}", str(folder)) for a in case.argv]
            o = run(argv, case.env, case.limit)
            ref = None
            if case.reference is not None and o.rc == 0:
                key = tuple(case.reference)
                if key not in refs:
                    refs[key] = run([a.replace("{d}", str(folder)) for a in case.reference])
                ref = refs[key]
            ps = problems(case, o, ref)
            report.cases += 1
            if ps:
                report.failures.append((case, o, ps))
            if progress:
                progress(i, case, o, ps)
    report.seconds += time.perf_counter() - t0
    return report


def main(argv=None) -> int:
    import argparse
    import tempfile

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cli_fuzz_cases
    import cli_fuzz_files

    ap = argparse.ArgumentParser(description="fuzz the fred command line (tests/cli/cli_fuzz.py)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--files", type=int, default=40, help="mutations per example file")
    ap.add_argument("--only", choices=("options", "files"), default=None)
    ap.add_argument("--match", default="", help="run the cases whose command line contains this")
    ap.add_argument("--examples", type=int, default=4)
    ap.add_argument("--log", default="", help="write every failure to this file")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    limit_memory()
    with tempfile.TemporaryDirectory(prefix="fred-fuzz-") as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            folder = os.path.join(tmp, "files")
            os.mkdir(folder)
            cases = []
            if a.only in (None, "options"):
                cases += cli_fuzz_cases.option_cases(folder, seed=a.seed)
            if a.only in (None, "files"):
                cases += cli_fuzz_files.file_cases(folder, per_file=a.files, seed=a.seed)
            cases = [c for c in cases if a.match in c.line()]
            print(f"{len(cases)} cases", flush=True)

            def show(i, case, o, ps):
                if a.verbose or ps:
                    print(f"[{i}] {o.seconds:5.1f}s rc={o.rc} {case.line()[:200]}", flush=True)
                    for p in ps:
                        print(f"      {p[:300]}", flush=True)
                elif i % 200 == 0:
                    print(f"[{i}] ...", flush=True)

            report = run_cases(cases, folder, progress=show)
        finally:
            os.chdir(cwd)
    print(report.summary(a.examples))
    if a.log:
        with open(a.log, "w", errors="backslashreplace") as fh:
            for case, o, ps in report.failures:
                fh.write(f"{case.line()}\n  rc={o.rc} {o.seconds:.1f}s\n")
                for p in ps:
                    fh.write(f"  {p}\n")
                if o.crash and o.crash != "hang":
                    fh.write("  " + o.crash.replace("\n", "\n  ") + "\n")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
