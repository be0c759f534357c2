"""Text -> token ids with character offsets, and the 63-token chunks the model retrieves.

The model inserts a landmark after every 63 real tokens (docs/spec.md §1.2), so document chunk c is
tokens [63c, 63c + 63) of the document's ids; the last chunk may be shorter. Each chunk knows its
token span, its character span in ParsedDocument.text, the first and last page it touches, and its
text: the evidence shown for an answer is exactly what the model retrieved.

Encoding: `drt_core.tokenizer.encode_with_offsets` semantics (special-token matching OFF, so a
document containing "<|endoftext|>" never yields a control id; offsets monotone and inside the
text). A model's own HF tokenizer is wrapped the same way by `make_encoder`. Long texts are encoded
in pieces cut just after a newline that has a non-space character on both sides: the byte-level
pre-tokenizer (GPT-2 regex) makes such a newline a pre-token of its own whether or not the text
ends after it, so the ids equal those of encoding the whole text at once. (A newline after other
whitespace is not safe: "\n\n\n" at the end of a piece is one pre-token, but inside the text the
last newline of the run stands alone.)
"""

from __future__ import annotations

import bisect
import hashlib
import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from .errors import Cancelled, IngestError

if TYPE_CHECKING:
    from .parse import Page, ParsedDocument

CHUNK_TOKENS = 63  # real tokens per chunk (the 64th slot is the model's landmark)
PIECE_CHARS = 1 << 18  # encode in pieces of about this many characters (progress, cancel, memory)


Offsets = list[tuple[int, int]]
Encoder = Callable[[str], tuple[list[int], Offsets]]


@dataclass
class Chunk:
    index: int
    tok_start: int
    tok_end: int  # exclusive
    char_start: int
    char_end: int  # exclusive
    page_first: int  # 1-based
    page_last: int
    text: str


@dataclass
class TokenizedDocument:
    ids: list[int]
    offsets: Offsets  # per token, (start, end) in the document text
    chunks: list[Chunk]
    tokenizer_fp: str  # which tokenizer made the ids (stored with the document)


# ---------------------------------------------------------------------------------------------
# encoders
# ---------------------------------------------------------------------------------------------


def make_encoder(tokenizer=None) -> Encoder:
    """An `Encoder` for `tokenizer`: an object with `encode_with_offsets`, an HF fast tokenizer, a
    `tokenizers.Tokenizer`, or None for the project tokenizer (`drt_core.tokenizer`)."""
    if tokenizer is None:
        from drt_core.tokenizer import encode_with_offsets

        return encode_with_offsets
    if hasattr(tokenizer, "encode_with_offsets"):
        return tokenizer.encode_with_offsets
    backend = _backend(tokenizer)
    if not hasattr(backend, "to_str"):
        raise TypeError(f"cannot encode with offsets using {type(tokenizer).__name__}")
    from tokenizers import Tokenizer

    # a private copy: switching off special-token matching / truncation must not touch the
    # tokenizer the engine uses for prompts (tokenizer.json may carry a truncation block)
    bk = Tokenizer.from_str(backend.to_str())
    bk.no_truncation()
    bk.no_padding()
    if hasattr(bk, "encode_special_tokens"):
        bk.encode_special_tokens = True

    def encode(text: str) -> tuple[list[int], Offsets]:
        enc = bk.encode(text, add_special_tokens=False)
        return list(enc.ids), sane_offsets(enc.offsets, len(text))

    return encode


def tokenizer_fingerprint(tokenizer=None) -> str:
    """A short hash of the tokenizer's definition (tokenizer.json), "default" for the project one."""
    if tokenizer is None:
        try:
            from drt_core.tokenizer import backend

            return _definition_hash(backend())
        except Exception:
            return "default"
    fp = getattr(tokenizer, "fingerprint", None)
    if isinstance(fp, str):
        return fp
    backend = _backend(tokenizer)
    if hasattr(backend, "to_str"):
        return _definition_hash(backend)
    return type(tokenizer).__name__


