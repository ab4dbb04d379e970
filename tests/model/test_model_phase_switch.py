"""The measured phase-switch latency reaches the model: an in-switch collective pays it once."""

import pytest

from fred.model.system import params as P
from fred.model.collectives.api import collective_time
from fred.contract.timing import load_timing
from fred.model.system.timing import switch_timing
from fred.model.network.topology import single_switch


def test_embedded_timing_carries_the_measured_phase_switch():
    tf = load_timing()
    st = switch_timing(tf)
    assert st.phase_switch_cycles == tf.summary["phase_switch_cycles"] > 0
    assert P.default_params().switch.phase_switch_cycles == st.phase_switch_cycles


def test_in_switch_all_reduce_pays_one_phase_switch():
    t = single_switch(4, 1e9, 0.0, in_switch=True)
    base = P.SwitchTiming(100, 1e9, 1.0, "test")
    phased = P.SwitchTiming(100, 1e9, 1.0, "test", phase_switch_cycles=400)
    r1 = collective_time(t, "all-reduce", None, 1e9, timing=base)
    r2 = collective_time(t, "all-reduce", None, 1e9, timing=phased)
    assert r2.time - r1.time == pytest.approx(400e-9)


def test_negative_phase_switch_is_rejected():
    with pytest.raises(ValueError, match="phase_switch_cycles must be >= 0, got -1"):
        P.SwitchTiming(1, 1e9, 1.0, "x", phase_switch_cycles=-1)
