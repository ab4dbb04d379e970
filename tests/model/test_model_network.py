"""Wafer network model: closed forms, max-min sharing, algorithms, contention (issue 4)."""

import math

import numpy as np
import pytest

from fred.model.system import params as P
from fred.model.collectives.algorithms import default_algorithm
from fred.model.collectives.api import collective_time
from fred.model.collectives.flowsim import Sim
from fred.model.network.graph import route
from fred.model.network.maxmin import maxmin_rates
from fred.model.collectives.strategy import coords, groups, parse_strategy, place
from fred.model.network.topology import Topology, build_fabric, fully_connected, mesh2d, ring, single_switch, torus2d, tree2

#: payload share of a wafer link (header flit + ACKs, fred.model.system.packets): the wafer fabrics move
#: payload at EFF x link bandwidth; generic topologies at the full bandwidth
EFF = P.default_params().link_efficiency

GiB = 2**30


def rel(a, b):
    return abs(a - b) / abs(b)


# ---- parameters ----------------------------------------------------------------------------
def test_default_params_are_the_spec():
    p = P.default_params()
    assert p.npus == 20 and p.mesh_rows * p.mesh_cols == 20
    assert p.npu_net_bw == 3e12 and p.hbm_bw == 3e12 and p.mesh_link_bw == 750e9
    assert p.io_count == 18 and p.io_bw == 128e9 and p.link_latency == 20e-9
    assert P.variant("Fred-A").l1_l2_bw == 1.5e12 and P.variant("fred-d").l1_l2_bw == 12e12
    assert not P.variant("fred-c").in_switch and P.variant("fred-b").in_switch
    assert p.switch.latency_s == pytest.approx(p.switch.latency_cycles / p.switch.clock_hz)
    assert p.switch.collective_bandwidth(3e12) == 3e12 * p.switch.beats_per_cycle_per_port


def test_unknown_variant_names_it_and_lists_known():
    with pytest.raises(ValueError, match=r"'fred-z'.*mesh, fred-a, fred-b, fred-c, fred-d"):
        P.variant("fred-z")
    with pytest.raises(ValueError, match="clock_hz"):
        P.SwitchTiming(10, 0)