def _definition_hash(backend) -> str:
    # what decides the ids: model, normalizer, pre-tokenizer, added tokens; not the padding or
    # truncation settings that loaders (HF) may attach to the same tokenizer
    spec = json.loads(backend.to_str())
    spec.pop("truncation", None)
    spec.pop("padding", None)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def _backend(tokenizer):
    """The `tokenizers.Tokenizer` inside an HF fast tokenizer (or the object itself)."""
    inner = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    return inner or tokenizer


def sane_offsets(offsets: Sequence[tuple[int, int]], n: int) -> Offsets:
    """Monotone offsets inside [0, n] (tokens splitting a multi-byte character share its span)."""
    out: Offsets = []
    prev_start = 0
    for s, e in offsets:
        s = min(max(int(s), prev_start), n)
        e = min(max(int(e), s), n)
        out.append((s, e))
        prev_start = s
    return out


def iter_pieces(text: str, piece_chars: int = PIECE_CHARS) -> Iterator[tuple[int, str]]:
    """(start, piece) covering `text`, cut where encoding the pieces gives the ids of the whole
    (drt_core.tokenizer.iter_pieces: just after a newline between two non-space characters)."""
    from drt_core.tokenizer import iter_pieces as tokenizer_pieces

    start = 0
    for piece in tokenizer_pieces(text, piece_chars):
        yield start, piece
        start += len(piece)


# ---------------------------------------------------------------------------------------------
# document -> ids -> chunks
# ---------------------------------------------------------------------------------------------


def encode_text(
    text: str,
    encode: Encoder,
    *,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    piece_chars: int = PIECE_CHARS,
) -> tuple[list[int], Offsets]:
    """Ids and offsets of the whole text, encoded piece by piece (progress in characters)."""
    ids: list[int] = []
    offsets: Offsets = []
    for start, piece in iter_pieces(text, piece_chars):
        if cancel is not None and cancel.is_set():
            raise Cancelled("tokenizing was cancelled")
        p_ids, p_off = encode(piece)
        if len(p_ids) != len(p_off):
            raise IngestError(f"tokenizer returned {len(p_ids)} ids but {len(p_off)} offsets")
        ids.extend(int(i) for i in p_ids)
        offsets.extend((s + start, e + start) for s, e in p_off)
        if progress is not None:
            progress(start + len(piece), len(text))
    return ids, offsets


def build_chunks(
    text: str, offsets: Offsets, pages: Sequence["Page"], chunk_tokens: int = CHUNK_TOKENS
) -> list[Chunk]:
    """Chunk c = tokens [c*chunk_tokens, (c+1)*chunk_tokens): its char span, pages and text.

    The page span counts only non-whitespace characters, so a chunk that merely starts in the
    blank separator after page 4 begins on page 5.
    """
    starts = [p.char_start for p in pages]
    numbers = [p.number for p in pages]

    def page_at(pos: int) -> int:
        i = bisect.bisect_right(starts, pos) - 1
        return numbers[max(i, 0)] if numbers else 1

    chunks: list[Chunk] = []
    n = len(offsets)
    for c, t0 in enumerate(range(0, n, chunk_tokens)):
        t1 = min(t0 + chunk_tokens, n)
        cs = offsets[t0][0]
        ce = max(offsets[t1 - 1][1], cs)
        a, b = cs, ce
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        first = page_at(a if a < b else cs)
        last = page_at(b - 1) if a < b else first
        chunks.append(Chunk(c, t0, t1, cs, ce, first, max(first, last), text[cs:ce]))
    return chunks


def tokenize_document(
    doc: "ParsedDocument",
    encode: Encoder | None = None,
    *,
    tokenizer_fp: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> TokenizedDocument:
    """Ids, offsets and chunks of a parsed document (see the module docstring)."""
    if encode is None:
        encode = make_encoder(None)
        tokenizer_fp = tokenizer_fp or tokenizer_fingerprint(None)
    ids, offsets = encode_text(doc.text, encode, progress=progress, cancel=cancel)
    if not ids:
        raise IngestError("the document's text produced no tokens")
    chunks = build_chunks(doc.text, offsets, doc.pages)
    return TokenizedDocument(ids, offsets, chunks, tokenizer_fp or "unknown")
