"""Poisoning the outputs of a round whose input was truncated (cut-through meets link faults).

The switch forwards cut-through: a round starts when the headers of its input packets have
arrived. If a flit of such a packet is then lost on its link (found by
:class:`~fred.hdl.switch.linkcheck.LinkRx`: a corrupted flit, a gap, a broken framing), the packet
cannot be recalled; the input port completes it with zero flits (``trunc``,
:mod:`fred.hdl.switch.buffers`) so that the round ends, and every output of that round must then
mark what it sends as bad: here the last flit of the round's packet at each output of the round
leaves with its check inverted (``LinkTx.poison``), so the receiver drops the packet and NACKs it
(and a downstream switch drops it as corrupted).

Which round: an input port streams the newest round it takes part in, and no newer round can
start before it has fed it, so a truncation at input ``p`` hits, at every output ``q`` that ``p``
feeds in that round, ``q``'s newest round (only those: another flow of the phase, or another
pair of an online round started in the same cycle, is left alone). Each output keeps its current
round and the rounds queued behind it (as many as its
:class:`~fred.hdl.switch.control.OutputPort` holds, ``rounds``), each with a poison bit; a round is
pushed at ``OutputPort.start`` and popped when the output sends the last flit of a data
packet. ``poisoned`` counts the flits sent poisoned.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal

from fred.contract.packet import DATA_VCS, VC_CTRL

__all__ = ["poison_rounds"]


def poison_rounds(m, sw, seen, outs, txs, round_src):
    """Drive ``txs[q].poison`` (module docstring); ``seen``: the ports as the control unit sees
    them (their ``take``), ``outs``: the output ports, ``txs``: the link senders, ``round_src[q]``:
    the inputs that feed output ``q`` in the round starting this cycle (its flow's inputs, or
    online its pair's source)."""
    P = sw.P
    hit = [Const(0, 1)] * P              # a truncation this cycle hits output q's newest round
    for p in range(P):
        took = Signal(name=f"pz_took{p}")
        m.d.comb += took.eq(sum(seen[p].take[v] for v in DATA_VCS) != 0)
        # only the outputs p feeds: another flow of the phase, or another pair of an online
        # round, is not hit by p's truncation
        starts = Cat(*[outs[q].start & round_src[q][p] for q in range(P)])
        round_outs = Signal(P, name=f"pz_outs{p}")     # the outputs of the round p streams
        now_outs = Mux(took, starts, round_outs)
        with m.If(took):
            m.d.sync += round_outs.eq(starts)
        for q in range(P):
            hit[q] = hit[q] | (seen[p].trunc & now_outs[q])
    sent = []
    for q in range(P):
        sent.append(_output(m, q, outs[q], txs[q], hit[q], sw.round_queue))
    m.d.sync += sw.poisoned.eq(sw.poisoned + sum(sent))


def _output(m, q, out, tx, hit, n):
    """Output ``q``'s ``n`` rounds (the one it sends, then the queued ones, oldest first: as many
    as the output port holds) with a poison bit each; returns the pulse "a poisoned flit
    left"."""
    o = out.o
    in_pkt = Signal(name=f"pz_in_pkt{q}")
    vcr = Signal(2, name=f"pz_vc{q}")
    vc = Mux(in_pkt, vcr, o.payload.data[4:6])
    fire = o.valid & o.ready
    with m.If(fire):
        m.d.sync += [in_pkt.eq(~o.payload.last), vcr.eq(vc)]
    data_last = Signal(name=f"pz_data_last{q}")        # the last flit of a data packet is offered
    m.d.comb += data_last.eq(o.valid & o.payload.last & (vc != VC_CTRL))
    rv = [Signal(name=f"pz_round{q}_{i}") for i in range(n)]       # slot i holds a round
    rz = [Signal(name=f"pz_round_bad{q}_{i}") for i in range(n)]   # ... and it is poisoned
    m.d.comb += tx.poison.eq(data_last & rz[0])
    pop = data_last & o.ready
    # after the pop: slot i holds what slot i + 1 held
    sv = [Mux(pop, rv[i + 1], rv[i]) if i + 1 < n else Mux(pop, 0, rv[i]) for i in range(n)]
    sz = [Mux(pop, rz[i + 1], rz[i]) if i + 1 < n else Mux(pop, 0, rz[i]) for i in range(n)]
    push = out.start
    for i in range(n):
        first_free = ~sv[i] & (sv[i - 1] if i else Const(1, 1))
        newest = sv[i] & (~sv[i + 1] if i + 1 < n else Const(1, 1))
        with m.If(push & first_free):                  # the round starting now: hit is its own
            m.d.sync += [rv[i].eq(1), rz[i].eq(hit)]
        with m.Elif(push):
            m.d.sync += [rv[i].eq(sv[i]), rz[i].eq(sz[i])]
        with m.Else():                                 # no start: hit is the newest round's
            m.d.sync += [rv[i].eq(sv[i]), rz[i].eq(sz[i] | (hit & newest))]
    return pop & rz[0]
