"""Reproducible Verilog emission for every FRED block."""

from __future__ import annotations

from pathlib import Path

__all__ = ["emit", "write"]


def emit(component, name: str) -> str:
    """Return Verilog for ``component`` with top module ``name``.

    Output is reproducible: no source locations, no internal attributes, so the same parameters
    always give byte-identical text.
    """
    from amaranth.back import verilog

    return verilog.convert(component, name=name, emit_src=False, strip_internal_attrs=True)


def write(component, name: str, path) -> Path:
    """Emit ``component`` to ``path`` (parent folders created); return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = emit(component, name)
    # only touch the file when the text changed, so downstream builds stay cached
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path
