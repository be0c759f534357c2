"""Markdown for the UI: text quoted verbatim, pages, quotes, evidence lists and answers.

Pure functions of the results `qa` returns (no library, no model): the tabs call them and
`tests/ui/test_handlers.py` checks their wording. Everything shown verbatim goes through
`md_escape` (HTML-escaped, Markdown and $math$ characters quoted).
"""

from __future__ import annotations

import html
import re

from ingest.boilerplate import matter_label
from qa.ask import not_found, quote_origin
from qa.evidence import also_relevant, snippet
from qa.statement_qa import uses_sentence
from qa.views import spoiler_note

from . import plots

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>$-])")


def md_escape(text: str) -> str:
    """Text shown verbatim inside Markdown: HTML-escaped, Markdown (and $math$) characters quoted."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(str(text), quote=False))


def cut_title(title: str, limit: int = 60) -> str:
    """A part's title for a one-line list or menu, cut at a word with "…" (a cut at 40 characters showed
    "Next-Neighbor Queries via Run-of-0's Sam"; chapters numbered afresh carry their part's label, "PART
    THE SECOND, CHAPTER VI: YALBURY WOOD AND THE KEEPER'S HOUSE")."""
    return title if len(title) <= limit else title[:limit].rsplit(" ", 1)[0] + " …"


def weight_text(w: float) -> str:
    """A fusion weight to three places; a positive one that rounds to 0 reads "< 0.001", not "0.000"
    (a chunk the model did retrieve, with little weight beside the one it leaned on)."""
    w = float(w)
    return "< 0.001" if 0 < w < 0.0005 else f"{w:.3f}"


def pages_text(first: int, last: int, labels: dict[int, str] | None = None) -> str:
    a, b = plots.page_label(first, labels), plots.page_label(last, labels)
    return f"p. {a}" if first == last else f"pp. {a}–{b}"


def pages_runs(pages, labels: dict[int, str] | None = None, limit: int = 6) -> str:
    """Pages as runs ("pp. 4–5, 8–9", "p. 23, pp. 141–142, 205"), not one span from the first to the
    last (which read as 'pp. 23–205' for three passages far apart); past `limit` runs, "…"."""
    ps = sorted({int(x) for x in pages})
    if not ps:
        return ""
    runs, start = [], ps[0]
    for a, b in zip(ps, ps[1:] + [None]):
        if b != a + 1:
            runs.append((start, a))
            start = b
    label = lambda n: plots.page_label(n, labels)  # noqa: E731
    shown = [label(a) if a == b else f"{label(a)}–{label(b)}" for a, b in runs[:limit]]
    more = ", …" if len(runs) > limit else ""
    return ("p. " if len(ps) == 1 else "pp. ") + ", ".join(shown) + more


def quote(text: str, limit: int | None = None) -> str:
    """A chunk's text as a quote block, cut at word boundaries (qa.evidence.snippet)."""
    return "> " + md_escape(snippet(text, limit))


def quote_marked(text: str, sentence: str | None) -> str:
    """A quote block with `sentence` in bold: the reader's short answer, or the sentence that answers."""
    t = " ".join(str(text).split())
    i = t.find(sentence) if sentence else -1
    if i < 0:
        return quote(t)
    return ("> " + md_escape(t[:i]) + "**" + md_escape(sentence) + "**" + md_escape(t[i + len(sentence):])).rstrip()


def matter_text(e: dict, sep: str = " ·") -> str:
    """" · *licence page*" (contents page, index page; after `sep`) for a passage on such a page, else ""."""
    label = matter_label(e)
    return f"{sep} *{label}*" if label else ""


def effect_text(e: dict) -> str:
    """" · causal effect +1.234" for an evidence row that has one (ask's rows), else ""."""
    if "causal_effect" not in e:
        return ""
    v = e["causal_effect"]
    return " · causal effect n/a" if v is None else f" · causal effect {float(v):+.3f}"


EFFECT_NOTE = ("causal effect: how much less likely (in nats) the model finds the answer shown above (its short "
               "answer, else the quoted sentence) when that chunk alone is hidden from retrieval; + means the "
               "chunk supports that answer, − that the answer is likelier without it, 0 that the model never used it")


