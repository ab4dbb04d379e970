"""Sequence alignment of a phase's inputs: what keeps in-switch reductions exact under Go-Back-N.

A round of a phase sums one packet from every input of the phase. When a packet is lost on one
input's link, or when the sources go back to a NACKed packet while older packets of theirs are
still buffered, the inputs' head packets of one phase carry different sequence numbers; summing
them would deliver a wrong reduction under a plausible header. :func:`align` puts a filter
between the input ports and the control unit (it sees *proxies* of the ports, and never a head
the filter drops):

* heads of one phase (same data VC, not the default index) at different ports whose sequence
  numbers differ: if the phase is being *rewound* to ``s`` (the switch forwarded a NACK for ``s``
  since its last round of ``s``) and some head carries ``s``, every other head is dropped (they
  were sent before the go-back); otherwise the heads that are behind the newest are dropped (a
  packet was lost on the newest one's link: the round goes on, the receivers see the gap and
  NACK it);
* dropped heads are counted in ``err_stale`` (one per packet); a stale head is hidden from the
  control unit at once but dropped only once it has arrived whole (cut-through: a head is
  visible when its header arrives);
* a head is never dropped while its seq equals the others', so traffic without faults is never
  touched.

The rewind state is one register per phase-table entry (valid + 16-bit seq + an epoch bit), set
when the control unit takes a NACK to forward it, cleared when a round of that phase starts at
the rewind seq, and expired :data:`REWIND_EPOCH` to twice that many cycles after it was set: a
NACK that arrives after its packet was delivered anyway, while one source had already sent that
packet again, must not pin the phase to a seq the other sources have left behind (the receivers
NACK again when they still miss it, which sets it again). ``fault="no-align"`` (tests only) builds the filter transparent: the bench's
bit-exact checker must then fail under input faults. ``fault="nack-no-fanout"`` (tests only)
delivers a NACK only to the lowest-numbered input port of its flow (:func:`outputs`).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Mux, Signal

from fred.contract.packet import DATA_VCS, DEFAULT_PHASE, KIND_NACK, VC_CTRL

__all__ = ["align", "outputs", "REWIND_EPOCH"]

#: cycles per rewind epoch (a rewind lives one to two epochs unless renewed)
REWIND_EPOCH = 1024


class _Proxy:
    """A port as the control unit sees it: some members replaced, the rest the real port's."""

    def __init__(self, real, **members):
        self._real = real
        self.__dict__.update(members)

    def __getattr__(self, name):
        return getattr(self._real, name)


def _fields(w):
    return w[6:8], w[8:16], w[16:32]      # kind, phase, seq


def _behind(a, b):
    """``a`` is behind ``b`` in 16-bit sequence arithmetic (0 < b - a < 2**15)."""
    diff = Signal(16)
    return diff, (diff != 0) & ~diff[15], (b - a)


def align(m, sw, ports):
    """Return ``(proxies, n_stale)``: the ports the control unit must use, and the number of
    head packets dropped this cycle (for ``err_stale``)."""
    P = sw.P
    cap = sw.capacity
    ab = max(1, (cap - 1).bit_length())
    rw_valid = [Signal(name=f"rw_valid{k}") for k in range(cap)]
    rw_seq = [Signal(16, name=f"rw_seq{k}") for k in range(cap)]
    take = [Signal(4, name=f"cu_take{p}") for p in range(P)]
    disc = [Signal(4, name=f"cu_discard{p}") for p in range(P)]
    hv = [Signal(4, name=f"cu_head_valid{p}") for p in range(P)]
    stale = [[Signal(name=f"stale_{p}_{v}") for v in range(4)] for p in range(P)]
    drop = [Signal(4, name=f"stale_drop{p}") for p in range(P)]   # stale heads fully arrived
    for p in range(P):
        m.d.comb += [drop[p].eq(Cat(*stale[p]) & ports[p].head_done),
                     ports[p].take.eq(take[p]),
                     ports[p].discard.eq(disc[p] | drop[p]),
                     hv[p].eq(ports[p].head_valid & ~Cat(*stale[p]))]
    if sw.fault != "no-align":
        for v in DATA_VCS:
            _stale(m, sw, ports, v, stale, rw_valid, rw_seq, ab)
    _rewind(m, sw, ports, take, rw_valid, rw_seq, ab)
    proxies = [_Proxy(ports[p], take=take[p], discard=disc[p], head_valid=hv[p]) for p in range(P)]
    n_stale = sum(drop[p][v] for p in range(P) for v in DATA_VCS)
    return proxies, n_stale


