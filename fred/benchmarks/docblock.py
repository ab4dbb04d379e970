"""The one place a benchmark writes its figures into the docs: the block between two marker
lines of a Markdown file (``<!-- name:begin -->`` ... ``<!-- name:end -->``), written atomically."""

from __future__ import annotations

import os
import pathlib

from fred.contract.outputs import write_atomic

ROOT = pathlib.Path(__file__).resolve().parents[2]


def rewrite_block(path, begin: str, end: str, text: str) -> bool:
    """Replace what stands between the markers ``begin`` and ``end`` of ``path`` by ``text``
    (nothing happens when the file or a marker is missing); say so, and return whether it did."""
    path = pathlib.Path(path)
    if not path.is_file():
        return False
    doc = path.read_text(encoding="utf-8")
    if begin not in doc or end not in doc:
        return False
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    write_atomic(path, head + begin + "\n" + text + "\n" + end + tail)
    print(f"(rewrote the {begin} block of {os.path.relpath(path, ROOT)})")
    return True
