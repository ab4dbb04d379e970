"""The fault bench on the switch RTL (sim/benches/faults.py): Go-Back-N endpoints over links that
drop, corrupt, duplicate and delay flits; every checker shown to catch a broken recovery.

make test: one run at the highest rate with every fault kind and phase kind at once, and the
two endpoint mutants (same build). make regress: the rate x fault kind x phase kind matrix and
the switch-build mutants (one Verilator build each).
"""

import pytest

from fred.sim.faults.bench import PHASE_KINDS
from fred.sim.faults.inject import FAULT_KINDS
from fred.sim.characterize.faults import goodput_curve, run_faults


def _ok(res):
    assert res["check"] == "pass", res["check"]
    return res


def test_faults_every_kind_at_once_recovers_bit_exact():
    """Rate 1e-2 per flit on every link, both directions, all four fault kinds, all four phase
    kinds at once; sequence numbers wrap (start 65536 - 16)."""
    res = _ok(run_faults(ports=4, rates=(1e-2,), packets=32, seed=3))
    (r,) = res["runs"]
    inj = r["injected"]
    assert all(inj[f"in_{k}"] + inj[f"out_{k}"] > 0 for k in FAULT_KINDS), inj
    assert sum(v for k, v in inj.items() if k.startswith("out")) > 0, inj
    assert r["retransmissions"] > 0 and r["nacks"] > 0 and 0 < r["goodput"] < 1
    assert r["delivered"] == res["baseline"]["delivered"] == 32 * (4 + 1 + 3 + 1)
    sw = r["switch"]
    assert sw["err_crc"] == inj["in_corrupt"] and sw["err_dup"] > 0 and sw["err_stale"] > 0
    assert res["baseline"]["switch"] == {k: 0 for k in sw}          # fault-free: nothing counted
    curve = goodput_curve(res)
    assert curve["points"][0]["rate_per_flit"] == 0.01


@pytest.mark.parametrize("mutant, needle", [
    ("accept-gap", "lost, duplicated or out of order"),       # delivery checker
    ("retx-late", "deadlock"),                                 # progress watchdog
])
def test_broken_endpoint_recovery_is_caught(mutant, needle):
    res = run_faults(ports=4, rates=(1e-2,), packets=32, seed=3, mutant=mutant, baseline=False)
    assert res["check"].startswith("FAILED") and needle in res["check"], res["check"]


@pytest.mark.regress
@pytest.mark.parametrize("fault, needle", [
    ("no-align", "not bit-exact"),                  # bit-exact checker (golden model)
    ("nack-no-fanout", "not fanned out"),           # control fan-out checker
    ("no-crc-check", "err_crc"),                    # counter checker
])
def test_broken_switch_recovery_is_caught(fault, needle):
    kw = {"faults": ["corrupt"]} if fault == "no-crc-check" else {}
    res = run_faults(ports=4, rates=(1e-2,), packets=32, seed=3, fault=fault, baseline=False, **kw)
    assert res["check"].startswith("FAILED") and needle in res["check"], res["check"]


@pytest.mark.regress
@pytest.mark.parametrize("phase", PHASE_KINDS)
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_fault_matrix(kind, phase):
    """Rates 1e-4, 1e-3, 1e-2 per flit (one simulation, a reset between runs), one fault kind,
    one phase kind; every check of the bench."""
    res = _ok(run_faults(ports=4, rates=(1e-4, 1e-3, 1e-2), packets=256, seed=11,
                         faults=[kind], kinds=[phase]))
    hi = res["runs"][-1]
    assert sum(hi["injected"].values()) > 0
