"""Online routing of default-index packets (hdl/switch_online*.py): the greedy rule, its gates,
and the whole switch routing random permutations and all-to-all traffic (pysim, ideal fabric;
the FRED-fabric Verilator bench is in tests/sim/test_switch_bench.py)."""

import random

import pytest
from amaranth.sim import Simulator

from fred.contract import packet as pk
from fred.hdl.netlist.flows import Flow
from fred.hdl.routing.check import check_and_trees
from fred.hdl.netlist.structure import netlist
from fred.hdl.switch.online import OnlineRouter, online_config, online_modes
from tests.hdl.test_switch import FB, _run_switch, _small_switch


def _partial_perm(rng, P):
    perm = list(range(P))
    rng.shuffle(perm)
    return {x: perm[x] for x in rng.sample(range(P), rng.randint(1, P))}


@pytest.mark.parametrize("P", [2, 3, 4, 5, 7, 10, 12])
@pytest.mark.parametrize("middle", [3, 4])
def test_greedy_routes_every_partial_permutation(P, middle):
    """m >= 3: the greedy choice always finds a copy, and the routing compiler's symbolic check
    finds every output receiving exactly its input."""
    rng = random.Random(P * 10 + middle)
    net = netlist(P, middle)
    for _ in range(60):
        pairs = _partial_perm(rng, P)
        check_and_trees(net, online_modes(P, middle, pairs), [Flow({x}, {y}) for x, y in pairs.items()])


def test_greedy_fails_on_fred2_and_is_refused():
    """FRED_2 unicast is only rearrangeably non-blocking: the greedy choice runs out of copies
    (FRED_2(6), permutation 0 2 4 3 1 5: input 3 finds copy 0 taken by its R-cell partner 2 and
    copy 1 by input 0, which feeds the other output of its D cell), so m = 2 is refused before
    any routing, and a switch asked to route online with m = 2 is refused."""
    from fred.hdl.switch import online as so
    from fred.hdl.switch.top import Switch
    with pytest.raises(ValueError, match="no free middle copy for input 3"):
        so._route((), 6, 2, dict(enumerate((0, 2, 4, 3, 1, 5))), {})
    with pytest.raises(ValueError, match="needs middle >= 3"):
        online_modes(4, 2, {0: 1})
    with pytest.raises(ValueError, match="needs middle >= 3"):
        Switch(4, 2, 2, "int32", online=True)
    assert Switch(4, 2, 2, "int32").online is False           # auto: off, default packets dropped
    with pytest.raises(ValueError, match="at least 56 bits"):
        Switch(4, 3, 3, "fp16", online=True)
    assert Switch(4, 3, 3, "fp16").online is False and Switch(4, 3, 4, "fp16").online is True
    with pytest.raises(ValueError, match="two inputs to one output"):
        online_modes(4, 3, {0: 1, 2: 1})


@pytest.mark.parametrize("P,middle", [(4, 3), (5, 3), (12, 3), (7, 4)])
def test_router_gates_equal_the_rule(P, middle):
    """The control unit's combinational router gives the rule's configuration bit for bit."""
    rng = random.Random(P)
    dut = OnlineRouter(P, middle)
    cases = [{}] + [_partial_perm(rng, P) for _ in range(40)]

    async def tb(ctx):
        for pairs in cases:
            ctx.set(dut.valid, sum(1 << x for x in pairs))
            for x in range(P):
                ctx.set(dut.dst[x], pairs.get(x, rng.randrange(P)))   # ignored when not valid
            assert ctx.get(dut.config) == online_config(P, middle, pairs), pairs

    sim = Simulator(dut)
    sim.add_testbench(tb)
    sim.run()


