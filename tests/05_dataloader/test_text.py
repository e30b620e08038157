"""The shipped text corpus, read through load_text."""
import pytest

from tinytorch.data import load_text


def test_fables_text_size_and_encoding():
    text = load_text()
    assert isinstance(text, str) and text.strip()
    data = text.encode("utf-8")
    assert 40_000 <= len(data) <= 80_000, f"{len(data)} bytes; the corpus is meant to be 40-80 KB"
    assert text.isascii(), "plain ASCII (so one byte = one character)"
    assert data.decode("ascii") == text
    assert load_text("fables") == text


def test_fables_text_is_varied_prose():
    text = load_text("fables")
    lines = text.splitlines()
    titles = [ln for ln in lines if ln.strip() and ln.isupper()]
    assert len(titles) >= 30, "one titled block per fable"
    assert len(text.split()) > 7_000
    assert len(set(text)) >= 50, "letters of both cases, digits or punctuation, quotes"
    for ch in '.,;:?!"\'':
        assert ch in text
    assert "\r" not in text and "\t" not in text


def test_unknown_text_is_a_clear_error():
    with pytest.raises(ValueError) as info:
        load_text("war_and_peace")
    assert "fables" in str(info.value)
