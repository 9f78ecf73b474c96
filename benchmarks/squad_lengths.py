"""The unpadded lengths of MLPerf BERT's SQuAD v1.1 dev features, as a histogram (length → count).

``python benchmarks/squad_lengths.py DEV_JSON VOCAB_TXT [--out benchmarks/data/squad_v1.1_dev_lengths.toml]``

Reads SQuAD v1.1's dev set (``dev-v1.1.json``) and BERT's uncased WordPiece vocabulary (``vocab.txt``), makes the
features the way MLPerf Inference's reference does (``language/bert/create_squad_data.py``,
``read_squad_examples`` + ``convert_examples_to_features`` with ``is_training=False``, called by ``squad_QSL.py``
at max_seq_length 384, max_query_length 64, doc_stride 128), and counts each feature's unpadded length, the sum
of its input mask: ``1 + len(query) + 1 + span + 1`` ([CLS] query [SEP] document span [SEP]). Only the
histogram is written (with its parameters, the inputs' hashes, the count, mean and percentiles); neither input
is committed. Nothing here touches the network.

The tokenizer is written here from the algorithm BERT's ``tokenization.py`` documents (no code copied; neither
``transformers`` nor ``tokenizers`` is used):

* basic tokenization: drop U+0000, U+FFFD and control characters (Unicode category C*, except tab, newline and
  carriage return, which are whitespace), map whitespace (space, tab, newline, carriage return, category Zs) to a
  space, put spaces around CJK ideographs, split on whitespace; per word: lower-case, strip accents (NFD, drop
  category Mn), split off every punctuation character (ASCII 33–47, 58–64, 91–96, 123–126, and category P*);
* WordPiece: per word, greedy longest match first from the left, continuation pieces prefixed ``##``; a word
  over 200 characters, or one that cannot be covered, is one ``[UNK]``.

The features: the context split on whitespace (space, tab, CR, LF and U+202F, as ``read_squad_examples`` does),
each word tokenized apart; the question tokenized and cut to 64 tokens; document windows of at most
``384 − len(query) − 3`` tokens, each next window starting ``min(length, 128)`` tokens later, until a window
reaches the document's end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

MAX_SEQ_LENGTH = 384
MAX_QUERY_LENGTH = 64
DOC_STRIDE = 128
MAX_WORD_CHARS = 200
OUT = Path(__file__).resolve().parent / "data" / "squad_v1.1_dev_lengths.toml"

_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_ASCII_PUNCT = (
    frozenset(range(33, 48)) | frozenset(range(58, 65)) | frozenset(range(91, 97)) | frozenset(range(123, 127))
)


def _whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _punctuation(ch: str) -> bool:
    return ord(ch) in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def _cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK)


def basic_tokens(text: str) -> list[str]:
    """Words after BERT's basic tokenization (uncased): see the module docstring."""
    cleaned = []
    for ch in text:
        if ord(ch) in (0, 0xFFFD) or _control(ch):
            continue
        if _whitespace(ch):
            cleaned.append(" ")
        elif _cjk(ch):
            cleaned.append(f" {ch} ")
        else:
            cleaned.append(ch)
    out: list[str] = []
    for word in "".join(cleaned).split():
        word = "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")
        piece = ""
        for ch in word:
            if _punctuation(ch):
                if piece:
                    out.append(piece)
                out.append(ch)
                piece = ""
            else:
                piece += ch
        if piece:
            out.append(piece)
    return out


def wordpiece(word: str, vocab: frozenset[str]) -> int:
    """How many WordPiece tokens ``word`` becomes: greedy longest match first, ``##`` on continuations; 1
    (``[UNK]``) when the word is over 200 characters or cannot be covered."""
    if len(word) > MAX_WORD_CHARS:
        return 1
    count, start = 0, 0
    while start < len(word):
        end = len(word)
        while end > start and ((word[start:end] if start == 0 else "##" + word[start:end]) not in vocab):
            end -= 1
        if end == start:
            return 1
        count += 1
        start = end
    return count


def token_count(text: str, vocab: frozenset[str]) -> int:
    return sum(wordpiece(word, vocab) for word in basic_tokens(text))


def _context_words(context: str) -> list[str]:
    words: list[str] = []
    previous_space = True
    for ch in context:
        if ch in " \t\r\n" or ord(ch) == 0x202F:
            previous_space = True
        elif previous_space:
            words.append(ch)
            previous_space = False
        else:
            words[-1] += ch
    return words


