"""The protobuf wire format, schema-free: enough to take ONNX models and Paddle ProgramDescs
apart field by field and write them back with one field changed, so that mutations reach
places no well-formed writer (onnx, paddle) would produce."""

from __future__ import annotations

from dataclasses import dataclass

VARINT, FIXED64, BYTES, FIXED32 = 0, 1, 2, 5
_MAX_DEPTH = 12


@dataclass
class Field:
    number: int
    wire_type: int
    value: int | bytes  # varints and fixed-width fields as int, length-delimited as bytes
    # A length-delimited payload that is itself a message that encodes back to the same bytes
    # (strings and packed numbers rarely do; where they do, mutating them as a message is fine).
    children: list[Field] | None = None
    length_override: int | None = None  # a length field that lies about its payload


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 values take ten bytes, as protobuf writes them
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def decode(buf: bytes, depth: int = 0) -> list[Field]:
    """The fields of a message; ValueError when buf is not one."""
    fields, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire_type == VARINT:
            value, pos = _varint(buf, pos)
        elif wire_type in (FIXED64, FIXED32):
            size = 8 if wire_type == FIXED64 else 4
            if pos + size > len(buf):
                raise ValueError("truncated fixed field")
            value, pos = int.from_bytes(buf[pos : pos + size], "little"), pos + size
        elif wire_type == BYTES:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise ValueError("truncated length-delimited field")
            value, pos = bytes(buf[pos : pos + size]), pos + size
        else:
            raise ValueError(f"wire type {wire_type}")
        field = Field(number, wire_type, value)
        if wire_type == BYTES and value and depth < _MAX_DEPTH:
            try:
                children = decode(value, depth + 1)
            except ValueError:
                children = None
            if children is not None and encode(children) == value:
                field.children = children
        fields.append(field)
    return fields


def encode(fields: list[Field]) -> bytes:
    out = bytearray()
    for f in fields:
        out += encode_varint(f.number << 3 | f.wire_type)
        payload = encode(f.children) if f.children is not None else f.value
        if isinstance(payload, int):
            if f.wire_type == VARINT:
                out += encode_varint(payload)
            elif f.wire_type in (FIXED64, FIXED32):
                size = 8 if f.wire_type == FIXED64 else 4
                out += (payload & ((1 << 8 * size) - 1)).to_bytes(size, "little")
            else:  # a varint retyped as length-delimited: its bytes as the payload
                payload = encode_varint(payload)
        if isinstance(payload, bytes):
            if f.wire_type == BYTES:
                length = len(payload) if f.length_override is None else f.length_override
                out += encode_varint(length)
            out += payload
    return bytes(out)


def walk(fields: list[Field]) -> list[tuple[list[Field], int]]:
    """Every field in the tree as (its list, its index), depth first: the handle a mutation
    needs to replace, drop or duplicate it."""
    found = []
    for i, f in enumerate(fields):
        found.append((fields, i))
        if f.children is not None:
            found += walk(f.children)
    return found