def evidence_md(evidence: list[dict], labels: dict[int, str] | None = None, *, title: str = "Evidence") -> str:
    """The evidence list (heaviest first): chunk, pages, fusion weight, causal effect (ask), the passage."""
    if not evidence:
        return f"**{title}:** none (no document chunk was retrieved)."
    note = f" ({EFFECT_NOTE})" if any("causal_effect" in e for e in evidence) else ""
    out = [f"**{title}** — the document chunks the model retrieved, by fusion weight "
           f"(normalised over the answer){note}:"]
    for e in evidence:
        pages = e.get("pages") or [0]
        out.append(
            f"**{pages_text(pages[0], pages[-1], labels)}**{matter_text(e)} · chunk {int(e['chunk'])} · "
            f"weight {weight_text(e['weight'])}{effect_text(e)}\n\n{quote(e['text'], 600)}"
        )
    return "\n\n".join(out)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def answer_md(result: dict, labels: dict[int, str] | None = None) -> str:
    """The chat's answer: a quote from the document with its page, or an abstention; the model's
    short answer under the quote when it copied one verbatim from it."""
    text = str(result.get("answer") or "").strip()
    passages = result.get("passages") or []
    if result.get("abstained"):
        heading, reason = not_found(result)  # asked before p. N: of the pages read, not the document
        if passages:  # the cross-encoder's closest passages, said to be what they are
            return (f"**{md_escape(heading)}** {md_escape(reason)}\n\n"
                    "The closest passages (closest, not an answer):\n\n" + passages_md(passages, labels))
        return (f"**{md_escape(heading)}** {md_escape(reason)} The passages the "
                "model scored highest are listed under Evidence.")
    note = spoiler_note(result)
    shown = _answer_body(result, text, passages, labels)
    statement = result.get("statement") or {}
    if statement.get("uses") is not None:  # "What does Theorem 8 use?": what it uses, then the statement
        shown = f"{md_escape(uses_sentence(statement))}\n\n{shown}"
    return f"{shown}\n\n*{note}*" if note else shown  # our own words: nothing to escape


def _answer_body(result: dict, text: str, passages: list[dict], labels: dict[int, str] | None) -> str:
    q = result.get("quote")
    if q and passages:  # evidence first: the best passage, its answer sentence in bold; then the next two
        pages = q.get("pages") or [0]
        origin = quote_origin(q)
        where = f" ({md_escape(origin)})" if origin else ""
        out = (f"{quote_marked(q['text'], q.get('short') or q.get('sentence'))}\n\n— "
               f"{pages_text(pages[0], pages[-1], labels)}{matter_text(q, ',')}, chunk {int(q['chunk'])}{where}")
        if result.get("short_answer"):
            out = f"**{md_escape(result['short_answer'])}**\n\n" + out
        rest = also_relevant(passages, q)
        if rest:
            out += "\n\nAlso relevant:\n\n" + passages_md(rest, labels)
        return out
    if q:
        pages = q.get("pages") or [0]
        short = q.get("short")  # the trained reader's short answer, in bold inside the quote
        if q.get("introduces"):
            where = f"the passage that introduces {md_escape(q['introduces'])}, read first"
        elif q.get("retrieved", True):
            where = "the passage is shown first under Evidence"
        else:
            where = (f"the model scored this chunk {_ordinal(int(q.get('rank') or 0))}, after the chunks it retrieved; "
                     "the passage is shown first under Evidence")
        out = (f"{quote_marked(q['text'], short or q.get('sentence'))}\n\n— {pages_text(pages[0], pages[-1], labels)}"
               f"{matter_text(q, ',')}, chunk {int(q['chunk'])} ({where})")
        if result.get("short_answer") and not short:  # the model's own, copied from the quote
            out = f"**{md_escape(result['short_answer'])}**\n\n" + out
        return out
    return md_escape(text) if text else "*(the model wrote nothing; see what it retrieved below)*"


def passages_md(passages: list[dict], labels: dict[int, str] | None = None) -> str:
    """Shown passages as a list: pages, chunk (the page view's chunk field shows it), the reader's
    probability, the text."""
    items = []
    for p in passages:
        pages = p.get("pages") or [0]
        items.append(f"- {pages_text(pages[0], pages[-1], labels)} · chunk {int(p['chunk'])} · "
                     f"{100 * float(p.get('p') or 0):.0f}%: {md_escape(snippet(p.get('text', ''), 240))}")
    return "\n".join(items)