def feature_lengths(dev: dict, vocab: frozenset[str]) -> Iterator[int]:
    """The unpadded length of every feature, in the reference's order (article, paragraph, question, window)."""
    for article in dev["data"]:
        for paragraph in article["paragraphs"]:
            doc = sum(token_count(word, vocab) for word in _context_words(paragraph["context"]))
            for qa in paragraph["qas"]:
                query = min(token_count(qa["question"], vocab), MAX_QUERY_LENGTH)
                window = MAX_SEQ_LENGTH - query - 3
                start = 0
                while start < doc:
                    span = min(doc - start, window)
                    yield query + span + 3
                    if start + span == doc:
                        break
                    start += min(span, DOC_STRIDE)


def percentile(lengths: list[int], q: float) -> int:
    """The nearest-rank percentile: the smallest length with at least q % of the features at or below it."""
    ordered = sorted(lengths)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def render(lengths: list[int], dev_path: Path, vocab_path: Path, provenance: str) -> str:
    counts = Counter(lengths)
    mean = statistics.fmean(lengths)
    tokens = sum(lengths)
    lines = [
        "# The unpadded lengths (sum of the input mask) of MLPerf Inference BERT's SQuAD v1.1 dev features.",
        "# Made by benchmarks/squad_lengths.py; do not edit by hand.",
        provenance.rstrip(),
        "",
        f"max_seq_length = {MAX_SEQ_LENGTH}",
        f"max_query_length = {MAX_QUERY_LENGTH}",
        f"doc_stride = {DOC_STRIDE}",
        f'dev_sha256 = "{_sha256(dev_path)}"',
        f'vocab_sha256 = "{_sha256(vocab_path)}"',
        f"features = {len(lengths)}",
        f"tokens = {tokens}",
        f"mean = {mean:.4f}",
        f"padding_share = {1 - tokens / (len(lengths) * MAX_SEQ_LENGTH):.4f}",
        f"mean_square = {statistics.fmean(n * n for n in lengths):.2f}",
        f"min = {min(lengths)}",
        f"max = {max(lengths)}",
    ]
    lines += [f"p{q} = {percentile(lengths, q)}" for q in (10, 25, 50, 75, 90, 99)]
    lines += ["", "[counts]", "# length = number of features"]
    lines += [f"{length} = {counts[length]}" for length in sorted(counts)]
    return "\n".join(lines) + "\n"


PROVENANCE = """\
# Inputs (neither is committed; their SHA-256 below):
# - dev-v1.1.json, 4,854,279 bytes, git blob e9a3f913ad1468ebe105b891334ca7b0bc0e2510 = the file MLPerf names,
#   https://github.com/rajpurkar/SQuAD-explorer/blob/eee5fdbf62f8613a7812b03419e6b29617b74fd1/dataset/dev-v1.1.json
#   (the fetched snapshot leaves files over 4 MiB out: the bytes came from the zip committed at
#   https://github.com/pulakdas1999/QnA_using_BERT/blob/48925669ea5ebb270348b817d7463b809a381bb9/dev-v1.1.json.zip,
#   whose content has that same git blob id).
# - vocab.txt: Google's uncased WordPiece vocabulary (30,522 entries, 231,508 bytes, md5
#   64800d5d8528ce344256daf115d4965e), shared by BERT-Base and BERT-Large uncased and used by MLPerf's
#   bert_tf_v1_1_large_fp32_384_v2 model. Taken from
#   https://github.com/yangpuhai/STN4DST/blob/8efa3e2bdae75aa38835894cea540b7180009fd9/bert-base-uncased/vocab.txt
#   with its lines 2-4 set back to [unused0] [unused1] [unused2] (that repository renamed them); the other
#   30,519 lines agree with two more copies (tingxinli1/ReadOIE@f02d4958c65796c02cfca6e3e620cba812528d68 and
#   Fr4n13Z/PKGN@534bb47e6b5c9f8d7e3e069f8ef4ddbca2db1520, bert-base-uncased/vocab.txt), which renamed other
#   [unusedN] lines; an [unusedN] entry cannot match text (the basic tokenizer splits off '[' and ']').
# Method: MLPerf Inference's reference, language/bert/squad_QSL.py (max_seq_length 384, max_query_length 64,
# doc_stride 128) + create_squad_data.py (convert_examples_to_features, is_training=False),
# https://github.com/mlcommons/inference/blob/2659c1b16cb113b314c98a7d3f074c075a39cd78/language/bert/create_squad_data.py;
# the tokenizer written anew from BERT's tokenization.py algorithm (benchmarks/squad_lengths.py docstring)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dev", type=Path, help="SQuAD v1.1 dev-v1.1.json")
    parser.add_argument("vocab", type=Path, help="BERT uncased vocab.txt")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    vocab = frozenset(args.vocab.read_text(encoding="utf-8").splitlines())
    dev = json.loads(args.dev.read_text(encoding="utf-8"))
    lengths = list(feature_lengths(dev, vocab))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(lengths, args.dev, args.vocab, PROVENANCE), encoding="utf-8")
    print(f"{len(lengths)} features, mean {statistics.fmean(lengths):.2f} tokens → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
