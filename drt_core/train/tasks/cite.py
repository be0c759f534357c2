"""The citation task (`train --task cite`): in Stacks Project LaTeX, a chunk that cites a statement
(\\ref{X}) should retrieve the chunk stating it (\\label{X}); `rename_labels` renames the labels of
a window (`--cite-rename`) so that names, not topics, must be matched."""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from ...prompts import CHUNK_TOKENS
from ...tokenizer import EOT_ID, PAD_ID
from .common import rng_of


REF_RE = re.compile(r"\\ref\{([^}]+)\}")
# \cref and its kin cite as \ref does (papers; restyle_labels writes them); one name each here
ANY_REF_RE = re.compile(r"\\(?:ref|cref|Cref|autoref)\{([^},]+)\}")
LABEL_RE = re.compile(r"\\label\{([^}]+)\}")
STATEMENT_KINDS = ("lemma", "proposition", "theorem", "definition", "remark", "example", "exercise",
                   "situation", "equation")


def chunk_of_char(starts: Sequence[int], char_pos: int, chunk_tokens: int = CHUNK_TOKENS) -> int:
    """The chunk holding character `char_pos`, where `starts[i]` is the character offset at which
    token i begins."""
    import bisect

    return max(0, bisect.bisect_right(starts, char_pos) - 1) // chunk_tokens


def citation_pairs(text: str, starts: Sequence[int], chunk_tokens: int = CHUNK_TOKENS,
                   statement_labels: set[str] | None = None) -> list[tuple[int, int, str]]:
    """(citing chunk, stating chunk, label) for every \\ref{X} (or \\cref{X}, ...) of a statement whose
    \\label{X} is in an EARLIER chunk. `starts[i]` is the character offset where token i begins in
    `text`. A statement's label: one whose prefix is a statement kind (Stacks' "lemma-..."), or one
    of `statement_labels` where given (restyle_labels' names)."""
    labels = {}
    for m in LABEL_RE.finditer(text):
        name = m.group(1)
        ok = name in statement_labels if statement_labels is not None else name.split("-", 1)[0] in STATEMENT_KINDS
        if ok and name not in labels:
            labels[name] = chunk_of_char(starts, m.start(), chunk_tokens)
    pairs = set()
    for m in ANY_REF_RE.finditer(text):
        name = m.group(1)
        if name in labels:
            c, t = chunk_of_char(starts, m.start(), chunk_tokens), labels[name]
            if t < c:
                pairs.add((c, t, name))
    return sorted(pairs)


def citation_targets(ids: Sequence[int], tokenizer_path=None,
                     chunk_tokens: int = CHUNK_TOKENS) -> list[tuple[int, list[int]]]:
    """Retrieval targets of a window of LaTeX tokens: (row, [stating chunks]) for each citing chunk
    (row = the citing chunk: its landmark has read the \\ref). At most 2 targets per row."""
    from ...tokenizer import decode_pieces

    pieces = decode_pieces(ids, tokenizer_path)
    starts, pos = [], 0
    for p in pieces:
        starts.append(pos)
        pos += len(p)
    by_row: dict[int, list[int]] = {}
    for c, t, _ in citation_pairs("".join(pieces), starts, chunk_tokens):
        if t not in by_row.setdefault(c, []) and len(by_row[c]) < 2:
            by_row[c].append(t)
    return sorted(by_row.items())


def statement_label_words(text: str) -> list[str]:
    """The words of the statements' label names in `text` ("lemma-flat-base-change" -> "flat",
    "base", "change"), sorted and without repeats: the vocabulary rename_labels draws from."""
    words = set()
    for m in LABEL_RE.finditer(text):
        kind, _, rest = m.group(1).partition("-")
        if kind in STATEMENT_KINDS:
            words.update(w for w in rest.split("-") if w.isalpha())
    return sorted(words)


