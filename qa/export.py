"""Export a document's conversation and its latest summary as Markdown (`drt-reader export`, the UI's
download buttons).

`export_markdown` reads only the library: each question (every one asked of the document, or those
of one conversation, the UI's "Export this conversation") with its answer as the reader quoted it
(qa.ask: the quote as a block quote, the short answer in bold inside it, its pages as printed
labels and its chunk; an abstention says so and why), the evidence the model retrieved (chunk,
pages, weight, causal effect, a snippet cut at a word boundary), then the latest summary (qa.summary:
the extractive sentences under their part titles, with pages, or the abstractive text). Document
text, titles and questions are escaped (`md_escape`), so nothing in a document can break the
layout or inject HTML. The output is deterministic: the same library gives the same bytes (the
only times in it are the answers' own stored dates). `export_file` writes it atomically to
`<directory>/<safe title>-<doc_id[:8]>.md`.
"""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
from pathlib import Path

from store.errors import StoreError
from store.library import Library

from .evidence import also_relevant, cut_words, snippet, weight_text
from ingest.boilerplate import matter_label
from ingest.parts import page_labels, pages_ref

SNIPPET_CHARS = 160
_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~$&])")  # inline Markdown and HTML, anywhere in a line
_LEAD = re.compile(r"^(\d{1,9})([.)])|^([-+=])")  # at a line's start: a list item, ordered list, underline


# ---------------------------------------------------------------------------------------------
# Markdown pieces
# ---------------------------------------------------------------------------------------------


def md_escape(text: object) -> str:
    """`text` on one line (whitespace collapsed), with every character that Markdown or HTML would
    read as markup backslash-escaped (CommonMark: any ASCII punctuation may be), and a leading
    list marker, number or underline escaped too: it reads as the same text, never as layout."""
    s = _SPECIAL.sub(r"\\\1", " ".join(str(text or "").split()))
    return _LEAD.sub(lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(1) else f"\\{m.group(3)}", s)


def page_ref(labels: dict[int, str], pages: list[int]) -> str:
    """"p. iv" / "pp. 12-14": the printed labels of the first and last page (the number without one)."""
    return pages_ref(pages, labels, md_escape) if pages else "no page"


def _chunks(chunks: list[int]) -> str:
    return f"chunk {chunks[0]}" if len(chunks) == 1 else "chunks " + ", ".join(str(c) for c in chunks)


def _matter(row: dict) -> str:
    label = matter_label(row)
    return f", {label}" if label else ""


def evidence_lines(library: Library, doc_id: str, evidence: list[dict], labels: dict[int, str]) -> list[str]:
    """One list item per evidence row: chunk, pages, weight (and causal effect), snippet."""
    cuts = cut_words(library, doc_id, evidence)
    out = []
    for e in evidence:
        effect = ""
        if e.get("causal_effect") is not None:
            effect = f", causal effect {float(e['causal_effect']):+.3f}"
        text = snippet(e.get("text", ""), SNIPPET_CHARS, *cuts.get(int(e["chunk"]), (False, False)))
        out.append(f"- chunk {e['chunk']}, {page_ref(labels, list(e.get('pages') or []))}{_matter(e)}, "
                   f"weight {weight_text(float(e.get('weight') or 0.0))}{effect}: {md_escape(text)}")
    return out


def passage_lines(passages: list[dict], labels: dict[int, str]) -> list[str]:
    """Shown passages (ask's cross-encoder path): pages, chunk, the reader's probability, the text."""
    return [f"- {page_ref(labels, list(p.get('pages') or []))}, chunk {p['chunk']}, "
            f"{100 * float(p.get('p') or 0):.0f}%: {md_escape(snippet(p.get('text', ''), SNIPPET_CHARS))}"
            for p in passages]


def quote_block(text: str, short: str | None) -> list[str]:
    """The quote as a block quote, its short answer in bold where it lies inside the quote (else
    on its own line below)."""
    text = " ".join(str(text or "").split())
    short = " ".join(str(short or "").split())
    at = text.find(short) if short else -1
    if at >= 0:
        body = (md_escape(text[:at]) + (" " if at and text[at - 1] == " " else "") + f"**{md_escape(short)}**"
                + (" " if text[at + len(short):].startswith(" ") else "") + md_escape(text[at + len(short):]))
        return [f"> {body}"]
    lines = [f"> {md_escape(text)}"]
    if short:
        lines += ["", f"Short answer: **{md_escape(short)}**"]
    return lines


