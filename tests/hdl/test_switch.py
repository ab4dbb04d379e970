"""FRED switch: packet format, buffers, credits, control unit, configuration table, CLI.

Amaranth-level (pysim) tests; the Verilator regression is tests/sim/test_switch_bench.py.
"""

import random
import subprocess
import sys

import pytest
from amaranth.sim import Simulator

from fred.contract import packet as pk
from fred.contract.link import LinkSender
from fred.hdl.netlist.flows import Flow

FB = 64


# -- packet format ---------------------------------------------------------------------------
def test_pack_unpack_round_trip():
    rng = random.Random(3)
    for _ in range(200):
        vc = rng.choice(pk.DATA_VCS)
        n = rng.randint(1, 20)
        h = pk.Header.data(vc, rng.randrange(255), rng.randrange(1 << 16), n)
        p = pk.Packet(h, tuple(rng.randrange(1 << FB) for _ in range(n)))
        words = pk.pack(p, FB)
        assert len(words) == n + 1
        assert [pk.word_fields(w, FB)[1] for w in words] == [False] * n + [True]
        assert pk.unpack(words, FB) == p
        assert pk.decode_header(pk.encode_header(h)) == h
    c = pk.Packet(pk.Header.control(5, 77, nack=True))
    w = pk.pack(c, FB)
    assert len(w) == 1 and pk.word_fields(w[0], FB)[1]
    assert pk.unpack(w, FB) == c
    assert pk.split_packets(pk.pack(p, FB) + w, FB) == [p, c]


def test_header_validity_check():
    good = pk.encode_header(pk.Header.data(pk.VC_DP, 3, 9, 4))
    assert pk.header_errors(good) == []
    assert "magic" in pk.header_errors(good ^ 1)[0]
    assert "check" in pk.header_errors(good ^ (1 << 20))[0]
    assert "reserved" in pk.header_errors(good | (1 << 50))[0]
    assert pk.header_errors(good, max_length=3)            # too long for the receiver
    for bad in (pk.Header(vc=pk.VC_CTRL, phase=1, kind=pk.KIND_DATA, length=1),
                pk.Header(vc=pk.VC_MP, phase=1, kind=pk.KIND_ACK),
                pk.Header(vc=pk.VC_MP, phase=1, kind=3, length=1),
                pk.Header(vc=pk.VC_MP, phase=1, length=0),
                pk.Header(vc=pk.VC_CTRL, phase=1, kind=pk.KIND_NACK, length=2)):
        assert pk.header_errors(pk.encode_header(bad)), bad
        with pytest.raises(pk.PacketError):
            pk.pack(pk.Packet(bad, (0,) * bad.length), FB)
    with pytest.raises(pk.PacketError, match="flit width"):
        pk.pack(pk.Packet(pk.Header.data(0, 1, 0, 1), (0,)), 32)
    with pytest.raises(pk.PacketError, match="last-flit"):
        w = pk.pack(pk.Packet(pk.Header.data(0, 1, 0, 2), (1, 2)), FB)
        pk.unpack([w[0] | (1 << FB), w[1], w[2]], FB)
    with pytest.raises(pk.PacketError, match="field phase"):
        pk.encode_header(pk.Header.data(0, 256, 0, 1))
    assert pk.DEFAULT_PHASE == 255 and pk.PRIORITY == (pk.VC_MP, pk.VC_PP, pk.VC_DP)