def _stale(m, sw, ports, v, stale, rw_valid, rw_seq, ab):
    P = sw.P
    valid, phase, seq, has_s = [], [], [], []
    for p in range(P):
        _, ph, sq = _fields(ports[p].head_word[v])
        h = Signal(name=f"has_rw_{p}_{v}")
        idx = ph[:ab]
        # every index value has an entry (a complete case, lint clean at any capacity); the pads
        # are never selected (ph < capacity)
        pad = 2 ** ab - sw.capacity
        m.d.comb += h.eq(ports[p].head_valid[v] & (ph < sw.capacity)
                         & Array(rw_valid + [Const(0, 1)] * pad)[idx]
                         & (sq == Array(rw_seq + [Const(0, 16)] * pad)[idx]))
        valid.append(ports[p].head_valid[v] & (ph != DEFAULT_PHASE))
        phase.append(ph)
        seq.append(sq)
        has_s.append(h)
    for p in range(P):
        terms = []
        for q in range(P):
            if q == p:
                continue
            diff, behind, expr = _behind(seq[p], seq[q])
            m.d.comb += diff.eq(expr)
            terms.append(valid[p] & valid[q] & (phase[p] == phase[q]) & (seq[p] != seq[q])
                         & (has_s[q] | (~has_s[p] & behind)))
        any_t = Const(0, 1)
        for t in terms:
            any_t = any_t | t
        m.d.comb += stale[p][v].eq(any_t)


def _rewind(m, sw, ports, take, rw_valid, rw_seq, ab):
    """Expire old rewinds; clear a phase's rewind when a round of it starts at the rewind seq;
    set it when the control unit takes a NACK of it (to forward it)."""
    ctr = Signal(range(REWIND_EPOCH), name="rw_ctr")
    epoch = Signal(name="rw_epoch")
    rw_ep = [Signal(name=f"rw_ep{k}") for k in range(sw.capacity)]
    wrap = ctr == REWIND_EPOCH - 1
    m.d.sync += ctr.eq(Mux(wrap, 0, ctr + 1))
    with m.If(wrap):
        m.d.sync += epoch.eq(~epoch)
    for k in range(sw.capacity):                  # set two epoch changes ago: expired
        with m.If(wrap & (rw_ep[k] == ~epoch)):
            m.d.sync += rw_valid[k].eq(0)
    for p in range(sw.P):
        for v in DATA_VCS:
            _, ph, sq = _fields(ports[p].head_word[v])
            for k in range(sw.capacity):
                with m.If(take[p][v] & (ph == k) & (sq == rw_seq[k])):
                    m.d.sync += rw_valid[k].eq(0)
    for p in range(sw.P):
        kind, ph, sq = _fields(ports[p].head_word[VC_CTRL])
        for k in range(sw.capacity):
            with m.If(take[p][VC_CTRL] & (kind == KIND_NACK) & (ph == k)):
                m.d.sync += [rw_valid[k].eq(1), rw_seq[k].eq(sq), rw_ep[k].eq(epoch)]


def outputs(m, sw, outs):
    """The output ports the control unit drives: the real ones, or (``nack-no-fanout``
    mutant) proxies whose NACKs reach only the lowest-numbered target port."""
    if sw.fault != "nack-no-fanout":
        return outs
    push = [Signal(name=f"cu_ctrl_push{t}") for t in range(sw.P)]
    word = [Signal(len(outs[t].ctrl_word), name=f"cu_ctrl_word{t}") for t in range(sw.P)]
    lower = Const(0, 1)
    for t in range(sw.P):
        nack = word[t][6:8] == KIND_NACK
        m.d.comb += [outs[t].ctrl_word.eq(word[t]), outs[t].ctrl_push.eq(push[t] & ~(nack & lower))]
        lower = lower | push[t]
    return [_Proxy(outs[t], ctrl_push=push[t], ctrl_word=word[t]) for t in range(sw.P)]
