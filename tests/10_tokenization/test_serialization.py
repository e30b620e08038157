"""save/load: plain JSON (no pickle) that restores identical merges and encodings."""
import json

import pytest

from tinytorch.text import BPETokenizer

EOT = "<|endoftext|>"
SAMPLE = "The crow dropped pebbles into the pitcher. «Voilà!» 😀 " + EOT + " Next fable."


def test_round_trip_gives_identical_encodings(tmp_path, fables, fables_bpe):
    path = tmp_path / "bpe.json"
    fables_bpe.save(path)
    loaded = BPETokenizer.load(path)
    assert list(loaded.merges.items()) == list(fables_bpe.merges.items())
    assert loaded.special_tokens == fables_bpe.special_tokens
    assert loaded.vocab == fables_bpe.vocab and loaded.vocab_size == fables_bpe.vocab_size
    assert loaded.pattern == fables_bpe.pattern
    assert loaded.encode(fables) == fables_bpe.encode(fables)
    assert loaded.encode(SAMPLE) == fables_bpe.encode(SAMPLE)
    assert loaded.decode(loaded.encode(SAMPLE)) == SAMPLE


def test_round_trip_without_pre_tokenisation(tmp_path, fables):
    tok = BPETokenizer(pattern=None).train(fables[:3000], 300, special_tokens=["<pad>"])
    tok.save(tmp_path / "raw.json")
    loaded = BPETokenizer.load(tmp_path / "raw.json")
    assert loaded.pattern is None and loaded.merges == tok.merges
    assert loaded.encode(fables[3000:4000]) == tok.encode(fables[3000:4000])


def test_the_file_is_plain_json(tmp_path, fables_bpe):
    path = tmp_path / "bpe.json"
    fables_bpe.save(path)
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert isinstance(data, dict)
    assert data["merges"] == [[a, b] for a, b in fables_bpe.merges]
    assert data["special_tokens"] == {EOT: fables_bpe.special_tokens[EOT]}
    assert len(text.encode("utf-8")) < 100_000, "merges and special tokens only; the vocab is derived"


def test_an_untrained_tokenizer_round_trips(tmp_path):
    BPETokenizer().save(tmp_path / "bytes.json")
    loaded = BPETokenizer.load(tmp_path / "bytes.json")
    assert loaded.vocab_size == 256 and loaded.merges == {}
    assert loaded.encode("héllo") == list("héllo".encode("utf-8"))


def test_load_rejects_files_that_are_not_tokenizers(tmp_path, fables_bpe):
    path = tmp_path / "bad.json"
    fables_bpe.save(path)
    good = json.loads(path.read_text(encoding="utf-8"))
    bad_files = {
        "not json": "this is not json",
        "other format": json.dumps({"format": "pickle", "merges": []}),
        "future id": json.dumps({**good, "merges": [[97, 300]] + good["merges"][1:]}),
        "not a pair": json.dumps({**good, "merges": [[97]] + good["merges"][1:]}),
        "special id": json.dumps({**good, "special_tokens": {EOT: 3}}),
    }
    for name, content in bad_files.items():
        path.write_text(content, encoding="utf-8")
        with pytest.raises(ValueError):
            BPETokenizer.load(path)
