"""Timing files: loading, validation, bad input, and the conversion the model uses."""

import copy
import json

import pytest

from fred import FredError
from fred.model.system import params
from fred.contract.timing import (SCHEMA_VERSION, TimingFileError, default_timing_path, load_timing,
                                  validate_timing)
from fred.model.system.timing import SWITCH_CLOCK_HZ, switch_timing


def _doc():
    """A minimal valid timing document (shape of what fred characterize writes)."""
    fab = {"ports": 12, "middle": 3,
           "latency_cycles": {"all-reduce": 21, "reduce": 21, "multicast": 21, "unicast": 21},
           "beats_per_cycle_per_port": {"all-reduce": 1.0, "reduce": 1.0, "multicast": 0.5,
                                        "unicast": 1.0}}
    return {
        "kind": "fred-timing", "schema_version": SCHEMA_VERSION,
        "source": {"revision": "0123456789abcdef", "dirty": False},
        "tools": {"python": "3"}, "seed": 1,
        "rtl": {"dtype": "fp16", "lanes": 4, "middle": 3},
        "cells": {}, "fabrics": {"FRED_3(12)": fab},
        "summary": {"chiplets": ["FRED_3(12)"], "switch_latency_cycles": 21,
                    "beats_per_cycle_per_port": 0.5},
    }


def _write(tmp_path, doc, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return p


def test_valid_file_loads_and_converts(tmp_path):
    tf = load_timing(_write(tmp_path, _doc()))
    assert tf.latency_cycles == 21 and tf.beats_per_cycle_per_port == 0.5
    st = switch_timing(tf, clock_hz=2e9)
    assert isinstance(st, params.SwitchTiming)
    assert st.latency_s == pytest.approx(21 / 2e9)            # cycles x clock period
    assert st.collective_bandwidth(3e12) == pytest.approx(1.5e12)  # link BW x beats/cycle/port
    assert str(tmp_path / "t.json") in st.source
    # default clock is the model's documented switch clock
    assert switch_timing(tf).clock_hz == SWITCH_CLOCK_HZ


def test_embedded_default_loads():
    tf = load_timing()
    assert tf.embedded and "embedded default" in tf.path
    assert default_timing_path().is_file()
    st = switch_timing(tf)
    assert st.latency_cycles == tf.latency_cycles > 0
    assert 0 < st.beats_per_cycle_per_port <= 1
    assert "timing file" in st.source and tf.revision[:12] in st.source


def _one_line_with_fix(exc, path=None):
    msg = str(exc)
    assert "\n" not in msg
    assert "fred characterize -o" in msg
    if path is not None:
        assert str(path) in msg
    return msg


def test_missing_file(tmp_path):
    p = tmp_path / "nope.json"
    with pytest.raises(TimingFileError) as ei:
        load_timing(p)
    assert "no such file" in _one_line_with_fix(ei.value, p)
    assert isinstance(ei.value, FredError) and isinstance(ei.value, ValueError)


def test_directory_is_rejected(tmp_path):
    with pytest.raises(TimingFileError, match="directory"):
        load_timing(tmp_path)


@pytest.mark.parametrize("text", ["", "{", "not json", "[1, 2", "\x00\x01"])
def test_corrupt_file(tmp_path, text):
    p = _write(tmp_path, text)
    with pytest.raises(TimingFileError) as ei:
        load_timing(p)
    assert "corrupt" in _one_line_with_fix(ei.value, p)


def test_not_an_object_or_wrong_kind(tmp_path):
    with pytest.raises(TimingFileError, match="not a JSON object"):
        load_timing(_write(tmp_path, "[1, 2, 3]"))
    d = _doc()
    d["kind"] = "something-else"
    with pytest.raises(TimingFileError, match="not a FRED timing file"):
        load_timing(_write(tmp_path, d))


@pytest.mark.parametrize("version", [0, SCHEMA_VERSION + 1, "1", None])
def test_other_schema_version(tmp_path, version):
    d = _doc()
    d["schema_version"] = version
    p = _write(tmp_path, d)
    with pytest.raises(TimingFileError) as ei:
        load_timing(p)
    assert "schema version" in _one_line_with_fix(ei.value, p)


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d.pop("summary"), "missing field summary"),
    (lambda d: d["summary"].pop("switch_latency_cycles"), "summary.switch_latency_cycles"),
    (lambda d: d["summary"].update(switch_latency_cycles="fast"), "wrong type"),
    (lambda d: d["summary"].update(switch_latency_cycles=0), "must be > 0"),
    (lambda d: d["summary"].update(beats_per_cycle_per_port=-1), "must be > 0"),
    (lambda d: d["summary"].update(beats_per_cycle_per_port=1.5), "exceeds 1 beat"),
    (lambda d: d["summary"].update(beats_per_cycle_per_port=float("nan")), "finite"),
    (lambda d: d["source"].pop("revision"), "source.revision"),
    (lambda d: d["source"].update(dirty="yes"), "source.dirty"),
    (lambda d: d.pop("seed"), "missing field seed"),
    (lambda d: d["rtl"].pop("lanes"), "rtl.lanes"),
    (lambda d: d["fabrics"]["FRED_3(12)"]["latency_cycles"].pop("reduce"), "latency_cycles.reduce"),
    (lambda d: d["fabrics"]["FRED_3(12)"].update(beats_per_cycle_per_port=[1]), "wrong type"),
])
def test_malformed_fields(tmp_path, mutate, needle):
    d = copy.deepcopy(_doc())
    mutate(d)
    p = _write(tmp_path, d)
    with pytest.raises(TimingFileError) as ei:
        load_timing(p)
    assert needle in _one_line_with_fix(ei.value, p)


