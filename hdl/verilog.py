"""Reproducible Verilog emission for every FRED block."""

from __future__ import annotations

from pathlib import Path

from fred.contract.outputs import write_atomic

__all__ = ["emit", "write"]


def emit(component, name: str) -> str:
    """Return Verilog for ``component`` with top module ``name``.

    Output is reproducible: no source locations, no internal attributes, so the same parameters
    always give byte-identical text.
    """
    from amaranth.back import verilog

    return verilog.convert(component, name=name, emit_src=False, strip_internal_attrs=True)


def write(component, name: str, path) -> Path:
    """Emit ``component`` to ``path`` (atomically, parent folders created); return the path."""
    return write_atomic(path, emit(component, name))
