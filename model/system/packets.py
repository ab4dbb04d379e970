"""Link packetization: the share of a wafer link's bytes that is payload.

Every message crosses the wafer's links as packets in the project's packet format
(:mod:`fred.contract.packet`, the one ``pack`` the RTL benches use): a header flit of its own, then
the data flits; FRED-SPEC §4 gives the sizes (4 KB data packets, 512 B flits) and the
reliability protocol (Go-Back-N, one cumulative ACK, a header-only control packet, per 16 data
packets). The flow simulator moves payload bytes, so a link of bandwidth ``bw`` carries
``bw x link_efficiency()`` of them.

Counted here, by packing real packets with :func:`fred.contract.packet.pack`:

* a data packet of ``packet_bytes`` occupies ``1 + packet_bytes / flit_bytes`` flits;
* ACKs: every ``ack_every`` data packets one way, one control packet comes back the other way;
  traffic on the wafer's links is symmetric enough (collectives send both ways) that each
  direction carries the ACKs of the other: one control packet per ``ack_every`` data packets.
"""

from __future__ import annotations

import functools

from fred.contract import packet as pk

__all__ = ["PACKET_BYTES", "FLIT_BYTES", "ACK_EVERY", "data_packet_flits", "control_packet_flits",
           "link_efficiency", "wire_bits"]

PACKET_BYTES = 4 * 2**10          # FRED-SPEC §4: data packets of 4 KB (payload)
FLIT_BYTES = 512                  # FRED-SPEC §4: 512 B flits
ACK_EVERY = 16                    # FRED-SPEC §4: Go-Back-N, one cumulative ACK per 16 data packets
# ours: the header (6 B, FRED-SPEC §4) travels in a flit of its own (fred.contract.packet, as the RTL
# does), so a data packet is 1 + 8 flits; link_efficiency() derives the links' payload share.


def _flit_bits(flit_bytes) -> int:
    fb = int(flit_bytes)
    if fb != flit_bytes or fb < 6:
        raise ValueError(f"flit size {flit_bytes!r} B must be a whole number of bytes >= 6 (the header is 6 B)")
    return 8 * fb


def data_packet_flits(packet_bytes=PACKET_BYTES, flit_bytes=FLIT_BYTES) -> int:
    """Flits on the link of one data packet carrying ``packet_bytes`` of payload."""

    fb = _flit_bits(flit_bytes)
    n = -(-int(packet_bytes) // int(flit_bytes))
    if not (packet_bytes > 0 and 1 <= n <= pk.MAX_LENGTH):
        raise ValueError(f"packet size {packet_bytes!r} B must be 1 to {pk.MAX_LENGTH} flits of {flit_bytes} B")
    words = pk.pack(pk.Packet(pk.Header.data(pk.VC_DP, 0, 0, n), (0,) * n), fb)
    return len(words)


def wire_bits(flit_bytes=FLIT_BYTES) -> int:
    """Bits one flit occupies on the wire: data, the sideband and the check
    (:class:`fred.contract.packet.WireFormat`, the paper's buffers: 8-bit flit sequence numbers).
    The sideband travels on wires of its own: it costs no payload bandwidth, but its bits can flip."""
    return pk.WireFormat(_flit_bits(flit_bytes), pk.fseq_bits_for(48)).width


def control_packet_flits(flit_bytes=FLIT_BYTES) -> int:
    """Flits on the link of one ACK/NACK (header-only control packet)."""

    return len(pk.pack(pk.Packet(pk.Header.control(0, 0), ()), _flit_bits(flit_bytes)))


@functools.cache
def link_efficiency(packet_bytes=PACKET_BYTES, flit_bytes=FLIT_BYTES, ack_every=ACK_EVERY) -> float:
    """Payload bytes per link byte for a long stream of full data packets plus their ACKs."""
    if not (isinstance(ack_every, int) and ack_every >= 1):
        raise ValueError(f"ACK interval {ack_every!r} must be a whole number of packets >= 1")
    payload = ack_every * packet_bytes
    wire = (ack_every * data_packet_flits(packet_bytes, flit_bytes) + control_packet_flits(flit_bytes)) * flit_bytes
    return payload / wire
