"""Bit-error derating of the model's links (model/system/bit_errors.py) and the timing file's
``link_faults`` section (schema 4) that it reads."""

import copy
import json
import math

import pytest

from fred.contract.timing import TimingFileError, load_timing
from fred.model.system import params
from fred.model.system.bit_errors import curve_from_section, goodput_at, max_bit_error_rate, packet_error
from fred.model.system.timing import switch_timing

from tests.contract.test_timing import _doc, _write

SECTION = {"ports": 12, "dtype": "fp16", "lanes": 4, "packet_flits": 9, "flit_bits": 64,
           "wire_bits": 109, "packets_per_phase": 32, "seed": 1, "faults": ["corrupt"],
           "phases": ["all-reduce"], "baseline_cycles": 4000,
           "points": [{"rate_per_flit": 1e-4, "goodput": 0.99, "retransmissions": 2, "cycles": 4040},
                      {"rate_per_flit": 1e-3, "goodput": 0.9, "retransmissions": 30, "cycles": 4444},
                      {"rate_per_flit": 1e-2, "goodput": 0.5, "retransmissions": 300, "cycles": 8000}]}


def test_packet_error_probability():
    assert packet_error(0, 4141, 9) == 0
    assert packet_error(1e-12, 4141, 9) == pytest.approx(4141 * 9e-12, rel=1e-6)
    assert packet_error(1e-3, 4141, 9) == pytest.approx(1 - 0.999 ** (4141 * 9))
    with pytest.raises(ValueError, match="bit-error rate"):
        packet_error(1.0, 10, 1)


def test_curve_interpolation():
    curve = curve_from_section(SECTION)
    qs = [q for q, _ in curve]
    assert qs == sorted(qs) and qs[0] == pytest.approx(1 - (1 - 1e-4) ** 9)
    for q, g in curve:
        assert goodput_at(curve, q) == pytest.approx(g)
    assert goodput_at(curve, 0) == 1.0
    assert goodput_at(curve, qs[0] / 2) == pytest.approx(1 - 0.01 / 2)       # linear from (0, 1)
    mid = math.sqrt(qs[0] * qs[1])                                            # log-linear between
    assert goodput_at(curve, mid) == pytest.approx((0.99 + 0.9) / 2)
    with pytest.raises(ValueError, match="beyond the measured goodput curve"):
        goodput_at(curve, qs[-1] * 1.01)
    assert packet_error(max_bit_error_rate(curve, 4141, 9), 4141, 9) == pytest.approx(qs[-1])


def _timing_with_curve(tmp_path, section=SECTION):
    doc = _doc()
    doc["link_faults"] = copy.deepcopy(section)
    return switch_timing(load_timing(_write(tmp_path, doc)))


def test_model_derates_links_by_the_measured_goodput(tmp_path):
    st = _timing_with_curve(tmp_path)
    base = params.default_params().replace(switch=st)
    assert base.bit_error_goodput == 1.0
    p = base.replace(bit_error_rate=1e-9)
    q = packet_error(1e-9, 4141, 9)
    assert p.bit_error_goodput == pytest.approx(goodput_at(st.fault_curve, q))
    assert p.link_efficiency == pytest.approx(base.link_efficiency * p.bit_error_goodput)
    assert p.link_efficiency < base.link_efficiency
    with pytest.raises(ValueError, match="bit-error-rate 0.0001 is beyond the goodput curve"):
        base.replace(bit_error_rate=1e-4)
    with pytest.raises(ValueError, match="must be in"):
        base.replace(bit_error_rate=-1e-9)
    assert "Go-Back-N goodput" in str(params.parameter_table(p))


def test_no_curve_no_derating():
    old = params.SwitchTiming()
    with pytest.raises(ValueError, match="needs the measured goodput curve"):
        params.default_params().replace(switch=old, bit_error_rate=1e-12)


@pytest.mark.parametrize("change, needle", [
    (lambda s: s["points"].reverse(), "does not increase"),
    (lambda s: s["points"][0].update(goodput=0), "goodput = 0 must be > 0"),
    (lambda s: s["points"].clear(), "points is empty"),
    (lambda s: s.pop("packet_flits"), "missing field link_faults.packet_flits"),
    (lambda s: s.update(packet_flits=1), "packet_flits must be >= 2"),
    (lambda s: s["points"][1].update(rate_per_flit=2), "rate_per_flit = 2 is too large"),
])
def test_bad_link_faults_section(tmp_path, change, needle):
    sec = copy.deepcopy(SECTION)
    change(sec)
    doc = _doc()
    doc["link_faults"] = sec
    with pytest.raises(TimingFileError, match=needle):
        load_timing(_write(tmp_path, doc))


def test_link_faults_needs_schema_4(tmp_path):
    doc = _doc()
    doc["schema_version"] = 3
    doc["link_faults"] = SECTION
    with pytest.raises(TimingFileError, match="needs schema version 4"):
        load_timing(_write(tmp_path, json.loads(json.dumps(doc))))


@pytest.mark.parametrize("version", [1, 3, 4])
def test_file_without_link_faults_reads_and_refuses_a_bit_error_rate(tmp_path, version):
    """A schema 1-3 file (the embedded default until it is regenerated) and a schema 4 file
    without the optional section read as before: no curve, no derating unless asked; asking for
    a bit-error rate is one line naming the rate and the schema that has the curve."""
    doc = _doc()
    doc["schema_version"] = version
    tf = load_timing(_write(tmp_path, doc))
    assert tf.schema_version == version and tf.link_faults is None
    st = switch_timing(tf)
    assert st.fault_curve == ()
    base = params.default_params().replace(switch=st)
    assert base.bit_error_goodput == 1.0
    with pytest.raises(ValueError, match=r"bit-error rate 1e-12 needs the measured goodput curve.*"
                                         r"schema 4"):
        base.replace(bit_error_rate=1e-12)


def test_embedded_default_reads_without_link_faults():
    tf = load_timing(None)
    assert tf.schema_version in (1, 2, 3, 4, 5)
    if tf.schema_version < 4:
        assert tf.link_faults is None and switch_timing(tf).fault_curve == ()


def test_estimate_text_says_how_links_are_derated(capsys):
    """``fred estimate --bit-error-rate``: the text output names the rate and the goodput it
    derates the wafer links by (the table alone can hide a small derating at its precision)."""
    from fred.cli import main

    assert main(["estimate", "-w", "resnet-152", "-f", "mesh", "--bit-error-rate", "1e-7"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    g = params.default_params().replace(bit_error_rate=1e-7).bit_error_goodput
    assert 0 < g < 1 and first.startswith("links: bit-error rate 1e-7 ") and f"{g:.6f}" in first
    assert main(["estimate", "-w", "resnet-152", "-f", "mesh"]) == 0
    assert not capsys.readouterr().out.startswith("links:")
