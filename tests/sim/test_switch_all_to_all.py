"""Precompiled all-to-all (hdl/routing/all_to_all.py) on the switch RTL, against online routing.

make test: the compiler's candidates and its choice (pure Python), the switch's ACK/NACK fan-out
to every input of a multi-flow phase (Amaranth simulator), the 4-port switch running a uniform
and a Zipf-skewed all-to-all from its phase table at the targets (>= 0.90 flits/cycle/port,
>= 0.75 of the bound) with every packet checked, under random back-pressure (padded shifts, and
a table cut to 3 phases with the tail online), and with link faults (Go-Back-N recovers), and
the timing file's schema 5 section. make regress: the 12-port figures of the embedded default
measured again (at the targets too).
"""

import copy
import json
import random

import pytest

from fred.contract import packet as pk
from fred.contract.timing import TimingFileError, load_timing, validate_timing
from fred.hdl.routing import (bound_packets, check_matrix, compile_all_to_all, estimate_cycles,
                              online_schedule, uniform_matrix, zipf_matrix)
from fred.hdl.netlist import Flow

# -- the compiler ----------------------------------------------------------------------------


def _is_partial_permutation(pairs):
    return len({s for s, _ in pairs}) == len(pairs) == len({d for _, d in pairs}) and \
        all(s != d for s, d in pairs)


@pytest.mark.parametrize("P", [2, 4, 5, 12])
def test_uniform_is_p_minus_1_cyclic_shifts(P):
    s = compile_all_to_all(uniform_matrix(P, 3), 20)
    assert s.method == "cyclic-shifts" and len(s.phases) == P - 1
    for k, ph in enumerate(s.phases, start=1):
        assert ph.rounds == 3 and sorted(ph.pairs) == [(j, (j + k) % P) for j in range(P)]
    assert s.covered() == uniform_matrix(P, 3) and not any(map(any, s.online)) and s.filler() == 0


@pytest.mark.parametrize("P, n, seed", [(4, 96, 1), (5, 40, 2), (12, 128, 1), (12, 30, 3)])
def test_uneven_decomposition_covers_the_matrix_at_its_bound(P, n, seed):
    """Birkhoff-von Neumann: partial permutations whose rounds sum to the busiest line's packets
    (the schedule meets the bound but for the per-phase cost), every packet covered once."""
    M = zipf_matrix(P, n, 1.0, random.Random(seed))
    s = compile_all_to_all(M, 1000, method="birkhoff-von-neumann")
    assert s.method == "birkhoff-von-neumann" and s.covered() == M and s.filler() == 0
    assert sum(ph.rounds for ph in s.phases) == bound_packets(M)
    assert all(_is_partial_permutation(ph.pairs) and ph.rounds > 0 for ph in s.phases)


@pytest.mark.parametrize("P, n, seed", [(4, 96, 2), (5, 40, 2), (12, 128, 1), (12, 128, 3),
                                        (12, 30, 3)])
def test_padded_cyclic_shifts_meet_the_bound_with_one_popularity_order(P, n, seed):
    """The P - 1 cyclic shifts with rounds = each shift's largest entry: every pair sends its
    packets and filler up to that (``padding``); when the most popular output's pair is the
    largest entry on every shift (all but the smallest matrix here: 30 packets per source leave
    too few to sort every shift), the rounds sum to the bound."""
    M = zipf_matrix(P, n, 1.0, random.Random(seed))
    s = compile_all_to_all(M, 20, method="cyclic-shifts")
    assert s.method == "cyclic-shifts-padded" and len(s.phases) == P - 1
    assert s.covered() == M and not any(map(any, s.online))
    sent = s.sent()
    for ph in s.phases:
        assert _is_partial_permutation(ph.pairs) and len(ph.pairs) == P
        assert ph.rounds == max(M[a][b] for a, b in ph.pairs)
    assert all(sent[a][b] == M[a][b] + s.padding[a][b] for a in range(P) for b in range(P))
    assert s.filler() == sum(map(sum, sent)) - sum(map(sum, M))
    top = max(range(P), key=lambda d: sum(M[a][d] for a in range(P)))
    at_bound = all(ph.rounds == M[next(a for a, b in ph.pairs if b == top)][top] for ph in s.phases)
    assert at_bound == (n > 30)
    assert (s.rounds() == bound_packets(M)) if at_bound else (s.rounds() > bound_packets(M))