def _traffic(rng, P, pattern, n):
    """Per port the packets (default index, port byte = destination) of ``pattern``:
    ``perm`` (n random permutations, one packet per input each) or ``a2a`` (every input sends
    n packets to every output, destinations shuffled)."""
    sends, sent = {p: [] for p in range(P)}, {p: [] for p in range(P)}
    for k in range(n):
        if pattern == "perm":
            perm = list(range(P))
            rng.shuffle(perm)
            dests = {p: [perm[p]] for p in range(P)}
        else:
            dests = {p: rng.sample(range(P), P) for p in range(P)}
        for p in range(P):
            for q in dests[p]:
                L = rng.randint(1, 4)
                x = pk.Packet(pk.Header.data(rng.choice(pk.DATA_VCS), pk.DEFAULT_PHASE, len(sent[p]), L,
                                             port=q), tuple(rng.randrange(1 << FB) for _ in range(L)))
                sent[p].append(x)
                sends[p] += pk.pack(x, FB)
    return sends, sent


@pytest.mark.parametrize("P", [4, pytest.param(5, marks=pytest.mark.regress)])  # 5 ports: make regress-switch
@pytest.mark.parametrize("pattern", ["perm", "a2a"])
def test_switch_routes_default_index_online(pattern, P):
    """Every default-index packet reaches the output its port byte names, unchanged, in order per
    (input, output, VC), with the header's port byte naming its source; nothing is dropped.
    P = 5: an odd port count, the check of the online control at 5 ports (make regress-switch, as
    are the Verilator runs of the 5-port FRED-fabric switch, tests/sim/test_switch_bench.py; make
    test runs P = 4)."""
    sw = _small_switch(P)
    rng = random.Random((11 if pattern == "perm" else 12) + 100 * (P - 4))
    sends, sent = _traffic(rng, P, pattern, 4 if pattern == "perm" else 1)
    outs, res = _run_switch(sw, [], sends, cycles=450 if P == 4 else 700,
                            ready=lambda c, q: rng.random() < 0.8)
    assert res["err_packet"] == 0 and res["err_phase"] == 0
    n = 0
    for q in range(P):
        for p in range(P):
            for v in pk.DATA_VCS:
                want = [pk.Packet(pk.Header.data(v, pk.DEFAULT_PHASE, x.header.seq,
                                                 x.header.length, port=p), x.data)
                        for x in sent[p] if x.header.port == q and x.header.vc == v]
                got = [x for x in outs[q] if x.header.port == p and x.header.vc == v]
                assert got == want, (q, p, v)
                n += len(got)
    assert n == sum(len(x) for x in sent.values())


def test_online_nack_goes_to_the_port_it_names():
    sw = _small_switch()
    nack = pk.Packet(pk.Header.control(pk.DEFAULT_PHASE, 77, nack=True, port=2))
    stray = pk.Packet(pk.Header.control(pk.DEFAULT_PHASE, 78, port=7))      # no port 7: dropped
    outs, res = _run_switch(sw, [], {0: pk.pack(nack, FB) + pk.pack(stray, FB)}, cycles=60)
    assert outs[2] == [nack] and not outs[0] and not outs[1] and not outs[3]
    assert res["err_phase"] == 1


def test_online_rounds_share_a_vc_with_table_phases():
    """A VC carrying both a table phase and online packets alternates between them; both
    complete (no starvation either way)."""
    sw = _small_switch()
    rng = random.Random(13)
    phases = {0: (pk.VC_DP, [Flow({0, 1}, {0, 1})])}
    table = {p: [pk.Packet(pk.Header.data(pk.VC_DP, 0, k, 2), (rng.randrange(1 << 32), 1))
                 for k in range(5)] for p in (0, 1)}
    online = {p: [pk.Packet(pk.Header.data(pk.VC_DP, pk.DEFAULT_PHASE, k, 2, port=5 - p),
                            (7, rng.randrange(1 << 32))) for k in range(5)] for p in (2, 3)}
    sends = {p: sum((pk.pack(x, FB) for x in table.get(p, []) + online.get(p, [])), [])
             for p in range(4)}
    outs, res = _run_switch(sw, sw.cfg_words(phases), sends, cycles=250)
    assert [x.header.seq for x in outs[0]] == list(range(5)) == [x.header.seq for x in outs[1]]
    assert [x.data for x in outs[3]] == [x.data for x in online[2]]
    assert [x.data for x in outs[2]] == [x.data for x in online[3]]
    t = res["times"]
    # interleaved: the online packets do not all wait for the table phase to finish
    assert min(t[3]) < max(t[0]) and min(t[0]) < max(t[3])