# -- simulation helpers ----------------------------------------------------------------------
def simulate(dut, tb, ticks_limit=None):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_vc_buffer_cut_through_abort_skip():
    """Flits are readable at once (cut-through); the open packet can be aborted; closed packets
    are skipped whole; ``r_closed`` / ``open_left`` tell the port what it may drop."""
    from fred.hdl.switch.buffers import VCBuffer
    dut = VCBuffer(16, 6)
    log = {}

    async def tb(ctx):
        async def step(**kw):
            for k in ("w_en", "w_close", "w_abort", "r_pop", "skip_en"):
                ctx.set(getattr(dut, k), kw.get(k, 0))
            ctx.set(dut.w_data, kw.get("d", 0))
            ctx.set(dut.skip_n, kw.get("n", 0))
            freed, left = ctx.get(dut.freed), ctx.get(dut.open_left)
            await ctx.tick()
            return freed if "want_left" not in kw else left
        await step(w_en=1, d=1)
        await step(w_en=1, d=2)
        assert ctx.get(dut.r_avail) == 2 and ctx.get(dut.r_data) == 1   # readable before closed
        assert ctx.get(dut.r_closed) == 0
        await step(w_en=1, d=3, w_close=1)
        assert ctx.get(dut.r_avail) == 3 and ctx.get(dut.r_closed) == 1
        await step(w_en=1, d=4)
        await step(w_en=1, d=5)
        assert await step(w_abort=1) == 2                               # the open packet goes
        assert ctx.get(dut.level) == 3 and ctx.get(dut.r_avail) == 3
        assert await step(r_pop=1) == 1
        assert ctx.get(dut.r_data) == 2
        for d in (6, 7, 8):
            await step(w_en=1, d=d, w_close=int(d == 8))
        assert ctx.get(dut.level) == 5
        await step(w_en=1, d=9, w_close=1)
        assert ctx.get(dut.w_space) == 0                               # full (6)
        assert await step(skip_en=1, n=4) == 4                          # wraps around
        assert ctx.get(dut.r_data) == 8 and ctx.get(dut.r_avail) == 2
        await step(r_pop=1)
        await step(r_pop=1)
        await step(w_en=1, d=10)                                        # open, at the head
        await step(w_en=1, d=11)
        assert ctx.get(dut.r_closed) == 0 and ctx.get(dut.r_data) == 10
        assert await step(r_pop=1, want_left=1) == 1                     # 2 held, 1 read now
        assert await step(w_close=1) == 0 and ctx.get(dut.r_closed) == 1
        log["ok"] = True

    simulate(dut, tb)
    assert log["ok"]


def _port_tb(dut, script):
    """Drive InputPort ``dut`` with link words; record credits and err pulses."""
    rec = {"credits": [0] * 4, "err": 0}

    async def tb(ctx):
        async def cycle(word=None, take=0, discard=0, d_ready=0):
            ctx.set(dut.i.valid, word is not None)
            ctx.set(dut.i.payload.as_value(), word or 0)
            ctx.set(dut.take, take)
            ctx.set(dut.discard, discard)
            ctx.set(dut.d.ready, d_ready)
            for v in range(4):
                rec["credits"][v] += ctx.get(dut.credit[v])
            rec["err"] += ctx.get(dut.err)
            out = (ctx.get(dut.d.valid), ctx.get(dut.d.payload))
            await ctx.tick()
            return out
        await script(ctx, cycle)
    return tb, rec


def test_input_port_checks_and_credits():
    from fred.hdl.switch.buffers import InputPort
    dut = InputPort(FB, (8, 8, 8, 2), max_len=4)
    good = pk.pack(pk.Packet(pk.Header.data(pk.VC_PP, 2, 7, 3), (11, 12, 13)), FB)
    bad_check = [good[0] ^ (1 << 44)] + good[1:]
    too_long = pk.pack(pk.Packet(pk.Header.data(pk.VC_PP, 2, 7, 5), (1,) * 5), FB)
    early = good[:2]
    early = [early[0], early[1] | (1 << FB)]
    got = {}

    async def script(ctx, cycle):
        for w in bad_check + too_long:
            await cycle(w)
        assert ctx.get(dut.head_valid) == 0
        for w in early:                     # visible at its header, gone at its early last
            await cycle(w)
            assert ctx.get(dut.head_valid) == (1 << pk.VC_PP if w == early[0] else 0)
        for k, w in enumerate(good):        # cut-through: visible the cycle after its header
            await cycle(w)
            assert ctx.get(dut.head_valid) == 1 << pk.VC_PP
            assert ctx.get(dut.head_done) == (1 << pk.VC_PP if w == good[-1] else 0), k
        await cycle()
        assert ctx.get(dut.level[pk.VC_PP]) == 4
        h = pk.decode_header(ctx.get(dut.head_word[pk.VC_PP]))
        assert (h.phase, h.seq, h.length) == (2, 7, 3)
        await cycle(take=1 << pk.VC_PP)
        data = []
        for _ in range(8):
            v, d = await cycle(d_ready=1)
            if v:
                data.append(d)
        got["data"] = data
        assert ctx.get(dut.busy) == 0 and ctx.get(dut.level[pk.VC_PP]) == 0
        # overflow: the sender ignores credits (8 flits buffer, two 5-flit packets)
        p5 = pk.pack(pk.Packet(pk.Header.data(pk.VC_MP, 1, 0, 4), (1, 2, 3, 4)), FB)
        for w in p5 + p5:
            await cycle(w)
        await cycle()
        assert ctx.get(dut.level[pk.VC_MP]) == 5          # first kept, second aborted
        await cycle(discard=1 << pk.VC_MP)
        await cycle()
        assert ctx.get(dut.level[pk.VC_MP]) == 0 and ctx.get(dut.peak[pk.VC_MP]) == 8
        # cut-through: taken after its header, streamed as it arrives, truncated by an early
        # last -> completed with zero flits (it cannot be recalled)
        p4 = pk.pack(pk.Packet(pk.Header.data(pk.VC_DP, 1, 0, 4), (21, 22, 23, 24)), FB)
        short = p4[:3]
        short[-1] |= 1 << FB
        await cycle(short[0])
        v, _ = await cycle(short[1], take=1 << pk.VC_DP, d_ready=1)
        out = []
        for w in short[2:] + [None] * 6:
            v, d = await cycle(w, d_ready=1)
            if v:
                out.append(d)
        got["trunc"] = out
        assert ctx.get(dut.busy) == 0 and ctx.get(dut.level[pk.VC_DP]) == 0

    tb, rec = _port_tb(dut, script)
    simulate(dut, tb)
    assert got["data"] == [11, 12, 13]
    assert got["trunc"] == [21, 0, 0, 0]                   # the early-last flit is dropped too
    assert rec["err"] == 5        # bad check, too long, early last, overflow, truncated
    # every flit that entered was returned as a credit, on its VC
    assert rec["credits"][pk.VC_PP] == len(bad_check + too_long + early + good)
    assert rec["credits"][pk.VC_MP] == 10
    assert rec["credits"][pk.VC_DP] == 3


