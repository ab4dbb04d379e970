"""Sequence alignment of a phase's inputs (hdl/switch/seqalign.py) on the Amaranth simulator (ideal
fabric): a packet lost on one input, a go-back with leftovers in the buffers, and the two
mutants the fault bench uses (``no-align``, ``nack-no-fanout``)."""

import random

from fred.contract import packet as pk
from fred.hdl.netlist.flows import Flow

from tests.hdl.test_switch import FB, _mk, _run_switch, _small_switch, _sum

PHASES = {0: (pk.VC_DP, [Flow({0, 1}, {0, 1})])}


def _data(n=8, seed=1, length=2):
    rng = random.Random(seed)
    # the packet of seq k is the same at every transmission (what a retransmission sends)
    return {p: {k: _mk(rng, pk.VC_DP, 0, k, length) for k in range(n)} for p in (0, 1)}


def _send(pk_of, seqs):
    return sum((pk.pack(pk_of[k], FB) for k in seqs), [])


def _expect(d, seqs):
    return [pk.Packet(pk.Header.data(pk.VC_DP, 0, k, len(d[0][k].data)),
                      tuple(_sum(a, b) for a, b in zip(d[0][k].data, d[1][k].data))) for k in seqs]


def test_packet_lost_on_one_input_drops_the_older_heads():
    d = _data()
    sends = {0: _send(d[0], [5, 6, 7]), 1: _send(d[1], [6, 7])}     # port 1 lost its 5
    for fault, stale in ((None, 1), ("no-align", 0)):
        sw = _small_switch(fault=fault)
        outs, res = _run_switch(sw, sw.cfg_words(PHASES), sends, cycles=160)
        assert res.get("err_stale", 0) == stale
        if fault is None:
            assert outs[0] == _expect(d, [6, 7]) == outs[1]
        else:                          # the mutant sums 5 with 6 and 6 with 7 under headers 5, 6
            assert [x.header.seq for x in outs[0]] == [5, 6] and outs[0] != _expect(d, [5, 6])


def test_go_back_with_leftovers_follows_the_nack():
    """Port 0 sent 3, 4 before the NACK(2) reached it, port 1 only 3: after the NACK both
    resend from 2. The leftover 4 must go, not port 1's 2."""
    d = _data()
    nack = pk.pack(pk.Packet(pk.Header.control(0, 2, nack=True)), FB)
    sends = {0: nack + _send(d[0], [3, 4, 2, 3]), 1: _send(d[1], [3, 2, 3])}
    sw = _small_switch()
    outs, res = _run_switch(sw, sw.cfg_words(PHASES), sends, cycles=220)
    assert res.get("err_stale") == 1
    assert [x for x in outs[0] if x.header.vc != pk.VC_CTRL] == _expect(d, [3, 2, 3])
    ctrl = {q: [x for x in outs[q] if x.header.vc == pk.VC_CTRL] for q in range(4)}
    assert len(ctrl[0]) == 1 == len(ctrl[1]) and not ctrl[2]     # fanned out to inputs 0 and 1


def test_nack_no_fanout_mutant_reaches_the_lowest_input_only():
    nack = pk.pack(pk.Packet(pk.Header.control(0, 2, nack=True)), FB)
    ack = pk.pack(pk.Packet(pk.Header.control(0, 2)), FB)
    sw = _small_switch(fault="nack-no-fanout")
    outs, _ = _run_switch(sw, sw.cfg_words(PHASES), {1: nack + ack}, cycles=60)
    kinds = {q: [x.header.kind for x in outs[q]] for q in range(4)}
    assert kinds == {0: [pk.KIND_NACK, pk.KIND_ACK], 1: [pk.KIND_ACK], 2: [], 3: []}


def test_flit_lost_after_the_round_started_poisons_its_outputs():
    """Cut-through meets a lost flit: input 1's packet 1 loses its last data flit after the
    round took it; the round completes (zeros) and both outputs send its last flit with a bad
    check, so receivers drop the packet (and NACK it); rounds 0 and 2 are exact."""
    d = _data(length=4)
    sends = {0: _send(d[0], [0, 1, 2]), 1: _send(d[1], [0, 1]) + [None] * 30 + _send(d[1], [2])}
    for lose in (((1, 9),), ()):           # word 9 of port 1: packet 1's last data flit
        sw = _small_switch()
        bad = []
        outs, res = _run_switch(sw, sw.cfg_words(PHASES), sends, cycles=200, lose=lose, poisoned=bad)
        assert res.get("err_lost", 0) == len(lose) and res.get("err_packet") == 0
        if lose:
            assert sorted(q for q, _ in bad) == [0, 1] and res.get("poisoned") == 2
            assert outs[0] == _expect(d, [0, 2]) == outs[1]
        else:
            assert not bad and outs[0] == _expect(d, [0, 1, 2]) == outs[1]
