"""The ONE prompt format, shared by fine-tuning (drt_core.train.tasks) and the app (ask / summarize).

One function lays out questions for fine-tuning and for the app alike, so the shipped model is
asked in the form it was taught (docs/design.md, "Rules we keep"). Everything that turns a question into
tokens goes through this module; nothing else formats prompts.

Text format
-----------
::

    <context ...>                       the document (or the NIAH haystack with needles)
    <|pad|> x n                         0..124 pad tokens, see layout_prompt
    "\\n\\nQuestion: {question}\\nAnswer:" qa_suffix(question)
    " {answer}\\n"                       answer_text(answer) + STOP_TEXT (what the model generates)

and for summaries ``summary_suffix() = "\\n\\nSummary:"`` followed by ``" {summary}\\n"``.

Geometry (docs/spec.md §5.3)
---------------------------
The model closes every 63 real tokens with a landmark (spec §1.2): chunk c holds the real positions
[63c, 63c + 63) and its landmark comes after position 63c + 62. The landmark of chunk c chooses
the chunks that the tokens of chunk c + 1 retrieve from.

`layout_prompt` pads the context to the end of its last chunk, so that no chunk holds both context
and question, and left-pads the prompt so that its LAST token (the ":" of "Answer:") lands on the
FIRST slot of a chunk, i.e. at a position ``p`` (counted from the start of the whole sequence,
context + pads + prompt) with ``p % 63 == 0``. The chunk that the question's landmark closes then
holds pads and the question only: its query (the query encoder's, and with config `lexical` the
words it matches) reads the question and not the document's last words, which in a book PDF are
its licence pages (before this layout every question about a Gutenberg PDF retrieved them). Then

* the landmark just before ``p`` (closing chunk p/63 - 1) has seen the whole question except the
  final ":", so the retrieval that serves the answer chunk is informed by the question;
* the answer tokens ``p + 1, p + 2, ...`` are in the same chunk as ``p`` and use that retrieval;
* equivalently, context + pads + prompt has length ``≡ 1 (mod 63)`` (the spec's summarisation
  layout: "left-padded so that its length ≡ 1 (mod chunk)").

This is the reference's NIAH layout (" is" at index L - 63, the first slot of the last chunk), with
our text format. Pad tokens (id 0) are ordinary inputs for the model (embedded as the pad row) and
carry no loss (label -100).
"""

from __future__ import annotations

from typing import Callable, Sequence

from .tokenizer import PAD_ID

CHUNK_TOKENS = 63  # real tokens per chunk (spec §1.1 S)
STOP_TEXT = "\n"  # an answer ends with a newline (or <|endoftext|>); generation stops at either

QUESTION_PREFIX = "\n\nQuestion: "
ANSWER_PREFIX = "\nAnswer:"
SUMMARY_SUFFIX = "\n\nSummary:"

# What every stream begins with (config stream_preamble holds its token ids; the model runs it
# before a stream's first token, in training, the store and every measurement alike). Neutral
# text, long enough to fill the key encoder's context of chunk 0 (key_context = 16) and to give
# the first tokens of a document some text to attend to, as every later token has (measured:
# 81 tokens put depth-0 needles' dense scores beside other needles'; 12 tokens did not).
STREAM_PREAMBLE = (
    "This is the beginning of a document. What follows is its text, as it was written, from the first word "
    "to the last: a book, a paper, a chapter of notes, or a set of definitions and theorems. Read it in order. "
    "Every part of it may matter later: names, places, numbers, dates, and what is said of them.\n\n"
)


def stream_preamble_ids(encode: Callable[[str], list[int]] | None = None) -> list[int]:
    """STREAM_PREAMBLE's token ids (`train --set stream_preamble=default` writes them)."""
    return list((encode or _default_encode())(STREAM_PREAMBLE))


def qa_suffix(question: str) -> str:
    """Text appended after the context to ask `question`: "\\n\\nQuestion: {q}\\nAnswer:".

    The question is stripped of surrounding whitespace and internal newlines are turned into
    spaces, so the prompt always ends with exactly "\\nAnswer:".
    """
    q = " ".join(str(question).split())
    if not q:
        raise ValueError("empty question")
    return f"{QUESTION_PREFIX}{q}{ANSWER_PREFIX}"


def summary_suffix() -> str:
    """Text appended after the context to ask for a summary: "\\n\\nSummary:"."""
    return SUMMARY_SUFFIX


def answer_text(answer: str) -> str:
    """How an answer follows the prompt: one space, then the answer (" 48213")."""
    return " " + str(answer).strip()


def n_layout_pads(n_context_tokens: int, n_prompt_tokens: int, chunk_tokens: int = CHUNK_TOKENS) -> int:
    """Pads (0..2*chunk_tokens-2) to put between context and prompt: first to the end of the
    context's last chunk, so the prompt starts a chunk of its own, then before the prompt so that
    its last token sits at a position p with p % chunk_tokens == 0."""
    if n_prompt_tokens < 1:
        raise ValueError("the prompt needs at least one token")
    if n_context_tokens < 0:
        raise ValueError("negative context length")
    start = n_context_tokens + (-n_context_tokens) % chunk_tokens
    return start - n_context_tokens + (-(start + n_prompt_tokens - 1)) % chunk_tokens


def layout_prompt(
    n_context_tokens: int,
    prompt_ids: Sequence[int],
    pad_id: int = PAD_ID,
    chunk_tokens: int = CHUNK_TOKENS,
) -> list[int]:
    """``[pad_id] * n + prompt_ids`` with n in [0, chunk_tokens) chosen so that, appended after
    `n_context_tokens` context tokens, the LAST prompt token is at position p, p % chunk_tokens == 0
    (the first slot of a chunk; see the module docstring). The answer starts at p + 1."""
    ids = [int(i) for i in prompt_ids]
    return [int(pad_id)] * n_layout_pads(n_context_tokens, len(ids), chunk_tokens) + ids


def _default_encode() -> Callable[[str], list[int]]:
    from .tokenizer import encode

    return encode


def qa_prompt_ids(
    n_context_tokens: int,
    question: str,
    encode: Callable[[str], list[int]] | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
) -> list[int]:
    """Ids to append after a context of `n_context_tokens` tokens to ask `question` (pads included).
    The app appends these, then generates; train/tasks/needles.py builds training examples the same way."""
    enc = encode or _default_encode()
    return layout_prompt(n_context_tokens, enc(qa_suffix(question)), chunk_tokens=chunk_tokens)


def summary_prompt_ids(
    n_context_tokens: int,
    encode: Callable[[str], list[int]] | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
) -> list[int]:
    """Ids to append after a context to ask for its summary (pads included)."""
    enc = encode or _default_encode()
    return layout_prompt(n_context_tokens, enc(summary_suffix()), chunk_tokens=chunk_tokens)


def clean_answer(generated: str) -> str:
    """The answer part of generated text: up to the first newline, stripped."""
    return generated.split(STOP_TEXT, 1)[0].strip()
