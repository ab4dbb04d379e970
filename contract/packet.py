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

Link integrity (the wire)
-------------------------
On the wire every flit carries a sideband protected with it by a CRC (:class:`WireFormat`,
docs/switch.md "Link integrity"): ``last``, ``head`` (first flit of a packet), ``probe`` (a
credit probe, not a flit of any packet), the flit's ``vc``, ``fseq`` (per-VC flit sequence
number, :func:`fseq_bits_for` bits) and ``check`` = the standard CRC-32C (Castagnoli, polynomial
``0x1EDC6F41``, reflected, preset and final XOR ``0xFFFFFFFF``: :func:`crc32c`) of every other
wire bit taken as little-endian bytes (:func:`crc_bytes_of`). The switch checks it at every input and
regenerates it at every output (its outputs carry sums); the receiving endpoint checks it too.
Link protocol (gaps, duplicates, credits of lost flits): :mod:`fred.contract.link`.

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
    "CRC_BITS", "CRC_POLY", "CRC_POLY_REFLECTED", "CRC_INIT", "CRC_XOROUT", "crc32c",
    "crc32c_bytes", "crc_bytes_of", "crc_columns", "crc_zero", "WireFormat", "Wire", "fseq_bits_for",
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


# -- link integrity: CRC-32C over every wire bit (docs/switch.md, "Link integrity") -----------------
CRC_BITS = 32
#: CRC-32C (Castagnoli), normal form; Hamming distance 6 up to 5,243 message bits (Koopman), so
#: any 5 flipped bits of a 512-byte flit with its sideband are detected, and every burst <= 32 bits
CRC_POLY = 0x1EDC6F41
#: the standard CRC-32C's other parameters (iSCSI, RFC 3720 appendix B.4; SCTP, RFC 9260; ext4):
#: input and output reflected (each byte enters least significant bit first), register preset
#: to all ones, result XORed with all ones. Check value: 0xE3069283 for b"123456789".
CRC_INIT = 0xFFFFFFFF
CRC_XOROUT = 0xFFFFFFFF
CRC_POLY_REFLECTED = int(f"{CRC_POLY:032b}"[::-1], 2)        # 0x82F63B78
_CRC_MASK = (1 << CRC_BITS) - 1


def _crc_table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ CRC_POLY_REFLECTED if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c_bytes(data: bytes) -> int:
    """The standard CRC-32C of ``data`` (reflected, preset and final XOR all ones): what every
    CRC-32C library returns (``0xE3069283`` for ``b"123456789"``)."""
    c = CRC_INIT
    for b in data:
        c = (c >> 8) ^ _TABLE[(c ^ b) & 0xFF]
    return c ^ CRC_XOROUT


