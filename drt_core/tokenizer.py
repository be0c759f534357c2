"""Our byte-level BPE tokenizer (docs/design.md: any text tokenizes; nothing is downloaded).

* Byte-level BPE trained with `tokenizers` on the training split of the corpora (docs/tokenizer.md
  records the sample, the vocabulary-size measurement and the choice).
* No normaliser, no prefix space (`add_prefix_space=False`), a byte-level pre-tokenizer (GPT-2
  regex) and a byte-level decoder: every Unicode string (NUL, CJK, emoji, accents, lone combining
  marks, runs of whitespace, ...) round-trips exactly through encode -> decode.
* Special tokens with FIXED ids: ``<|pad|>`` = 0, ``<|endoftext|>`` = 1, ``<|lmk|>`` = 2 (the
  landmark, inserted by the model itself), then ``<|reserved_0|>`` .. ``<|reserved_4|>`` = 3..7.
* Document text is encoded with special-token matching OFF (``encode_special_tokens=True`` in
  `tokenizers` terms): a document that literally contains "<|endoftext|>" is tokenized as ordinary
  text and never produces a control id. Control ids are only ever inserted by code.

Artefacts live in ``checkpoints/drt-tiny/`` (tokenizer.json, tokenizer_config.json,
special_tokens_map.json), so ``PreTrainedTokenizerFast.from_pretrained("checkpoints/drt-tiny")``
works offline.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATH = ROOT / "checkpoints" / "drt-tiny"

PAD_TOKEN = "<|pad|>"
EOT_TOKEN = "<|endoftext|>"
LMK_TOKEN = "<|lmk|>"
N_RESERVED = 5
RESERVED_TOKENS = [f"<|reserved_{i}|>" for i in range(N_RESERVED)]
SPECIAL_TOKENS = [PAD_TOKEN, EOT_TOKEN, LMK_TOKEN, *RESERVED_TOKENS]

PAD_ID = 0
EOT_ID = 1
LMK_ID = 2
N_SPECIAL = len(SPECIAL_TOKENS)  # 8: ids 0..7

DEFAULT_VOCAB_SIZE = 8192
_SAFE_CUT = re.compile(r"(?<=\S)\n(?=\S)")

__all__ = [
    "PAD_ID",
    "EOT_ID",
    "LMK_ID",
    "PAD_TOKEN",
    "EOT_TOKEN",
    "LMK_TOKEN",
    "SPECIAL_TOKENS",
    "DEFAULT_PATH",
    "DEFAULT_VOCAB_SIZE",
    "load_tokenizer",
    "encode",
    "encode_with_offsets",
    "decode_pieces",
    "backend",
    "iter_pieces",
    "encode_batch",
    "decode",
    "train_tokenizer",
    "truncate_vocab",
    "save_tokenizer",
    "bytes_per_token",
]


# --------------------------------------------------------------------------------------------
# building / training
# --------------------------------------------------------------------------------------------


def _empty_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    # trim_offsets=False: offsets cover the whitespace a token carries, so tokens tile the text
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    out_dir: str | os.PathLike | None = None,
    min_frequency: int = 2,
    show_progress: bool = False,
):
    """Train the byte-level BPE on an iterator of texts; return a `tokenizers.Tokenizer`.

    The first ids are the special tokens (fixed ids, see module docstring), then the 256 byte
    symbols, then the merges. If `out_dir` is given the HF artefacts are written there too.
    """
    from tokenizers import pre_tokenizers, trainers

    if vocab_size < N_SPECIAL + 256 + 1:
        raise ValueError(f"vocab_size must be > {N_SPECIAL + 256}, got {vocab_size}")
    tok = _empty_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=show_progress,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    _check_special_ids(tok)
    if out_dir is not None:
        save_tokenizer(tok, out_dir)
    return tok


def truncate_vocab(tok, vocab_size: int):
    """The same BPE with only its first `vocab_size` ids (BPE training is greedy, so this equals
    training with the smaller vocabulary: the merges are a prefix). Used by the size measurement."""
    from tokenizers import Tokenizer

    spec = json.loads(tok.to_str())
    model = spec["model"]
    vocab = {t: i for t, i in model["vocab"].items() if i < vocab_size}
    merges = model["merges"][: max(0, vocab_size - (N_SPECIAL + 256))]
    model["vocab"] = vocab
    model["merges"] = merges
    return Tokenizer.from_str(json.dumps(spec))


def _check_special_ids(tok) -> None:
    for i, t in enumerate(SPECIAL_TOKENS):
        got = tok.token_to_id(t)
        if got != i:
            raise RuntimeError(f"special token {t!r} has id {got}, expected {i}")


def save_tokenizer(tok, out_dir: str | os.PathLike) -> Path:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json into `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _check_special_ids(tok)
    tok.save(str(out / "tokenizer.json"))
    added = {
        str(i): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i, t in enumerate(SPECIAL_TOKENS)
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_prefix_space": False,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "model_max_length": 1_000_000_000,
        "padding_side": "right",
        "pad_token": PAD_TOKEN,
        "eos_token": EOT_TOKEN,
        "bos_token": EOT_TOKEN,
        "unk_token": None,
        "additional_special_tokens": [LMK_TOKEN, *RESERVED_TOKENS],
        "added_tokens_decoder": added,
        "extra_special_tokens": {"lmk_token": LMK_TOKEN},
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    smap = {
        "pad_token": PAD_TOKEN,
        "eos_token": EOT_TOKEN,
        "bos_token": EOT_TOKEN,
        "additional_special_tokens": [LMK_TOKEN, *RESERVED_TOKENS],
    }
    (out / "special_tokens_map.json").write_text(json.dumps(smap, indent=2) + "\n")
    return out


# --------------------------------------------------------------------------------------------
# loading / encoding
# --------------------------------------------------------------------------------------------


def _resolve(path: str | os.PathLike | None) -> Path:
    p = Path(path) if path is not None else DEFAULT_PATH
    if p.is_file():
        p = p.parent
    if not (p / "tokenizer.json").exists():
        from .errors import ModelNotFound

        raise ModelNotFound(f"no tokenizer.json in {p}")
    return p.resolve()


def load_tokenizer(path: str | os.PathLike | None = None):
    """The HF fast tokenizer (`PreTrainedTokenizerFast`) from `path` (default checkpoints/drt-tiny).

    Note: HF `tok(text)` / `tok.encode(text)` match special-token strings in the text; use
    `encode_with_offsets` / `encode_batch` for document text (special matching off).
    """
    from transformers import PreTrainedTokenizerFast

    p = _resolve(path)
    tok = PreTrainedTokenizerFast.from_pretrained(str(p), local_files_only=True)
    if tok.pad_token_id != PAD_ID or tok.eos_token_id != EOT_ID or tok.convert_tokens_to_ids(LMK_TOKEN) != LMK_ID:
        raise RuntimeError(f"tokenizer at {p} does not have the fixed special ids")
    return tok


class EngineTokenizer:
    """The checkpoint's tokenizer as the engine uses it, without importing transformers: the calls
    of `PreTrainedTokenizerFast` the tree makes (encode, decode, batch_decode, the special ids,
    backend_tokenizer), with its results for our tokenizer.json (special-token strings matched in
    `encode`, as HF does; no clean-up of spaces in `decode`, as tokenizer_config.json says). The
    same ids and texts as load_tokenizer's (tests/drt_core/test_runtime.py)."""

    def __init__(self, path: str | os.PathLike | None = None):
        from tokenizers import Tokenizer

        p = _resolve(path)
        self.backend_tokenizer = Tokenizer.from_file(str(p / "tokenizer.json"))
        self.backend_tokenizer.no_truncation()
        self.backend_tokenizer.no_padding()
        _check_special_ids(self.backend_tokenizer)
        self.pad_token_id, self.eos_token_id = PAD_ID, EOT_ID

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def batch_decode(self, seqs, skip_special_tokens: bool = False) -> list[str]:
        return self.backend_tokenizer.decode_batch([list(s) for s in seqs], skip_special_tokens=skip_special_tokens)

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)


