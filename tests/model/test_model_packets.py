"""The model moves payload: packet headers and ACKs (the RTL's packet format, fred.contract.packet)
take their share of every wafer link."""

import pytest

from fred.contract import packet as pk
from fred.model.system import params as P
from fred.model.collectives.api import collective_time
from fred.model.system.packets import control_packet_flits, data_packet_flits, link_efficiency
from fred.model.network.topology import build_fabric, single_switch


def test_packet_sizes_follow_the_rtl_format():
    # FRED-SPEC §4: 4 KB packets of 512 B flits; the header flit comes on top (fred.contract.packet)
    assert data_packet_flits(4096, 512) == 1 + 8
    assert data_packet_flits(4097, 512) == 1 + 9
    assert control_packet_flits(512) == 1
    words = pk.pack(pk.Packet(pk.Header.data(pk.VC_MP, 3, 0, 8), (1,) * 8), 512 * 8)
    assert len(words) == data_packet_flits(4096, 512)


def test_link_efficiency_counts_headers_and_acks():
    assert link_efficiency(4096, 512, 16) == pytest.approx(16 * 4096 / ((16 * 9 + 1) * 512))
    assert link_efficiency(4096, 512, 1) == pytest.approx(4096 / (10 * 512))
    assert P.default_params().link_efficiency == link_efficiency()
    # bigger packets amortize the header
    assert link_efficiency(64 * 1024, 512, 16) > link_efficiency(4096, 512, 16)


@pytest.mark.parametrize("bad, msg", [
    (dict(packet_bytes=0), "packet size 0 B must be 1 to 255 flits of 512 B"),
    (dict(packet_bytes=512 * 256), "packet size 131072 B must be 1 to 255 flits of 512 B"),
    (dict(flit_bytes=4), "flit size 4 B must be a whole number of bytes >= 6"),
    (dict(ack_every=0), "ACK interval 0 must be a whole number of packets >= 1"),
])
def test_bad_packet_parameters_are_named(bad, msg):
    with pytest.raises(ValueError, match=msg):
        P.default_params().replace(**bad)


def test_wafer_links_carry_payload_at_the_efficiency():
    p = P.default_params()
    t = build_fabric("fred-d", p)
    assert t.link_efficiency == p.link_efficiency
    S = 3e9
    r = collective_time(t, "p2p", [0, 5], S)
    assert r.time == pytest.approx(S / (3e12 * p.link_efficiency), rel=1e-3)
    # with a packet format that costs nothing more, the same transfer is faster by exactly that share
    big = p.replace(packet_bytes=255 * 512, ack_every=1 << 20)
    r2 = collective_time(build_fabric("fred-d", big), "p2p", [0, 5], S)
    assert r.time / r2.time == pytest.approx(big.link_efficiency / p.link_efficiency, rel=1e-3)


def test_generic_topologies_are_not_packetized():
    t = single_switch(4, 1e9)
    assert t.link_efficiency == 1.0
    assert collective_time(t, "p2p", [0, 1], 1e9).time == pytest.approx(1.0, rel=1e-6)
