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
and its queued round (an
:class:`~fred.hdl.switch.control.OutputPort` holds at most one queued round), each with a poison
bit; a round is pushed at ``OutputPort.start`` and popped when the output sends the last flit of
a data packet. ``poisoned`` counts the flits sent poisoned.
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
        sent.append(_output(m, q, outs[q], txs[q], hit[q]))
    m.d.sync += sw.poisoned.eq(sw.poisoned + sum(sent))


def _output(m, q, out, tx, hit):
    """Output ``q``'s two rounds (current, queued) with their poison bits; returns the pulse
    "a poisoned flit left"."""
    o = out.o
    in_pkt = Signal(name=f"pz_in_pkt{q}")
    vcr = Signal(2, name=f"pz_vc{q}")
    vc = Mux(in_pkt, vcr, o.payload.data[4:6])
    fire = o.valid & o.ready
    with m.If(fire):
        m.d.sync += [in_pkt.eq(~o.payload.last), vcr.eq(vc)]
    data_last = Signal(name=f"pz_data_last{q}")        # the last flit of a data packet is offered
    m.d.comb += data_last.eq(o.valid & o.payload.last & (vc != VC_CTRL))
    cur_v, cur_z = Signal(name=f"pz_cur{q}"), Signal(name=f"pz_cur_bad{q}")
    nxt_v, nxt_z = Signal(name=f"pz_next{q}"), Signal(name=f"pz_next_bad{q}")
    m.d.comb += tx.poison.eq(data_last & cur_z)
    pop = data_last & o.ready
    c_v, c_z = Mux(pop, nxt_v, cur_v), Mux(pop, nxt_z, cur_z)     # after the pop
    n_v, n_z = Mux(pop, 0, nxt_v), Mux(pop, 0, nxt_z)
    push = out.start
    with m.If(push & ~c_v):
        m.d.sync += [cur_v.eq(1), cur_z.eq(hit), nxt_v.eq(0), nxt_z.eq(0)]
    with m.Elif(push):
        m.d.sync += [cur_v.eq(c_v), cur_z.eq(c_z), nxt_v.eq(1), nxt_z.eq(hit)]
    with m.Else():
        m.d.sync += [cur_v.eq(c_v), cur_z.eq(c_z | (hit & ~n_v)), nxt_v.eq(n_v), nxt_z.eq(n_z | (hit & n_v))]
    return pop & cur_z
