"""Functional coverage (sim/benches/cover.py): classification of operands, the cover points' export,
merge and report, and the empty-bin verdict ``make coverage`` fails on. No simulator."""

import numpy as np
import pytest
import yaml

from fred.sim.benches import cover as C
from fred.sim.golden.elem import from_values, special_values


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_value_classes(dtype):
    sp = special_values(dtype)
    assert set(C.value_classes(dtype, sp)) == set(C.CLASSES)
    one, big = from_values(dtype, np.array([1.0, -0.0])), from_values(dtype, np.array([np.inf]))
    assert list(C.value_classes(dtype, one)) == ["normal", "zero"]
    assert list(C.value_classes(dtype, big)) == ["inf"]


def test_tie_mask():
    man = {"fp16": 10, "bf16": 7, "fp32": 23}
    for dtype, M in man.items():
        a = from_values(dtype, np.array([1.0, 1.0, 1.0, 3.0, np.inf]))
        half = 2.0 ** -(M + 1)          # half an ulp at 1
        b = from_values(dtype, np.array([half, 2 * half, 1.5 * half, half, 1.0]))
        assert C.tie_mask(dtype, a, b).tolist() == [True, False, False, False, False], dtype


def _sample(point, b):
    fn = {"fred.cell.mode_class_stall": C._cell, "fred.fabric.kind_ports_middle": C._fabric,
          "fred.switch.round_vc": C._round_vc, "fred.switch.transition": C._transition,
          "fred.switch.preemption": C._preemption, "fred.switch.ctrl_fanout": C._fanout}[point]
    fn(*b) if isinstance(b, tuple) else fn(b)


def test_export_merge_report_and_empty_bins(tmp_path, monkeypatch):
    monkeypatch.setenv(C.ENV, str(tmp_path / "runs"))
    with pytest.raises(ValueError, match="no coverage files"):
        C.report([], tmp_path / "m.yml")
    left = ("fred.switch.preemption", C.PREEMPTION_BINS[-1])
    for point, bins in C.POINTS.items():
        for b in bins:
            if (point, b) != left:
                _sample(point, b)
    first = C.export("unit")
    table, empty = C.report([first], tmp_path / "m1.yml")
    assert empty == [left]
    assert "EMPTY" in table and f"total: {sum(map(len, C.POINTS.values())) - 1} of" in table
    _sample(*left)
    second = C.export("unit")
    table, empty = C.report([first, second], tmp_path / "m2.yml")
    assert empty == [] and "EMPTY" not in table
    merged = yaml.safe_load((tmp_path / "m2.yml").read_text())
    hits = merged["fred.switch.round_vc"]["bins:_hits"]
    assert hits["MP"] == 2      # the merge sums the exports (the second export is cumulative)


def test_sampling_is_off_without_the_variable(monkeypatch):
    monkeypatch.delenv(C.ENV, raising=False)
    assert not C.enabled() and C.export("x") is None
