from gputop.vocab.reasons import REASON_TEXT, THROTTLING, decode_reasons


def test_known_bits_decode_in_order():
    assert decode_reasons(0x1) == ("gpu_idle",)
    assert decode_reasons(0x4 | 0x40) == ("sw_power_cap", "hw_thermal")
    assert decode_reasons(0) == ()


def test_unknown_bits_are_kept_as_hex():
    assert decode_reasons(0x4 | 0x200 | 0x400) == ("sw_power_cap", "0x200", "0x400")
    assert decode_reasons(1 << 40) == ("0x10000000000",)


def test_every_throttling_reason_has_an_explanation():
    assert set(REASON_TEXT) >= THROTTLING
    assert "gpu_idle" not in THROTTLING