def test_validate_accepts_good_document():
    assert validate_timing(_doc()) is not None


def test_bad_clock(tmp_path):
    with pytest.raises(ValueError, match="clock_hz"):
        switch_timing(load_timing(_write(tmp_path, _doc())), clock_hz=0)


def test_forwarding_from_the_switch_section(tmp_path):
    """Schema 3: a switch section with cut_through_cycles makes the summary cut-through (its
    figures from the header of the last input packet) and the model drops the store-and-forward
    term of the FRED fabrics; without it (schema <= 2 files) nothing changes."""
    import dataclasses

    from fred.contract.timing import summarize
    from fred.model.network.topology import build_fabric
    sw = {"params": {"fabric_latency": 21}, "phase_switch_cycles": 7,
          "first_data_cycles": {"same_config": 30}, "activation_cycles": {"new_config": 6},
          "preemption_cycles": {"max": 35}}
    d = _doc()
    d["switch"] = sw
    old = summarize(d)
    assert old["forwarding"] == "store-and-forward" and old["switch_overhead_cycles"] == 9
    d["switch"] = dict(sw, cut_through_cycles={"first_data": {"same_config": 33},
                                               "activation": {"new_config": 8},
                                               "preemption": {"max": 37}})
    new = summarize(d)
    assert new["forwarding"] == "cut-through"
    assert (new["switch_overhead_cycles"], new["activation_cycles"], new["preemption_cycles_max"]) == (12, 8, 37)
    d["summary"] = new
    tf = load_timing(_write(tmp_path, d))
    assert tf.cut_through and switch_timing(tf).cut_through
    p = params.default_params()
    cut = build_fabric("fred-d", dataclasses.replace(p, switch=switch_timing(tf)))
    d["summary"] = old
    saf = build_fabric("fred-d", dataclasses.replace(p, switch=switch_timing(load_timing(_write(tmp_path, d, "o.json")))))
    assert cut.store_forward_bytes == 0 and saf.store_forward_bytes == 9 * 512
    d["summary"] = dict(old, forwarding="wormhole")
    with pytest.raises(TimingFileError, match="summary.forwarding = 'wormhole'"):
        load_timing(_write(tmp_path, d, "w.json"))
