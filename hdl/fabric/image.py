"""The configuration image of one routed phase: the flat word the fabric's ``cfg`` port takes,
and where each cell's field lies in it (``fred route --json``).

The packing is :mod:`fred.hdl.fabric.recursive`'s (depth-first over the recursion, first cell in the least
significant bits; :func:`fred.hdl.fabric.recursive.config_layout`). A loader or an independent test bench
drives ``int(word_hex, 16)`` into ``cfg`` while the fabric is drained; cell ``c``'s field is
``(word >> offset_bits) & ((1 << width_bits) - 1)`` and equals ``value``, the cell's
``encode()`` of its mode.
"""

from __future__ import annotations

from .recursive import config_bits, config_layout

__all__ = ["config_image", "annotate", "PACKING"]

#: how the fields are packed (stated in the JSON next to the word)
PACKING = "depth-first over the recursion, first cell in the least significant bits"


def config_image(result) -> dict:
    """``{"width_bits", "word_hex", "packing", "fields": {CellAddr: (offset, width, value)}}`` of
    a :class:`fred.hdl.routing.result.RoutingResult`. ``word_hex`` is zero-padded to the width
    (no ``0x``)."""
    word = config_bits(result.P, result.middle, result)
    layout = config_layout(result.P, result.middle)
    cell, off, w = layout[-1]
    width = off + w
    fields = {c: (o, n, (word >> o) & ((1 << n) - 1)) for c, o, n in layout}
    return {"width_bits": width, "word_hex": f"{word:0{(width + 3) // 4}x}", "packing": PACKING,
            "fields": fields}


def annotate(doc: dict, result) -> dict:
    """Add the configuration image to ``result.to_dict()`` output ``doc`` (in place): a
    ``config`` entry (``width_bits``, ``word_hex``, ``packing``) and, per cell,
    ``config_offset_bits``, ``config_width_bits`` and ``config_value``."""
    img = config_image(result)
    doc["config"] = {k: img[k] for k in ("width_bits", "word_hex", "packing")}
    by_name = {str(c): f for c, f in img["fields"].items()}
    for cell in doc["cells"]:
        off, w, v = by_name[cell["cell"]]
        cell.update(config_offset_bits=off, config_width_bits=w, config_value=v)
    return doc
