"""Link integrity: the CRC and wire format (contract/packet.py), the link protocol
(contract/link.py) and its RTL (hdl/switch/linkcheck.py, checked word by word against the protocol),
the input buffer's abort-and-restart (hdl/switch/buffers.py)."""

import random

import pytest
from amaranth.sim import Simulator

from fred.contract import packet as pk
from fred.contract.link import LinkReceiver, LinkSender

FB = 64
FMT = pk.WireFormat(FB, 8)


def _crc_bitwise(msg, n):
    """The standard CRC-32C bit by bit, as the definition reads: the padded message's bits in
    order 0, 1, ... (little-endian bytes, each least significant bit first) into a reflected
    register preset to all ones, the result XORed with all ones."""
    r = 0xFFFFFFFF
    for i in range(8 * ((n + 7) // 8)):
        r ^= msg >> i & 1
        r = (r >> 1) ^ 0x82F63B78 if r & 1 else r >> 1
    return r ^ 0xFFFFFFFF


def test_crc32c_is_the_standard_one():
    """The wire CRC is the library CRC-32C (the package ``crc32c``, an independent C
    implementation): the check value, and random messages of every width the switch uses,
    through the table, the bitwise definition and the RTL's columns and constant."""
    import crc32c
    assert crc32c.crc32c(b"123456789") == 0xE3069283
    assert pk.crc32c_bytes(b"123456789") == 0xE3069283
    assert pk.crc32c(int.from_bytes(b"123456789", "little"), 72) == 0xE3069283
    assert pk.CRC_POLY_REFLECTED == 0x82F63B78
    rng = random.Random(1)
    for n in (1, 7, 8, 9, 64, 77, 4109, 4129):
        cols, zero = pk.crc_columns(n), pk.crc_zero(n)
        assert zero == crc32c.crc32c(bytes((n + 7) // 8))
        for _ in range(20):
            m = rng.getrandbits(n)
            want = crc32c.crc32c(m.to_bytes((n + 7) // 8, "little"))
            assert pk.crc32c(m, n) == want and _crc_bitwise(m, n) == want
            x = zero
            for i in range(n):
                if m >> i & 1:
                    x ^= cols[i]
            assert x == want
    with pytest.raises(ValueError, match="does not fit in 8 bits"):
        pk.crc32c(256, 8)


def test_wire_check_is_the_library_crc_of_the_covered_bytes():
    """``check`` (wire bits ``covered`` .. ``covered + 31``) = CRC-32C of the covered bits as
    little-endian bytes; a dead link (an all-zero word) fails the check."""
    import crc32c
    rng = random.Random(2)
    for flit_bits, fseq_bits in ((64, 8), (48, 4), (4096, 8)):
        fmt = pk.WireFormat(flit_bits, fseq_bits)
        for _ in range(10):
            w = fmt.seal(rng.getrandbits(flit_bits), rng.random() < .5, rng.random() < .5,
                         rng.randrange(4), rng.randrange(fmt.fseq_mod))
            low = w & ((1 << fmt.covered) - 1)
            assert w >> fmt.covered == crc32c.crc32c(low.to_bytes((fmt.covered + 7) // 8, "little"))
        assert not fmt.fields(0).ok


def test_docs_worked_example_is_the_library_crc():
    """docs/switch.md's worked example (between its crc-example markers): the covered bytes
    and the check it states are what this code and the library compute."""
    import pathlib
    import re

    import crc32c
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "switch.md").read_text()
    block = doc.split("<!-- crc-example:begin -->")[1].split("<!-- crc-example:end -->")[0]
    fields = dict(re.findall(r"`(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+)`", block))
    fmt = pk.WireFormat(int(fields["flit_bits"]), int(fields["fseq_bits"]))
    w = fmt.seal(int(fields["data"], 0), int(fields["last"], 0), int(fields["head"], 0),
                 int(fields["vc"], 0), int(fields["fseq"], 0))
    low = w & ((1 << fmt.covered) - 1)
    covered = low.to_bytes((fmt.covered + 7) // 8, "little")
    listed = bytes.fromhex(re.search(r"byte 0 first: `([0-9a-f ]+)`", block).group(1))
    assert listed == covered
    assert int(fields["check"], 0) == crc32c.crc32c(covered) == w >> fmt.covered
    assert int(fields["wire"], 0) == w


def test_crc_check_rtl_known_answers():
    """The CRC block of the RTL (``crc_check`` in amaranth.sim) against the library: the check
    value of b"123456789" and random messages at the link's covered widths."""
    import crc32c
    from amaranth.hdl import Module, Signal

    from fred.hdl.switch.linkcheck import crc_check
    rng = random.Random(3)
    for n in (72, 77, 4109):
        m = Module()
        msg = Signal(n)
        out = crc_check(m, msg)
        vectors = [rng.getrandbits(n) for _ in range(6)] + [0, (1 << n) - 1]
        if n == 72:
            vectors.insert(0, int.from_bytes(b"123456789", "little"))
        got = []

        async def tb(ctx):
            for v in vectors:
                ctx.set(msg, v)
                got.append(ctx.get(out))

        sim = Simulator(m)
        sim.add_testbench(tb)
        sim.run()
        assert got == [crc32c.crc32c(v.to_bytes((n + 7) // 8, "little")) for v in vectors], n
        if n == 72:
            assert got[0] == 0xE3069283


def test_link_ends_rtl_known_answers():
    """Through the link ends: every word LinkTx sends carries the library CRC-32C of its covered
    bytes; LinkRx passes a word sealed with the library CRC and flags it bad with one check bit
    or one covered bit flipped."""
    import crc32c

    from fred.hdl.switch.linkcheck import LinkRx, LinkTx

    def lib_seal(low):
        return low | crc32c.crc32c(low.to_bytes((FMT.covered + 7) // 8, "little")) << FMT.covered

    rng = random.Random(4)
    packets = _packets(rng, 8)
    inner = [w for p in packets for w in pk.pack(p, FB)]
    tx = LinkTx(FB, 8, probe_idle=0)
    sent = []

    async def tb_tx(ctx):
        ctx.set(tx.o.ready, 1)
        ctx.set(tx.i.valid, 1)
        for w in inner:
            ctx.set(tx.i.payload.as_value(), w)
            sent.append(ctx.get(tx.o.payload.as_value()))
            await ctx.tick()

    simulate(tx, tb_tx)
    assert len(sent) == len(inner)
    for w in sent:
        assert w == lib_seal(w & ((1 << FMT.covered) - 1))

    rx = LinkRx(FB, 8, (12, 12, 12, 4))
    head = pk.pack(pk.Packet(pk.Header.data(pk.VC_DP, 1, 0, 1), (0x0123456789ABCDEF,)), FB)[0]
    low = FMT.seal(head & ((1 << FB) - 1), False, True, pk.VC_DP, 0) & ((1 << FMT.covered) - 1)
    good = lib_seal(low)
    seen = []

    async def tb_rx(ctx):
        for w in (good ^ 1 << FMT.covered, good ^ 1 << rng.randrange(FMT.covered), good):
            ctx.set(rx.i.valid, 1)
            ctx.set(rx.i.payload.as_value(), w)
            seen.append((ctx.get(rx.bad), ctx.get(rx.o.valid)))
            await ctx.tick()

    simulate(rx, tb_rx)
    assert seen == [(1, 0), (1, 0), (0, 1)]


@pytest.mark.parametrize("flit_bits", [64, 4096])
def test_wire_check_detects_up_to_five_flipped_bits(flit_bits):
    fmt = pk.WireFormat(flit_bits, 8)
    rng = random.Random(flit_bits)
    for _ in range(300 if flit_bits == 64 else 40):
        w = fmt.seal(rng.getrandbits(flit_bits), rng.random() < .5, rng.random() < .5,
                     rng.randrange(4), rng.randrange(256))
        f = fmt.fields(w)
        assert f.ok and pk.word_fields(w, flit_bits)[0] == f.data
        bits = rng.sample(range(fmt.width), rng.randint(1, 5))
        bad = w
        for b in bits:
            bad ^= 1 << b
        assert not fmt.fields(bad).ok, bits


# -- the protocol ------------------------------------------------------------------------------
def _packets(rng, n, max_len=4):
    out = []
    for k in range(n):
        if rng.random() < 0.2:
            out.append(pk.Packet(pk.Header.control(rng.randrange(8), k)))
        else:
            L = rng.randint(1, max_len)
            out.append(pk.Packet(pk.Header.data(rng.choice(pk.DATA_VCS), rng.randrange(8), k, L),
                                 tuple(rng.getrandbits(FB) for _ in range(L))))
    return out


def faulty_stream(rng, packets, rate, kinds=("drop", "corrupt", "dup")):
    """Sealed words of ``packets`` with faults; returns (words, log, sealed per packet)."""
    tx = LinkSender(FMT)
    words, log, per_packet = [], {"drop": 0, "corrupt": 0, "dup": 0}, []
    for k, p in enumerate(packets):
        sealed = tx.seal_packet(pk.pack(p, FB))
        intact = True
        for w in sealed:
            kind = rng.choice(kinds) if rng.random() < rate else None
            if kind == "drop":
                intact = False
            elif kind == "corrupt":
                intact = False
                words.append(w ^ (1 << rng.randrange(FMT.width)))
            else:
                words.append(w)
                if kind == "dup":
                    words.append(w)
            if kind:
                log[kind] += 1
        per_packet.append((p, intact))
    for v in range(4):                      # the sender's final probes reveal trailing losses
        words.append(tx.probe(v))
    return words, log, per_packet


def _receive_all(rx, words):
    """Replay the packet layer over a LinkReceiver: complete packets and credits per VC."""
    got, cur, credits = [], [], [0] * 4
    for w in words:
        r = rx.receive(w)
        if r.restart:
            cur = []
        credits[r.vc] += r.credits
        if r.passed:
            credits[r.vc] += 1                # the packet layer frees (or drops) it later
            cur.append(pk.link_word(r.data, r.last, FB))
            if r.last:
                got.append(pk.unpack(cur, FB))
                cur = []
    return got, credits


@pytest.mark.parametrize("seed", range(6))
def test_protocol_credits_every_flit_once_and_delivers_intact_packets(seed):
    rng = random.Random(seed)
    packets = _packets(rng, 300)
    words, log, per_packet = faulty_stream(rng, packets, 0.05)
    rx = LinkReceiver(FMT, (12, 12, 12, 4))
    got, credits = _receive_all(rx, words)
    sent = [0] * 4
    for p in packets:
        sent[p.header.vc] += 1 + len(p.data)
    assert credits == sent                                 # nothing leaked, nothing doubled
    assert got == [p for p, ok in per_packet if ok]        # intact packets, in order
    assert (rx.bad, rx.dup, rx.lost) == (log["corrupt"], log["dup"], log["drop"] + log["corrupt"])


def test_duplicate_far_behind_and_gap_within_window():
    tx, rx = LinkSender(FMT), LinkReceiver(FMT, (12, 12, 12, 4))
    p = pk.pack(pk.Packet(pk.Header.data(pk.VC_DP, 1, 0, 3), (1, 2, 3)), FB)
    s = tx.seal_packet(p)
    assert [rx.receive(w).kind for w in s[:2]] == ["flit", "flit"]
    r = rx.receive(s[0])                                    # a copy of an old flit
    assert r.kind == "dup" and r.credits == 0
    r = rx.receive(s[3])                                    # s[2] lost: the packet is broken
    assert (r.kind, r.lost, r.restart, r.credits) == ("orphan", 1, True, 2)
    with pytest.raises(ValueError, match="inside a packet"):
        _probe_inside(p)


def _probe_inside(words):
    tx = LinkSender(FMT)
    tx.seal(words[0])
    tx.probe(1)


# -- RTL against the protocol --------------------------------------------------------------------
def simulate(dut, tb):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize("seed", [1, 2])
def test_link_rx_rtl_matches_protocol(seed):
    from fred.hdl.switch.linkcheck import LinkRx
    rng = random.Random(seed)
    words, _, _ = faulty_stream(rng, _packets(rng, 120), 0.08)
    ref = LinkReceiver(FMT, (12, 12, 12, 4))
    dut = LinkRx(FB, 8, (12, 12, 12, 4))
    seen = {"n": 0}

    async def tb(ctx):
        for w in words:
            for _ in range(rng.randint(0, 1)):          # idle cycles between words
                ctx.set(dut.i.valid, 0)
                await ctx.tick()
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload.as_value(), w)
            r = ref.receive(w)
            got = (ctx.get(dut.o.valid), ctx.get(dut.restart), ctx.get(dut.bad), ctx.get(dut.dup),
                   ctx.get(dut.lost), [ctx.get(dut.credit[v]) for v in range(4)])
            cred = [0] * 4
            cred[r.vc] = r.credits
            want = (int(r.passed), int(r.restart), int(r.kind == "bad"), int(r.kind == "dup"),
                    r.lost, cred)
            assert got == want, (seen["n"], r)
            if r.passed:
                assert ctx.get(dut.o.payload.data) == r.data and ctx.get(dut.o.payload.last) == r.last
            seen["n"] += 1
            await ctx.tick()

    simulate(dut, tb)
    assert seen["n"] == len(words)


def test_link_tx_rtl_seals_like_the_protocol_probes_and_poisons():
    from fred.hdl.switch.linkcheck import LinkTx
    rng = random.Random(5)
    packets = _packets(rng, 40)
    inner = [w for p in packets for w in pk.pack(p, FB)]
    ref = LinkSender(FMT)
    want = [ref.seal(w) for w in inner]
    dut = LinkTx(FB, 8, probe_idle=20)
    out = []

    async def tb(ctx):
        k = 0
        poisoned = None
        while k < len(inner):
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload.as_value(), inner[k])
            ready = rng.random() < 0.7
            ctx.set(dut.o.ready, ready)
            ctx.set(dut.poison, k == 17)
            if ready and ctx.get(dut.o.valid):
                out.append(ctx.get(dut.o.payload.as_value()))
                if k == 17:
                    poisoned = len(out) - 1
                if ctx.get(dut.i.ready):
                    k += 1
            await ctx.tick()
        ctx.set(dut.i.valid, 0)
        ctx.set(dut.poison, 0)
        ctx.set(dut.o.ready, 1)
        for _ in range(120):                      # idle: one probe per VC that sent flits
            if ctx.get(dut.o.valid):
                out.append(ctx.get(dut.o.payload.as_value()))
            await ctx.tick()
        out.append(poisoned)

    simulate(dut, tb)
    poisoned = out.pop()
    flits = [w for w in out if not FMT.is_probe(w)]
    probes = [FMT.fields(w) for w in out if FMT.is_probe(w)]
    assert not FMT.fields(flits[poisoned]).ok
    flits[poisoned] = want[poisoned]
    assert flits == want
    used = sorted({p.header.vc for p in packets})
    assert sorted(p.vc for p in probes) == used and all(p.ok for p in probes)
    assert all(p.fseq == ref.fseq[p.vc] for p in probes)


def test_vc_buffer_abort_or_cut_and_write_in_one_cycle():
    """The flit written with ``w_abort`` or ``w_cut`` starts the next packet."""
    from fred.hdl.switch.buffers import VCBuffer
    dut = VCBuffer(16, 8)
    log = {}

    async def tb(ctx):
        async def step(**kw):
            for k in ("w_en", "w_close", "w_abort", "w_cut", "r_pop", "skip_en"):
                ctx.set(getattr(dut, k), kw.get(k, 0))
            ctx.set(dut.w_data, kw.get("d", 0))
            freed = ctx.get(dut.freed)
            await ctx.tick()
            return freed
        await step(w_en=1, d=1)
        await step(w_en=1, d=2)
        assert await step(w_en=1, d=3, w_abort=1) == 2        # 1, 2 freed; 3 starts anew
        assert ctx.get(dut.r_avail) == 1 and ctx.get(dut.r_closed) == 0
        await step(w_en=1, d=4, w_close=1)                      # packet [3, 4]
        await step(w_en=1, d=5)
        await step(w_en=1, d=6, w_cut=1, w_close=1)            # [5] cut, [6] a whole packet
        await step(w_en=1, d=7)
        await step(w_en=1, d=8, w_cut=1)                        # [7] cut, 8 open
        assert ctx.get(dut.level) == 6
        assert await step(w_abort=1) == 1                       # only 8 goes
        got = []
        while ctx.get(dut.r_avail):
            got.append((ctx.get(dut.r_data), ctx.get(dut.r_closed)))
            await step(r_pop=1)
        log["got"] = got

    simulate(dut, tb)
    assert log["got"] == [(3, 1), (4, 1), (5, 1), (6, 1), (7, 1)]


def test_input_port_restart_drops_the_broken_packet_and_takes_the_next():
    from fred.hdl.switch.buffers import InputPort
    dut = InputPort(FB, (8, 8, 8, 2), max_len=4)
    a = pk.pack(pk.Packet(pk.Header.data(pk.VC_DP, 2, 1, 3), (1, 2, 3)), FB)
    b = pk.pack(pk.Packet(pk.Header.data(pk.VC_DP, 2, 2, 2), (4, 5)), FB)
    rec = {"credit": 0, "err": 0}

    async def tb(ctx):
        for k, w in enumerate(a[:2] + b):             # a's tail lost; b's header restarts
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload.as_value(), w)
            ctx.set(dut.restart, k == 2)
            rec["credit"] += ctx.get(dut.credit[pk.VC_DP])
            rec["err"] += ctx.get(dut.err)
            await ctx.tick()
        ctx.set(dut.i.valid, 0)
        ctx.set(dut.restart, 0)
        await ctx.tick()
        rec["head"] = pk.decode_header(ctx.get(dut.head_word[pk.VC_DP]))
        rec["level"] = ctx.get(dut.level[pk.VC_DP])

    simulate(dut, tb)
    assert rec["credit"] == 2 and rec["err"] == 0            # a's two flits, not counted
    assert rec["head"].seq == 2 and rec["level"] == 3


def test_input_port_restart_truncates_a_taken_packet():
    """Cut-through: the broken packet was already taken; it is completed with zero flits
    (``trunc``, which poisons its round at the outputs) and the next one starts cleanly."""
    from fred.hdl.switch.buffers import InputPort
    dut = InputPort(FB, (8, 8, 8, 2), max_len=4)
    a = pk.pack(pk.Packet(pk.Header.data(pk.VC_DP, 2, 1, 3), (1, 2, 3)), FB)
    b = pk.pack(pk.Packet(pk.Header.data(pk.VC_DP, 2, 2, 2), (4, 5)), FB)
    rec = {"trunc": 0, "err": 0, "d": []}

    async def tb(ctx):
        script = [(a[0], 0, 0), (a[1], 1 << pk.VC_DP, 0), (b[0], 0, 1), (b[1], 0, 0), (b[2], 0, 0)]
        for w, take, restart in script + [(None, 0, 0)] * 6:
            ctx.set(dut.i.valid, w is not None)
            ctx.set(dut.i.payload.as_value(), w or 0)
            ctx.set(dut.take, take)
            ctx.set(dut.restart, restart)
            ctx.set(dut.d.ready, 1)
            rec["trunc"] += ctx.get(dut.trunc)
            rec["err"] += ctx.get(dut.err)
            if ctx.get(dut.d.valid):
                rec["d"].append(ctx.get(dut.d.payload))
            await ctx.tick()
        rec["head"] = pk.decode_header(ctx.get(dut.head_word[pk.VC_DP]))
        rec["done"] = ctx.get(dut.head_done) >> pk.VC_DP & 1

    simulate(dut, tb)
    assert rec["trunc"] == 1 and rec["err"] == 0
    assert rec["d"] == [1, 0, 0]                              # a: its flit, then zeros
    assert rec["head"].seq == 2 and rec["done"] == 1           # b whole, next at the head


def test_online_round_corrupted_mid_packet_poisons_only_its_pair():
    """Cut-through meets the online (default-index) route: inputs 0 -> 1 and 2 -> 3 share each
    online round; packet 1 of input 0 has its second data flit corrupted on the link after its
    round started (the links pause after the header, and the round of packet 0 ran with the
    same pairs, so packet 1's starts at once). The switch counts the bad word, finds the gap at the next flit, completes the packet
    with zeros and sends its last flit at output 1 poisoned; output 3, fed by input 2 in the same
    round, is not touched (a switch that poisons every output of the round fails here)."""
    from tests.hdl.test_switch import _run_switch, _small_switch
    rng = random.Random(3)
    pkts = {p: [pk.Packet(pk.Header.data(pk.VC_DP, pk.DEFAULT_PHASE, k, 4, port=p + 1),
                          tuple(rng.randrange(1 << FB) for _ in range(4))) for k in range(3)]
            for p in (0, 2)}
    sends = {p: [w for x in pkts[p] for w in pk.pack(x, FB)] for p in (0, 2)}
    sends[0][6:6] = [None] * 6      # the links pause after packet 1's header: its round starts
    sends[2][6:6] = [None] * 12     # before the data come, and input 2's is still running when
    sw = _small_switch()            # input 0's packet breaks
    bad = []
    outs, res = _run_switch(sw, [], sends, cycles=120, corrupt=((0, 7),), poisoned=bad)

    def fwd(x, p):                  # what the switch sends: the port byte names the source
        return pk.Packet(pk.Header.data(x.header.vc, x.header.phase, x.header.seq, 4, port=p), x.data)

    assert [q for q, _ in bad] == [1] and res.get("poisoned") == 1
    assert res.get("err_crc") == 1 and res.get("err_lost") == 1
    assert res["err_packet"] == 0 and res["err_phase"] == 0
    assert outs[1] == [fwd(pkts[0][0], 0), fwd(pkts[0][2], 0)]            # packet 1 dropped
    assert outs[3] == [fwd(x, 2) for x in pkts[2]]


@pytest.mark.regress
def test_link_ends_emit_fast_at_the_real_flit_width():
    """At a 4,096-bit flit (256 fp16 lanes) each link end emits in a few seconds: its CRC taps
    one signal. Tapping an expression made Amaranth rebuild the whole expression per tap
    (54 s for the receiver, 35 s for the transmitter, measured); the bound leaves 5x margin.
    make regress-switch; make test emits and simulates the link ends at small widths (the rest of
    this file)."""
    import time

    from fred.hdl.switch.linkcheck import LinkRx, LinkTx
    from fred.hdl.verilog import emit

    for dut in (LinkRx(4096, 8, (48, 48, 48, 4)), LinkTx(4096, 8)):
        t0 = time.process_time()
        text = emit(dut, "link_end")
        took = time.process_time() - t0
        assert "crc_in" in text and took < 12, f"{type(dut).__name__}: {took:.1f} s of CPU"
