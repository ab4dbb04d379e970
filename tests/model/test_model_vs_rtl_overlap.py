"""The flow model's switch-arbitration rule (fred_switches=True) checked against the switch RTL.

Scenario (sim/benches/overlap.py, sim/characterize/overlap.py): on the 4-port bench switch a DP
all-reduce over ports {0,1} streams K packets per port; 40..44 cycles later an MP all-reduce
over {2,3} offers J packets per port (5 offsets = every alignment against the DP rounds of
L + 1 = 5 cycles). Delays = completion with the other phase - completion alone, in cycles.

Tolerance per run: ``measure_overlap.tolerance(L)`` = one packet time (L + 1: the fluid model
has no packet boundaries, the RTL preempts between rounds) + P - 1 (scanner jitter of the
control unit) = 8 cycles.

The Verilator build is tests/sim/test_switch_bench.py's (same Verilog, same build directory); with
it cached the bench part takes about 5 s.
"""

import copy

import pytest

from fred.benchmarks.overlap import model_overlap, proposed_delays, tolerance
from fred.sim.characterize.overlap import DEFAULTS

K, J, L = DEFAULTS["K"], DEFAULTS["J"], DEFAULTS["L"]
OFFSETS = list(DEFAULTS["offsets"])

# Switch figures of the bench build (measure_switch's measurement scenario, FRED_3(4), 2 x int32
# lanes, buffers 12/2, max_len 4, cut-through) and the RTL's delays for the default scenario,
# seed 1 (python -m fred.bench overlap): for the model-only tests, which need no Verilator.
# Re-recorded for the cut-through switch: activation counts from the header (3 / 1 cycles, were
# 6 / 5 from the last flit), preemption 7..12 (was 10..14), MP alone ends at 39 (was 42).
# Preemption 10..13 since measure_switch's scenario runs on the compiled path (other random gaps
# between the preempting packets; the overlap delays themselves are unchanged).
FIGURES = {"params": {"ports": 4, "lanes": 2, "dtype": "int32", "max_len": 4, "fabric_latency": 3},
           "activation_cycles": {"new_config": 3, "same_config": 1},
           "phase_switch_cycles": 7, "preemption_cycles": {"min": 10, "max": 13, "mean": 11.2}}
RECORDED = {
    "params": {"ports": 4, "K": K, "J": J, "L": L, "offsets": OFFSETS},
    "runs": {"dp_alone": {"dp_end": 127, "dp_gap": 0}, "mp_alone": {"mp_end": 39, "mp_first": 4},
             **{f"both@{o}": {"mp_in": o, "dp_gap": 42, "mp_first": f}
                for o, f in zip(OFFSETS, (9, 8, 7, 6, 10))}},
    "dp_delay": dict(zip(OFFSETS, (44, 44, 44, 44, 44))),
    "mp_delay": dict(zip(OFFSETS, (5, 4, 3, 2, 6))),
}



def _errors(r):
    return {k: max(abs(v) for v in r["error"][k].values()) for k in ("dp_delay", "mp_delay")}


@pytest.fixture(scope="module")
def rtl():
    from fred.sim.characterize.overlap import measure_overlap
    return measure_overlap(seed=1)


# -- RTL side -------------------------------------------------------------------------------------
@pytest.mark.regress
def test_rtl_overlap_sane(rtl):
    """Bench plausibility: line rate alone, MP served first, DP resumes and completes. make
    regress-characterize (the cocotb overlap bench: its own build); make test compares the model
    with the recorded RTL figures (test_model_vs_recorded_rtl_overlap)."""
    runs = rtl["runs"]
    assert K * (L + 1) <= runs["dp_alone"]["dp_end"] <= K * (L + 1) + 20
    assert J * (L + 1) <= runs["mp_alone"]["mp_end"] <= J * (L + 1) + 20
    assert runs["dp_alone"]["dp_gap"] == 0               # DP alone streams back to back
    for o in OFFSETS:
        b = runs[f"both@{o}"]
        assert b["mp_in"] == o
        assert rtl["dp_delay"][o] >= J * (L + 1)          # DP gets no fabric time while MP runs
        assert b["dp_gap"] >= J * (L + 1)
        assert 0 <= rtl["mp_delay"][o] <= L + 1 + 2 * rtl["switch_figures"]["phase_switch_cycles"]
        vcs = [vc for _, vc, _ in b["rounds"]]
        first_mp = vcs.index("MP")                        # MP rounds run as one block
        assert vcs[first_mp:first_mp + J] == ["MP"] * J and vcs.count("MP") == J


