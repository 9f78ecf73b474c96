"""benchmarks/squad_lengths.py: BERT's uncased tokenization (counted) and MLPerf's SQuAD feature windows, on
small inputs made here (the dev set and the vocabulary are not committed)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import squad_lengths as sq  # noqa: E402


def test_basic_tokens_lower_case_strip_accents_and_split_punctuation() -> None:
    assert sq.basic_tokens("Hello, World!") == ["hello", ",", "world", "!"]
    assert sq.basic_tokens("Café\u00a0Müller's") == ["cafe", "muller", "'", "s"]  # NBSP is whitespace (Zs)
    assert sq.basic_tokens("a\u0000b\ufffdc\u200bd") == ["abcd"]  # NUL, U+FFFD and a format char (Cf) dropped
    assert sq.basic_tokens("x\t\n y") == ["x", "y"]
    assert sq.basic_tokens("東京") == ["東", "京"]  # CJK ideographs stand alone
    assert sq.basic_tokens("1,000–2,000") == ["1", ",", "000", "–", "2", ",", "000"]  # en dash is Pd


def test_wordpiece_is_greedy_longest_match_first() -> None:
    vocab = frozenset({"un", "##aff", "##able", "una", "##ff"})
    # "una" + "##ff" + "##able" (longest first from the left), not "un" + "##aff" + "##able"
    assert sq.wordpiece("unaffable", vocab) == 3
    assert sq.wordpiece("unx", vocab) == 1  # "un" then "x" matches nothing: the whole word is one [UNK]
    assert sq.wordpiece("a" * 201, frozenset({"a", "##a"})) == 1  # over 200 characters: [UNK]
    assert sq.wordpiece("a" * 200, frozenset({"a", "##a"})) == 200


def test_features_window_the_document_as_the_reference_does() -> None:
    """A document of 500 one-piece words and a 10-token question: windows of 384 − 10 − 3 = 371 tokens at
    starts 0, 128 and 256 (the third reaches the end: 244 tokens), so lengths 384, 384 and 244 + 13 = 257; a
    question over 64 tokens is cut to 64; a short document is one feature of query + doc + 3."""
    vocab = frozenset({"w", "q"})
    dev = {
        "data": [
            {
                "paragraphs": [
                    {"context": " ".join(["w"] * 500), "qas": [{"question": " ".join(["q"] * 10)}]},
                    {"context": "w\u202fw w", "qas": [{"question": " ".join(["q"] * 70)}, {"question": "q?"}]},
                ]
            }
        ]
    }
    # U+202F splits the context's words as read_squad_examples does: 3 words; "q?" is 2 tokens
    assert list(sq.feature_lengths(dev, vocab | {"?"})) == [384, 384, 257, 64 + 3 + 3, 2 + 3 + 3]


def test_percentile_is_nearest_rank() -> None:
    lengths = [10, 20, 30, 40]
    assert [sq.percentile(lengths, q) for q in (25, 50, 75, 90, 100)] == [10, 20, 30, 40, 40]
