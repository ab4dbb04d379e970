"""The groups of ``make regress`` (Makefile ``regress-cells``, ``regress-fabric``, ...).

Every test marked ``regress`` belongs to exactly one group, by its file (or, for a file whose
regress tests span two groups, by its test function's name); collection adds the group's marker
(``group_cells``, ...), and each ``make regress-GROUP`` runs ``-m "regress and group_GROUP"``.
A regress test of a file named nowhere here stops the collection with one line that names it:
a new slow test cannot fall out of ``make regress``.
"""

from __future__ import annotations

import pathlib

import pytest

#: group -> test files (base names) whose regress tests it runs
REGRESS_GROUPS = {
    "cells": ("test_cells_cocotb.py", "test_crossbar.py", "test_build_cache.py"),
    "adders": ("test_adders.py",),
    "fabric": ("test_fabric_sim.py", "test_routing.py", "test_soak.py"),
    "wide": ("test_wide_fabric.py",),
    "switch": ("test_switch_bench.py", "test_hier.py", "test_switch.py", "test_linkcheck.py",
               "test_switch_online.py", "test_switch_all_to_all.py"),
    "links": ("test_faults.py", "test_sim_faults_cli.py", "test_gbn.py"),
    "characterize": ("test_characterize.py", "test_clock.py", "test_model_vs_rtl_overlap.py"),
    "model": ("test_model_training_table.py", "test_model_streaming.py", "test_cli_bad_inputs.py",
              "test_api_checks.py", "test_model_network.py"),
    "formal": ("test_formal.py",),
}
#: test function name -> group, where it differs from its file's
REGRESS_TESTS = {"test_cell_soak_long": "cells"}


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