# ---------------------------------------------------------------------------------------------
# questions and answers
# ---------------------------------------------------------------------------------------------


def _made(library: Library, trace_id: int | None) -> dict:
    """How the answer was made (the trace's "answer": quote, abstained, short answer...), or {}."""
    if trace_id is None:
        return {}
    try:
        data = library.trace(trace_id)["data"]
    except StoreError:  # a missing trace: the answer's own text is shown
        return {}
    made = data.get("answer") if isinstance(data, dict) else None
    return made if isinstance(made, dict) else {}


def answer_lines(row: dict, made: dict, labels: dict[int, str]) -> list[str]:
    """The answer to one question: the quote (or the abstention, or the generated text)."""
    from .ask import not_found
    from .statement_qa import uses_sentence
    from .views import read_before

    if row.get("answer_id") is None:
        return ["No answer was recorded for this question."]
    lines = []
    if made.get("masked"):
        lines += [f"Answered with {_chunks(list(made['masked']))} barred from retrieval (masked).", ""]
    if (page := read_before(made)) is not None:
        lines += [f"Answered from the pages before p. {page} only (spoiler-safe).", ""]
    q = made.get("quote")
    if made.get("abstained"):
        heading, reason = not_found(made)  # of the pages read
        lines.append(f"**{md_escape(heading)}** {md_escape(reason)}")
        if made.get("passages"):
            lines += (["", "The closest passages (closest, not an answer):", ""]
                      + passage_lines(made["passages"], labels))
    elif q:
        where = f"{page_ref(labels, list(q.get('pages') or []))}{_matter(q)}, chunk {q['chunk']}"
        if q.get("introduces"):  # as `ask` says it
            where += f"; the passage that introduces {md_escape(q['introduces'])}"
        elif q.get("retrieved") is False:
            where += f"; scored #{q.get('rank')} by the model, after the chunks it retrieved"
        if (made.get("statement") or {}).get("uses") is not None:  # "What does Theorem 8 use?", as `ask` says
            lines += [md_escape(uses_sentence(made["statement"])), ""]
        lines += quote_block(q.get("text", ""), made.get("short_answer") or q.get("short"))
        lines += ["", f"Quoted from {where}."]
        rest = also_relevant(made.get("passages") or [], q)
        if rest:
            lines += ["", "Also relevant:", ""] + passage_lines(rest, labels)
    elif row.get("answer"):
        lines += [f"> {md_escape(row['answer'])}", "", "The model's generated text (no passage quoted)."]
    else:
        lines.append("The model generated no text.")
    return lines


def question_section(library: Library, doc_id: str, n: int, row: dict, labels: dict[int, str]) -> list[str]:
    """One question: its heading, when it was asked, the answer, the evidence."""
    made = _made(library, row.get("trace_id"))
    when = [str(row["created_at"])] if row.get("created_at") else []
    if row.get("model_fp"):
        when.append(f"model {md_escape(row['model_fp'])}")
    lines = [f"### {n}. {md_escape(row['question'])}", ""]
    if when:
        lines += [f"*Asked {', '.join(when)}*", ""]
    lines += answer_lines(row, made, labels)
    evidence = row.get("evidence") or []
    lines += ["", "Evidence (what the model retrieved):", ""]
    lines += evidence_lines(library, doc_id, evidence, labels) if evidence else ["- none"]
    return lines + [""]


# ---------------------------------------------------------------------------------------------
# summary
# ---------------------------------------------------------------------------------------------


def latest_summary(library: Library, doc_id: str, model_fp: str | None = None) -> dict | None:
    """The latest stored summary trace (`{"id", "model_fp", "data": {"summary", "evidence",
    "trace"}}`) of this model, or of any model that prefilled or answered about the document."""
    if model_fp is not None:
        return library.latest_trace(doc_id, model_fp, "summary")
    fps = {s["model_fp"] for d in library.documents() if d["id"] == doc_id for s in d["prefill"]}
    fps |= {r["model_fp"] for r in library.conversation(doc_id) if r.get("model_fp")}
    found = [t for t in (library.latest_trace(doc_id, fp, "summary") for fp in sorted(fps)) if t]
    return max(found, key=lambda t: t["id"]) if found else None