@pytest.mark.regress
def test_rtl_follows_proposed_rule(rtl):
    """What the RTL does, as a closed form (proposed rule for the model), within the tolerance. make
    regress-characterize, with the bench run it reads."""
    rule = proposed_delays(K, J, L, rtl["switch_figures"])
    tol = tolerance(L)
    for o in OFFSETS:
        assert abs(rtl["dp_delay"][o] - rule["dp_delay"]) <= tol, (o, rtl["dp_delay"], rule)
        assert abs(rtl["mp_delay"][o] - rule["mp_delay"]) <= tol, (o, rtl["mp_delay"], rule)


@pytest.mark.regress
def test_recorded_numbers_current(rtl):
    """The recorded figures/delays used by the model-only tests are this build's. make
    regress-characterize, with the bench run it reads."""
    f = rtl["switch_figures"]
    for k in ("phase_switch_cycles", "activation_cycles"):
        assert f[k] == FIGURES[k]
    assert f["preemption_cycles"]["max"] == FIGURES["preemption_cycles"]["max"]
    assert f["params"]["fabric_latency"] == FIGURES["params"]["fabric_latency"]
    assert rtl["dp_delay"] == RECORDED["dp_delay"] and rtl["mp_delay"] == RECORDED["mp_delay"]


# -- model vs RTL ---------------------------------------------------------------------------------
@pytest.mark.regress
def test_model_vs_rtl_overlap(rtl):
    """make regress-characterize, with the bench run it reads; make test:
    test_model_vs_recorded_rtl_overlap."""
    r = model_overlap(rtl)
    err = _errors(r)
    assert err["dp_delay"] <= r["tolerance"] and err["mp_delay"] <= r["tolerance"], \
        (f"model vs RTL, max |error| {err} > {r['tolerance']} cycles; predicted "
         f"{r['predicted']['dp_delay']} / {r['predicted']['mp_delay']}, measured "
         f"{r['measured']['dp_delay']} / {r['measured']['mp_delay']}")


def test_model_vs_recorded_rtl_overlap():
    """Same check against the recorded RTL numbers (no Verilator: fast feedback on model edits)."""
    r = model_overlap(copy.deepcopy(RECORDED), FIGURES)
    err = _errors(r)
    assert err["dp_delay"] <= r["tolerance"] and err["mp_delay"] <= r["tolerance"], \
        (f"max |error| {err} > {r['tolerance']}: predicted {r['predicted']['dp_delay']} / "
         f"{r['predicted']['mp_delay']}, RTL {RECORDED['dp_delay']} / {RECORDED['mp_delay']}")


# -- model side alone -----------------------------------------------------------------------------
def test_model_overlap_engages_arbitration():
    """The model sets the scenario up so that its FRED arbitration acts: one preemption, one
    resume per run; MP is not slowed by more than its preemption cost, DP loses at least the
    MP burst; alone times are the line-rate times plus the constant latencies."""
    r = model_overlap({"params": {"ports": 4, "K": K, "J": J, "L": L, "offsets": OFFSETS}}, FIGURES)
    pr = r["predicted"]
    lat = FIGURES["params"]["fabric_latency"] + FIGURES["phase_switch_cycles"]
    assert pr["dp_alone"] == pytest.approx(K * (L + 1) + lat)
    assert pr["mp_alone"] == pytest.approx(J * (L + 1) + lat)
    for o in OFFSETS:
        assert pr["preemptions"][o] == 1 and pr["resumes"][o] == 1
        assert pr["dp_delay"][o] >= J * (L + 1)
        assert 0 <= pr["mp_delay"][o] <= FIGURES["preemption_cycles"]["max"]
    assert "measured" not in r


def test_tolerance_check_can_fail():
    """A model that ignored the switch time-sharing (DP unaffected) is caught by the check."""
    fake = copy.deepcopy(RECORDED)
    fake["dp_delay"] = {o: 0 for o in OFFSETS}
    r = model_overlap(fake, FIGURES)
    assert _errors(r)["dp_delay"] > r["tolerance"]


# -- real fault mutants: the overlap bench must fail on each -------------------------------------
def _overlap_caught(fault):
    from fred.sim.characterize.overlap import measure_overlap
    with pytest.raises(AssertionError, match="cocotb tests failed"):
        measure_overlap(K=6, J=2, offsets=(20,), figures=False, fault=fault)


@pytest.mark.regress
def test_overlap_header_off_by_one_caught():
    """Headers carrying phase + 1 (the build tests/sim/test_switch_bench.py's mutant test uses).
    make regress, with that test and its compiled twin
    (tests/sim/test_switch_soak.py::test_switch_soak_catches_a_wrong_header)."""
    _overlap_caught("header-off-by-one")


@pytest.mark.regress
@pytest.mark.parametrize("fault", ["prio-reversed", "credit-twice"])
def test_overlap_mutant_caught(fault):
    """No preemption (DP keeps the fabric while MP waits) and a credit returned twice."""
    _overlap_caught(fault)
