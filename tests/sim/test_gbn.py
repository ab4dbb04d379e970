"""Go-Back-N endpoints (sim/faults/gbn.py) and the fault injector (sim/faults/inject.py), in plain Python: a
source and a receiver over a lossy channel (no switch), across the 16-bit sequence wrap."""

import random
from collections import deque

import pytest

from fred.contract import packet as pk
from fred.sim.faults.inject import Injector
from fred.sim.faults.gbn import GbnParams, GbnReceiver, GbnSource, ack_fields


def test_injector_kinds_rates_and_order():
    rng = random.Random(1)
    for kind in ("drop", "corrupt", "duplicate", "delay"):
        inj = Injector(0.1, [kind], random.Random(2), 40, lambda w: False)
        words = list(range(1, 2001))
        for w in words:
            inj.push(w)
        out, now = [], 0
        while inj.busy or inj.hold:
            w = inj.step(now)
            if w is not None:
                out.append(w)
            now += 1
        n = inj.faults(kind)
        assert 140 < n < 260, (kind, n)                          # ~10 % of 2000
        if kind == "drop":
            assert len(out) == 2000 - n and out == sorted(out)
        elif kind == "corrupt":
            assert sum(a != b for a, b in zip(out, words)) == n
        elif kind == "duplicate":
            assert len(out) == 2000 + n and sorted(set(out)) == words
        else:
            assert out == words and now > 2000 + n                # delays keep order, cost time
    with pytest.raises(ValueError, match="fault kinds"):
        Injector(0.1, ["melt"], rng, 8, lambda w: False)
    with pytest.raises(ValueError, match="fault rate"):
        Injector(1.5, ["drop"], rng, 8, lambda w: False)


def _loop(n, s0, loss, seed, mutant=None, receivers=(1,)):
    """One source, ``receivers`` over channels losing ``loss`` of the packets both ways."""
    g = GbnParams(4, window=16, rto=60, ack_delay=8, nack_retry=40, mutant=mutant)
    rng = random.Random(seed)
    to_rx = {r: deque() for r in receivers}
    to_tx = deque()
    got = {r: [] for r in receivers}
    src = GbnSource(g, 0, 0, n, s0, receivers,
                    lambda k: pk.Packet(pk.Header.data(pk.VC_DP, 0, (s0 + k) % pk.SEQ_MOD, 1), (k,)))
    rcv = {r: GbnReceiver(g, 0, r, n, s0, lambda h: to_tx.append(h),
                          lambda k, p, r=r: got[r].append((k, p.data[0]))) for r in receivers}
    for now in range(30_000):
        if src.ready() and now % 2 == 0:
            _, p = src.take(now)
            for r in receivers:
                if rng.random() >= loss:
                    to_rx[r].append((now + 5, p))
        for r in receivers:
            while to_rx[r] and to_rx[r][0][0] <= now:
                rcv[r].on_packet(to_rx[r].popleft()[1], now)
            rcv[r].tick(now)
        while to_tx:
            h = to_tx.popleft()
            if rng.random() >= loss:
                (src.on_nack if h.kind == pk.KIND_NACK else src.on_ack)(h.seq, now)
        src.tick(now)
        if src.done and all(rr.expected == n for rr in rcv.values()):
            return src, got, now
    return src, got, None


@pytest.mark.parametrize("seed", range(4))
def test_go_back_n_delivers_everything_once_in_order_across_the_wrap(seed):
    s0 = pk.SEQ_MOD - 37                                     # seq 65499 .. wraps after 37
    src, got, end = _loop(200, s0, 0.05, seed, receivers=(1, 3))
    assert end is not None
    for r in (1, 3):
        assert got[r] == [(k, k) for k in range(200)]
    assert src.retransmitted > 0 and src.rewinds + src.timeouts > 0


def test_ack_names_its_receiver_and_the_source_waits_for_all():
    g = GbnParams(4)
    src = GbnSource(g, 0, 0, 40, pk.SEQ_MOD - 3, (1, 2), lambda k: None)
    for now in range(20):
        src.take(now)
    low = lambda k: (pk.SEQ_MOD - 3 + k) % pk.SEQ_MOD & ((1 << g.nbits) - 1)
    src.on_ack((1 << g.nbits) | low(16), 30)               # receiver 1 has 0..15
    assert ack_fields(g, (1 << g.nbits) | low(16)) == (1, low(16))
    assert src.base == 0                                      # receiver 2 has not acknowledged
    src.on_ack((2 << g.nbits) | low(10), 31)
    assert src.base == 10
    src.on_nack((pk.SEQ_MOD - 3 + 12) % pk.SEQ_MOD, 32)      # go back to packet 12 (across the wrap)
    assert src.next == 12 and src.rewinds == 1


def test_retx_late_mutant_never_completes():
    _, got, end = _loop(60, 0, 0.1, 1, mutant="retx-late")
    assert end is None and len(got[1]) < 60


def test_accept_gap_mutant_skips_packets():
    _, got, end = _loop(60, 0, 0.1, 1, mutant="accept-gap")
    ks = [k for k, _ in got[1]]
    assert ks != list(range(len(ks)))
