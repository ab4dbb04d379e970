"""The control unit's online rounds: packets with the default index 255, routed on the fly.

:class:`OnlineRounds` is built by :class:`fred.hdl.switch.rounds.ControlUnit` when the switch
routes online (``Switch(online=...)``, docs/switch.md):

* **candidates** (per data VC, every cycle): input p offers its head if it is a default-index
  packet of that VC whose port byte names an output ``< P``. A round-robin pass over the inputs
  (starting at ``rr``, which moves on after every online round) picks a partial permutation:
  input p joins if its output is not yet claimed and holds ``L + 1`` credits for its length L.
  ``go[v]``: at least one input joins.
* **latch** (the sequencer chose an online round of VC v): the picked inputs, their outputs
  and lengths are stored; the :class:`~fred.hdl.switch.online.OnlineRouter` computes the
  fabric configuration from the stored pairs, loaded in the next cycle.
* **start** (after ``config_settle``): if every stored input still holds the same head (a
  packet whose framing breaks before it is taken vanishes), each input's packet is taken and
  its output sends ``Header(vc, 255, seq, L, port=input)`` and the L data flits; otherwise the
  round is dropped and the control unit chooses again. A round ends when every output is done.
* **next round, same configuration**: while an online round runs, a new candidate set of the
  same VC whose pairs are all among the stored ones (the same permutation again, or part of
  it) starts as soon as the inputs have fed the current round -- the configuration routes it
  already -- and the outputs queue it back to back, like a table phase's next round.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal

from fred.contract.packet import DEFAULT_PHASE, HEADER_BITS, ONLINE_HEADER_BITS

from .online import OnlineRouter

__all__ = ["OnlineRounds"]


def f_port(w):
    """The port byte of a header word (0 when the word has none)."""
    return w[HEADER_BITS:ONLINE_HEADER_BITS] if len(w) >= ONLINE_HEADER_BITS else Const(0, 8)


class OnlineRounds:
    """Online-round logic of one :class:`~fred.hdl.switch.rounds.ControlUnit` ``cu``."""

    def __init__(self, cu):
        self.cu = cu
        m, P, sw = cu.m, cu.P, cu.sw
        self.router = OnlineRouter(P, sw.middle, ideal=sw.fabric_kind == "ideal")
        m.submodules.online_router = self.router
        self.rr = Signal(range(P), name="on_rr")
        self.sel = [Signal(P, name=f"on_sel{v}") for v in range(3)]
        self.go = [Signal(name=f"on_go{v}") for v in range(3)]
        self.l_sel = Signal(P, name="on_l_sel")
        self.l_vc = Signal(2, name="on_l_vc")
        self.l_dst = [Signal(range(P), name=f"on_l_dst{p}") for p in range(P)]
        self.l_len = [Signal(8, name=f"on_l_len{p}") for p in range(P)]
        m.d.comb += self.router.valid.eq(self.l_sel)
        for p in range(P):
            m.d.comb += self.router.dst[p].eq(self.l_dst[p])

    def is_default(self, w):
        return w[8:16] == DEFAULT_PHASE

    def dest_ok(self, w):
        """A default-index header whose port byte names an output of this switch."""
        return self.is_default(w) & (f_port(w) < self.cu.P)

    def candidates(self):
        """``sel[v]`` / ``go[v]`` for every data VC (see the module docstring)."""
        cu, m, P = self.cu, self.cu.m, self.cu.P
        for v in range(3):
            want = []
            for p in range(P):
                w = cu.hw(p, v)
                cred = Const(0)
                for q in range(P):
                    cred = cred | ((f_port(w) == q) & (cu.outs[q].avail[v] >= w[32:40] + 1))
                want.append(cu.hv(p, v) & self.dest_ok(w) & cred)
            claimed = Const(0, P)
            picked = [Const(0) for _ in range(P)]
            for i in range(2 * P - 1):        # two passes: ports >= rr, then ports < rr
                p = i % P
                if p == P - 1:                # rr <= P - 1: always in the first pass
                    en = Const(1)
                else:
                    en = (self.rr <= p) if i < P else (self.rr > p)
                dst = f_port(cu.hw(p, v))[:max(1, (P - 1).bit_length())]
                take = Signal(name=f"on_take{v}_{i}")
                m.d.comb += take.eq(en & want[p] & ~claimed.bit_select(dst, 1))
                picked[p] = picked[p] | take
                # a signal per step: an expression used twice per step would be emitted twice,
                # and the chain would grow as 2 ** (2 P) in the Verilog
                nxt = Signal(P, name=f"on_claimed{v}_{i}")
                m.d.comb += nxt.eq(claimed | Mux(take, (Const(1, P) << dst)[:P], 0))
                claimed = nxt
            m.d.comb += [self.sel[v].eq(Cat(*picked)), self.go[v].eq(self.sel[v] != 0)]

    def latch(self, vc):
        """Sequencer statements: store the pairs of VC ``vc`` (a signal) for a round."""
        cu, m, P = self.cu, self.cu.m, self.cu.P
        for v in range(3):
            with m.If(vc == v):
                m.d.sync += self.l_sel.eq(self.sel[v])
                for p in range(P):
                    w = cu.hw(p, v)
                    m.d.sync += [self.l_dst[p].eq(f_port(w)), self.l_len[p].eq(w[32:40])]
        m.d.sync += [self.l_vc.eq(vc), self.rr.eq(Mux(self.rr == P - 1, 0, self.rr + 1))]

    def still_there(self):
        """Every stored input still holds the same default-index head."""
        cu, P = self.cu, self.cu.P
        ok = Const(1)
        for p in range(P):
            here = Const(0)
            for v in range(3):
                w = cu.hw(p, v)
                here = here | ((self.l_vc == v) & cu.hv(p, v) & self.dest_ok(w)
                               & (f_port(w) == self.l_dst[p]) & (w[32:40] == self.l_len[p]))
            ok = ok & (~self.l_sel[p] | here)
        return ok

    def subset(self):
        """The candidates of the stored VC are all pairs of the stored round (the loaded
        configuration routes them)."""
        cu, P = self.cu, self.cu.P
        ok = Const(0)
        for v in range(3):
            inside = Const(1)
            for p in range(P):
                inside = inside & (~self.sel[v][p] | (self.l_sel[p]
                                                      & (f_port(cu.hw(p, v)) == self.l_dst[p])))
            ok = ok | ((self.l_vc == v) & inside & self.go[v])
        return ok

    def round_pairs(self, pipelined):
        """``(sel, dst[p], len[p])`` of the round starting now: the stored ones, or (``pipelined``
        high) the live candidates of the stored VC."""
        cu, m, P = self.cu, self.cu.m, self.cu.P
        sel = Signal(P, name="on_r_sel")
        dst = [Signal(range(P), name=f"on_r_dst{p}") for p in range(P)]
        length = [Signal(8, name=f"on_r_len{p}") for p in range(P)]
        m.d.comb += sel.eq(self.l_sel)
        m.d.comb += [d.eq(x) for d, x in zip(dst, self.l_dst)]
        m.d.comb += [d.eq(x) for d, x in zip(length, self.l_len)]
        with m.If(pipelined):
            for v in range(3):
                with m.If(self.l_vc == v):
                    m.d.comb += sel.eq(self.sel[v])
                    for p in range(P):
                        w = cu.hw(p, v)
                        m.d.comb += [dst[p].eq(f_port(w)), length[p].eq(w[32:40])]
        return sel, dst, length

    def outputs(self, sel, dst):
        """Per output q: (used, source one-hot) of a round's pairs."""
        P = self.cu.P
        res = []
        for q in range(P):
            src = Cat(*[sel[p] & (dst[p] == q) for p in range(P)])
            res.append((src != 0, src))
        return res
