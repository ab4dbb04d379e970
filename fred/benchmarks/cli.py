"""CLI start-up benchmark (``make bench``, ``python -m fred.bench cli``).

Runs each command in a fresh interpreter (``python -m fred ...``, as the ``fred`` script does)
several times and reports the median wall time and the median CPU time of the child (user +
system; the machine is shared, so CPU time is the fairer figure). Target (issue 12): ``fred
--help``, ``fred route`` and ``fred collective`` on the wafer well under 0.5 s. The heavy
packages each command imports are listed too (none for ``--version``/``--help``).
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

#: label -> fred arguments
COMMANDS = {
    "fred --version": ["--version"],
    "fred --help": ["--help"],
    "fred route (8 ports, one flow)": ["route", "--ports", "8", "--flow", "0,1>2"],
    "fred collective (wafer mesh)": ["collective", "--group", "0-19", "--size", "1GiB"],
    "fred collective --fabric all": ["collective", "--fabric", "all", "--size", "1GiB"],
    "fred verilog rd (Amaranth)": ["verilog", "rd"],  # to stdout, discarded
}

HEAVY = ("numpy", "amaranth", "matplotlib", "yaml", "cocotb")

_PROBE = ("import sys, runpy; sys.argv = ['fred', *sys.argv[1:]]\n"
          "try:\n    runpy.run_module('fred', run_name='__main__')\n"
          "except SystemExit:\n    pass\n"
          "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & set(%r))), file=sys.stderr)")


def time_command(argv, runs: int = 7) -> dict:
    """Median wall and child CPU seconds of ``python -m fred ARGV`` over ``runs`` runs."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "fred", *argv], capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        if r.returncode != 0:
            raise RuntimeError(f"fred {' '.join(argv)} exited {r.returncode}: {r.stderr.strip()[:200]}")
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "runs": runs}


def heavy_imports(argv) -> list:
    """The heavy packages (:data:`HEAVY`) imported by ``fred ARGV``."""
    r = subprocess.run([sys.executable, "-c", _PROBE % (HEAVY,), *argv], capture_output=True, text=True)
    return r.stderr.strip().splitlines()[-1].split() if r.stderr.strip() else []


def main(runs: int = 7):
    print(f"fred start-up, fresh interpreter, median of {runs} runs (target: --help, route and "
          f"collective well under 0.5 s)")
    print(f"{'command':34} {'wall s':>7} {'cpu s':>7}  heavy imports")
    for label, argv in COMMANDS.items():
        t = time_command(argv, runs)
        heavy = ", ".join(heavy_imports(argv)) or "-"
        print(f"{label:34} {t['wall_s']:7.3f} {t['cpu_s']:7.3f}  {heavy}", flush=True)


if __name__ == "__main__":
    main()
