"""The FRED switch: input buffers per virtual channel, credits, control unit, FRED_m(P) fabric.

``Switch(ports, middle, lanes, dtype, ...)`` (FRED-SPEC section 4; link/packet format in
:mod:`fred.contract.packet`, full description in docs/switch.md).

Ports (``P`` = ports; a *link* is a stream of ``{data: flit_bits, last: 1}``,
``flit_bits = lanes * dtype.width``):

==================  ====  =====================================================================
``i[p]``            In    link from the sender at port p (``ready`` is always 1: credits); links
                          are wire words (:class:`fred.contract.packet.WireFormat`: flit + CRC)
``credit_o[p]``     Out   per VC, credits returned to that sender this cycle (count)
``o[p]``            Out   link to the receiver at port p (honours ``ready`` back-pressure)
``credit_i[p]``     In    per VC, credits the receiver at port p returns this cycle (count)
``cfg``             In    phase-table write port (:class:`~fred.hdl.switch.control.PhaseTable`)
``err_packet``      Out   packets dropped: malformed header, framing != length, overflow
``err_phase``       Out   packets dropped: unknown/unloaded/default phase index, port not in
                          the phase, lengths of one round differ, control packet for an output
                          that is not in the phase
``err_crc``         Out   wire words that failed the check (corrupted on the link), dropped
``err_lost``        Out   flits found lost on the links (per-VC flit sequence gaps)
``err_dup``         Out   duplicated flits dropped
``err_stale``       Out   head packets dropped by the sequence alignment (:mod:`fred.hdl.switch.seqalign`)
``poisoned``        Out   flits sent with their check inverted: the last flit of a round whose
                          input packet was truncated after it started (:mod:`fred.hdl.switch.poison`)
``cfg_rejects``     Out   rejected configuration writes
``active``          Out   a round is in progress; ``act_phase`` / ``act_vc`` name it
``round_start``     Out   pulse: a round starts (takes its input headers) this cycle
``ready_vcs``       Out   per VC: a phase of that VC is ready to start (inputs and credits)
``peak``            Out   per VC: highest buffer occupancy (flits) of any input port so far
==================  ====  =====================================================================

Operation
---------
* **Input**: each packet is checked and written into the buffer of its VC; it becomes visible
  to the control unit when its last flit has arrived. Malformed or mis-framed packets and
  packets overflowing the buffer (sender ignored credits) are dropped, their credits returned.
* **Phase activation**: a phase (table entry) is *ready* when every input port of its flows has
  a packet of that phase at the head of the phase's VC, all with the same length ``L``, and
  every output port of its flows holds at least ``L + 1`` credits for that VC. A scanner visits
  one port per cycle for each data VC (3 table read ports), drops heads naming an unusable
  phase, and latches one ready phase per VC, plus a "next" one found while the first runs.
* **Rounds**: one phase is active at a time. A *round* moves one packet from each input of the
  phase through the fabric: headers are taken, each output sends a header (phase, VC, length,
  and the sequence number of the lowest input port of its flow) then the ``L`` summed data flits.
  While the phase stays selected, its next round starts as soon as the inputs have fed the
  current one and every output has a free queue slot (outputs queue it and send it back to
  back; each holds ``round_queue`` rounds, enough to cover the fabric's latency). Before a
  different phase starts, every output has sent its packets (the fabric is drained).
* **Priority / preemption**: between rounds (i.e. at packet boundaries) the control unit starts
  the highest-priority ready phase, MP > PP > DP; a phase keeps running while it stays ready
  and nothing of higher priority is ready (a higher VC waiting only for output credits does not
  hold back lower ones). Changing the fabric configuration waits
  ``config_settle`` cycles. Separate buffers per VC and whole-round scheduling mean a blocked
  low-priority phase never holds resources a higher one needs: no deadlock across VCs, and
  within a VC the scanner always finds the oldest ready phase (sources must send the phases of
  one VC in one global order -- see docs/switch.md).
* **Control VC**: an ACK/NACK arriving at input port q for phase f is forwarded unchanged to
  every input port of the flow of f that has q as an output (as output links of those ports,
  i.e. towards the sources), between packets and ahead of data, with CTRL credits.

Latencies (cycles; measured figures in docs/switch.md and sim/characterize/switch.py): a packet is
visible 1 cycle after its last flit arrives; a ready phase is found within ``P`` cycles by the
scanner; a round starts the cycle it is chosen (same configuration) or after
``1 + config_settle`` cycles (new configuration); each output sends its header the cycle after
the round starts; data then flows at one flit per cycle plus the fabric latency.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fred.contract.checks import check_int
from fred.contract.packet import DEFAULT_PHASE, HEADER_BITS, ONLINE_HEADER_BITS, fseq_bits_for

from fred.hdl.dtypes import get_dtype
from fred.hdl.fabric import emit_modules, input_bits, instantiate, resolve_form
from .linkcheck import LinkRx, LinkTx, wire_layout
from .poison import poison_rounds
from .seqalign import align, outputs
from fred.hdl.fabric import MAX_MODULE_PORT_BITS, Fabric, config_bits
from fred.hdl.params import check_lanes, rejecting
from fred.hdl.routing import route
from fred.hdl.netlist import check_params
from .buffers import InputPort, header_bits, link_layout
from .control import (OutputPort, PhaseTable, TableLayout, TABLE_BUDGET_BYTES,
                             MAX_ROUND_QUEUE, default_capacity, round_queue_for)
from .ideal import IdealFabric, ideal_config_bits
from .online import check_online_middle
from .rounds import ControlUnit

#: deepest input buffer (flits) and longest configuration settle time (cycles) taken
MAX_DEPTH = 4096

__all__ = ["Switch", "verilog_build", "FABRICS", "SWITCH_FAULTS",
           "PAPER_DATA_DEPTH", "PAPER_CTRL_DEPTH", "PAPER_MAX_LEN"]

#: the paper's sizes in 512-byte flits: 24 KB per data VC, 2 KB control, 4 KB data packets
PAPER_DATA_DEPTH = 48
PAPER_CTRL_DEPTH = 4
PAPER_MAX_LEN = 8
#: build-time faults (tests only: the switch and overlap benches must catch each):
#: ``credit-twice`` (input port 0 returns its first data-VC credit twice), ``header-off-by-one``
#: (output headers carry phase index + 1), ``prio-reversed`` (DP > PP > MP between rounds)
#: ``activate-early`` (a phase starts without waiting for input port 0's packet); the fault
#: bench's (sim/benches/faults.py): ``no-crc-check`` (inputs accept corrupted words), ``no-align`` (no
#: sequence alignment, :mod:`fred.hdl.switch.seqalign`), ``nack-no-fanout`` (a NACK reaches only the
#: lowest input port of its flow)
SWITCH_FAULTS = (None, "credit-twice", "header-off-by-one", "prio-reversed", "activate-early",
                 "no-crc-check", "no-align", "nack-no-fanout")
#: the fabrics a switch can be built with
FABRICS = ("fred", "ideal")


class Switch(wiring.Component):
    """The whole FRED switch (see the module docstring for ports and rules).

    Parameters
    ----------
    ports, middle : FRED_middle(ports) fabric
    lanes, dtype : elements per flit and their type (``flit_bits = lanes * width >= 48``)
    data_depth, ctrl_depth : input buffer per port per VC, flits (paper: 48 and 4)
    max_len : longest data packet in data flits (paper 8; at most ``data_depth - 1``)
    out_credits : initial credits per VC (MP, DP, PP, CTRL) towards each receiver (default: the
        same buffer sizes as ours)
    table_entries : phase-table capacity (default: what fits ``table_bytes``, 1.5 KB)
    fabric : ``"fred"`` (hdl/fabric/recursive.py, default) or ``"ideal"`` (:mod:`fred.hdl.switch.ideal`,
        int32 only)
    config_settle : cycles between loading a new fabric configuration and the first data
    online : route default-index (255) packets online (docs/switch.md): ``None`` (default) =
        when the switch can (``middle >= 3`` and flits of at least 56 bits for the header's port
        byte), ``True`` = required (ValueError when it cannot), ``False`` = drop and count them
    fseq_bits : per-VC flit sequence bits on the wire (default: :func:`fseq_bits_for` the
        buffers, at least 8, i.e. receive windows up to 127 flits)
    probe_idle : idle cycles after which an output link probes a VC that sent flits
        (:class:`~fred.hdl.switch.linkcheck.LinkTx`; 0 = never)
    round_queue : rounds each output holds at once, the one it sends and those queued behind
        it (default :func:`~fred.hdl.switch.control.round_queue_for` the fabric's latency and
        ``max_len``: enough for rounds of one phase to follow back to back; 2 on FRED_3(4),
        4 on FRED_3(12) with 1 + 8-flit packets)
    """

    def __init__(self, ports: int, middle: int = 3, lanes: int = 4, dtype="fp16", *,
                 data_depth: int = PAPER_DATA_DEPTH, ctrl_depth: int = PAPER_CTRL_DEPTH,
                 max_len: int = PAPER_MAX_LEN, out_credits=None, table_entries=None,
                 table_bytes: int = TABLE_BUDGET_BYTES, fabric: str = "fred",
                 config_settle: int = 1, counter_bits: int = 16, online=None, fault=None,
                 fseq_bits=None, probe_idle: int = 256, round_queue=None, _shared=None,
                 _hier=False):
        with rejecting(self):
            ports, middle, lanes, data_depth, ctrl_depth, max_len, table_entries, config_settle, counter_bits = \
                self._check(ports, middle, lanes, dtype, data_depth, ctrl_depth, max_len,
                            out_credits, table_entries, fabric, config_settle, counter_bits)
            self.online = self._check_online(online, fabric)
            if fault not in SWITCH_FAULTS:
                raise ValueError(f"unknown switch fault {fault!r}; known: "
                                 + ", ".join(f for f in SWITCH_FAULTS if f))
        self.fault = fault
        self.fseq_bits = fseq_bits_for(*self.depths, *self.out_credits) if fseq_bits is None \
            else fseq_bits
        self.probe_idle = probe_idle
        self.config_settle = config_settle
        self.counter_bits = counter_bits
        self.fabric_kind = fabric
        self._shared = _shared  # None, or the FRED fabric's shared cell-module registry
        # hierarchical form (fred.hdl.fabric.hier): shared port modules, the fabric's too
        self._hier = bool(_hier) and _shared is not None
        self.fabric = self._make_fabric()
        self.config_width = len(self.fabric.cfg)
        self.fabric_latency = getattr(self.fabric, "latency", None)
        with rejecting(self):
            if round_queue is None:
                round_queue = round_queue_for(self.fabric_latency or 0, max_len)
            round_queue = check_int("round_queue", round_queue, 1, MAX_ROUND_QUEUE)
        self.round_queue = round_queue
        cap = table_entries if table_entries is not None else \
            default_capacity(ports, self.config_width, table_bytes)
        self.layout = TableLayout(ports, self.config_width, cap)
        self.capacity = cap

        self._ports = [InputPort(self.flit_bits, self.depths, max_len) for _ in range(ports)]
        cb = self._ports[0].credit_bits
        self.credit_bits = cb
        lw = max(self.depths).bit_length()
        link = stream.Signature(wire_layout(self.flit_bits, self.fseq_bits))
        super().__init__({
            "i": In(link).array(ports),
            "o": Out(link).array(ports),
            "credit_o": Out(data.ArrayLayout(cb, 4)).array(ports),
            "credit_i": In(data.ArrayLayout(cb, 4)).array(ports),
            "cfg": In(stream.Signature(self.layout.cfg_layout())),
            "err_packet": Out(counter_bits),
            "err_phase": Out(counter_bits),
            "cfg_rejects": Out(counter_bits),
            "err_crc": Out(counter_bits), "err_lost": Out(counter_bits),
            "err_dup": Out(counter_bits), "err_stale": Out(counter_bits),
            "poisoned": Out(counter_bits),
            "active": Out(1), "act_phase": Out(8), "act_vc": Out(2),
            "round_start": Out(1), "ready_vcs": Out(4),
            "peak": Out(data.ArrayLayout(lw, 4)),
        })

    def _check(self, ports, middle, lanes, dtype, data_depth, ctrl_depth, max_len, out_credits,
               table_entries, fabric, config_settle, counter_bits=16):
        """Validate the parameters (fred.contract.checks: TypeError / ValueError naming each);
        set ``P``, ``middle``, ``lanes``, ``dtype``, ``width``, ``flit_bits``, ``depths``,
        ``max_len`` and ``out_credits``; return the integer parameters as ints (numpy ones too)."""
        check_params(ports, middle)
        ports, middle = int(ports), int(middle)
        data_depth = check_int("data_depth", data_depth, 2, MAX_DEPTH)
        ctrl_depth = check_int("ctrl_depth", ctrl_depth, 1, MAX_DEPTH)
        max_len = check_int("max_len", max_len, 1, 255)
        config_settle = check_int("config_settle", config_settle, 0, MAX_DEPTH)
        counter_bits = check_int("counter_bits", counter_bits, 1, 64)
        if table_entries is not None:
            table_entries = check_int("table_entries", table_entries, 1, DEFAULT_PHASE)
        if not isinstance(fabric, str):
            raise TypeError(f"fabric must be a string ({', '.join(FABRICS)}), not {type(fabric).__name__} {fabric!r}")
        self.dtype = get_dtype(dtype)
        self.P, self.middle, self.lanes = ports, middle, check_lanes(lanes)
        self.width = self.dtype.width
        self.flit_bits = self.lanes * self.width
        if self.flit_bits < HEADER_BITS:
            raise ValueError(f"flit of {lanes} x {self.dtype.name} = {self.flit_bits} bits is "
                             f"smaller than the {HEADER_BITS}-bit header; use more lanes")
        self.hdr_bits = header_bits(self.flit_bits)
        if ctrl_depth < 1:
            raise ValueError(f"control buffer depth {ctrl_depth} must be at least 1 flit")
        if not 1 <= max_len <= 255 or max_len > data_depth - 1:
            raise ValueError(f"max packet length {max_len} (max_len) must be 1..{min(255, data_depth - 1)} "
                             f"flits: header + data must fit the data buffer (data_depth {data_depth})")
        self.depths = (data_depth, data_depth, data_depth, ctrl_depth)
        self.max_len = max_len
        self.out_credits = tuple(out_credits) if out_credits is not None else self.depths
        if len(self.out_credits) != 4 or any(isinstance(c, bool) or not isinstance(c, int) or c < 0
                                             for c in self.out_credits):
            raise ValueError(f"out_credits {out_credits!r} must be 4 non-negative counts")
        if config_settle < 0:
            raise ValueError(f"config_settle {config_settle} must be >= 0")
        if table_entries is not None and not 1 <= table_entries <= DEFAULT_PHASE:
            raise ValueError(f"table capacity {table_entries} must be 1..{DEFAULT_PHASE} entries "
                             f"(index {DEFAULT_PHASE} is the reserved default)")
        if fabric not in FABRICS:
            raise ValueError(f"fabric {fabric!r} must be one of {', '.join(FABRICS)}")
        return ports, middle, int(lanes), data_depth, ctrl_depth, max_len, table_entries, config_settle, counter_bits

    def _check_online(self, online, fabric) -> bool:
        """Whether the switch routes default-index packets online (see ``online``)."""
        if online not in (None, True, False):
            raise TypeError(f"online {online!r} must be None, True or False")
        can = self.flit_bits >= ONLINE_HEADER_BITS and (fabric == "ideal" or self.middle >= 3)
        if online is None:
            return can
        if online and self.flit_bits < ONLINE_HEADER_BITS:
            raise ValueError(f"online routing needs flits of at least {ONLINE_HEADER_BITS} bits "
                             f"(header + port byte), not {self.flit_bits}; use more lanes or "
                             f"online=False")
        if online and fabric != "ideal":
            check_online_middle(self.middle)
        return bool(online)

    # -- Python-side helpers -------------------------------------------------------------------
    def _make_fabric(self):
        if self.fabric_kind == "ideal":
            return IdealFabric(self.P, self.lanes, self.width)
        return Fabric(self.P, self.middle, self.lanes, self.dtype.name, _shared=self._shared,
                      _hier=self._hier)

    def fabric_config(self, flows) -> int:
        """Fabric configuration bits for one phase's ``flows``."""
        if self.fabric_kind == "ideal":
            return ideal_config_bits(self.P, flows)
        return config_bits(self.P, self.middle, route(self.P, self.middle, list(flows)))

    def table_entry(self, vc: int, flows) -> int:
        return self.layout.encode(vc, flows, self.fabric_config(flows))

    def cfg_words(self, phases: dict) -> list:
        """``{index: (vc, flows)}`` -> list of ``cfg`` payloads loading those entries."""
        return [self.layout.cfg_word(idx, self.table_entry(vc, flows))
                for idx, (vc, flows) in sorted(phases.items())]

    def describe(self) -> dict:
        return {"ports": self.P, "middle": self.middle, "lanes": self.lanes, "dtype": self.dtype.name,
                "flit_bits": self.flit_bits, "depths": list(self.depths), "max_len": self.max_len,
                "out_credits": list(self.out_credits), "table_entries": self.capacity,
                "entry_bits": self.layout.entry_width, "table_bits": self.layout.bits,
                "config_bits": self.config_width, "fabric": self.fabric_kind,
                "fabric_latency": self.fabric_latency, "config_settle": self.config_settle,
                "credit_bits": self.credit_bits, "online": self.online,
                "forwarding": "cut-through", "fseq_bits": self.fseq_bits,
                "probe_idle": self.probe_idle, "round_queue": self.round_queue}

    # -- RTL -----------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        ports, fab, tab, outs = self._blocks(m)
        txs = self._datapath(m, ports, fab, outs)
        seen, n_stale = align(m, self, ports)          # the ports as the control unit sees them
        m.d.sync += self.err_stale.eq(self.err_stale + n_stale)
        cu = self.control = ControlUnit(self, m, seen, fab, tab, outputs(m, self, outs))
        cu.round_state()
        cu.scanner()
        cu.sequencer()
        cu.start_round()
        cu.control_vc()
        cu.counters()
        poison_rounds(m, self, seen, outs, txs, cu.round_src)
        return m

    def _blocks(self, m):
        """Input ports, fabric, phase table (behind ``cfg``) and output ports as submodules."""
        ports = [self._port(m, f"in{p}", ip, "in_d" + "_".join(map(str, self.depths))
                            + f"_n{self.max_len}") for p, ip in enumerate(self._ports)]
        m.submodules.fabric = fab = self.fabric
        m.submodules.table = tab = PhaseTable(self.layout, 4, self.counter_bits)
        outs = [self._port(m, f"out{q}", OutputPort(self.flit_bits, self.out_credits, self.credit_bits,
                                                    hdr_bits=self.hdr_bits, rounds=self.round_queue),
                           "out_c" + "_".join(map(str, self.out_credits)) + f"_b{self.credit_bits}"
                           + f"_q{self.round_queue}")
                for q in range(self.P)]
        wiring.connect(m, wiring.flipped(self.cfg), tab.cfg)
        m.d.comb += self.cfg_rejects.eq(tab.rejects)
        return ports, fab, tab, outs

    def _port(self, m, name, port, kind):
        """An input or output port: a submodule, or (hierarchical form) an instance of one shared
        module per port kind (fred.hdl.fabric.hier)."""
        if not self._hier:
            m.submodules[name] = port
            return port
        module = f"fred_switch_{kind}_f{self.flit_bits}"
        return instantiate(m, name, port, module, self._shared)

    def _datapath(self, m, ports, fab, outs):
        """Links and credits to the ports; input port -> fabric -> output port per port."""
        rxs = [self._port(m, f"lrx{p}", LinkRx(self.flit_bits, self.fseq_bits, self.depths,
                                               check=self.fault != "no-crc-check"),
                          f"lrx_d{'_'.join(map(str, self.depths))}_s{self.fseq_bits}"
                          + ("_nocheck" if self.fault == "no-crc-check" else ""))
               for p in range(self.P)]
        txs = [self._port(m, f"ltx{p}", LinkTx(self.flit_bits, self.fseq_bits, self.probe_idle),
                          f"ltx_s{self.fseq_bits}_i{self.probe_idle}") for p in range(self.P)]
        self._link_counters(m, rxs)
        for p in range(self.P):
            wiring.connect(m, wiring.flipped(self.i[p]), rxs[p].i)
            wiring.connect(m, rxs[p].o, ports[p].i)
            m.d.comb += ports[p].restart.eq(rxs[p].restart)
            for v in range(4):
                m.d.comb += self.credit_o[p][v].eq(ports[p].credit[v] + rxs[p].credit[v])
            if self.fault == "credit-twice" and p == 0:
                self._credit_twice(m, ports[p])
            # input -> fabric
            m.d.comb += [fab.i[p].valid.eq(ports[p].d.valid),
                         fab.i[p].payload.eq(ports[p].d.payload),
                         ports[p].d.ready.eq(fab.i[p].ready)]
            # fabric -> output
            m.d.comb += [outs[p].fd.valid.eq(fab.o[p].valid),
                         outs[p].fd.payload.eq(fab.o[p].payload),
                         fab.o[p].ready.eq(outs[p].fd.ready)]
            wiring.connect(m, outs[p].o, txs[p].i)
            wiring.connect(m, txs[p].o, wiring.flipped(self.o[p]))
            m.d.comb += outs[p].credit_i.eq(self.credit_i[p])
        return txs


    def _link_counters(self, m, rxs):
        """err_crc / err_dup / err_lost: per cycle, the sums of the link receivers' pulses."""
        m.d.sync += [self.err_crc.eq(self.err_crc + sum(r.bad for r in rxs)),
                     self.err_dup.eq(self.err_dup + sum(r.dup for r in rxs)),
                     self.err_lost.eq(self.err_lost + sum(r.lost for r in rxs))]

    def _credit_twice(self, m, port):
        """Mutant (tests only): the first credit input port 0 returns on a data VC is returned
        twice (one credit more than the buffer holds)."""
        done = Signal(name="fault_credit_done")
        for v in range(3):
            c = port.credit[v]
            with m.If(~done & (c != 0)):
                m.d.comb += self.credit_o[0][v].eq(c + 1)
                m.d.sync += done.eq(1)