def summary_lines(library: Library, doc_id: str, found: dict | None, labels: dict[int, str]) -> list[str]:
    """The summary: the extractive sentences under their part titles, or the abstractive text."""
    if found is None:
        return ["No summary yet.", ""]
    data = found["data"] if isinstance(found.get("data"), dict) else {}
    trace = data.get("trace") or {}
    lines = []
    if trace.get("notice"):
        lines += [f"*{md_escape(trace['notice'])}*", ""]
    text = str(data.get("summary") or "")
    sentences = trace.get("sentences")
    if trace.get("mode", "extractive") == "extractive" and sentences is not None:
        intro = text.split("\n\n", 1)[0] if text.startswith("Extractive summary") else ""
        if intro:
            lines += [md_escape(intro), ""]
        last: object = None
        for s in sentences:
            part = (s.get("part"), s.get("part_title"))
            if part != last:
                if lines and lines[-1] != "":
                    lines.append("")
                lines += [f"### {md_escape(s.get('part_title') or 'Part')}", ""]
                last = part
            chunks = list(s.get("chunks") or [])
            where = page_ref(labels, list(s.get("pages") or [])) + (f", {_chunks(chunks)}" if chunks else "")
            lines.append(f"- {md_escape(s.get('text', ''))} ({where})")
        if not sentences:
            lines.append("The summary quoted no sentence.")
        return lines + [""]
    lines += [md_escape(text) if text.strip() else "The model generated no text.", ""]
    evidence = data.get("evidence") or []
    if evidence:
        lines += ["Evidence (what the model retrieved):", ""]
        lines += evidence_lines(library, doc_id, evidence, labels) + [""]
    return lines


# ---------------------------------------------------------------------------------------------
# the document
# ---------------------------------------------------------------------------------------------


def export_markdown(library: Library, doc_id: str, model_fp: str | None = None,
                    questions: list[int] | None = None) -> str:
    """The document's conversation and latest summary (of `model_fp`, else of any model) as Markdown.
    `questions`: only these questions (their ids in the library: the UI's one conversation), said
    under the title; None: every question asked of the document. UnknownDocument (one line) for a
    document not in the library."""
    doc = library.document(doc_id)
    labels = page_labels(library, doc_id)
    title = md_escape(doc.get("title") or "Untitled")
    name = md_escape(doc.get("source_name") or "")
    lines = [f"# {title}" + (f" ({name})" if name else ""), "",
             f"Document {doc_id[:12]}, {doc.get('n_pages') or 0} pages, exported by drt-reader.", ""]
    rows = library.conversation(doc_id)
    if questions is not None:
        asked, wanted = len(rows), set(questions)
        rows = [r for r in rows if r["question_id"] in wanted]
        lines += [f"One conversation: {len(rows)} of the {asked} questions asked about this document.", ""]
    lines += ["## Questions", ""]
    if not rows:
        lines += ["No questions yet.", ""]
    for n, row in enumerate(rows, 1):
        lines += question_section(library, doc_id, n, row, labels)
    found = latest_summary(library, doc_id, model_fp)
    lines += ["## Summary", ""] + summary_lines(library, doc_id, found, labels)
    return "\n".join(lines).rstrip("\n") + "\n"


def write_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write `text` (UTF-8) to `path` through a temporary file beside it and os.replace: a reader
    never sees half a file. The folder must exist; a file replaced keeps its permissions."""
    path = Path(path)
    mode = path.stat().st_mode & 0o777 if path.is_file() else 0o644  # mkstemp's own is 0600
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def safe_name(title: str, limit: int = 60) -> str:
    """A file-name-safe form of a title: ASCII letters and digits joined by "-" ("document" when
    nothing is left)."""
    ascii_ = unicodedata.normalize("NFKD", str(title or "")).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9]+", "-", ascii_).strip("-")[:limit].strip("-") or "document"


def export_file(library: Library, doc_id: str, directory: str | os.PathLike,
                model_fp: str | None = None, questions: list[int] | None = None) -> Path:
    """Write the export to `<directory>/<safe title>-<doc_id[:8]>.md` (atomically; the folder is
    created; one conversation's, `questions`, to `...-conversation.md`) and return its path."""
    doc = library.document(doc_id)
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    one = "-conversation" if questions is not None else ""
    path = folder / f"{safe_name(doc.get('title') or '')}-{doc_id[:8]}{one}.md"
    return write_atomic(path, export_markdown(library, doc_id, model_fp, questions))
