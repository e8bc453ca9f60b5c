import pytest

from shared.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    "text, micros",
    [
        ("500ms", 500_000),
        ("10s", 10_000_000),
        ("1m", 60_000_000),
        ("2h", 7_200_000_000),
        ("1d", 86_400_000_000),
        ("0", 0),
        (0, 0),
        ("0s", 0),
    ],
)
def test_parse(text, micros):
    assert parse_duration(text) == micros


@pytest.mark.parametrize("text", ["10", "1.5m", "-1s", "1w", "", "abc", 10, True])
def test_rejects_with_the_accepted_forms(text):
    with pytest.raises(ValueError) as err:
        parse_duration(text, name="window-size")
    assert "window-size" in str(err.value)


def test_error_names_units():
    with pytest.raises(ValueError, match=r"ms, s, m, h, d"):
        parse_duration("1w")


@pytest.mark.parametrize(
    "micros, text", [(0, "0s"), (90_000_000, "90s"), (7_200_000_000, "2h"), (1_500, "1500us"), (500_000, "500ms")]
)
def test_format(micros, text):
    assert format_duration(micros) == text
