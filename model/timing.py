"""The model's switch parameters from a timing file (:mod:`fred.contract.timing`).

* switch traversal latency = ``summary.switch_latency_cycles`` x clock period
  (``latency_cycles`` / ``clock_hz``);
* in-switch collective bandwidth = link bandwidth x ``summary.beats_per_cycle_per_port``;
* phase switch, preemption and activation latencies from the summary.
"""

from __future__ import annotations

from fred.contract.timing import TimingFile, load_timing

from . import params

__all__ = ["switch_timing"]


def _activation_cycles(tf: TimingFile) -> float:
    """Activation of a new configuration on an idle switch (summary, else the switch section)."""
    v = tf.summary.get("activation_cycles")
    if v is None:
        v = ((tf.data.get("switch") or {}).get("activation_cycles") or {}).get("new_config")
    return float(v or 0)


def switch_timing(tf: TimingFile | None = None, clock_hz: float | None = None):
    """:class:`fred.model.params.SwitchTiming` from a timing file (default: the embedded one).

    ``clock_hz`` defaults to ``fred.model.params.SWITCH_CLOCK_HZ`` (the paper gives no clock;
    the RTL figures are in cycles). The ``source`` names the file, its revision and the figures.
    """
    tf = load_timing() if tf is None else tf
    clock = params.SWITCH_CLOCK_HZ if clock_hz is None else float(clock_hz)
    if not clock > 0:
        raise ValueError(f"clock_hz {clock_hz!r} must be > 0")
    return params.SwitchTiming(latency_cycles=tf.latency_cycles, clock_hz=clock,
                               beats_per_cycle_per_port=tf.beats_per_cycle_per_port,
                               phase_switch_cycles=float(tf.summary.get("phase_switch_cycles") or 0),
                               preemption_cycles=float(tf.summary.get("preemption_cycles_max") or 0),
                               activation_cycles=_activation_cycles(tf),
                               source=f"timing file {tf.describe()}")
