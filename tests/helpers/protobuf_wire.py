"""A tiny protobuf wire-format encoder, enough to write Paddle's ProgramDesc by hand
(tests/integrations/paddle) or write a parsed one back (paddle_program_writer): vi, ld, f32,
f64 and packed each return one field, its key then its value as the wire type encodes it."""

from __future__ import annotations

import struct


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negatives as protobuf writes int64: ten bytes, two's complement
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def vi(field: int, n: int) -> bytes:
    return key(field, 0) + varint(n)


def ld(field: int, payload: bytes | str) -> bytes:
    payload = payload.encode() if isinstance(payload, str) else payload
    return key(field, 2) + varint(len(payload)) + payload


def f32(field: int, x: float) -> bytes:
    return key(field, 5) + struct.pack("<f", x)


def f64(field: int, x: float) -> bytes:
    return key(field, 1) + struct.pack("<d", x)


def packed(field: int, values) -> bytes:
    return ld(field, b"".join(varint(v) for v in values))
