"""Lines the training commands (``fred estimate``, ``fred sweep``, ``fred scan``, ``fred
collective``) share: the breakdown columns, what an all-to-all runs at, the memory policy of a row and of a comparison, and the --bit-error-rate
help with the range the embedded timing default covers."""

from __future__ import annotations

#: the breakdown columns of the training tables and their titles
COLS = ("compute", "dp", "mp", "pp", "stream", "input", "offload")
COL_TITLES = {"compute": "compute", "dp": "DP", "mp": "MP", "pp": "PP", "stream": "wstream", "input": "input",
              "offload": "offload", "inter_wafer": "inter", "ep": "EP a2a"}
#: short names of the memory policies in tables
POLICY_SHORT = {"none": "none", "selective": "sel", "recompute": "rec", "offload": "off",
                "selective+offload": "sel+off", "recompute+offload": "rec+off"}


def memory_cell(e, mesh_policy=None) -> str:
    """``policy before->after`` in GB per NPU, e.g. ``sel+off 129->80``; with ``mesh_policy`` (the
    mesh's in the same comparison) a policy that differs from it is marked ``(own)``."""
    own = " (own)" if mesh_policy is not None and e.memory_policy != mesh_policy else ""
    return (f"{POLICY_SHORT.get(e.memory_policy, e.memory_policy)} {e.memory_before / 1e9:.0f}->"
            f"{e.memory_per_npu / 1e9:.0f}{own}")


def memory_line(estimates) -> list:
    """The line saying how the memory policy of the comparison was chosen (none without estimates)."""
    choices = {e.memory_choice for e in estimates}
    if not choices:
        return []
    if choices == {"requested"}:
        return [f"memory: the requested policy ({', '.join(sorted({e.memory_policy for e in estimates}))}) on every "
                "fabric"]
    if "per-fabric" in choices:
        return ["memory: each fabric picks its own cheapest fitting policy (--memory-choice per-fabric), so a row "
                "may differ from the mesh's in memory policy as well as in network; '(own)' marks those that do"]
    return ["memory: one policy per workload and strategy on every fabric: the cheapest that fits on the mesh "
            "(by simulation; --memory-choice per-fabric lets each fabric pick its own)"]


def bit_error_help(what: str) -> str:
    """The --bit-error-rate help: the range the embedded timing default's measured goodput curve
    covers (computed; another --timing file's curve sets its own reach)."""
    from fred.model.system import max_bit_error_rate
    from fred.model.system import default_params, data_packet_flits, wire_bits

    p = default_params()
    curve = p.switch.fault_curve
    reach = (f"0..{max_bit_error_rate(curve, wire_bits(p.flit_bytes), data_packet_flits(p.packet_bytes, p.flit_bytes)):.3g}"
             f" with the embedded timing default, the reach of its measured goodput curve; a --timing file's "
             f"curve sets its own" if curve else "the embedded timing default has no measured goodput curve: "
             "give a --timing file of schema 4")
    return (f"bit-error rate of {what} ({reach}; default: error-free): links are derated by the Go-Back-N goodput "
            f"measured on the switch RTL")


def table_cols(rows) -> tuple:
    """The breakdown columns: :data:`COLS`, and ``ep`` (exposed all-to-all) when a row runs
    expert parallelism."""
    return COLS + (("ep",) if any(getattr(e, "expert_parallel", 1) > 1 for e in rows) else ())


def a2a_lines(rows) -> list:
    """For rows with expert parallelism: what each fabric moves an all-to-all at (one line)."""
    from fred.model.system import variant

    seen = {}
    for e in rows:
        if getattr(e, "expert_parallel", 1) > 1:
            seen.setdefault(e.all_to_all_source, []).append(variant(e.fabric).display)
    return [f"all-to-all ({', '.join(dict.fromkeys(f))}): {src}" for src, f in seen.items()]