def test_phase_table_rejects_and_reads():
    from fred.hdl.switch.control import PhaseTable, TableLayout
    L = TableLayout(4, 10, 6)
    dut = PhaseTable(L, 1)
    e = L.encode(pk.VC_DP, [Flow({0, 1}, {2})], 0x2AB)
    words = [L.cfg_word(3, e), L.cfg_word(6, e), L.cfg_word(255, e), L.cfg_word(1, e | 3),
             L.cfg_word(2, 1), L.cfg_word(4, e), L.cfg_word(4, None)]
    res = {}

    async def tb(ctx):
        for w in words:
            ctx.set(dut.cfg.valid, 1)
            ctx.set(dut.cfg.payload.as_value(), w)
            await ctx.tick()
        ctx.set(dut.cfg.valid, 0)
        await ctx.tick()
        res["rejects"] = ctx.get(dut.rejects)
        for a in (3, 4, 6, 255, 1):
            ctx.set(dut.r_addr[0], a)
            res[a] = (ctx.get(dut.r_hit[0]), ctx.get(dut.r_entry[0]))

    simulate(dut, tb)
    assert res["rejects"] == 4
    assert res[3] == (1, e)
    assert res[4][0] == 0 and res[6][0] == 0 and res[255][0] == 0 and res[1][0] == 0
    d = L.decode(e)
    assert d["in_mask"] == 0b11 and d["out_mask"] == 0b100 and d["flow_in"][2] == 0b11
    assert d["config"] == 0x2AB and d["vc"] == pk.VC_DP
    with pytest.raises(ValueError, match="two flows"):
        L.encode(pk.VC_DP, [Flow({0}, {1}), Flow({0}, {2})], 0)
    with pytest.raises(ValueError, match="data VC"):
        L.encode(pk.VC_CTRL, [Flow({0}, {1})], 0)


def test_default_capacity_fits_budget():
    from fred.hdl.switch.control import TableLayout, default_capacity
    from fred.hdl.fabric.recursive import config_width
    for P in (4, 10, 12):
        C = config_width(P, 3)
        cap = default_capacity(P, C)
        assert cap >= 8
        assert TableLayout(P, C, cap).bits <= 1536 * 8