# ---- topologies ----------------------------------------------------------------------------
def test_mesh_shape_xy_routing_and_edge_io():
    m = build_fabric("mesh")
    assert m.npus == 20 and len(m.io_nodes) == 18
    # 5 rows x 4 cols: 2*(5*3 + 4*4) NPU links + 2*18 I/O links
    assert m.num_links == 2 * 31 + 36
    assert m.path_nodes(0, 19) == [0, 1, 2, 3, 7, 11, 15, 19]          # X first, then Y
    assert m.path_nodes(0, 19, order=(1, 0)) == [0, 4, 8, 12, 16, 17, 18, 19]
    attached = [m.meta["io_attach"][i] for i in m.io_nodes]
    edge = {n for n in range(20) if n // 4 in (0, 4) or n % 4 in (0, 3)}
    assert set(attached) == edge
    assert sum(1 for a in attached if a in (0, 3, 16, 19)) == 8           # corners carry two
    assert all(bw == 750e9 for _, a, b, bw, _ in m.links() if a < 20 and b < 20)


@pytest.mark.parametrize("name, up", [("fred-a", 1.5e12), ("fred-b", 1.5e12), ("fred-c", 12e12), ("fred-d", 12e12)])
def test_fred_tree(name, up):
    t = build_fabric(name)
    assert t.npus == 20 and t.kinds.count("switch") == 6 and len(t.io_nodes) == 18
    l1 = t.meta["l1_nodes"]
    root = t.meta["root"]
    assert t.link_bw[t.link(l1[0], root)] == up and t.link_bw[t.link(root, l1[4])] == up
    assert t.link_bw[t.link(5, l1[1])] == 3e12
    assert t.path_nodes(0, 3) == [0, l1[0], 3]
    assert t.path_nodes(0, 19) == [0, l1[0], root, l1[4], 19]
    per_l1 = [sum(1 for io in t.io_nodes if t.meta["parent"][io] == s) for s in l1]
    assert sorted(per_l1) == [3, 3, 4, 4, 4]
    # the default timing file is the cut-through switch's: a hop costs its measured traversal
    assert t.timing.cut_through and t.store_forward_bytes == 0
    assert t.path_latency(0, 19) == pytest.approx(4 * 20e-9 + 3 * t.timing.latency_s)
    # a store-and-forward switch first takes a whole packet in (1 + 8 flits of 512 B) on the
    # link entering each switch
    import dataclasses

    p = P.default_params()
    saf = build_fabric(name, dataclasses.replace(p, switch=dataclasses.replace(p.switch, cut_through=False)))
    pkt = 9 * 512
    assert saf.store_forward_bytes == pkt
    assert saf.path_latency(0, 19) == pytest.approx(4 * 20e-9 + 3 * t.timing.latency_s + pkt / 3e12 + 2 * pkt / up)
    assert build_fabric("mesh").path_latency(0, 19) == pytest.approx(7 * 20e-9)   # NPU routers: cut-through


def test_generic_topologies_and_route():
    r = ring(8, 1e9)
    assert r.num_links == 16 and r.path_nodes(0, 5) == [0, 7, 6, 5]
    assert route(r, 0, 2) == [r.link(0, 1), r.link(1, 2)]
    assert route(r, 3, 3) == []
    t = torus2d(4, 4, 1e9)
    assert t.path_nodes(0, 15) == [0, 3, 15]
    m = mesh2d(3, 3, 1e9)
    assert m.num_links == 24 and m.path_nodes(0, 8) == [0, 1, 2, 5, 8]
    f = fully_connected(5, 1e9)
    assert f.num_links == 20 and f.path_nodes(1, 4) == [1, 4]
    s = single_switch(6, 1e9)
    assert s.num_links == 12 and len(s.path_nodes(0, 5)) == 3
    tt = tree2(3, 2, 1e9, 2e9)
    assert tt.npus == 6 and len(tt.path_nodes(0, 5)) == 5


def test_bad_topology_input():
    with pytest.raises(ValueError, match="unknown fabric 'hypercube'"):
        build_fabric("hypercube")
    t = ring(4, 1e9)
    with pytest.raises(ValueError, match="NPU 7 .*outside"):
        t.check_npus([0, 7])
    with pytest.raises(ValueError, match="bandwidth must be > 0"):
        t.add_link(0, 2, 0, 0)


# ---- simulator closed forms -------------------------------------------------------------------
def test_one_link_is_size_over_bandwidth_plus_latency():
    t = ring(2, 10e9, 1e-6)
    sim = Sim(t)
    x = sim.transfer(0, 1, 5e9)
    r = sim.run()
    assert r.finish[x] == pytest.approx(5e9 / 10e9 + 1e-6, rel=1e-12)
    assert r.link_bytes[t.link(0, 1)] == 5e9 and r.link_bytes[t.link(1, 0)] == 0


def test_two_flows_on_one_link_get_half_each():
    t = ring(2, 10e9, 0.0)
    sim = Sim(t)
    a = sim.transfer(0, 1, 1e9)
    b = sim.transfer(0, 1, 1e9)
    c = sim.transfer(1, 0, 1e9)          # other direction: full bandwidth
    r = sim.run()
    assert r.finish[a] == pytest.approx(0.2) and r.finish[b] == pytest.approx(0.2)
    assert r.finish[c] == pytest.approx(0.1)


def test_rates_resolved_when_a_flow_ends():
    t = ring(2, 1e9, 0.0)
    sim = Sim(t)
    a = sim.transfer(0, 1, 1e9)
    b = sim.transfer(0, 1, 3e9)
    r = sim.run()
    # both at 0.5 GB/s until a ends at 2 s; then b alone at 1 GB/s for its last 2 GB
    assert r.finish[a] == pytest.approx(2.0) and r.finish[b] == pytest.approx(4.0)


def test_maxmin_textbook_case():
    # link 0 (cap 1) shared by f0, f1; link 1 (cap 2) shared by f0, f2
    rates = maxmin_rates(np.array([0, 0, 1, 2]), np.array([0, 1, 0, 1]), 3, np.array([1.0, 2.0]))
    assert rates == pytest.approx([0.5, 0.5, 1.5])
    capped = maxmin_rates(np.array([0, 1]), np.array([0, 0]), 2, np.array([1.0]), np.array([0.2, np.inf]))
    assert capped == pytest.approx([0.2, 0.8])


def test_dependencies_and_delays():
    sim = Sim(ring(2, 1e9, 0.0))
    c = sim.delay(1.0, label="compute")
    x = sim.transfer(0, 1, 1e9, deps=[c], label="dp")
    y = sim.delay(0.5, deps=[x], label="compute")
    r = sim.run()
    assert r.start[x] == pytest.approx(1.0) and r.finish[y] == pytest.approx(2.5) and r.makespan == pytest.approx(2.5)
    busy = r.busy_time_by_label()
    assert busy["compute"] == pytest.approx(1.5) and busy["dp"] == pytest.approx(1.0)
    assert r.exposed_time("dp", hidden_by="compute") == pytest.approx(1.0)


def test_exposed_time_subtracts_overlap():
    sim = Sim(ring(2, 1e9, 0.0))
    sim.delay(1.0, label="compute")
    sim.transfer(0, 1, 1.5e9, label="dp")      # 1.5 s, overlaps the first 1 s of compute
    r = sim.run()
    assert r.exposed_time("dp", ("compute",)) == pytest.approx(0.5)


def test_bad_sim_input():
    sim = Sim(build_fabric("mesh"))
    for bad in (0, -1, float("nan"), "x"):
        with pytest.raises(ValueError, match="nbytes"):
            sim.transfer(0, 1, bad)
    with pytest.raises(ValueError, match="destination 99 outside"):
        sim.transfer(0, 99, 1)
    with pytest.raises(ValueError, match="dependency 5 is not a task"):
        sim.transfer(0, 1, 1, deps=[5])
    with pytest.raises(ValueError, match="duration"):
        sim.delay(-1)
    with pytest.raises(ValueError, match="NPU 20 in group outside"):
        sim.collective("all-reduce", [0, 20], 1)
    with pytest.raises(ValueError, match="unknown collective 'allsum'"):
        sim.collective("allsum", [0, 1], 1)
    with pytest.raises(ValueError, match="unknown algorithm 'magic'"):
        sim.collective("all-reduce", [0, 1], 1, algorithm="magic")
    with pytest.raises(ValueError, match="in-switch"):
        sim.collective("all-reduce", [0, 1], 1, algorithm="in-switch")
    with pytest.raises(ValueError, match="chunks"):
        sim.collective("all-reduce", [0, 1], 1, chunks=0)


# ---- trees: reduction paces at the slowest input; multicast ------------------------------------
def _star(bws, in_switch=True):
    t = Topology("star", multicast=in_switch, in_network_reduction=in_switch)
    for i in range(len(bws)):
        t.add_node("npu")
    sw = t.add_node("switch")
    for i, bw in enumerate(bws):
        t.add_link(i, sw, bw, 0.0)
    t.meta.update(parent={**{i: sw for i in range(len(bws))}, sw: None}, l1_of=[0] * len(bws), root=sw)
    t.routing = "tree"
    return t


def test_reduction_advances_at_the_pace_of_its_slowest_input():
    t = _star([1e9, 0.25e9, 1e9, 1e9])
    sim = Sim(t)
    x = sim.reduce([0, 1, 2], 3, 1e9)
    r = sim.run()
    assert r.finish[x] == pytest.approx(4.0)
    # one copy per link of the tree
    assert r.link_bytes[t.link(0, 4)] == 1e9 and r.link_bytes[t.link(4, 3)] == 1e9
    assert r.bytes_sent[:4] == pytest.approx([1e9, 1e9, 1e9, 0])


def test_multicast_tree_and_fallback_without_multicast():
    t = _star([1e9] * 4)
    sim = Sim(t)
    x = sim.transfer(0, [1, 2, 3], 1e9)
    r = sim.run()
    assert r.finish[x] == pytest.approx(1.0) and r.link_bytes[t.link(0, 4)] == 1e9
    t2 = _star([1e9] * 4, in_switch=False)
    sim = Sim(t2)
    y = sim.transfer(0, [1, 2, 3], 1e9)        # three unicast copies share the source link
    r = sim.run()
    assert r.finish[y] == pytest.approx(3.0) and r.link_bytes[t2.link(0, 4)] == 3e9


def test_switch_timing_adds_latency_and_caps_in_switch_rate():
    t = single_switch(4, 1e9, 0.0, in_switch=True)
    slow = P.SwitchTiming(1000, 1e9, 0.5, "test")
    r1 = collective_time(t, "all-reduce", None, 1e9)
    r2 = collective_time(t, "all-reduce", None, 1e9, timing=slow)
    assert r1.time == pytest.approx(1.0)
    assert r2.time == pytest.approx(2.0 + 1e-6)          # half rate + one switch traversal
    assert r2.timing_source == "test"


# ---- collective closed forms -----------------------------------------------------------------
@pytest.mark.parametrize("p", [2, 3, 8, 16])
def test_ring_all_reduce_closed_form(p):
    S, B, a = 1e9, 100e9, 1e-6
    r = collective_time(ring(p, B, a), "all-reduce", None, S, algorithm="ring")
    assert r.time == pytest.approx(2 * (p - 1) / p * S / B + 2 * (p - 1) * a, rel=1e-9)
    assert r.bytes_sent_per_npu == pytest.approx(2 * (p - 1) / p * S)


def test_bidirectional_ring_halves_time():
    S, B, p = 1e9, 100e9, 8
    r = collective_time(ring(p, B, 0), "all-reduce", None, S, algorithm="ring2")
    assert r.time == pytest.approx((p - 1) / p * S / B, rel=1e-9)


@pytest.mark.parametrize("op, factor", [("reduce-scatter", 1), ("all-gather", 1)])
def test_ring_rs_ag_closed_form(op, factor):
    S, B, p = 1e9, 100e9, 5
    r = collective_time(ring(p, B, 0), op, None, S, algorithm="ring")
    assert r.time == pytest.approx((p - 1) / p * S / B, rel=1e-9)


def test_in_switch_all_reduce_is_size_over_bandwidth():
    S, B = 1e9, 100e9
    for p in (4, 16):
        r = collective_time(single_switch(p, B, 1e-7, in_switch=True), "all-reduce", None, S)
        assert r.algorithms == ["in-switch"]
        assert r.time == pytest.approx(S / B + 2e-7, rel=1e-9)
        assert r.bytes_sent_per_npu == pytest.approx(S)


def test_all_to_all_direct_and_shift():
    S, B, p = 1e9, 100e9, 4
    for alg in ("direct", "shift"):
        r = collective_time(fully_connected(p, B, 0), "all-to-all", None, S, algorithm=alg)
        assert r.time == pytest.approx(S / p / B, rel=1e-9) if alg == "direct" else \
            r.time == pytest.approx((p - 1) * S / p / B, rel=1e-9)


def test_p2p_broadcast_reduce_multicast():
    t = build_fabric("fred-d")
    S = 3e9
    line = 3e12 * EFF
    assert collective_time(t, "p2p", [0, 5], S).time == pytest.approx(S / line, rel=1e-3)
    assert collective_time(t, "multicast", [0, 1, 2, 3], S).time == pytest.approx(S / line, rel=1e-3)
    assert collective_time(t, "reduce", list(range(20)), S).time == pytest.approx(S / line, rel=1e-3)
    assert collective_time(t, "broadcast", list(range(20)), S).time == pytest.approx(S / line, rel=1e-3)
    c = build_fabric("fred-c")
    # endpoint reduce = reduce-scatter + gather; broadcast = scatter + all-gather
    assert collective_time(c, "reduce", [0, 1, 2, 3], S).time > S / 3e12
    assert collective_time(c, "broadcast", [0, 1, 2, 3], S).time > S / 3e12


# ---- the wafer fabrics ---------------------------------------------------------------------------
def test_default_algorithms():
    m, a, d = build_fabric("mesh"), build_fabric("fred-a"), build_fabric("fred-d")
    assert default_algorithm(m, "all-reduce", range(20)) == "hier2d"
    assert default_algorithm(m, "all-reduce", [0, 4, 8, 12, 16]) == "ring"
    assert default_algorithm(a, "all-reduce", range(20)) == "hier-direct"
    assert default_algorithm(a, "all-reduce", [0, 4, 8]) == "ring"
    assert default_algorithm(a, "all-reduce", [0, 1, 4, 5, 8]) == "ring"       # unequal per L1
    assert default_algorithm(d, "all-reduce", [0, 4, 8]) == "in-switch"


def test_wafer_wide_all_reduce_per_npu_bandwidth():
    """FRED-SPEC §7: mesh ~1.5 TB/s per NPU; Fred-C/D 3 TB/s; Fred-D moves about half the bytes."""
    res = {f: collective_time(f, "all-reduce", None, GiB) for f in P.FABRICS}
    assert 1.3e12 * EFF < res["mesh"].npu_bandwidth < 1.55e12 * EFF
    assert res["fred-c"].npu_bandwidth == pytest.approx(3e12 * EFF, rel=0.02)
    assert res["fred-d"].npu_bandwidth == pytest.approx(3e12 * EFF, rel=0.01)
    assert res["fred-d"].bytes_sent_per_npu == pytest.approx(GiB)
    assert res["fred-c"].bytes_sent_per_npu == pytest.approx(1.9 * GiB)
    assert res["fred-b"].time == pytest.approx(GiB / (1.5e12 * EFF), rel=0.01)      # L1->L2 bound
    assert res["mesh"].time > res["fred-a"].time > res["fred-b"].time > res["fred-c"].time > res["fred-d"].time
    assert res["fred-d"].time == pytest.approx(res["fred-c"].time / 1.9, rel=0.02)


def test_concurrent_groups_contend_on_mesh_not_on_fred_c():
    # MP(5)-DP(4): DP groups {0,5,10,15}, ... are diagonals of the 5x4 mesh; their XY routes cross
    dp = groups("MP(5)-DP(4)-PP(1)", "dp")
    S = 256 * 2**20
    for fabric, contends in (("mesh", True), ("fred-c", False)):
        alone = collective_time(fabric, "all-reduce", [dp[0]], S).time
        together = collective_time(fabric, "all-reduce", dp, S).time
        if contends:
            assert together > 1.3 * alone, (fabric, alone, together)
        else:
            assert together == pytest.approx(alone, rel=1e-6), (fabric, alone, together)


def test_mesh_io_broadcast_hotspot_is_0_65_of_line_rate():
    """FRED-SPEC §6: edge I/O broadcast on the 5x4 mesh runs at 750/(9*128) = 0.65 of line rate
    (line rate here: the I/O controllers' payload rate, 18 x 128 GB/s x EFF)."""
    line = 18 * 128e9 * EFF
    m = collective_time("mesh", "io-broadcast", None, GiB)
    assert m.algorithm_bandwidth / line == pytest.approx(750 / (9 * 128), rel=0.01)
    d = collective_time("fred-d", "io-broadcast", None, GiB)
    assert d.algorithm_bandwidth / line == pytest.approx(1.0, rel=0.01)
    g = collective_time("mesh", "io-reduce", None, GiB)
    assert g.algorithm_bandwidth / line == pytest.approx(750 / (9 * 128), rel=0.01)
    c = collective_time("fred-c", "io-reduce", None, GiB)
    assert c.algorithm_bandwidth / line > 0.9


def test_strategy_phase_groups_dp_bandwidths():
    """Paper §8.1, MP(2)-DP(5)-PP(2) DP: mesh 750 GB/s, Fred-A 375 GB/s, Fred-C/D 3 TB/s per NPU."""
    dp = groups("MP(2)-DP(5)-PP(2)", "dp")
    bw = {f: collective_time(f, "all-reduce", dp, GiB).npu_bandwidth for f in ("mesh", "fred-a", "fred-c", "fred-d")}
    assert bw["mesh"] == pytest.approx(750e9 * EFF, rel=0.01)
    assert bw["fred-a"] == pytest.approx(375e9 * EFF, rel=0.01)
    assert bw["fred-c"] == pytest.approx(3e12 * EFF, rel=0.01)
    assert bw["fred-d"] == pytest.approx(3e12 * EFF, rel=0.01)


def test_collective_task_spans_its_flows():
    sim = Sim(build_fabric("mesh"))
    c = sim.delay(1e-3, label="compute")
    a = sim.collective("all-reduce", range(20), GiB, deps=[c], label="dp")
    b = sim.collective("all-reduce", [[0, 1, 2, 3], [4, 5, 6, 7]], 2**20, deps=[a], label="mp")
    r = sim.run()
    assert r.start[a] == pytest.approx(1e-3) and r.finish[a] > r.start[a]
    assert r.start[b] == pytest.approx(r.finish[a]) and r.makespan == pytest.approx(r.finish[b])
    assert r.busy_time_by_label()["dp"] == pytest.approx(r.finish[a] - r.start[a])


# ---- parallel groups --------------------------------------------------------------------------------
def test_parse_strategy_and_placement_rule():
    assert parse_strategy("MP(2)-DP(5)-PP(2)") == (2, 5, 2)
    assert parse_strategy("DP(20)") == (1, 20, 1)
    assert parse_strategy("pp(4)-mp(5)") == (5, 1, 4)
    a, b, c = 2, 5, 2
    seen = set()
    for mp in range(a):
        for dp in range(b):
            for pp in range(c):
                n = place(mp, dp, pp, (a, b, c))
                assert n == mp + a * (pp + c * dp) and coords(n, (a, b, c)) == (mp, dp, pp)
                seen.add(n)
    assert seen == set(range(20))
    assert groups((2, 5, 2), "mp")[0] == [0, 1]
    assert groups((2, 5, 2), "pp")[0] == [0, 2]
    assert groups((2, 5, 2), "dp")[1] == [1, 5, 9, 13, 17]
    for bad in ("MP(2)-DP(5)", "MP(0)-DP(20)", "XP(20)", "MP(2)-MP(10)"):
        with pytest.raises(ValueError):
            parse_strategy(bad, 20)


def test_pieces_pipeline_through_hierarchical_phases():
    # Fred-A: intra-L1 phases (3 TB/s) overlap the L1<->L2-bound phase of the previous piece
    one = collective_time("fred-a", "all-reduce", None, GiB, chunks=1)
    four = collective_time("fred-a", "all-reduce", None, GiB, chunks=4)
    assert four.time < 0.9 * one.time
    assert four.bytes_sent_per_npu == pytest.approx(one.bytes_sent_per_npu)
    # unpipelined closed form: 2 * [(3/4) S / 3 TB/s + (4/5)(S/4) / (1.5 TB/s / 4)]
    assert one.time == pytest.approx(2 * (0.75 * GiB / 3e12 + 0.2 * GiB / 0.375e12) / EFF, rel=0.01)


def test_many_groups_merge_into_one_plan_with_identical_results():
    mp = groups("MP(4)-DP(5)-PP(1)", "mp")
    sim = Sim(build_fabric("mesh"))
    t = sim.collective("all-reduce", mp, 2**24)
    r = sim.run()
    alone = collective_time("mesh", "all-reduce", [mp[0]], 2**24).time
    assert r.finish[t] == pytest.approx(alone, rel=1e-9)     # rows of the mesh do not interact


def test_strict_priority_between_classes():
    t = ring(2, 1e9, 0.0)
    sim = Sim(t)
    lo = sim.transfer(0, 1, 1e9, label="dp")
    hi = sim.transfer(0, 1, 1e9, label="mp", priority=2)
    other = sim.transfer(1, 0, 1e9, label="dp")          # other direction: unaffected
    r = sim.run()
    assert r.finish[hi] == pytest.approx(1.0) and r.finish[lo] == pytest.approx(2.0)
    assert r.finish[other] == pytest.approx(1.0)
    sim = Sim(build_fabric("fred-c"))
    d = sim.collective("all-reduce", range(20), GiB, label="dp")
    m = sim.collective("all-reduce", [[0, 1], [2, 3]], 2**26, label="mp", priority=1)
    r = sim.run()
    alone = collective_time("fred-c", "all-reduce", [[0, 1], [2, 3]], 2**26).time
    # the MP ring's second step finds DP holding the L1 switches: it preempts them (4 flows,
    # one measured preemption latency on the critical path)
    assert r.preemptions == 4
    assert r.finish[m] == pytest.approx(alone + sim.timing.preemption_delay_s, rel=1e-6)
