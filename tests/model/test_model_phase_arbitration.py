"""FRED switches run one phase at a time (FRED-SPEC §4): priority classes time-share a switch,
MP > PP > DP, a flow that preempts pays the measured preemption latency and the flow it
interrupts a phase switch. Elsewhere (meshes, generic switches) classes only meet on links."""

import pytest

from fred.model.system import params as P
from fred.model.training.estimator import estimate
from fred.model.collectives.flowsim import Sim
from fred.contract.timing import load_timing
from fred.model.system.timing import switch_timing
from fred.model.network.topology import Topology, build_fabric, single_switch

B = 1e9                                   # bytes/s per port
TM = P.SwitchTiming(100, 1e9, 1.0, "test", phase_switch_cycles=7, preemption_cycles=21, activation_cycles=6)


def _overlap(fred_switches, mp_prio=2, dp_prio=0):
    """DP All-Reduce on ports 0,1 (1 ms alone); MP All-Reduce on ports 2,3 (0.5 ms) from 0.2 ms."""
    t = single_switch(4, B, 0.0, in_switch=True, timing=TM, fred_switches=fred_switches)
    s = Sim(t)
    dp = s.collective("all-reduce", [0, 1], 1e6, priority=dp_prio, label="dp")
    go = s.delay(0.2e-3)
    mp = s.collective("all-reduce", [2, 3], 0.5e6, deps=[go], priority=mp_prio, label="mp")
    return s, dp, mp, s.run()


def test_higher_class_takes_the_switch_and_pays_the_preemption():
    s, dp, mp, r = _overlap(True)
    lat = TM.latency_s + TM.phase_switch_s          # an in-switch All-Reduce's own latency
    # MP waits for the DP round in flight: preemption less the activation it pays anyway
    assert TM.preemption_delay_s == pytest.approx(15e-9)
    assert r.finish[mp] == pytest.approx(0.2e-3 + 0.5e-3 + lat + 15e-9, rel=1e-9)
    # DP is stopped for the whole MP burst and loses two phase switches (to MP and back)
    assert TM.resume_delay_s == pytest.approx(14e-9)
    assert r.finish[dp] == pytest.approx(1e-3 + 0.5e-3 + lat + 14e-9, rel=1e-9)
    assert (r.preemptions, r.resumes) == (1, 1)
    assert r.preemption_latency == pytest.approx(15e-9 + 14e-9)


def test_without_fred_switches_disjoint_ports_do_not_interact():
    s, dp, mp, r = _overlap(False)
    lat = TM.latency_s + TM.phase_switch_s
    assert r.finish[dp] == pytest.approx(1e-3 + lat, rel=1e-9)
    assert r.finish[mp] == pytest.approx(0.7e-3 + lat, rel=1e-9)
    assert r.preemptions == 0


def test_one_class_is_one_phase():
    """Flows of one class on disjoint ports run together (the compiler routes them as one
    phase): a FRED switch changes nothing, and nobody is preempted."""
    a = _overlap(True, mp_prio=0)[3]
    b = _overlap(False, mp_prio=0)[3]
    assert list(a.finish) == pytest.approx(list(b.finish), rel=1e-12)
    assert a.preemptions == 0


def test_lower_class_arriving_later_waits_without_preempting():
    t = single_switch(4, B, 0.0, in_switch=True, timing=TM, fred_switches=True)
    s = Sim(t)
    mp = s.collective("all-reduce", [2, 3], 1e6, priority=2, label="mp")
    go = s.delay(0.2e-3)
    pp = s.transfer(0, 1, 0.5e6, deps=[go], priority=1, label="pp")
    r = s.run()
    assert r.preemptions == 0
    # PP is starved while MP streams (the fabric is released with MP's last byte), then runs
    assert r.finish[pp] == pytest.approx(1.5e-3 + TM.latency_s, rel=1e-6)


def _side_road():
    """npu0 -(B/2)- npu1 -(B)- S -(B)- npu2, npu3: npu0's traffic is slowed before the switch."""
    t = Topology("side", timing=TM, fred_switches=True)
    n = [t.add_node("npu", f"n{i}") for i in range(4)]
    sw = t.add_node("switch", "S")
    t.add_link(n[0], n[1], B / 2, 0.0)
    for i in (1, 2, 3):
        t.add_link(n[i], sw, B, 0.0)
    return t


def test_lower_class_gets_the_fabric_time_left():
    """An MP flow limited to B/2 *before* the switch keeps its fabric busy half the time; a DP
    flow through the same switch (other ports) gets the other half."""
    t = _side_road()
    s = Sim(t)
    mp = s.transfer(0, 2, 1e6, priority=2, label="mp")
    dp = s.transfer(3, 1, 0.5e6, label="dp")
    r = s.run()
    assert r.finish[mp] == pytest.approx(2e-3 + TM.latency_s, rel=1e-6)
    assert r.finish[dp] == pytest.approx(1e-3 + TM.latency_s, rel=1e-6)     # B/2, not B
    t.fred_switches = False
    s = Sim(t)
    s.transfer(0, 2, 1e6, priority=2, label="mp")
    dp = s.transfer(3, 1, 0.5e6, label="dp")
    assert s.run().finish[dp] == pytest.approx(0.5e-3 + TM.latency_s, rel=1e-6)


def test_occupancy_is_per_port_not_per_flow():
    """Two MP flows sharing a port at B/2 each keep that port -- and so the fabric -- busy all
    the time: a DP flow elsewhere on the switch waits for both."""
    t = single_switch(4, B, 0.0, timing=TM, fred_switches=True)
    s = Sim(t)
    s.transfer(2, 3, 0.5e6, priority=2, label="mp")
    s.transfer(2, 3, 0.5e6, priority=2, label="mp")
    dp = s.transfer(0, 1, 0.5e6, label="dp")
    r = s.run()
    assert r.finish[dp] == pytest.approx(1.5e-3 + TM.latency_s, rel=1e-6)


def test_only_fred_fabrics_arbitrate():
    assert not build_fabric("mesh").fred_switches
    for f in ("fred-a", "fred-b", "fred-c", "fred-d"):
        assert build_fabric(f).fred_switches


def test_measured_preemption_reaches_the_model():
    tf = load_timing()
    st = switch_timing(tf)
    assert st.preemption_cycles == tf.summary["preemption_cycles_max"] > 0
    assert st.preemption_cycles >= st.phase_switch_cycles       # a preemption includes a switch
    sw = tf.data["switch"]
    act = sw["cut_through_cycles"]["activation"] if st.cut_through else sw["activation_cycles"]
    assert 0 < st.activation_cycles == act["new_config"]
    assert st.preemption_delay_s == pytest.approx((st.preemption_cycles - st.activation_cycles) / st.clock_hz)
    assert P.default_params().switch.preemption_cycles == st.preemption_cycles
    with pytest.raises(ValueError, match="preemption_cycles must be >= 0, got -3"):
        P.SwitchTiming(1, 1e9, 1.0, "x", preemption_cycles=-3)
    with pytest.raises(ValueError, match="activation_cycles must be >= 0, got -1"):
        P.SwitchTiming(1, 1e9, 1.0, "x", activation_cycles=-1)


def test_training_schedule_uses_vc_priorities_on_fred():
    """Transformer-17B (MP, DP and PP overlap): on Fred-D MP preempts DP in the switches; the
    mesh has no such arbitration."""
    d = estimate("transformer-17b", "fred-d")
    m = estimate("transformer-17b", "mesh")
    assert d.preemptions > 0
    assert m.preemptions == 0
