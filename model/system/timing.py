"""The model's switch timing (:class:`SwitchTiming`) and how it is read from a timing file.

A timing file (:mod:`fred.contract.timing`, written by ``fred characterize``) gives cycles:

* switch traversal latency = ``summary.switch_latency_cycles`` x clock period
  (``latency_cycles`` / ``clock_hz``);
* in-switch collective bandwidth = link bandwidth x ``summary.beats_per_cycle_per_port``;
* phase switch, preemption and activation latencies from the summary.

The default parameter set (:func:`fred.model.system.params.default_params`) reads the embedded default
timing file; the figures below are only the fallback of an explicitly constructed
``SwitchTiming()``.
"""

from __future__ import annotations

from dataclasses import dataclass

from fred.contract.timing import TimingFile, load_timing

from .bit_errors import curve_from_section

__all__ = ["SwitchTiming", "ZERO_SWITCH_TIMING", "SWITCH_CLOCK_HZ", "switch_timing"]

# ours: the clock of the switch RTL (the paper gives none); the timing file gives cycles.
# The figures below are only the fallback of an explicitly constructed ``SwitchTiming()``:
# the default parameter set reads the measured timing file (fred.model.system.params). A FRED_3(12) fabric is
# R(6) -> FRED_3(6) -> D(6): R, R, FRED_3(3) (3 cell stages), D, D ~ 7 registered µSwitch
# stages; plus input-port buffer, header decode and output register ~ 16 cycles per traversal
# of one logical switch. Clock 1 GHz (the paper gives none). The cells are fully pipelined, one
# beat per cycle per port in every mode (FRED-SPEC §2, ours), so in-switch collectives run at
# link rate: 1.0 beat/cycle/port.
SWITCH_LATENCY_CYCLES = 16
SWITCH_CLOCK_HZ = 1.0e9
SWITCH_BEATS_PER_CYCLE_PER_PORT = 1.0
SWITCH_TIMING_SOURCE = "ours: documented default (16 cycles at 1 GHz, 1 beat/cycle/port); not yet measured"


