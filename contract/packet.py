"""FRED link and packet format: the contract between switch RTL, testbenches and system model.

Pure Python, no Amaranth import.

Link
----
A link is a valid/ready stream of *flits*. Each beat is ``flit_bits`` data bits plus one
sideband bit, ``last`` (the last-flit marker), packed as one integer *link word*::

    word = data | (last << flit_bits)

(in the RTL the payload is ``StructLayout({"data": flit_bits, "last": 1})``, data in the low
bits). ``flit_bits`` is parameterized (the switch uses ``lanes * dtype.width``; the paper's flit
is 512 B) and must be at least :data:`HEADER_BITS`. Links are lossless with credits: a sender
may start a packet on virtual channel ``vc`` only while it holds at least ``len(packet)``
credits for ``vc`` (one credit = one flit slot in the receiver's buffer of that VC; virtual
cut-through, so packets are never interleaved on a link).

Packet
------
A packet is one *header flit* followed by ``length`` data flits; ``last`` is 1 on its final flit
and 0 on every other one (a header-only packet has ``last`` = 1 on the header flit). The header
occupies the low 48 bits (6 B, as in the paper) of the header flit; all other header-flit bits
are reserved and must be 0.

=========  ======  ============================================================================
bits       field   meaning
=========  ======  ============================================================================
[3:0]      magic   :data:`MAGIC` (``0xA``): marks a header flit
[5:4]      vc      virtual channel: 0 MP, 1 DP, 2 PP (data), 3 CTRL (control)
[7:6]      kind    0 DATA, 1 ACK, 2 NACK (3 is malformed); DATA only on data VCs,
                   ACK/NACK only on CTRL
[15:8]     phase   phase / configuration index into the switch's table; 255
                   (:data:`DEFAULT_PHASE`) is reserved for "all-unicast, route online"
[31:16]    seq     sequence number (16 bits, wraps); on ACK/NACK: the acknowledged packet
[39:32]    length  number of data flits after the header: 1..255 for DATA, 0 for ACK/NACK
[47:40]    check   ``0x5A ^ byte0 ^ byte1 ^ byte2 ^ byte3 ^ byte4 ^ byte6``
[55:48]    port    default index only (*ours*): the other end of an online-routed unicast --
                   the destination output port on a packet entering a switch, the source
                   input port on the packet the switch sends on (so a receiver knows where
                   its ACK/NACK goes); an ACK/NACK names the port it is for. 0 (reserved)
                   on every other packet, so byte 6 leaves their check byte unchanged
=========  ======  ============================================================================

A header is *malformed* (:func:`header_errors`) when the magic, the check byte, the kind, the
kind/VC pairing, the length or the reserved bits are wrong. The port byte needs a header flit
of at least :data:`ONLINE_HEADER_BITS` (56) bits: narrower links cannot carry online-routed
packets (the switch then drops default-index packets, see docs/switch.md). The switch drops malformed packets
(and packets whose framing disagrees with ``length``) and counts them; see docs/switch.md.

Priority between data VCs is MP > PP > DP (:data:`PRIORITY`). The paper's sizes: data packet
4 KB, control packet 512 B, flit 512 B, header 6 B, Go-Back-N with one cumulative ACK per 16
data packets.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "HEADER_BITS", "ONLINE_HEADER_BITS", "MAGIC", "DEFAULT_PHASE", "MAX_PHASE", "MAX_LENGTH", "SEQ_MOD",
    "VC_MP", "VC_DP", "VC_PP", "VC_CTRL", "DATA_VCS", "VC_NAMES", "PRIORITY",
    "KIND_DATA", "KIND_ACK", "KIND_NACK", "KIND_NAMES",
    "Header", "Packet", "PacketError", "check_byte", "encode_header", "decode_header",
    "header_errors", "is_header_valid", "pack", "unpack", "split_packets", "link_word",
    "word_fields", "flit_from_lanes", "lanes_from_flit",
]

HEADER_BITS = 48
#: header-flit bits an online-routed (default-index) packet needs: the header + the port byte
ONLINE_HEADER_BITS = 56
MAGIC = 0xA
DEFAULT_PHASE = 0xFF
MAX_PHASE = 0xFE          # largest ordinary phase index
MAX_LENGTH = 0xFF         # data flits per packet (8-bit field)
SEQ_MOD = 1 << 16

VC_MP, VC_DP, VC_PP, VC_CTRL = 0, 1, 2, 3
DATA_VCS = (VC_MP, VC_DP, VC_PP)
VC_NAMES = {VC_MP: "MP", VC_DP: "DP", VC_PP: "PP", VC_CTRL: "CTRL"}
#: data VCs from highest to lowest priority
PRIORITY = (VC_MP, VC_PP, VC_DP)

KIND_DATA, KIND_ACK, KIND_NACK = 0, 1, 2
KIND_NAMES = {KIND_DATA: "DATA", KIND_ACK: "ACK", KIND_NACK: "NACK"}

_CHECK_SALT = 0x5A


class PacketError(ValueError):
    """A malformed header or packet (message names the bad field)."""


@dataclass(frozen=True)
class Header:
    vc: int
    phase: int
    seq: int = 0
    length: int = 0
    kind: int = KIND_DATA
    port: int = 0             # default index only: the other end (see the module docstring)

    @classmethod
    def data(cls, vc, phase, seq, length, port=0):
        return cls(vc=vc, phase=phase, seq=seq, length=length, kind=KIND_DATA, port=port)

    @classmethod
    def control(cls, phase, seq, nack=False, port=0):
        return cls(vc=VC_CTRL, phase=phase, seq=seq, length=0, kind=KIND_NACK if nack else KIND_ACK,
                   port=port)

    def __str__(self):
        return (f"{KIND_NAMES.get(self.kind, self.kind)} vc={VC_NAMES.get(self.vc, self.vc)} "
                f"phase={self.phase} seq={self.seq} len={self.length}"
                + (f" port={self.port}" if self.phase == DEFAULT_PHASE else ""))


@dataclass(frozen=True)
class Packet:
    header: Header
    data: tuple = ()          # data flits (ints of flit_bits)

    def with_data(self, data):
        return replace(self, data=tuple(data))


def check_byte(low40: int, port: int = 0) -> int:
    c = _CHECK_SALT ^ (port & 0xFF)
    for k in range(5):
        c ^= (low40 >> (8 * k)) & 0xFF
    return c


def encode_header(h: Header) -> int:
    """Header -> integer of 48 bits (56 with a port byte; no validity check beyond field
    widths and the port byte being used on the default index only)."""
    for name, value, bits in (("vc", h.vc, 2), ("kind", h.kind, 2), ("phase", h.phase, 8),
                              ("seq", h.seq, 16), ("length", h.length, 8), ("port", h.port, 8)):
        if not isinstance(value, int) or not 0 <= value < (1 << bits):
            raise PacketError(f"header field {name}={value!r} does not fit in {bits} bits")
    if h.port and h.phase != DEFAULT_PHASE:
        raise PacketError(f"header field port={h.port} is for the default index "
                          f"{DEFAULT_PHASE} only, not phase {h.phase}")
    low = MAGIC | (h.vc << 4) | (h.kind << 6) | (h.phase << 8) | (h.seq << 16) | (h.length << 32)
    return low | (check_byte(low, h.port) << 40) | (h.port << HEADER_BITS)


def decode_header(word: int) -> Header:
    """Header flit -> Header (fields only; use :func:`header_errors` to validate)."""
    return Header(vc=(word >> 4) & 3, kind=(word >> 6) & 3, phase=(word >> 8) & 0xFF,
                  seq=(word >> 16) & 0xFFFF, length=(word >> 32) & 0xFF,
                  port=(word >> HEADER_BITS) & 0xFF)


def header_errors(flit: int, max_length: int = MAX_LENGTH) -> list:
    """Reasons the header flit ``flit`` (data bits, without ``last``) is malformed ([] if valid).

    ``max_length`` is the receiver's limit on data flits per packet (its buffer size).
    """
    errs = []
    if flit & 0xF != MAGIC:
        errs.append(f"magic {flit & 0xF:#x} != {MAGIC:#x}")
    h = decode_header(flit)
    if flit >> ONLINE_HEADER_BITS or (h.port and h.phase != DEFAULT_PHASE):
        errs.append("reserved header-flit bits set")
    if (flit >> 40) & 0xFF != check_byte(flit & ((1 << 40) - 1), h.port):
        errs.append("check byte mismatch")
    if h.kind == 3:
        errs.append("kind 3 is reserved")
    elif (h.kind == KIND_DATA) != (h.vc != VC_CTRL):
        errs.append(f"kind {KIND_NAMES[h.kind]} not allowed on VC {VC_NAMES[h.vc]}")
    if h.kind == KIND_DATA and not 1 <= h.length <= max_length:
        errs.append(f"data length {h.length} outside 1..{max_length}")
    if h.kind in (KIND_ACK, KIND_NACK) and h.length != 0:
        errs.append(f"control packet length {h.length} != 0")
    return errs


def is_header_valid(flit: int, max_length: int = MAX_LENGTH) -> bool:
    return not header_errors(flit, max_length)


def _check_flit_bits(flit_bits):
    if not isinstance(flit_bits, int) or flit_bits < HEADER_BITS:
        raise PacketError(f"flit width {flit_bits!r} bits is too small: the header needs "
                          f"{HEADER_BITS} bits")


def link_word(data: int, last: bool, flit_bits: int) -> int:
    return (int(data) & ((1 << flit_bits) - 1)) | (int(bool(last)) << flit_bits)


def word_fields(word: int, flit_bits: int):
    """link word -> (data, last)."""
    return word & ((1 << flit_bits) - 1), bool(word >> flit_bits & 1)


def pack(packet, flit_bits: int, check: bool = True) -> list:
    """Packet (or (Header, data)) -> list of link words (header flit first, ``last`` on the end).

    With ``check`` the header must be valid and ``length`` must equal the number of data flits.
    """
    _check_flit_bits(flit_bits)
    if not isinstance(packet, Packet):
        packet = Packet(packet[0], tuple(packet[1]))
    h = packet.header
    hw = encode_header(h)
    if hw >> flit_bits:
        raise PacketError(f"header {h} needs {ONLINE_HEADER_BITS}-bit flits (port byte), "
                          f"not {flit_bits}")
    if check:
        errs = header_errors(hw)
        if errs:
            raise PacketError(f"cannot pack {h}: {errs[0]}")
        if h.length != len(packet.data):
            raise PacketError(f"header length {h.length} != {len(packet.data)} data flits")
    words = [link_word(hw, not packet.data, flit_bits)]
    for k, d in enumerate(packet.data):
        if not 0 <= int(d) < (1 << flit_bits):
            raise PacketError(f"data flit {k} value {d:#x} does not fit in {flit_bits} bits")
        words.append(link_word(d, k == len(packet.data) - 1, flit_bits))
    return words


def unpack(words, flit_bits: int, max_length: int = MAX_LENGTH) -> Packet:
    """List of link words of exactly one packet -> Packet; raises PacketError if malformed."""
    _check_flit_bits(flit_bits)
    words = list(words)
    if not words:
        raise PacketError("empty packet")
    hdr, last = word_fields(words[0], flit_bits)
    errs = header_errors(hdr, max_length)
    if errs:
        raise PacketError(f"malformed header {hdr:#x}: {errs[0]}")
    h = decode_header(hdr)
    if len(words) != 1 + h.length:
        raise PacketError(f"packet has {len(words) - 1} data flits, header says {h.length}")
    lasts = [word_fields(w, flit_bits)[1] for w in words]
    if lasts != [False] * (len(words) - 1) + [True]:
        raise PacketError(f"last-flit markers {lasts} wrong for a {len(words)}-flit packet")
    return Packet(h, tuple(word_fields(w, flit_bits)[0] for w in words[1:]))


def split_packets(words, flit_bits: int, max_length: int = MAX_LENGTH) -> list:
    """A link's word stream -> list of Packets, split at ``last`` markers (strict)."""
    out, cur = [], []
    for w in words:
        cur.append(w)
        if word_fields(w, flit_bits)[1]:
            out.append(unpack(cur, flit_bits, max_length))
            cur = []
    if cur:
        raise PacketError(f"stream ends inside a packet ({len(cur)} flits without last)")
    return out


def flit_from_lanes(values, width: int) -> int:
    mask = (1 << width) - 1
    word = 0
    for k, v in enumerate(values):
        word |= (int(v) & mask) << (k * width)
    return word


def lanes_from_flit(flit: int, width: int, lanes: int) -> list:
    mask = (1 << width) - 1
    return [(flit >> (k * width)) & mask for k in range(lanes)]