@lru_cache(maxsize=8)
def _backend_cached(path: str):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
    _check_special_ids(tok)
    # tokenizer.json may carry truncation/padding settings that from_file restores: a document
    # would be silently cut (docs/reliability.md §3); the backend never truncates nor pads
    tok.no_truncation()
    tok.no_padding()
    tok.encode_special_tokens = True  # document text never yields control ids
    return tok


def backend(path: str | os.PathLike | None = None):
    """The raw `tokenizers.Tokenizer` (special-token matching off), cached per path."""
    return _backend_cached(str(_resolve(path)))


def _sane_offsets(offsets: Sequence[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """Make offsets monotone and inside [0, n]: tokens that split a multi-byte character share it."""
    out: list[tuple[int, int]] = []
    prev_start = prev_end = 0
    for s, e in offsets:
        s = min(max(int(s), prev_start), n)
        e = min(max(int(e), s, prev_end), n)
        out.append((s, e))
        prev_start, prev_end = s, e
    return out


def encode_with_offsets(text: str, path: str | os.PathLike | None = None) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids and, per token, the (start, end) character span in the Python string `text`.

    Spans are monotone (start and end never decrease), lie inside [0, len(text)] and together cover
    the text. A byte-level token that holds only part of a multi-byte character is given the whole
    character's span, so two neighbouring tokens may share a span.
    """
    enc = backend(path).encode(text, add_special_tokens=False)
    return list(enc.ids), _sane_offsets(enc.offsets, len(text))


def encode(text: str, path: str | os.PathLike | None = None) -> list[int]:
    """Token ids of document text (no special ids ever; nothing added)."""
    return list(backend(path).encode(text, add_special_tokens=False).ids)


def encode_batch(texts: Sequence[str], path: str | os.PathLike | None = None) -> list[list[int]]:
    """Ids of many texts at once (parallel in Rust; RAYON_NUM_THREADS caps the threads)."""
    encs = backend(path).encode_batch_fast(list(texts), add_special_tokens=False)
    return [list(e.ids) for e in encs]


def decode(ids: Sequence[int], path: str | os.PathLike | None = None, skip_special_tokens: bool = False) -> str:
    """Text of ids: exact inverse of `encode` for any Unicode string."""
    return backend(path).decode(list(map(int, ids)), skip_special_tokens=skip_special_tokens)


def decode_pieces(ids: Sequence[int], path: str | os.PathLike | None = None) -> list[str]:
    """The text of each id on its own (special tokens included), in one batched call: a 64K-token
    window in ~0.2 s instead of ~2.4 s for a Python loop over `decode`."""
    return backend(path).decode_batch([[int(i)] for i in ids], skip_special_tokens=False)


def bytes_per_token(tok, texts: Iterable[str], batch: int = 64) -> tuple[float, int, int]:
    """(UTF-8 bytes / token, bytes, tokens) of `texts` under a `tokenizers.Tokenizer`."""
    nbytes = ntok = 0
    buf: list[str] = []

    def flush():
        nonlocal ntok
        for e in tok.encode_batch_fast(buf, add_special_tokens=False):
            ntok += len(e.ids)
        buf.clear()

    for t in texts:
        nbytes += len(t.encode("utf-8"))
        buf.append(t)
        if len(buf) >= batch:
            flush()
    if buf:
        flush()
    return (nbytes / max(ntok, 1), nbytes, ntok)


def iter_pieces(text: str, piece_chars: int = 1 << 16) -> Iterator[str]:
    """Split a long text into pieces of about `piece_chars` characters, for batch encoding.

    Cuts are made just after a lone newline (non-space on both sides, "X\nY"): the byte-level
    pre-tokenizer (GPT-2 regex) makes such a newline a pre-token of its own and starts a new one at
    "Y", so encoding the pieces and concatenating gives exactly the ids of the whole text.
    """
    i, n = 0, len(text)
    while i < n:
        j = min(n, i + piece_chars)
        if j < n:
            k = text.rfind("\n", i, j)
            while k > i and (k + 1 >= n or text[k + 1].isspace() or text[k - 1].isspace()):
                k = text.rfind("\n", i, k)
            if k > i:
                j = k + 1
            else:  # no safe cut in the window: extend to the next safe one
                m = _SAFE_CUT.search(text, j)
                j = m.end() if m else n
        yield text[i:j]
        i = j
