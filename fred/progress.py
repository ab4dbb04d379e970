"""Progress of long commands on a terminal (tqdm), nothing anywhere else.

One helper for every command that can take more than a couple of seconds (``fred verilog
switch``/``fabric``, ``fred sim cell``, ``fred sim faults``, ``fred characterize``, ``fred compare``, ``fred
estimate``, ``fred sweep``, ``fred route --study``):

* :func:`enabled` -- show progress only when standard output *and* standard error are terminals
  and the user did not ask for ``--quiet``: a pipe, a redirect (``fred estimate --json >
  x.json``), CI logs and tests get nothing extra;
* :class:`Progress` -- a tqdm bar on standard error. ``step(what)`` advances it by one named
  step, ``note(what)`` prints a line above it, and ``phase(what)`` wraps one long blocking call
  (a Verilator build, an Amaranth elaboration) with a clock that keeps ticking while it runs.
  ``start(what)`` is the callback form for library loops: a step starts, the previous one is
  done. A disabled ``Progress`` does nothing, so callers never test for it.

Library code (``fred.sim``, ``fred.model``, ``fred.hdl``) never imports this module: it takes a
``progress`` callback or object from the command (layers, tests/test_layers.py).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

__all__ = ["enabled", "Progress"]


def enabled(quiet: bool = False, stdout=None, stderr=None) -> bool:
    """Progress is shown: not ``quiet`` and both standard streams are terminals."""
    if quiet:
        return False
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        return bool(out.isatty() and err.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


class Progress:
    """A tqdm bar on stderr (or nothing when disabled).

    ``total``: the number of steps (None: unknown, the bar shows a count and the elapsed time);
    ``desc``: the command (``"fred sweep"``); ``enabled``: normally :func:`enabled`'s answer.
    Use as a context manager (the bar is closed on exit, also on errors).
    """

    def __init__(self, total: int | None = None, desc: str = "", enabled: bool = True, unit: str = "step"):
        self.enabled = bool(enabled)
        self.t0 = time.perf_counter()
        self._bar = None
        self._started = False
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False,
                             dynamic_ncols=True, bar_format=None if total else "{desc} [{elapsed}]{postfix}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self, what: str = "") -> None:
        """A named step starts (the one before it is done): the callback the library functions
        take (``estimate_table(progress=bar.start)``)."""
        if self._bar is not None:
            if self._started:
                self._bar.update(1)
            self._started = True
            self._bar.set_postfix_str(what)

    def step(self, what: str = "", n: int = 1) -> None:
        """Advance by ``n`` steps; ``what`` names what is running now."""
        if self._bar is not None:
            if what:
                self._bar.set_postfix_str(what, refresh=False)
            self._bar.update(n)

    def show(self, what: str) -> None:
        """Name what is running now without advancing."""
        if self._bar is not None:
            self._bar.set_postfix_str(what)

    def note(self, what: str) -> None:
        """A line above the bar (kept on the terminal)."""
        if self._bar is not None:
            self._bar.write(f"[{time.perf_counter() - self.t0:5.0f}s] {what}", file=sys.stderr)

    @contextlib.contextmanager
    def phase(self, what: str, advance: int = 1):
        """Show ``what`` with a clock ticking once a second while the block runs, then advance."""
        if self._bar is None:
            yield
            return
        self.show(what)
        stop = threading.Event()

        def tick():
            while not stop.wait(1.0):
                self._bar.refresh()

        t = threading.Thread(target=tick, daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()
        self.step("", advance)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