def test_output_port_credits_and_control_first():
    from fred.hdl.switch.control import OutputPort
    dut = OutputPort(FB, (0, 0, 4, 1), credit_in_bits=5)
    out = []

    async def tb(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.ctrl_push, 1)
        ctx.set(dut.ctrl_word, 0xC0FFEE)
        ctx.set(dut.o.ready, 0)                      # link stalled while the queue fills
        await ctx.tick()
        ctx.set(dut.ctrl_push, 0)
        await ctx.tick()
        await ctx.tick()
        hdr = pk.encode_header(pk.Header.data(pk.VC_PP, 1, 2, 2))
        ctx.set(dut.start, 1)
        ctx.set(dut.start_hdr, hdr)
        ctx.set(dut.start_len, 2)
        ctx.set(dut.start_vc, pk.VC_PP)
        await ctx.tick()
        ctx.set(dut.ctrl_push, 0)
        ctx.set(dut.start, 0)
        ctx.set(dut.o.ready, 1)
        k = 0
        for cyc in range(12):
            ctx.set(dut.fd.valid, cyc >= 3 and k < 2)
            ctx.set(dut.fd.payload, 100 + k)
            if ctx.get(dut.o.valid):
                out.append(ctx.get(dut.o.payload.as_value()))
            if ctx.get(dut.fd.valid) and ctx.get(dut.fd.ready):
                k += 1
            await ctx.tick()
        assert ctx.get(dut.idle)
        assert ctx.get(dut.credits[pk.VC_PP]) == 1 and ctx.get(dut.credits[pk.VC_CTRL]) == 0
        ctx.set(dut.credit_i.as_value(), 3 << (2 * 5))
        await ctx.tick()
        ctx.set(dut.credit_i.as_value(), 0)
        await ctx.tick()
        assert ctx.get(dut.credits[pk.VC_PP]) == 4

    simulate(dut, tb)
    fields = [pk.word_fields(w, FB) for w in out]
    assert fields[0] == (0xC0FFEE, True)                  # control packet before the header
    assert pk.decode_header(fields[1][0]).vc == pk.VC_PP and not fields[1][1]
    assert fields[2:] == [(100, False), (101, True)]


def test_output_port_queues_rounds_in_order():
    """An output holding 4 rounds (the one it sends + 3 queued): ``can_queue`` falls when the
    third is queued, each queued round reserves its credits (``avail``), and the rounds leave in
    the order they started, each header followed by its own data flits."""
    from fred.hdl.switch.control import OutputPort
    dut = OutputPort(FB, (0, 40, 0, 1), credit_in_bits=5, rounds=4)
    lens = [2, 1, 3, 2]
    out, seen = [], {}

    async def tb(ctx):
        ctx.set(dut.o.ready, 0)                      # link stalled while the rounds queue
        for k, n in enumerate(lens):
            seen[f"can_queue{k}"] = ctx.get(dut.can_queue)
            ctx.set(dut.start, 1)
            ctx.set(dut.start_hdr, pk.encode_header(pk.Header.data(pk.VC_DP, 4, k, n)))
            ctx.set(dut.start_len, n)
            ctx.set(dut.start_vc, pk.VC_DP)
            await ctx.tick()
        ctx.set(dut.start, 0)
        seen["can_queue_full"] = ctx.get(dut.can_queue)
        seen["avail"] = ctx.get(dut.avail[pk.VC_DP])
        ctx.set(dut.o.ready, 1)
        k = 0
        for _ in range(30):
            ctx.set(dut.fd.valid, 1)
            ctx.set(dut.fd.payload, 100 + k)
            if ctx.get(dut.o.valid):
                out.append(ctx.get(dut.o.payload.as_value()))
            if ctx.get(dut.fd.ready):
                k += 1
            await ctx.tick()
        seen["idle"] = ctx.get(dut.idle)
        seen["credits"] = ctx.get(dut.credits[pk.VC_DP])

    simulate(dut, tb)
    assert [seen[f"can_queue{k}"] for k in range(4)] == [1, 1, 1, 1]
    assert seen["can_queue_full"] == 0 and seen["idle"] == 1
    assert seen["avail"] == 40 - sum(n + 1 for n in lens) and seen["credits"] == seen["avail"]
    pkts = pk.split_packets(out, FB)
    assert [x.header.seq for x in pkts] == [0, 1, 2, 3]
    assert [x.data for x in pkts] == [(100, 101), (102,), (103, 104, 105), (106, 107)]


