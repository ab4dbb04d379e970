"""``fred sim faults``: the text and JSON reports (on a recorded result) and one real run."""

import json

import pytest

from fred.cli import main


def _fake(check="pass"):
    run = {"check": check, "cycles": 1306, "delivered": 576, "packets_sent": 658,
           "retransmissions": 82, "go_backs": 20, "timeouts": 0, "acks": 41, "nacks": 7, "probes": 70,
           "injected": {f"{s}_{k}": 1 for s in ("in", "out") for k in ("drop", "corrupt", "duplicate", "delay")},
           "switch": {"err_crc": 1, "err_dup": 1, "err_lost": 2, "err_packet": 0, "err_phase": 0, "err_stale": 3,
                      "poisoned": 0},
           "endpoints": {"bad": 1, "dup": 1, "lost": 2}, "rate": 1e-3, "goodput": 0.9066}
    return {"schema": "fred-link-faults/1", "check": check, "baseline": dict(run, cycles=1184),
            "runs": [run] if check == "pass" else [{"check": check}],
            "params": {"ports": 4, "flit_bits": 64}, "runtime_s": 1.0}


@pytest.fixture
def fake(monkeypatch):
    calls = []

    def run_faults(**kw):
        calls.append(kw)
        return _fake(kw.pop("_check", "pass"))
    monkeypatch.setattr("fred.sim.characterize.run_faults", run_faults)
    return calls


def test_text_report(fake, capsys):
    assert main(["sim", "faults", "--ports", "4", "--rate", "1e-3", "--packets", "64", "--seed", "7",
                 "--faults", "drop,corrupt", "-q"]) == 0
    out = capsys.readouterr().out
    assert fake[0]["rates"] == (1e-3,) and fake[0]["seed"] == 7 and fake[0]["faults"] == ["drop", "corrupt"]
    assert "delivered packets        576" in out and "retransmissions          82 of 658" in out
    assert "goodput                  0.9066 (fault-free run 1184 cycles, this run 1306)" in out
    assert "check                    pass" in out


def test_json_report(fake, capsys):
    assert main(["sim", "faults", "--json", "--phases", "all-reduce", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "fred-sim-faults" and doc["phases"] == ["all-reduce"]
    (r,) = doc["results"]
    assert r["check"] == "pass" and r["goodput"] == 0.9066 and r["baseline_cycles"] == 1184
    assert r["switch_counters"]["err_crc"] == 1 and r["delivered_packets"] == 576


def test_failed_check_exits_1(monkeypatch, capsys):
    monkeypatch.setattr("fred.sim.characterize.run_faults",
                        lambda **kw: _fake("FAILED: cycle 9: deadlock"))
    assert main(["sim", "faults", "-q"]) == 1
    err = capsys.readouterr().err
    assert "fred: sim faults: FAILED: cycle 9: deadlock" in err


@pytest.mark.regress
def test_real_run_json(capsys):
    """The command end to end on the 4-port switch RTL (8 packets per phase, rate 1e-2). make
    regress-links; make test runs the fault bench itself (tests/sim/test_faults.py) and this
    command's refusals."""
    assert main(["sim", "faults", "--rate", "1e-2", "--packets", "8", "--seed", "2", "--json", "-q"]) == 0
    (r,) = json.loads(capsys.readouterr().out)["results"]
    assert r["check"] == "pass" and r["delivered_packets"] == 8 * 9 and 0 < r["goodput"] <= 1.5