@dataclass(frozen=True)
class SwitchTiming:
    """Timing of one logical switch traversal.

    * traversal latency = ``latency_cycles / clock_hz`` seconds, added per switch on a path;
    * in-switch collective bandwidth = link bandwidth x ``beats_per_cycle_per_port`` (a flow that
      reduces or multicasts inside a switch is capped at that rate on the switch's ports);
    * ``source`` says where the numbers come from (a timing file path, or "ours: ...").
    """

    latency_cycles: float = SWITCH_LATENCY_CYCLES
    clock_hz: float = SWITCH_CLOCK_HZ
    beats_per_cycle_per_port: float = SWITCH_BEATS_PER_CYCLE_PER_PORT
    source: str = SWITCH_TIMING_SOURCE
    #: cycles the control unit needs to switch to a new phase's configuration (measured by the
    #: switch bench); paid once by every in-switch collective flow, which is a phase of its own;
    #: a preempted flow loses two (the fabric drains and reloads to the higher phase, and again
    #: back: :attr:`resume_delay_s`)
    phase_switch_cycles: float = 0.0
    #: cycles from a higher-priority phase being ready to its first output while a lower-priority
    #: phase holds the fabric (the round in flight drains, then the new configuration loads;
    #: measured by the switch bench, worst case)
    preemption_cycles: float = 0.0
    #: the same on an idle switch with a new configuration (measured): the part of a preemption
    #: that every phase pays anyway; a preempting flow pays the rest (:attr:`preemption_delay_s`)
    activation_cycles: float = 0.0
    #: the switch forwards a packet once its head has arrived (virtual cut-through: the RTL
    #: since issue 14); False = store-and-forward, each switch hop then adds one packet's time
    #: on its incoming link (``Topology.store_forward_bytes``)
    cut_through: bool = False
    #: Go-Back-N goodput vs packet error probability measured through the switch RTL:
    #: ((q, goodput), ...) from the timing file's ``link_faults`` (:mod:`fred.model.system.bit_errors`;
    #: empty: not measured, so no bit-error derating)
    fault_curve: tuple = ()

    def __post_init__(self):
        if not self.latency_cycles >= 0:
            raise ValueError(f"switch latency_cycles must be >= 0, got {self.latency_cycles!r}")
        if not self.clock_hz > 0:
            raise ValueError(f"switch clock_hz must be > 0, got {self.clock_hz!r}")
        if not self.phase_switch_cycles >= 0:
            raise ValueError(f"switch phase_switch_cycles must be >= 0, got {self.phase_switch_cycles!r}")
        if not self.preemption_cycles >= 0:
            raise ValueError(f"switch preemption_cycles must be >= 0, got {self.preemption_cycles!r}")
        if not self.activation_cycles >= 0:
            raise ValueError(f"switch activation_cycles must be >= 0, got {self.activation_cycles!r}")
        if not self.beats_per_cycle_per_port > 0:
            raise ValueError(f"switch beats_per_cycle_per_port must be > 0, got {self.beats_per_cycle_per_port!r}")

    @property
    def latency_s(self) -> float:
        """Switch traversal latency in seconds."""
        return self.latency_cycles / self.clock_hz

    @property
    def phase_switch_s(self) -> float:
        """Phase (configuration) switch latency in seconds."""
        return self.phase_switch_cycles / self.clock_hz

    @property
    def preemption_delay_s(self) -> float:
        """What preempting costs a flow over an unobstructed start, in seconds: the measured
        preemption latency less the activation every new phase pays (checked against the RTL by
        tests/model/test_model_vs_rtl_overlap.py)."""
        return max(0.0, self.preemption_cycles - self.activation_cycles) / self.clock_hz

    @property
    def resume_delay_s(self) -> float:
        """What being preempted costs a flow, in seconds: two phase switches (to the higher
        phase and back; the fabric idles during both), as the RTL shows."""
        return 2.0 * self.phase_switch_s

    def collective_bandwidth(self, link_bw: float) -> float:
        """In-switch collective bandwidth on a port of bandwidth ``link_bw`` (B/s)."""
        return link_bw * self.beats_per_cycle_per_port


ZERO_SWITCH_TIMING = SwitchTiming(0, 1.0e9, 1.0, "ours: ideal switch (no traversal latency), as in ASTRA-sim analytical")


def _activation_cycles(tf: TimingFile) -> float:
    """Activation of a new configuration on an idle switch (summary, else the switch section)."""
    v = tf.summary.get("activation_cycles")
    if v is None:
        v = ((tf.data.get("switch") or {}).get("activation_cycles") or {}).get("new_config")
    return float(v or 0)


def switch_timing(tf: TimingFile | None = None, clock_hz: float | None = None):
    """:class:`SwitchTiming` from a timing file (default: the embedded one).

    ``clock_hz`` defaults to :data:`SWITCH_CLOCK_HZ` (the paper gives no clock;
    the RTL figures are in cycles). The ``source`` names the file, its revision and the figures.
    """
    tf = load_timing() if tf is None else tf
    clock = SWITCH_CLOCK_HZ if clock_hz is None else float(clock_hz)
    if not clock > 0:
        raise ValueError(f"clock_hz {clock_hz!r} must be > 0")
    return SwitchTiming(latency_cycles=tf.latency_cycles, clock_hz=clock,
                               beats_per_cycle_per_port=tf.beats_per_cycle_per_port,
                               phase_switch_cycles=float(tf.summary.get("phase_switch_cycles") or 0),
                               preemption_cycles=float(tf.summary.get("preemption_cycles_max") or 0),
                               activation_cycles=_activation_cycles(tf),
                               cut_through=tf.cut_through,
                               fault_curve=curve_from_section(tf.link_faults) if tf.link_faults else (),
                               source=f"timing file {tf.describe()}")