def _perm_run(round_queue, n=12, lose=(), poisoned=None, pause=None, ready=lambda c, q: True):
    """FRED_3(4) (int32, fabric latency 3) running the permutation phase 0 -> 1 -> 2 -> 3 -> 0
    with ``n`` packets of 1 data flit per input: a round takes 2 cycles at an output and 5 from
    its start to its last flit, so 3 rounds must be in flight for them to follow back to back."""
    from fred.hdl.switch.top import Switch
    sw = Switch(4, 3, 2, "int32", data_depth=12, ctrl_depth=2, max_len=1, table_entries=4,
                round_queue=round_queue)
    rng = random.Random(11)
    perm = [1, 2, 3, 0]
    phases = {0: (pk.VC_DP, [Flow({p}, {perm[p]}) for p in range(4)])}
    pkts = {p: [pk.Packet(pk.Header.data(pk.VC_DP, 0, k, 1), (rng.randrange(1 << FB),))
                for k in range(n)] for p in range(4)}
    sends = {p: [w for x in pkts[p] for w in pk.pack(x, FB)] for p in range(4)}
    if pause:                                 # (port, word index, idle cycles) before that word
        p, k, idle = pause
        sends[p][k:k] = [None] * idle
    outs, res = _run_switch(sw, sw.cfg_words(phases), sends, cycles=60 + 6 * n, lose=lose,
                            poisoned=poisoned, ready=ready)
    return sw, perm, pkts, outs, res