# -- fred verilog switch ---------------------------------------------------------------------
def verilog_build(args, target):
    """``(verilog text, top name)`` for ``fred verilog switch`` in the form ``args.form``
    (:func:`fred.hdl.fabric.hier.resolve_form`: flat up to AUTO_HIER_LANES lanes, else hier)."""
    # ports, middle and lanes are checked by Switch (fred.hdl.params); the buffer options here
    for name in ("data_depth", "ctrl_depth", "max_len", "table_bytes"):
        check_int("--" + name.replace("_", "-"), getattr(args, name), 1)
    form = resolve_form("switch", args.lanes, getattr(args, "form", "auto"))
    registry = {}
    shared = form != "flat"
    sw = Switch(args.ports, args.middle, args.lanes, args.dtype, data_depth=args.data_depth,
                ctrl_depth=args.ctrl_depth, max_len=args.max_len,
                table_entries=args.table_entries, table_bytes=args.table_bytes,
                fabric=args.fabric, _shared=registry if shared else None, _hier=form == "hier")
    top = f"fred_switch_p{args.ports}_m{args.middle}"
    bits = input_bits(sw)
    if bits > MAX_MODULE_PORT_BITS:
        from fred import FredError

        raise FredError(f"a {args.ports}-port switch with {args.lanes} {args.dtype} lanes needs {bits:,} "
                        f"input bits in its top module, more than the {MAX_MODULE_PORT_BITS:,} "
                        f"Amaranth's netlist holds; use fewer ports or lanes")
    return emit_modules(sw, top, registry, getattr(args, "progress", None)), top
