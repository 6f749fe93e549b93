"""SMS text on the wire: GSM 03.38 (7-bit) or UCS-2, counted in segments and split.

SMPP carries the GSM default alphabet unpacked, one septet per octet, with
data_coding 0x00; any character outside it makes the whole text UCS-2 (UTF-16BE,
data_coding 0x08). A long text is either split into parts that each carry a
concatenation user data header (esm_class UDHI) or sent whole in message_payload.
Parts never split a GSM escape pair or a UTF-16 surrogate pair.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

GSM7 = "GSM-7"
UCS2 = "UCS-2"
DATA_CODING = {GSM7: 0x00, UCS2: 0x08}
ESM_CLASS_DEFAULT = 0x00
ESM_CLASS_UDHI = 0x40
_REGISTERED_DELIVERY_FINAL = 0x01  # ask the SMSC for a receipt on success and failure

# GSM 03.38 default alphabet: the character at index n is septet n (0x1B is the escape).
_GSM7_TABLE = (
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
assert len(_GSM7_TABLE) == 128
GSM7_BASIC = {char: code for code, char in enumerate(_GSM7_TABLE) if code != 0x1B}
# The extension table: each costs two septets (escape + code).
GSM7_EXTENSION = {
    "\f": 0x0A, "^": 0x14, "{": 0x28, "}": 0x29, "\\": 0x2F,
    "[": 0x3C, "~": 0x3D, "]": 0x3E, "|": 0x40, "€": 0x65,
}  # fmt: skip


@dataclass(frozen=True)
class SegmentLimits:
    """Characters (septets or UTF-16 units) in one part and in each concatenated part."""

    gsm7_single: int = 160
    gsm7_part: int = 153
    ucs2_single: int = 70
    ucs2_part: int = 67


@dataclass(frozen=True)
class EncodedText:
    encoding: str  # GSM7 | UCS2
    data: bytes  # the whole text, encoded
    parts: tuple[bytes, ...]  # the text split into segments (one part when it fits)

    @property
    def data_coding(self) -> int:
        return DATA_CODING[self.encoding]

    @property
    def segments(self) -> int:
        return len(self.parts)


def is_gsm7(text: str) -> bool:
    return all(char in GSM7_BASIC or char in GSM7_EXTENSION for char in text)


def _units(text: str) -> tuple[str, list[bytes]]:
    """The encoding and each character as its own encoded unit (never split)."""
    if is_gsm7(text):
        units = [
            bytes([GSM7_BASIC[char]]) if char in GSM7_BASIC else bytes([0x1B, GSM7_EXTENSION[char]])
            for char in text
        ]
        return GSM7, units
    return UCS2, [char.encode("utf-16-be") for char in text]


def encode_text(text: str, *, limits: SegmentLimits | None = None) -> EncodedText:
    """Encode `text` and split it into the segments an SMS needs (none for no text)."""
    limits = limits or SegmentLimits()
    encoding, units = _units(text)
    # Capacity in bytes: a GSM-7 septet is one octet unpacked; a UTF-16 unit is two.
    if encoding == GSM7:
        single, part = limits.gsm7_single, limits.gsm7_part
    else:
        single, part = limits.ucs2_single * 2, limits.ucs2_part * 2
    data = b"".join(units)
    if not data:
        return EncodedText(encoding, data, ())
    if len(data) <= single:
        return EncodedText(encoding, data, (data,))
    parts: list[bytes] = []
    current = bytearray()
    for unit in units:
        if len(current) + len(unit) > part:
            parts.append(bytes(current))
            current = bytearray()
        current += unit
    parts.append(bytes(current))
    return EncodedText(encoding, data, tuple(parts))


def sms_segments(text: str, *, limits: SegmentLimits | None = None) -> tuple[str, int]:
    """(`GSM-7` | `UCS-2`, parts) — what the message will cost."""
    encoded = encode_text(text, limits=limits)
    return encoded.encoding, encoded.segments


def decode(data: bytes, data_coding: int) -> str:
    """The text back from the wire (used for receipts and by tests)."""
    if data_coding == DATA_CODING[UCS2]:
        return data.decode("utf-16-be")
    if data_coding != DATA_CODING[GSM7]:
        return data.decode("latin-1")
    extension = {code: char for char, code in GSM7_EXTENSION.items()}
    out, escape = [], False
    for byte in data:
        if escape:
            out.append(extension.get(byte, " "))
            escape = False
        elif byte == 0x1B:
            escape = True
        else:
            out.append(_GSM7_TABLE[byte & 0x7F])
    return "".join(out)


def concatenation_udh(reference: int, total: int, number: int) -> bytes:
    """The 8-bit concatenation header (IEI 0x00) a phone reassembles parts by."""
    return bytes([0x05, 0x00, 0x03, reference & 0xFF, total, number])


def udh_parts(encoded: EncodedText, *, rng: random.Random | None = None) -> list[bytes]:
    """The short_message of each submit_sm: the part alone, or UDH + part when split."""
    if encoded.segments <= 1:
        return list(encoded.parts)
    reference = (rng or random).randrange(256)
    return [
        concatenation_udh(reference, encoded.segments, number) + part
        for number, part in enumerate(encoded.parts, start=1)
    ]


def submit_sm_fields(
    *, source: str, destination: str, encoded: EncodedText, whole_in_payload: bool
) -> list[dict[str, Any]]:
    """The submit_sm PDUs (as smpplib fields) that carry this text from `source` to
    `destination`: one, or one per part (`whole_in_payload`: one with the whole long
    text in message_payload). Each asks for a delivery receipt."""
    numeric_source = source.lstrip("+").isdigit()
    base = {
        "source_addr_ton": 1 if numeric_source else 5,  # international / alphanumeric
        "source_addr_npi": 1 if numeric_source else 0,
        "source_addr": source.lstrip("+") if numeric_source else source,
        "dest_addr_ton": 1,  # targets are E.164 numbers
        "dest_addr_npi": 1,
        "destination_addr": destination.lstrip("+"),
        "data_coding": encoded.data_coding,
        "registered_delivery": _REGISTERED_DELIVERY_FINAL,
    }
    if encoded.segments > 1 and whole_in_payload:
        return [{**base, "esm_class": ESM_CLASS_DEFAULT, "message_payload": encoded.data}]
    esm_class = ESM_CLASS_UDHI if encoded.segments > 1 else ESM_CLASS_DEFAULT
    return [{**base, "esm_class": esm_class, "short_message": part} for part in udh_parts(encoded)]
