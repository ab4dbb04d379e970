"""The control unit of the FRED switch: which phase runs, and when (FRED-SPEC section 4).

:class:`ControlUnit` builds, inside :meth:`fred.hdl.switch.top.Switch.elaborate`, the logic between
the input ports, the phase table, the fabric and the output ports; one method per block, called
in this order (the order in which they add signals and statements to the module):

* :meth:`ControlUnit.round_state` -- the round in progress (VC, phase) and the fabric
  configuration register;
* :meth:`ControlUnit.scanner` -- per data VC, a scanner visits one input port per cycle, drops
  heads naming an unusable phase (or lengths that differ within a round), latches one ready
  phase and keeps a "next" one found while the first runs;
* :meth:`ControlUnit.sequencer` -- strict priority MP > PP > DP between rounds, loading a new
  configuration (``config_settle`` cycles) or starting the next round of the same phase;
* :meth:`ControlUnit.start_round` -- a round takes the inputs' headers and starts every output
  of the phase with its header;
* :meth:`ControlUnit.control_vc` -- ACK/NACK packets are forwarded towards the sources;
* online rounds of default-index packets (:mod:`fred.hdl.switch.online_ctl`), when the switch
  routes online, share the selection and the sequencer with the table's phases;
* :meth:`ControlUnit.counters` -- error counters and per-VC peak buffer occupancy.

The rules and the latencies are in the docstring of :mod:`fred.hdl.switch.top`.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal

from fred.contract.packet import DATA_VCS, DEFAULT_PHASE, PRIORITY, VC_CTRL

from .control import make_header
from .online_ctl import OnlineRounds, f_port

__all__ = ["ControlUnit"]

#: sequencer states
IDLE, SETTLE, RUN, O_CFG, O_SET = 0, 1, 2, 3, 4


# header fields (fred.contract.packet): phase, sequence number, length
def f_phase(w):
    return w[8:16]


def f_seq(w):
    return w[16:32]


def f_len(w):
    return w[32:40]


class ControlUnit:
    """The control unit of one elaboration of ``switch`` into module ``m``.

    ``ports`` are the :class:`~fred.hdl.switch.buffers.InputPort` s, ``fab`` the fabric, ``tab``
    the :class:`~fred.hdl.switch.control.PhaseTable`, ``outs`` the
    :class:`~fred.hdl.switch.control.OutputPort` s. Creating it adds the per-port, per-VC
    ``take`` / ``discard`` pulses.
    """

    def __init__(self, switch, m, ports, fab, tab, outs):
        self.sw, self.m = switch, m
        self.ports, self.fab, self.tab, self.outs = ports, fab, tab, outs
        self.P, self.L = switch.P, switch.layout
        P = self.P
        self.take = [[Signal(name=f"take_{p}_{v}") for v in range(4)] for p in range(P)]
        self.discard = [[Signal(name=f"discard_{p}_{v}") for v in range(4)] for p in range(P)]
        for p in range(P):
            m.d.comb += [ports[p].take.eq(Cat(*self.take[p])),
                         ports[p].discard.eq(Cat(*self.discard[p]))]
        self.n_disc = []       # packets dropped by the control unit this cycle (terms)
        self.hdr_bits = switch.hdr_bits
        self.on = OnlineRounds(self) if switch.online else None

    # -- fields --------------------------------------------------------------------------------
    def hv(self, p, v):
        """Head valid of VC ``v`` at input port ``p``."""
        return self.ports[p].head_valid[v]

    def hw(self, p, v):
        """Head (header) word of VC ``v`` at input port ``p``."""
        return self.ports[p].head_word[v]

    def hd(self, p, v):
        """The whole head packet of VC ``v`` at input port ``p`` has arrived."""
        return self.ports[p].head_done[v]

    def e_vc(self, e):
        return e[0:2]

    def e_in(self, e):
        L = self.L
        return e[L.off_in:L.off_in + self.P]

    def e_out(self, e):
        L = self.L
        return e[L.off_out:L.off_out + self.P]

    def e_flow(self, e, q):
        L, P = self.L, self.P
        return e[L.off_flow + q * P:L.off_flow + (q + 1) * P]

    def e_cfg(self, e):
        L = self.L
        return e[L.off_cfg:L.off_cfg + L.C]

    # -- blocks --------------------------------------------------------------------------------
    def round_state(self):
        m, sw = self.m, self.sw
        busy = Signal()            # a round is in progress (started, not yet finished)
        act_vc = Signal(2)
        act_phase = Signal(8)
        cfg_loaded = Signal()
        cfg_phase = Signal(8)
        cfg_reg = Signal(self.L.C)
        m.d.comb += [self.fab.cfg.eq(cfg_reg), sw.active.eq(busy), sw.act_vc.eq(act_vc),
                     sw.act_phase.eq(act_phase)]
        with m.If(self.tab.changed):
            m.d.sync += cfg_loaded.eq(0)
        self.busy, self.act_vc, self.act_phase = busy, act_vc, act_phase
        self.cfg_loaded, self.cfg_phase, self.cfg_reg = cfg_loaded, cfg_phase, cfg_reg

    def scanner(self):
        """One port per cycle per data VC; latches a ready phase per VC (see the module doc)."""
        m, P, L = self.m, self.P, self.L
        sp = Signal(range(P))
        m.d.sync += sp.eq(Mux(sp == P - 1, 0, sp + 1))
        self.sp = sp
        self.lat_valid = [Signal(name=f"lat_valid{v}") for v in range(3)]
        self.lat_phase = [Signal(8, name=f"lat_phase{v}") for v in range(3)]
        self.lat_port = [Signal(range(P), name=f"lat_port{v}") for v in range(3)]
        self.lat_entry = [Signal(L.entry_width, name=f"lat_entry{v}") for v in range(3)]
        self.nxt_valid = [Signal(name=f"nxt_valid{v}") for v in range(3)]
        self.nxt_phase = [Signal(8, name=f"nxt_phase{v}") for v in range(3)]
        self.nxt_port = [Signal(range(P), name=f"nxt_port{v}") for v in range(3)]
        self.nxt_entry = [Signal(L.entry_width, name=f"nxt_entry{v}") for v in range(3)]
        self.rdy = [Signal(name=f"rdy{v}") for v in range(3)]
        self.go = [Signal(name=f"go{v}") for v in range(3)]
        self.lat_len = [Signal(8, name=f"lat_len{v}") for v in range(3)]
        self.pending = [Signal(name=f"pending{v}") for v in range(3)]
        self.age = [Signal(range(P + 1), name=f"age{v}") for v in range(3)]
        for v in DATA_VCS:
            paused = self.busy & (self.act_vc == v)     # VC v's phase is the one running
            phi, ent, scan, eok, present, len_eq = self._scan_candidate(v)
            self._latched_readiness(v)
            self._age(v, paused)
            self._latch(v, phi, ent, scan & eok & present & len_eq, paused)
        self.go_any = [Signal(name=f"go_any{v}") for v in range(3)]
        if self.on is not None:
            self.on.candidates()
        for v in DATA_VCS:
            m.d.comb += self.go_any[v].eq(self.go[v] | (self.on.go[v] if self.on else 0))
        go = self.go_any
        m.d.comb += self.sw.ready_vcs.eq(Cat(go[0], go[1], go[2], Const(0, 1)))

    def _scan_candidate(self, v):
        """The head at the scanned port: its table entry, and whether its phase is usable,
        present at every input of the phase and of one length there (else it is dropped, once
        the packets have arrived whole; a default-index head is left to the online rounds)."""
        m, P, sp, tab = self.m, self.P, self.sp, self.tab
        hv, hw, hd, e_in = self.hv, self.hw, self.hd, self.e_in
        cand_hv = Signal(name=f"cand_hv{v}")
        cand_hd = Signal(name=f"cand_hd{v}")
        cand_w = Signal(self.hdr_bits, name=f"cand_w{v}")
        for p in range(P):
            with m.If(sp == p):
                m.d.comb += [cand_hv.eq(hv(p, v)), cand_hd.eq(hd(p, v)), cand_w.eq(hw(p, v))]
        phi = f_phase(cand_w)
        m.d.comb += tab.r_addr[v].eq(phi)
        ent = tab.r_entry[v]
        hit = tab.r_hit[v]
        eok = Signal(name=f"eok{v}")
        m.d.comb += eok.eq(hit & (self.e_vc(ent) == v) & e_in(ent).bit_select(sp, 1))
        present = Const(1)
        len_eq = Const(1)
        all_done = Const(1)
        for p in range(P):
            here = hv(p, v) & (f_phase(hw(p, v)) == phi)
            present = present & (~e_in(ent)[p] | here)
            len_eq = len_eq & (~e_in(ent)[p] | (f_len(hw(p, v)) == f_len(cand_w)))
            all_done = all_done & (~e_in(ent)[p] | hd(p, v))
        scan = Signal(name=f"scan{v}")
        m.d.comb += scan.eq(cand_hv)
        online = self.on.dest_ok(cand_w) if self.on is not None else Const(0)
        bad = Signal(name=f"bad{v}")
        mism = Signal(name=f"mism{v}")
        m.d.comb += [bad.eq(scan & ~eok & ~online & cand_hd),
                     mism.eq(scan & eok & present & ~len_eq & all_done)]
        for p in range(P):
            with m.If(bad & (sp == p)):
                m.d.comb += self.discard[p][v].eq(1)
            with m.If(mism & e_in(ent)[p]):
                m.d.comb += self.discard[p][v].eq(1)
        self.n_disc.append(bad)
        self.n_disc.append(Mux(mism, sum(e_in(ent)[p] for p in range(P)), 0))
        return phi, ent, scan, eok, present, len_eq

    def _latched_readiness(self, v):
        """``rdy[v]``: the latched phase has its packets at every input; ``go[v]``: and every
        output of it has the credits for a round."""
        m, P, hv, hw = self.m, self.P, self.hv, self.hw
        le = self.lat_entry[v]
        lat_len = self.lat_len
        for p in range(P):
            with m.If(self.lat_port[v] == p):
                m.d.comb += lat_len[v].eq(f_len(hw(p, v)))
        ready = Const(1)
        credok = Const(1)
        for p in range(P):
            here = hv(p, v) & (f_phase(hw(p, v)) == self.lat_phase[v]) & \
                (f_len(hw(p, v)) == lat_len[v])
            if self.sw.fault == "activate-early" and p == 0:   # mutant: port 0 not waited for
                here = Const(1)
            ready = ready & (~self.e_in(le)[p] | here)
            credok = credok & (~self.e_out(le)[p] | (self.outs[p].avail[v] >= lat_len[v] + 1))
        m.d.comb += [self.rdy[v].eq(self.lat_valid[v] & ready), self.go[v].eq(self.rdy[v] & credok)]

    def _age(self, v, paused):
        # age: cycles the scanner has searched VC v without latching (saturates at P); a
        # lower-priority VC may only start once every pending higher VC had a full sweep
        # since its last round or since a head of it last appeared (a packet that completes
        # while the switch streams a lower VC must be found before that VC's next round)
        m, P, hv, age = self.m, self.P, self.hv, self.age
        pend = Const(0)
        arrived = Const(0)
        hv_prev = Signal(P, name=f"hv_prev{v}")
        m.d.sync += hv_prev.eq(Cat(*[hv(p, v) for p in range(P)]))
        for p in range(P):
            pend = pend | hv(p, v)
            arrived = arrived | (hv(p, v) & ~hv_prev[p])
        m.d.comb += self.pending[v].eq(pend)
        with m.If(self.lat_valid[v] | paused | arrived):
            m.d.sync += age[v].eq(0)
        with m.Elif(age[v] != P):
            m.d.sync += age[v].eq(age[v] + 1)

    def _latch(self, v, phi, ent, found, paused):
        # a second ready phase of this VC is kept in the "next" slot (found while the
        # latched one runs) and takes its place when the latched one is no longer ready
        m, sp = self.m, self.sp
        lat_valid, lat_phase, lat_port, lat_entry = (self.lat_valid, self.lat_phase,
                                                     self.lat_port, self.lat_entry)
        nxt_valid, nxt_phase, nxt_port, nxt_entry = (self.nxt_valid, self.nxt_phase,
                                                     self.nxt_port, self.nxt_entry)
        with m.If(~lat_valid[v]):
            with m.If(found):
                m.d.sync += [lat_valid[v].eq(1), lat_phase[v].eq(phi), lat_port[v].eq(sp),
                             lat_entry[v].eq(ent)]
        with m.Elif(~self.rdy[v] & ~paused):
            with m.If(nxt_valid[v]):
                m.d.sync += [lat_phase[v].eq(nxt_phase[v]), lat_port[v].eq(nxt_port[v]),
                             lat_entry[v].eq(nxt_entry[v]), nxt_valid[v].eq(0)]
            with m.Else():
                m.d.sync += lat_valid[v].eq(0)
        with m.Elif(~nxt_valid[v] & found & (phi != lat_phase[v])):
            m.d.sync += [nxt_valid[v].eq(1), nxt_phase[v].eq(phi), nxt_port[v].eq(sp),
                         nxt_entry[v].eq(ent)]
        with m.If(self.tab.changed):
            m.d.sync += [lat_valid[v].eq(0), nxt_valid[v].eq(0)]

    def _select(self):
        """The ready VC to start (strict priority) and its latched phase, entry and length."""
        m = self.m
        go, pending, age, lat_valid = self.go_any, self.pending, self.age, self.lat_valid
        sel_vc = Signal(2)
        sel_any = Signal()
        # strict priority: VC v may start if it is ready and no higher VC is ready or may still
        # become ready (pending heads not yet swept once). A higher VC that is ready but waits
        # for output credits does not block lower ones (credits depend on the receivers).
        blocked = Const(0)
        order = PRIORITY[::-1] if self.sw.fault == "prio-reversed" else PRIORITY  # mutant
        for v in order:
            with m.If(go[v] & ~blocked):
                m.d.comb += [sel_any.eq(1), sel_vc.eq(v)]
            blocked = blocked | go[v] | (pending[v] & (age[v] != self.P) & ~lat_valid[v])
        sel_entry = Signal(self.L.entry_width)
        sel_phase = Signal(8)
        sel_len = Signal(8)
        sel_online = Signal()      # the chosen VC runs an online round (not its table phase)
        # a VC with both a ready table phase and online packets alternates between them
        self.prefer_on = Signal(3, name="prefer_online")
        for v in DATA_VCS:
            with m.If(sel_vc == v):
                m.d.comb += [sel_entry.eq(self.lat_entry[v]), sel_phase.eq(self.lat_phase[v]),
                             sel_len.eq(self.lat_len[v])]
                if self.on is not None:
                    m.d.comb += sel_online.eq(self.on.go[v] & (~self.go[v] | self.prefer_on[v]))
        self.sel_vc, self.sel_any, self.sel_online = sel_vc, sel_any, sel_online
        self.sel_entry, self.sel_phase, self.sel_len = sel_entry, sel_phase, sel_len

    def _hdr_phase(self):
        """The phase index the output headers carry (the mutant ``header-off-by-one`` adds 1)."""
        if self.sw.fault == "header-off-by-one":
            return (self.sel_phase + 1)[:8]
        return self.sel_phase

    def _prefer(self, vc, online):
        """After a round of VC ``vc`` starts: its next tie goes to the other kind of round."""
        for v in DATA_VCS:
            with self.m.If(vc == v):
                self.m.d.sync += self.prefer_on[v].eq(int(not online))

    def sequencer(self):
        """IDLE -> (SETTLE: load a new configuration) -> RUN: rounds of one phase; online:
        IDLE -> O_CFG (route the stored pairs) -> O_SET (settle, start) -> RUN."""
        self._select()
        m, P, ports, outs = self.m, self.P, self.ports, self.outs
        sel_any, sel_vc, sel_phase = self.sel_any, self.sel_vc, self.sel_phase
        busy, act_vc, act_phase = self.busy, self.act_vc, self.act_phase
        cfg_loaded, cfg_phase = self.cfg_loaded, self.cfg_phase
        self.settle = settle = Signal(range(self.sw.config_settle + 2))
        all_idle = Const(1)
        feeders_done = Const(1)
        can_queue = Const(1)
        for p in range(P):
            all_idle = all_idle & ~ports[p].busy & outs[p].idle
            feeders_done = feeders_done & ~ports[p].busy
            can_queue = can_queue & outs[p].can_queue
        start = Signal()           # a table phase's round starts
        on_start = Signal()        # an online round starts
        m.d.comb += self.sw.round_start.eq(start | on_start)
        self.start, self.on_start = start, on_start
        self.on_pipe = Signal()    # the online round starting now is a pipelined one
        self.seq = seq = Signal(3, name="seq_state")
        with m.Switch(seq):
            if self.on is not None:
                self._online_states()
            with m.Case(SETTLE):
                with m.If(settle == 0):
                    m.d.sync += seq.eq(IDLE)
                with m.Else():
                    m.d.sync += settle.eq(settle - 1)
            with m.Case(RUN):
                # the same phase continues: start its next round as soon as the inputs have
                # fed this one and every output has a queue slot (outputs queue it behind the
                # rounds they hold; same configuration)
                with m.If(sel_any & ~self.sel_online & (sel_vc == act_vc) & (sel_phase == act_phase)
                          & cfg_loaded & (cfg_phase == sel_phase) & feeders_done & can_queue):
                    m.d.comb += start.eq(1)
                    self._prefer(sel_vc, False)
                if self.on is not None:
                    # the next online round, if the loaded configuration routes it already
                    with m.Elif(sel_any & self.sel_online & (sel_vc == act_vc)
                                & (act_phase == DEFAULT_PHASE) & self.on.subset()
                                & feeders_done & can_queue):
                        m.d.comb += [on_start.eq(1), self.on_pipe.eq(1)]
                        self._prefer(sel_vc, True)
                with m.Elif(all_idle):
                    m.d.sync += busy.eq(0)
                    m.d.sync += seq.eq(IDLE)
            with m.Default():                      # IDLE
                # (explicit: every state drives the online pulses, so the case is complete)
                m.d.comb += [on_start.eq(0), self.on_pipe.eq(0)]
                with m.If(sel_any & self.sel_online):
                    self.on.latch(sel_vc)
                    m.d.sync += seq.eq(O_CFG)
                with m.Elif(sel_any):
                    with m.If(cfg_loaded & (cfg_phase == sel_phase)):
                        m.d.comb += start.eq(1)
                        m.d.sync += [busy.eq(1), act_vc.eq(sel_vc), act_phase.eq(sel_phase)]
                        m.d.sync += seq.eq(RUN)
                        self._prefer(sel_vc, False)
                    with m.Else():
                        m.d.sync += [self.cfg_reg.eq(self.e_cfg(self.sel_entry)),
                                     cfg_phase.eq(sel_phase), cfg_loaded.eq(1),
                                     settle.eq(self.sw.config_settle)]
                        m.d.sync += seq.eq(SETTLE)

    def _online_states(self):
        """O_CFG: load the online configuration; O_SET: settle, then start if every stored
        packet is still there and the selection still picks this VC's online round (else
        choose again)."""
        m, on, seq, settle = self.m, self.on, self.seq, self.settle
        with m.Case(O_CFG):
            m.d.sync += [self.cfg_reg.eq(on.router.config), self.cfg_loaded.eq(0),
                         settle.eq(self.sw.config_settle), seq.eq(O_SET)]
        with m.Case(O_SET):
            with m.If(settle != 0):
                m.d.sync += settle.eq(settle - 1)
            with m.Elif(on.still_there() & self.sel_any & self.sel_online & (self.sel_vc == on.l_vc)):
                # (still the choice: a higher VC that became ready meanwhile goes first)
                m.d.comb += self.on_start.eq(1)
                m.d.sync += [self.busy.eq(1), self.act_vc.eq(on.l_vc),
                             self.act_phase.eq(DEFAULT_PHASE), seq.eq(RUN)]
                self._prefer(on.l_vc, True)
            with m.Else():
                m.d.sync += seq.eq(IDLE)       # a stored packet vanished, or a higher VC: choose again

    def start_round(self):
        """Round start: take the headers, start every output of the phase (or, online, every
        output of the stored pairs with its source's header)."""
        m, P, outs = self.m, self.P, self.outs
        start, sel_vc, sel_entry = self.start, self.sel_vc, self.sel_entry
        on = self.on
        if on is not None:
            r_sel, r_dst, r_len = on.r_pairs = on.round_pairs(self.on_pipe)
        for p in range(P):
            with m.If(start & self.e_in(sel_entry)[p]):
                for v in DATA_VCS:
                    with m.If(sel_vc == v):
                        m.d.comb += self.take[p][v].eq(1)
            if on is not None:
                with m.If(self.on_start & r_sel[p]):
                    for v in DATA_VCS:
                        with m.If(on.l_vc == v):
                            m.d.comb += self.take[p][v].eq(1)
        on_outs = on.outputs(r_sel, r_dst) if on is not None else None
        self.round_src = []              # per output: the inputs feeding it in the round starting
        for q in range(P):
            src_seq = Signal(16, name=f"src_seq{q}")
            fmask = self.e_flow(sel_entry, q)
            vc = sel_vc if on is None else Mux(self.on_start, on.l_vc, sel_vc)
            length = self.sel_len
            port = Const(0, 8)
            if on is not None:
                used, src = on_outs[q]
                fmask = Mux(self.on_start, src, fmask)
                o_len = Signal(8, name=f"on_len{q}")
                o_port = Signal(8, name=f"on_port{q}")
                for p in range(P):
                    with m.If(src[p]):
                        m.d.comb += [o_len.eq(r_len[p]), o_port.eq(p)]
                length = Mux(self.on_start, o_len, length)
                port = Mux(self.on_start, o_port, 0)
            src_mask = Signal(P, name=f"round_src{q}")
            m.d.comb += src_mask.eq(fmask)
            self.round_src.append(src_mask)
            for p in reversed(range(P)):
                with m.If(fmask[p]):
                    for v in DATA_VCS:
                        with m.If(vc == v):
                            m.d.comb += src_seq.eq(f_seq(self.hw(p, v)))
            go = start & self.e_out(sel_entry)[q]
            phase = self._hdr_phase()
            if on is not None:
                go = go | (self.on_start & on_outs[q][0])
                phase = Mux(self.on_start, DEFAULT_PHASE, phase)
            m.d.comb += [
                outs[q].start.eq(go),
                outs[q].start_hdr.eq(make_header(vc, Const(0, 2), phase, src_seq, length, port,
                                                 self.hdr_bits)),
                outs[q].start_len.eq(length),
                outs[q].start_vc.eq(vc),
            ]

    def control_vc(self):
        """ACK/NACK towards the sources: a packet for phase f arriving at q (an output of f) goes
        to every input of f -- of every flow of f, not only q's: the rounds of a phase lock-step
        its flows (one packet of every input per round, sequence numbers aligned), so every
        source of the phase must go back on a NACK and hear every receiver's ACK -- between
        packets, with CTRL credits; online (phase 255) it goes to the port its port byte
        names."""
        m, P, outs, tab = self.m, self.P, self.outs, self.tab
        cp = Signal(range(P))
        c_hv = Signal()
        c_w = Signal(self.hdr_bits)
        for p in range(P):
            with m.If(cp == p):
                m.d.comb += [c_hv.eq(self.hv(p, VC_CTRL)), c_w.eq(self.hw(p, VC_CTRL))]
        m.d.comb += tab.r_addr[3].eq(f_phase(c_w))
        cent = tab.r_entry[3]
        c_ok = Signal()
        targets = Signal(P)
        m.d.comb += c_ok.eq(tab.r_hit[3] & self.e_out(cent).bit_select(cp, 1))
        m.d.comb += targets.eq(self.e_in(cent))
        if self.on is not None:
            with m.If(f_phase(c_w) == DEFAULT_PHASE):
                m.d.comb += [c_ok.eq(self.on.dest_ok(c_w)),
                             targets.eq((Const(1, P) << f_port(c_w)[:max(1, (P - 1).bit_length())])[:P])]
        space_ok = Const(1)
        for t in range(P):
            space_ok = space_ok & (~targets[t] | outs[t].ctrl_space)
        c_bad = Signal()
        c_fwd = Signal()
        m.d.comb += [c_bad.eq(c_hv & ~c_ok), c_fwd.eq(c_hv & c_ok & space_ok)]
        for p in range(P):
            with m.If(cp == p):
                m.d.comb += [self.discard[p][VC_CTRL].eq(c_bad), self.take[p][VC_CTRL].eq(c_fwd)]
        for t in range(P):
            m.d.comb += [outs[t].ctrl_push.eq(c_fwd & targets[t]), outs[t].ctrl_word.eq(c_w)]
        with m.If(~(c_hv & c_ok & ~space_ok)):
            m.d.sync += cp.eq(Mux(cp == P - 1, 0, cp + 1))
        self.n_disc.append(c_bad)

    def counters(self):
        """Error counters and the per-VC peak buffer occupancy over all input ports."""
        m, P, ports, sw = self.m, self.P, self.ports, self.sw
        n_pkt = sum(ports[p].err for p in range(P))
        m.d.sync += [sw.err_packet.eq(sw.err_packet + n_pkt),
                     sw.err_phase.eq(sw.err_phase + sum(self.n_disc))]
        for v in range(4):
            mx = ports[0].peak[v]
            for p in range(1, P):
                # a signal per step: ``mx`` is used twice, an expression would double each step
                nxt = Signal.like(ports[p].peak[v], name=f"peak_max{v}_{p}")
                m.d.comb += nxt.eq(Mux(ports[p].peak[v] > mx, ports[p].peak[v], mx))
                mx = nxt
            m.d.comb += sw.peak[v].eq(mx)