def crc_bytes_of(message: int, nbits: int) -> bytes:
    """The bytes the CRC covers for an ``nbits``-bit ``message``: little-endian (message bits
    0..7 are byte 0, with bit 0 its least significant bit), the last byte padded with zeros
    above bit ``nbits - 1``. With the reflected CRC, message bit ``i`` is the ``i``-th bit to
    enter the register."""
    if message < 0 or message >> nbits:
        raise ValueError(f"CRC message {message:#x} does not fit in {nbits} bits")
    return message.to_bytes((nbits + 7) // 8, "little")


def crc32c(message: int, nbits: int) -> int:
    """The standard CRC-32C of the ``nbits``-bit ``message`` taken as :func:`crc_bytes_of`
    (``crc32c(int.from_bytes(b"123456789", "little"), 72) == 0xE3069283``)."""
    return crc32c_bytes(crc_bytes_of(message, nbits))


def _reflect32(x: int) -> int:
    return int(f"{x:032b}"[::-1], 2)


def crc_columns(nbits: int) -> list:
    """The linear part of :func:`crc32c` for every message bit ``i``: ``crc32c(1 << i, nbits) ^
    crc_zero(nbits)`` (the CRC is affine: check bit ``j`` of the RTL is the XOR of the message
    bits whose column has bit ``j`` set, then XORed with bit ``j`` of :func:`crc_zero`).

    Bit ``i`` enters ``n - 1 - i`` bits before the end of the ``n = 8 * ceil(nbits / 8)`` padded
    bits, so it adds ``x^(n - 1 - i + 32) mod G``, which the reflected register holds bit-reversed."""
    n = 8 * ((nbits + 7) // 8)
    powers, c = [], CRC_POLY           # x^(32 + k) mod G, k = 0, 1, ...
    for _ in range(n):
        powers.append(c)
        c = ((c << 1) ^ CRC_POLY) & _CRC_MASK if c & 0x80000000 else (c << 1) & _CRC_MASK
    return [_reflect32(powers[n - 1 - i]) for i in range(nbits)]


def crc_zero(nbits: int) -> int:
    """:func:`crc32c` of the all-zero ``nbits``-bit message (the affine constant of the RTL)."""
    return crc32c(0, nbits)


def fseq_bits_for(*windows) -> int:
    """Bits of the per-VC flit sequence number on the wire: gaps of up to ``max(windows)``
    flits (a receiver's buffer of one VC) and the duplicate of the previous flit must be told
    apart, so ``2**bits > 2 * max + 1``; at least 8."""
    w = max([int(x) for x in windows] + [1])
    return max(8, (2 * w + 1).bit_length())


@dataclass(frozen=True)
class Wire:
    """The fields of one wire word (see :class:`WireFormat`)."""
    data: int
    last: bool
    head: bool
    probe: bool
    vc: int
    fseq: int
    check: int
    ok: bool           # the check matches


class WireFormat:
    """Wire word of a link with ``flit_bits`` data bits and ``fseq_bits`` sequence bits.

    LSB first: ``data`` (flit_bits), ``last``, ``head``, ``probe``, ``vc`` (2), ``fseq``
    (fseq_bits), ``check`` (32) -- the Amaranth layout :func:`fred.hdl.switch.linkcheck.wire_layout`.
    ``data | last << flit_bits`` is the link word of :func:`pack`, so :func:`word_fields` reads
    a wire word too. ``check`` = :func:`crc32c` of the ``covered`` low bits (the standard
    CRC-32C of their little-endian bytes, the last byte zero-padded; CRC bit ``k`` is wire bit
    ``covered + k``).
    """

    def __init__(self, flit_bits: int, fseq_bits: int = 8):
        _check_flit_bits(flit_bits)
        if not isinstance(fseq_bits, int) or not 4 <= fseq_bits <= 16:
            raise PacketError(f"flit sequence width {fseq_bits!r} must be 4..16 bits")
        self.flit_bits, self.fseq_bits = flit_bits, fseq_bits
        F = flit_bits
        self.off_last, self.off_head, self.off_probe, self.off_vc = F, F + 1, F + 2, F + 3
        self.off_fseq = F + 5
        self.covered = F + 5 + fseq_bits
        self.width = self.covered + CRC_BITS
        self.fseq_mod = 1 << fseq_bits

    def check_of(self, low: int) -> int:
        return crc32c(low & ((1 << self.covered) - 1), self.covered)

    def seal(self, data: int, last: bool, head: bool, vc: int, fseq: int, probe: bool = False) -> int:
        """The wire word of one flit (or of a probe) with its check."""
        if not 0 <= data < (1 << self.flit_bits):
            raise PacketError(f"flit data {data:#x} does not fit in {self.flit_bits} bits")
        if not 0 <= vc < 4 or not 0 <= fseq < self.fseq_mod:
            raise PacketError(f"vc {vc!r} / flit sequence {fseq!r} out of range")
        low = (data | int(bool(last)) << self.off_last | int(bool(head)) << self.off_head
               | int(bool(probe)) << self.off_probe | vc << self.off_vc | fseq << self.off_fseq)
        return low | self.check_of(low) << self.covered

    def fields(self, word: int) -> Wire:
        low = word & ((1 << self.covered) - 1)
        check = (word >> self.covered) & _CRC_MASK
        return Wire(data=word & ((1 << self.flit_bits) - 1), last=bool(word >> self.off_last & 1),
                    head=bool(word >> self.off_head & 1), probe=bool(word >> self.off_probe & 1),
                    vc=word >> self.off_vc & 3, fseq=(word >> self.off_fseq) & (self.fseq_mod - 1),
                    check=check, ok=check == self.check_of(low) and not word >> self.width)

    def is_probe(self, word: int) -> bool:
        return bool(word >> self.off_probe & 1)