def rename_labels(ids: Sequence[int], rng, words: Sequence[str], tokenizer_path=None) -> np.ndarray:
    """A citation row whose statements' label names are replaced, consistently in each \\label and
    \\ref of the window, by random names of the same kind and word count from `words` (`train
    --cite-rename`, our extension). A scorer can then find the cited chunk only by matching the
    names it reads in the \\ref with those of the \\label, not by the topic both passages share. The
    window is split at EOT ids (documents), each part decoded, renamed and encoded again; the
    result is cut or padded (PAD_ID) to len(ids)."""
    from ...tokenizer import decode, encode

    rng = rng_of(rng)
    ids = np.asarray(ids, dtype=np.int64)
    n, out, words = len(ids), [], list(words)
    cuts = [-1] + np.flatnonzero(ids == EOT_ID).tolist() + [n]
    for a, b in zip(cuts, cuts[1:]):
        text = decode(ids[a + 1:b].tolist(), tokenizer_path)
        names = {m.group(1) for r in (LABEL_RE, REF_RE) for m in r.finditer(text)
                 if m.group(1).partition("-")[0] in STATEMENT_KINDS}
        new, taken = {}, set(names)  # no new name is an old one (it would join two statements)
        for name in sorted(names):
            kind, _, rest = name.partition("-")
            size = min(4, max(1, len(rest.split("-"))))
            while True:
                cand = kind + "-" + "-".join(rng.sample(words, min(size, len(words))))
                if cand not in taken:
                    break
            new[name] = cand
            taken.add(cand)
        text = re.sub(r"\\(label|ref)\{([^}]+)\}",
                      lambda m: "\\" + m.group(1) + "{" + new.get(m.group(2), m.group(2)) + "}", text)
        out += encode(text, tokenizer_path)
        if b < n:
            out.append(EOT_ID)
    out = out[:n] + [PAD_ID] * max(0, n - len(out))
    return np.asarray(out, dtype=np.int64)


LABEL_STYLES = ("stacks", "prefix", "suffix", "camel", "short", "numbered")
_ABBREV = {"lemma": "lem", "proposition": "prop", "theorem": "thm", "definition": "def", "remark": "rem",
           "example": "ex", "exercise": "exer", "situation": "sit", "equation": "eq", "section": "sec",
           "subsection": "subsec"}
_CITED_AS = re.compile(r"\b(Lemma|Lemmas|Proposition|Propositions|Theorem|Theorems|Definition|Definitions|"
                       r"Remark|Remarks|Example|Examples|Exercise|Exercises|Situation|Equation)(~| )\\ref\{")


def restyle_labels(text: str, style: str, cref: bool = False) -> tuple[str, dict[str, str]]:
    """`text` (Stacks LaTeX) with every label renamed, consistently in each \\label and \\ref, in the
    style of papers' labels (our extension, `word_gates --label-styles`): "lemma-flat-base-change"
    becomes "lem:flat-base-change" (prefix), "flat-base-change:lem" (suffix), "lem:FlatBaseChange"
    (camel), "flatbase" (short: the first two words run together), or "lem:12" (numbered: the kind's
    running number); "stacks" keeps them. With `cref`, "Lemma \\ref{" is written "\\cref{". Returns
    the text and each label's new name ({old: new}; `statement_labels` picks citation_pairs' ones)."""
    if style not in LABEL_STYLES:
        raise ValueError(f"unknown label style {style!r}; one of {', '.join(LABEL_STYLES)}")
    new, taken, counts = {}, set(), {}
    for m in LABEL_RE.finditer(text):
        name = m.group(1)
        if name in new:
            continue
        kind, _, rest = name.partition("-")
        words = [w for w in rest.split("-") if w] or [kind]
        short = _ABBREV.get(kind, kind[:3])
        counts[kind] = counts.get(kind, 0) + 1
        cand = {"stacks": name, "prefix": f"{short}:{'-'.join(words)}", "suffix": f"{'-'.join(words)}:{short}",
                "camel": f"{short}:{''.join(w[:1].upper() + w[1:] for w in words)}",
                "short": "".join(words[:2]), "numbered": f"{short}:{counts[kind]}"}[style]
        base, i = cand, 1
        while cand in taken:  # two labels never share a name
            i += 1
            cand = f"{base}{i}"
        new[name] = cand
        taken.add(cand)
    if cref:
        text = _CITED_AS.sub(lambda m: "\\cref{", text)
    text = re.sub(r"\\(label|ref|cref)\{([^}]+)\}",
                  lambda m: "\\" + m.group(1) + "{" + new.get(m.group(2), m.group(2)) + "}", text)
    return text, new


def statement_labels(renamed: dict[str, str], kinds: Sequence[str] = STATEMENT_KINDS) -> set[str]:
    """The new names (restyle_labels' {old: new}) of the labels whose old Stacks name is a statement's
    of one of `kinds` ("lemma-...")."""
    return {new for old, new in renamed.items() if old.split("-", 1)[0] in kinds}