def test_the_compiler_picks_the_fastest_estimate_that_fits_the_table():
    """12 ports, Zipf(1.0), 128 packets per source, the 20-entry table: Birkhoff-von Neumann
    needs 36 phases (merged and cut to 20, the rest online); the padded shifts need 11 at the
    bound. The compiler compares their estimated cycles and takes the shifts; a uniform matrix
    stays the exact shifts."""
    M = zipf_matrix(12, 128, 1.0, random.Random(1))
    cands = {m: compile_all_to_all(M, 20, method=m) for m in ("cyclic-shifts", "birkhoff-von-neumann")}
    best = compile_all_to_all(M, 20)
    assert len(compile_all_to_all(M, 1000, method="birkhoff-von-neumann").phases) == 36
    assert estimate_cycles(best) == min(estimate_cycles(c) for c in cands.values())
    assert best.method == "cyclic-shifts-padded" and len(best.phases) <= 20
    assert bound_packets(M) * 9 / estimate_cycles(best) > 0.95
    bvn = cands["birkhoff-von-neumann"]
    assert len(bvn.phases) == 20 and bvn.covered() == M and sum(map(sum, bvn.online)) > 0
    assert compile_all_to_all(uniform_matrix(12, 5), 20).method == "cyclic-shifts"
    with pytest.raises(ValueError, match="method 'magic'"):
        compile_all_to_all(M, 20, method="magic")


def _own_popularity(P, n, seed):
    """Zipf(1.0) with each source's own popularity order (not MoE's shared one)."""
    rng = random.Random(seed)
    M = [[0] * P for _ in range(P)]
    for s in range(P):
        order = [d for d in range(P) if d != s]
        rng.shuffle(order)
        for d in rng.choices(order, [1 / (i + 1) for i in range(P - 1)], k=n):
            M[s][d] += 1
    return M


@pytest.mark.parametrize("seed", [1, 2])
def test_without_a_shared_popularity_order_the_compiler_keeps_birkhoff_von_neumann(seed):
    """When every source has its own popularity order the shifts' largest entries are on
    different outputs and their rounds far exceed the bound: the estimate picks Birkhoff-von
    Neumann (cut to the 20-entry table, the rest online) on 12 ports."""
    M = _own_popularity(12, 128, seed)
    best = compile_all_to_all(M, 20)
    shifts = compile_all_to_all(M, 20, method="cyclic-shifts")
    assert best.method.startswith("birkhoff-von-neumann") and best.covered() == M
    assert shifts.rounds() > 1.5 * bound_packets(M)
    assert estimate_cycles(best) < estimate_cycles(shifts)


@pytest.mark.parametrize("cap", [6, 12, 20])
def test_merged_decomposition_fits_the_table(cap):
    """Birkhoff-von Neumann phases merged (unions that stay partial permutations, padded) and
    cut to the table: at most ``cap`` phases, every packet covered once (table or online)."""
    M = zipf_matrix(12, 128, 1.0, random.Random(1))
    s = compile_all_to_all(M, cap, method="birkhoff-von-neumann")
    assert len(s.phases) <= cap and s.covered() == M
    assert all(_is_partial_permutation(ph.pairs) and ph.rounds > 0 for ph in s.phases)
    assert all(x >= 0 for r in s.padding for x in r)


def test_full_table_sends_the_tail_online():
    M = zipf_matrix(12, 128, 1.0, random.Random(1))
    full = compile_all_to_all(M, 1000, method="birkhoff-von-neumann")
    s = compile_all_to_all(M, 20, method="birkhoff-von-neumann")
    assert len(full.phases) > 20 == len(s.phases) and s.method.endswith("+online")
    assert s.covered() == M and sum(map(sum, s.online)) > 0
    order = s.per_source(random.Random(1))
    for src, items in order.items():       # table phases first, in order, then online
        idx = [k for k, _ in items]
        table = [k for k in idx if k is not None]
        assert table == sorted(table) and idx[len(table):] == [None] * (len(idx) - len(table))


def test_zipf_matrix_is_skewed_towards_the_first_outputs():
    M = zipf_matrix(12, 1000, 1.0, random.Random(1))
    cols = [sum(M[s][d] for s in range(12)) for d in range(12)]
    assert all(sum(r) == 1000 and r[i] == 0 for i, r in enumerate(M))
    assert cols[0] > 2.5 * cols[5] > 0 and cols[0] == max(cols)


