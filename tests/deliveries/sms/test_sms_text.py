"""What an SMS costs and how its text is put on the wire (GSM 03.38 / UCS-2)."""

from __future__ import annotations

import pytest

from deliveries.channels.sms.smpp.encoding import GSM7, UCS2, decode, encode_text, sms_segments


@pytest.mark.parametrize(
    ("text", "encoding", "segments"),
    [
        ("Your login code: 123456", GSM7, 1),
        ("a" * 160, GSM7, 1),
        ("a" * 161, GSM7, 2),
        ("a" * 306, GSM7, 2),
        ("a" * 307, GSM7, 3),
        ("€" * 80, GSM7, 1),  # extension characters cost two septets
        ("€" * 81, GSM7, 2),
        ("Код для входа: 123456", UCS2, 1),
        ("ж" * 70, UCS2, 1),
        ("ж" * 71, UCS2, 2),
        ("ж" * 134, UCS2, 2),
        ("ж" * 135, UCS2, 3),
        ("", GSM7, 0),
    ],
)
def test_text_is_counted_in_the_segments_the_phone_will_receive(text, encoding, segments):
    assert sms_segments(text) == (encoding, segments)


def test_segment_counts_agree_with_template_validation(db):
    from templates_admin.validation import sms_segments as template_segments

    for text in ["hi", "a" * 200, "[]" * 90, "Заказ отправлен " * 9, "ß§¿ÄÖ" * 40]:
        assert sms_segments(text) == template_segments(text), text


def test_gsm7_and_ucs2_text_comes_back_unchanged_from_the_wire():
    for text in ["@£$¥ {curly} [sq] ~^|\\ €", "Привет, мир", "emoji 😀 too"]:
        encoded = encode_text(text)
        assert decode(encoded.data, encoded.data_coding) == text


def test_a_part_never_splits_an_escape_pair_or_a_surrogate_pair():
    gsm = encode_text("a" * 152 + "€" + "b" * 20)
    assert gsm.parts[0] == b"a" * 152  # € (escape + code) did not fit: it opens part two
    assert gsm.parts[1].startswith(b"\x1b\x65")
    ucs = encode_text("x" * 66 + "😀" + "y" * 10)
    assert len(ucs.parts[0]) == 132  # the surrogate pair moved whole to part two
    assert ucs.parts[1].decode("utf-16-be").startswith("😀")
