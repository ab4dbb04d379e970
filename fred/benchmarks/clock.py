"""Clock benchmark (``make bench``, ``python -m fred.bench clock``): gate levels per pipeline
stage and ECP5 place-and-route fmax of every cell kind and element type at 4 lanes and of
FRED_3(12) (gate levels at 4 lanes, place and route at 1 lane), by
:func:`fred.sim.characterize.clock.measure_clock` (cached in the build cache: the first run takes
several minutes of CPU, later ones seconds). Prints the table of ``fred timing`` and the clock
the model assumes next to the measured FPGA fmax.
"""

from __future__ import annotations

import time

from fred.commands.timing import format_clock
from fred.model.system import SWITCH_CLOCK_HZ
from fred.sim.characterize import measure_clock


def main() -> None:
    t0 = time.perf_counter()
    section = measure_clock(step=lambda what: print(f"  [{time.perf_counter() - t0:6.0f} s] {what}",
                                                    flush=True))
    print(format_clock(section))
    lim = section["limiting"]
    print(f"model clock: {SWITCH_CLOCK_HZ / 1e9:g} GHz (ours, an ASIC assumption); measured "
          f"ECP5 fmax of the slowest design: {lim['fpga_fmax_mhz']:.1f} MHz "
          f"({SWITCH_CLOCK_HZ / 1e6 / lim['fpga_fmax_mhz']:.1f}x slower, an FPGA, not an ASIC)")


if __name__ == "__main__":
    main()
