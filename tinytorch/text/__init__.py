"""tinytorch.text: tokenizers and language-model data helpers (module 10).

The code lives in tokenizers.py, generated from modules/10_tokenization/tokenization.ipynb.
(PyTorch itself ships no tokenizer; the names follow tiktoken / Hugging Face habits.)
"""
from tinytorch.text.tokenizers import (  # noqa: F401  (module 10)
    SPLIT_PATTERN, BPETokenizer, CharTokenizer, best_pair, build_vocab, encode_chunk, encode_corpus,
    get_batch, get_pair_counts, learn_merges, merge_pair, pretokenize, split_on_special,
)

__all__ = [
    "CharTokenizer", "BPETokenizer", "SPLIT_PATTERN", "pretokenize", "split_on_special",
    "get_pair_counts", "merge_pair", "best_pair", "learn_merges", "build_vocab", "encode_chunk",
    "encode_corpus", "get_batch",
]