@pytest.mark.parametrize("bad, needle", [
    ([[1, 0], [0, 0]], "matrix[0][0] = 1 must be 0"),
    ([[0, -1], [0, 0]], "matrix[0][1] = -1"),
    ([[0, 1.5], [0, 0]], "matrix[0][1] = 1.5"),
    ([[0, 1], [0]], "row 1 must have 2 entries"),
    ([[0]], "at least 2 rows"),
])
def test_bad_matrix_is_refused_in_one_line(bad, needle):
    with pytest.raises(ValueError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        check_matrix(bad)


# -- ACK/NACK fan-out over a phase of several flows (pysim) ----------------------------------


def test_control_packet_reaches_every_input_of_a_multi_flow_phase():
    """A permutation phase has one flow per pair, and its rounds lock-step them: a NACK from
    receiver 2 must reach every source of the phase (inputs 0 and 1), not only its flow's."""
    from tests.hdl.test_switch import FB, _run_switch, _small_switch

    phases = {0: (pk.VC_DP, [Flow({0}, {2}), Flow({1}, {3})])}
    nack = pk.pack(pk.Packet(pk.Header.control(0, 7, nack=True)), FB)
    sw = _small_switch()
    outs, res = _run_switch(sw, sw.cfg_words(phases), {2: nack}, cycles=60)
    kinds = {q: [(x.header.kind, x.header.seq) for x in outs[q]] for q in range(4)}
    assert kinds == {0: [(pk.KIND_NACK, 7)], 1: [(pk.KIND_NACK, 7)], 2: [], 3: []}
    assert res.get("err_phase", 0) == 0


# -- the 4-port switch RTL (Verilator) -------------------------------------------------------


@pytest.mark.regress
def test_precompiled_uniform_and_skewed_meet_the_targets_on_4_ports():
    """Every packet checked (golden model, per pair once and in order); uniform >= 0.90
    flits/cycle/port, Zipf(1.0) >= 0.75 of its bound; online routing of the same traffic is
    measured to be well below (it is the figure the precompiled phases replace).
    make regress-switch; make run measures the same figures (fred characterize's all-to-all
    section), and make test runs the precompiled all-to-all on the unit benches' 4-port switch
    with every packet checked (test_back_pressure_and_an_online_tail_deliver_every_packet_in_order)."""
    from fred.sim.characterize.all_to_all import run_a2a

    uni = uniform_matrix(4, 32)
    r = run_a2a(4, compile_all_to_all(uni, 201), seed=2, length=8)
    assert r["phases"] == 3 and r["phase_changes"] == 2 and r["rounds"] == 96
    assert r["flits_per_cycle_per_port"] >= 0.90, r
    skew = zipf_matrix(4, 96, 1.0, random.Random(2))
    s = run_a2a(4, compile_all_to_all(skew, 201), seed=2, length=8)
    assert s["busiest_flits"] == bound_packets(skew) * 9 and s["fraction_of_bound"] >= 0.75, s
    o = run_a2a(4, online_schedule(uniform_matrix(4, 8)), seed=2, length=8)
    assert o["phases"] == 0 and o["flits_per_cycle_per_port"] < 0.8 * r["flits_per_cycle_per_port"]


def test_back_pressure_and_an_online_tail_deliver_every_packet_in_order():
    """Random receiver back-pressure (30 % of cycles) on a skewed all-to-all whose table holds
    only 3 phases: the rest goes online behind them; per (source, destination) every packet
    once, intact, in order (the bench fails otherwise). On the unit benches' 4-port switch (2 x
    int32 lanes, 4-flit packets, 8 table entries: the compiled build the switch soak and the
    fault bench share)."""
    from fred.sim.characterize.all_to_all import run_a2a

    skew = zipf_matrix(4, 40, 1.0, random.Random(5))
    sched = compile_all_to_all(skew, 3, method="birkhoff-von-neumann")
    assert len(sched.phases) == 3 and sum(map(sum, sched.online)) > 0
    r = run_a2a(4, sched, seed=5, length=4, stall=0.3, lanes=2, dtype="int32", table_entries=8)
    assert r["flits"] == sum(map(sum, skew)) * 5 and r["online_packets"] == sum(map(sum, sched.online))


@pytest.mark.regress
def test_padded_shifts_under_back_pressure_with_three_queued_rounds():
    """The padded cyclic shifts (filler included) on FRED_3(4) with 1 + 4-flit packets, where each
    output holds 3 rounds (fabric latency 9: ``round_queue_for(9, 4)``), under random receiver
    back-pressure (30 % of cycles): every packet, filler too, once, intact, in order per pair;
    the figures count the matrix's packets.
    make regress-switch (its own build: 1 + 4-flit packets); make test checks three queued rounds
    per output on the RTL in amaranth's simulator
    (tests/hdl/test_switch.py::test_round_queue_sized_by_the_fabric_latency_keeps_rounds_back_to_back)."""
    from fred.hdl.switch import round_queue_for
    from fred.sim.characterize.all_to_all import _switch, run_a2a

    assert _switch(4, 4)[1].round_queue == round_queue_for(9, 4) == 3
    skew = zipf_matrix(4, 40, 1.0, random.Random(6))
    sched = compile_all_to_all(skew, 201, length=4)
    assert sched.method == "cyclic-shifts-padded" and sched.filler() > 0
    r = run_a2a(4, sched, seed=6, length=4, stall=0.3)
    assert r["filler_packets"] == sched.filler()
    assert r["flits_sent"] == (sum(map(sum, skew)) + sched.filler()) * 5
    assert r["flits"] == sum(map(sum, skew)) * 5 and r["busiest_flits"] == bound_packets(skew) * 5


def test_go_back_n_recovers_on_the_precompiled_all_to_all():
    """Link faults (every kind, 1e-2 per flit, both directions) on the P - 1 cyclic-shift phases
    of 4 unicast flows each: every receiver gets every packet once, in order, bit-exact."""
    from fred.sim.characterize.faults import run_faults

    res = run_faults(ports=4, rates=(1e-2,), packets=24, seed=4, kinds=["all-to-all"])
    assert res["check"] == "pass", res["check"]
    (r,) = res["runs"]
    assert r["delivered"] == res["baseline"]["delivered"] == 24 * 3 * 4
    assert r["retransmissions"] > 0 and r["nacks"] > 0


# -- the timing file (schema 5) --------------------------------------------------------------


def _doc():
    return copy.deepcopy(load_timing().data)


def test_embedded_default_carries_the_section():
    t = load_timing()
    a = t.all_to_all
    assert t.schema_version == 5 and a is not None
    assert a["by_ports"][str(a["ports"])] == a["methods"] and a["default_method"] == "precompiled"
    assert "characterize.all_to_all" in a["measured_by"] and "seed=" in a["measured_by"]
    for P, by in a["by_ports"].items():
        pre, on = by["precompiled"], by["online"]
        assert on["uniform_flits_per_cycle_per_port"] < pre["uniform_flits_per_cycle_per_port"]
        assert on["skewed_fraction_of_bound"] < pre["skewed_fraction_of_bound"]
        assert pre["phases_uniform"] == int(P) - 1
    for P in ("4", "12"):                                 # both switches meet the targets
        pre = a["by_ports"][P]["precompiled"]
        assert pre["uniform_flits_per_cycle_per_port"] >= 0.90 and pre["skewed_fraction_of_bound"] >= 0.75


def test_older_schema_reads_without_the_section():
    d = _doc()
    d["schema_version"] = 4
    del d["all_to_all"]
    assert validate_timing(d)["schema_version"] == 4
    d["all_to_all"] = _doc()["all_to_all"]
    with pytest.raises(TimingFileError, match="all_to_all needs schema version 5"):
        validate_timing(d)


@pytest.mark.parametrize("edit, needle", [
    (lambda a: a["methods"]["online"].update(skewed_fraction_of_bound=0), "online.skewed_fraction_of_bound = 0"),
    (lambda a: a["methods"]["precompiled"].update(uniform_flits_per_cycle_per_port=1.2),
     "uniform_flits_per_cycle_per_port = 1.2 is too large"),
    (lambda a: a["methods"]["precompiled"].update(phases_uniform="11"), "phases_uniform"),
    (lambda a: a["methods"].pop("online"), "missing field all_to_all.methods.online"),
    (lambda a: a.update(default_method="magic"), "default_method = 'magic'"),
    (lambda a: a.update(zipf_exponent="1"), "all_to_all.zipf_exponent"),
    (lambda a: a["by_ports"][str(a["ports"])]["online"].update(uniform_flits_per_cycle_per_port=0.01),
     "methods differs from all_to_all.by_ports"),
    (lambda a: a.pop("measured_by"), "missing field all_to_all.measured_by"),
])
def test_bad_section_is_one_line_naming_the_field(edit, needle):
    d = _doc()
    edit(d["all_to_all"])
    with pytest.raises(TimingFileError) as exc:
        validate_timing(d, "t.json")
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg, msg


# -- 12 ports (make regress) -----------------------------------------------------------------


@pytest.mark.regress
def test_12_port_switch_reproduces_the_default():
    """The embedded default's 12-port figures, measured again with the same settings (the
    simulation is deterministic: equal). They meet the targets: each output holds 4 rounds
    (``round_queue_for``: the fabric's 21 cycles of latency + 9 flits per round), so rounds of a
    phase follow back to back, and the Zipf matrix runs as 11 padded cyclic shifts at its bound
    (docs/switch.md, "All-to-all at line rate")."""
    from fred.sim.characterize.all_to_all import measure_all_to_all

    r = measure_all_to_all(12, seed=1)
    assert r["figures"] == load_timing().all_to_all["by_ports"]["12"], json.dumps(r["runs"])
    pre, on = r["figures"]["precompiled"], r["figures"]["online"]
    assert pre["uniform_flits_per_cycle_per_port"] >= 0.90 and pre["skewed_fraction_of_bound"] >= 0.75
    assert pre["uniform_flits_per_cycle_per_port"] > 1.5 * on["uniform_flits_per_cycle_per_port"]
    assert pre["phases_uniform"] == 11
    assert r["runs"]["precompiled-skewed"]["online_packets"] == 0