@pytest.mark.parametrize("queue", [None, 2])
def test_round_queue_sized_by_the_fabric_latency_keeps_rounds_back_to_back(queue):
    """The default queue (``round_queue_for(3, 1)`` = 3 rounds) sends the rounds of a phase back
    to back once the first has arrived; one queued round (2) leaves a gap after every two rounds
    (the limit the 12-port switch hit: docs/switch.md). Every packet arrives intact either way."""
    sw, perm, pkts, outs, res = _perm_run(queue)
    assert sw.round_queue == (3 if queue is None else 2)
    assert res["err_packet"] == res["err_phase"] == 0
    for p in range(4):
        assert outs[perm[p]] == pkts[p]
    t = res["times"][1][2:]                   # after the first round
    gaps = sum(b - a - 1 for a, b in zip(t, t[1:]))
    assert (gaps == 0) if queue is None else (gaps >= len(t) // 4 - 1), t


def test_truncated_round_poisons_only_itself_behind_queued_rounds():
    """Output 1 stalls (cycles 14..39) after 3 rounds, so rounds 3, 4 and 5 wait there (3 in
    flight); input 0 pauses after packet 5's header (the round takes it, cut-through) and then
    loses its data flit. Only round 5's flit leaves poisoned at output 1 (the poison bit goes to
    the newest queued round, not to the one waiting to be sent); rounds 3 and 4 and every other
    output arrive intact."""
    bad = []
    sw, perm, pkts, outs, res = _perm_run(None, lose=((0, 11),), poisoned=bad, pause=(0, 11, 6),
                                          ready=lambda c, q: not (q == 1 and 14 <= c < 40))
    assert sw.round_queue == 3
    t = res["times"][1]
    assert t[5] < 14 and t[6] == 40, t            # 3 rounds sent, then the stall
    assert [q for q, _ in bad] == [1] and res.get("poisoned") == 1
    assert res.get("err_lost") == 1 and res["err_packet"] == 0
    assert outs[1] == pkts[0][:5] + pkts[0][6:]
    for p in (1, 2, 3):
        assert outs[perm[p]] == pkts[p]


# -- whole switch, ideal fabric (fast) ---------------------------------------------------------
def _run_switch(sw, cfg_words, sends, cycles=400, ready=lambda c, q: True, credits_out=None,
                lose=(), poisoned=None, corrupt=()):
    """Drive ``sw``: ``sends[p]`` = link words (sealed into wire words here; None: an idle
    cycle, between packets or inside one); ``lose`` = (port, index) of words sealed but lost on the link,
    ``corrupt`` = (port, index) of words that reach the switch with bit 0 of their data flipped;
    ``poisoned`` (a list) collects (output, data) of words the switch sent with a bad check
    (else any is an error). Returns (packets per output, counters)."""
    P = sw.P
    lose, corrupt = set(lose), set(corrupt)
    sent = {p: 0 for p in range(P)}
    start = {q: 0 for q in range(P)}       # where the packet being received starts in got[q]
    got = {q: [] for q in range(P)}
    times = {q: [] for q in range(P)}
    res = {"times": times}
    queues = {p: list(w) for p, w in sends.items()}
    fmt = pk.WireFormat(sw.flit_bits, sw.fseq_bits)
    seal = {p: LinkSender(fmt) for p in range(P)}

    async def tb(ctx):
        for w in cfg_words:
            ctx.set(sw.cfg.valid, 1)
            ctx.set(sw.cfg.payload.as_value(), w)
            await ctx.tick()
        ctx.set(sw.cfg.valid, 0)
        cred = {p: list(sw.depths) for p in range(P)}
        left = {p: 0 for p in range(P)}        # flits left of the packet being sent
        out_vc = {q: None for q in range(P)}
        for c in range(cycles):
            for p in range(P):
                q = queues.get(p, [])
                if q and q[0] is None:                      # an idle cycle
                    q.pop(0)
                    ctx.set(sw.i[p].valid, 0)
                    for v in range(4):
                        cred[p][v] += ctx.get(sw.credit_o[p][v])
                    continue
                go = bool(q)
                if go and left[p] == 0:            # a packet starts: needs credits for all of it
                    w = q[0]
                    vc, n = (w >> 4) & 3, ((w >> 32) & 0xFF) + 1
                    if w >> FB & 1:
                        n = 1
                    n = min(n, len(q))
                    if cred[p][vc] >= n:
                        cred[p][vc] -= n
                        left[p] = n
                    else:
                        go = False
                wire_word = seal[p].seal(q[0]) if go else 0
                if go and (p, sent[p]) in lose:
                    wire_word = None
                elif go and (p, sent[p]) in corrupt:
                    wire_word ^= 1
                ctx.set(sw.i[p].valid, go and wire_word is not None)
                ctx.set(sw.i[p].payload.as_value(), wire_word or 0)
                if go:
                    sent[p] += 1
                    q.pop(0)
                    left[p] -= 1
                for v in range(4):
                    cred[p][v] += ctx.get(sw.credit_o[p][v])
            for q in range(P):
                r = ready(c, q)
                ctx.set(sw.o[q].ready, r)
                ret = 0
                if r and ctx.get(sw.o[q].valid) and not fmt.is_probe(ctx.get(sw.o[q].payload.as_value())):
                    wire = fmt.fields(ctx.get(sw.o[q].payload.as_value()))
                    if not wire.ok:      # poisoned: a receiver drops the whole packet
                        assert poisoned is not None, f"output {q}: bad check"
                        assert wire.last, f"output {q}: a poisoned flit that is not a last one"
                        poisoned.append((q, wire.data))
                        del got[q][start[q]:]
                        out_vc[q] = None
                        ctx.set(sw.credit_i[q].as_value(), 1 << (wire.vc * sw.credit_bits))
                        continue
                    w = pk.link_word(wire.data, wire.last, sw.flit_bits)
                    if out_vc[q] is None:
                        start[q] = len(got[q])
                    got[q].append(w)
                    times[q].append(c)
                    if out_vc[q] is None:
                        out_vc[q] = (w >> 4) & 3
                    ret = 1 << (out_vc[q] * sw.credit_bits)   # the receiver frees it at once
                    if w >> FB & 1:
                        out_vc[q] = None
                ctx.set(sw.credit_i[q].as_value(), ret)
            await ctx.tick()
        res.update(err_packet=ctx.get(sw.err_packet), err_phase=ctx.get(sw.err_phase),
                   cfg_rejects=ctx.get(sw.cfg_rejects))
        for k in ("err_crc", "err_lost", "err_dup", "err_stale", "poisoned"):
            v = ctx.get(getattr(sw, k))
            if v:
                res[k] = v
        if credits_out is not None:
            credits_out.extend(ctx.get(sw.credit_o[p].as_value()) for p in range(P))

    simulate(sw, tb)
    return {q: pk.split_packets(w, sw.flit_bits) for q, w in got.items()}, res


def _small_switch(P=4, **kw):
    from fred.hdl.switch.top import Switch
    return Switch(P, 3, 2, "int32", data_depth=12, ctrl_depth=2, max_len=4, table_entries=8,
                  fabric="ideal", **kw)


def _mk(rng, vc, phase, seq, n):
    return pk.Packet(pk.Header.data(vc, phase, seq, n), tuple(rng.randrange(1 << FB) for _ in range(n)))


def _sum(*flits):
    M = (1 << 32) - 1
    lo = sum(f & M for f in flits) & M
    hi = sum(f >> 32 for f in flits) & M
    return lo | hi << 32


def test_switch_phases_priority_nack_and_errors():
    sw = _small_switch()
    rng = random.Random(5)
    phases = {0: (pk.VC_DP, [Flow({0, 1}, {0, 1})]),
              1: (pk.VC_MP, [Flow({2}, {0, 3}), Flow({3}, {2})]),
              2: (pk.VC_PP, [Flow({0, 1, 2}, {1})])}
    # every input of a phase numbers its rounds alike (Go-Back-N: hdl/switch/seqalign.py)
    dp = {p: [_mk(rng, pk.VC_DP, 0, 10, 3)] for p in (0, 1)}
    mp = {p: [_mk(rng, pk.VC_MP, 1, 20, 2)] for p in (2, 3)}
    pp = {p: [_mk(rng, pk.VC_PP, 2, 30, 4)] for p in (0, 1, 2)}
    nack = pk.Packet(pk.Header.control(2, 99, nack=True))       # from output 1 of phase 2
    unknown = _mk(rng, pk.VC_DP, 5, 0, 2)                         # phase 5 not loaded
    default = pk.Packet(pk.Header.data(pk.VC_MP, pk.DEFAULT_PHASE, 0, 1, port=9), (5,))  # no port 9
    wrong_port = _mk(rng, pk.VC_DP, 0, 10, 2)                     # port 3 is not in phase 0
    bad = pk.pack(_mk(rng, pk.VC_PP, 2, 0, 2), FB)
    bad[0] ^= 1 << 45
    sends = {p: [] for p in range(4)}
    for p in range(4):
        for group in (pp, dp, mp):
            for x in group.get(p, []):
                sends[p] += pk.pack(x, FB)
    sends[1] += pk.pack(nack, FB)
    sends[3] += pk.pack(unknown, FB) + pk.pack(default, FB) + pk.pack(wrong_port, FB) + bad
    cfgw = sw.cfg_words(phases) + [sw.layout.cfg_word(200, 0)]
    # back-pressure: outputs not ready until every input is buffered, then all at once
    outs, res = _run_switch(sw, cfgw, sends, cycles=300, ready=lambda c, q: c > 60)
    res.pop("times")
    assert res == {"err_packet": 1, "err_phase": 3, "cfg_rejects": 1}
    data = {q: [x for x in outs[q] if x.header.vc != pk.VC_CTRL] for q in range(4)}
    # priority: MP first, then PP, then DP at every output carrying several
    assert [x.header.vc for x in data[0]] == [pk.VC_MP, pk.VC_DP]
    assert [x.header.vc for x in data[1]] == [pk.VC_PP, pk.VC_DP]
    assert data[0][0].data == mp[2][0].data and data[3][0].data == mp[2][0].data
    assert data[2][0].data == mp[3][0].data
    assert data[0][0].header == pk.Header.data(pk.VC_MP, 1, 20, 2)
    exp_dp = tuple(_sum(a, b) for a, b in zip(dp[0][0].data, dp[1][0].data))
    assert data[0][1].data == exp_dp and data[1][1].data == exp_dp
    assert data[1][1].header.seq == 10
    assert data[1][0].data == tuple(_sum(*fl) for fl in zip(*(pp[p][0].data for p in (0, 1, 2))))
    # the NACK from output 1 of phase 2 reaches every input port of that flow (0, 1, 2)
    for q in range(4):
        ctrl = [x for x in outs[q] if x.header.vc == pk.VC_CTRL]
        assert ctrl == ([nack] if q in (0, 1, 2) else []), q


def test_switch_mismatched_lengths_are_dropped():
    sw = _small_switch()
    rng = random.Random(6)
    phases = {0: (pk.VC_DP, [Flow({0, 1}, {0})]), 1: (pk.VC_DP, [Flow({2}, {3})])}
    a = _mk(rng, pk.VC_DP, 0, 0, 2)
    b = _mk(rng, pk.VC_DP, 0, 0, 3)
    ok = _mk(rng, pk.VC_DP, 1, 4, 2)
    a2, b2 = _mk(rng, pk.VC_DP, 0, 1, 1), _mk(rng, pk.VC_DP, 0, 1, 1)
    sends = {0: pk.pack(a, FB) + pk.pack(a2, FB), 1: pk.pack(b, FB) + pk.pack(b2, FB),
             2: pk.pack(ok, FB)}
    outs, res = _run_switch(sw, sw.cfg_words(phases), sends, cycles=200)
    assert res["err_phase"] == 2 and res["err_packet"] == 0
    assert [x.header.seq for x in outs[0]] == [1]                  # the next round still works
    assert outs[0][0].data == (_sum(a2.data[0], b2.data[0]),)
    assert outs[3] == [pk.Packet(pk.Header.data(pk.VC_DP, 1, 4, 2), ok.data)]


def test_switch_same_phase_rounds_back_to_back():
    sw = _small_switch()
    rng = random.Random(7)
    phases = {3: (pk.VC_PP, [Flow({0, 2}, {1, 3})])}
    n, L = 6, 4
    pkts = {p: [_mk(rng, pk.VC_PP, 3, k, L) for k in range(n)] for p in (0, 2)}
    sends = {p: sum((pk.pack(x, FB) for x in pkts[p]), []) for p in (0, 2)}
    outs, res = _run_switch(sw, sw.cfg_words(phases), sends, cycles=200)
    exp = [pk.Packet(pk.Header.data(pk.VC_PP, 3, k, L),
                     tuple(_sum(a, b) for a, b in zip(pkts[0][k].data, pkts[2][k].data)))
           for k in range(n)]
    assert res["err_packet"] == 0
    assert outs[1] == exp and outs[3] == exp
    t = res["times"][1]
    # steady state: rounds follow each other without idle cycles on the link
    assert t[-1] - t[(L + 1) * 2] == len(t) - 1 - (L + 1) * 2, t


def test_switch_parameter_errors():
    from fred.hdl.switch.top import Switch
    with pytest.raises(ValueError, match="header"):
        Switch(4, 3, 1, "fp16", fabric="ideal")
    with pytest.raises(ValueError, match="max packet length 12"):
        Switch(4, 3, 2, "int32", data_depth=12, max_len=12, fabric="ideal")
    with pytest.raises(ValueError, match="ports"):
        Switch(1, 3, 2, "int32", fabric="ideal")
    with pytest.raises(ValueError, match="fabric"):
        Switch(4, 3, 2, "int32", fabric="mesh")
    with pytest.raises(ValueError, match="table_entries 300"):
        Switch(4, 3, 2, "int32", fabric="ideal", table_entries=300)
    for bad in (0, 17):
        with pytest.raises(ValueError, match=f"round_queue {bad}"):
            Switch(4, 3, 2, "int32", fabric="ideal", round_queue=bad)
    with pytest.raises(TypeError, match="round_queue"):
        Switch(4, 3, 2, "int32", fabric="ideal", round_queue=2.5)


# -- CLI ---------------------------------------------------------------------------------------
def _fred(*args):
    return subprocess.run([sys.executable, "-m", "fred.cli", *args], capture_output=True, text=True)


def test_cli_verilog_switch_bad_input():
    r = _fred("verilog", "switch", "--ports", "1", "--middle", "3")
    assert r.returncode == 2 and "fred: error:" in r.stderr and "--ports 1" in r.stderr
    assert "Traceback" not in r.stderr
    r = _fred("verilog", "switch", "--ports", "4", "--lanes", "2", "--dtype", "fp16")
    assert r.returncode == 2 and "32 bits" in r.stderr and "Traceback" not in r.stderr
    r = _fred("verilog", "switch", "--ports", "4", "--max-len", "60")
    assert r.returncode == 2 and "--max-len 60 does not fit --data-depth 48" in r.stderr
    r = _fred("verilog", "switch", "--ports", "4", "--dtype", "fp8")
    assert r.returncode == 2 and "fp8" in r.stderr


def test_cli_verilog_switch_emits(tmp_path):
    out = tmp_path / "sw.v"
    # 3 ports: an odd count, and 8 s of CPU where 4 ports take 12 (the control unit grows per port)
    r = _fred("verilog", "switch", "--ports", "3", "--middle", "3", "--lanes", "2", "--dtype",
              "int32", "--data-depth", "8", "--max-len", "4", "--fabric", "ideal", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "module fred_switch_p3_m3" in text and "credit_o__2" in text and "credit_o__3" not in text


@pytest.mark.regress
def test_control_unit_verilog_grows_polynomially():
    """The switch's top module (the control unit: online candidates, peak occupancy, rounds)
    grows polynomially with the ports. An expression used twice per step of a chain is emitted
    twice, so such a chain doubles per port (it made the 5-port top module 11x the 3-port one,
    and the 12-port switch could not be emitted); with a signal per step it grows by about a
    third per port.
    make regress-switch (it emits switches of 3 to 6 ports); make test emits the 4-port switch
    (test_cli_verilog_switch_emits)."""
    import re

    from fred.hdl.switch.top import Switch
    from fred.hdl.verilog import emit

    def top_lines(P):
        text = emit(Switch(P, lanes=2, dtype="int32", fabric="ideal"), name="sw")
        body = re.search(r"^module sw\(.*?^endmodule", text, re.M | re.S).group(0)
        return body.count("\n")

    small, large = top_lines(3), top_lines(5)     # 6,821 and 11,706 lines (126,086 doubling)
    assert large < 2.2 * small, (small, large)
