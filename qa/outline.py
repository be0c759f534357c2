"""The document's structure, and what the model retrieved of it while reading.

statements  (papers) every definition, lemma, proposition, theorem, corollary, remark and example, and
            the other kinds papers number (claims, invariants, observations, facts, conjectures, hypotheses, ...:
            STATEMENT_KINDS): TeX environments (`\\begin{lemma}` or thmtools's `\\begin{restatable}{lemma}{name}`,
            with its `\\label`), or, in PDFs and text, the headings a paper prints ("Definition 2.3.",
            "▶Lemma 4 (Title).", German "Satz", "Korollar" too; see PRINTED). Each has its kind, label
            or number, page, chunks, "used by" (the later chunks whose selection during prefill, the
            dependency map, retrieved one of its chunks, with the fusion weight) and "uses"
            (`statement_uses`: the statements its text or proof cites, then those it retrieved).
            `statement_question` reads "What is Definition 1.4?" / "What does Theorem 8 use?" for ask.
names       (books) the cast: people, each once under the forms the book calls them by, and
            places (qa.cast), each with the sentence that introduces it (its first mention
            outside front and back matter) and the pages where it recurs.
links       the dependency map's strongest long-range links (source and target more than
            LONG_LINK chunks apart, boilerplate left out), drawn from every stretch of the
            document (`long_links`), each named by what it joins.
relied_on   for any chunk, what it retrieved, with the statement each retrieved chunk belongs to.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import defaultdict
from typing import Sequence

from ingest.boilerplate import chunk_matter
from ingest.parse import page_ranges
from ingest.parts import document_parts, joined_text
from .cast import cast, introducing_sentence
from .evidence import flat

# what papers number besides (often on the theorem counter: ccc16's 21 claims, itcs20's Invariant 30); ordinary
# words too ("the main claim"): a heading must look like one (PRINTED), a question name one with its number
OTHER_KINDS = ("claim", "invariant", "observation", "fact", "conjecture", "assumption", "hypothesis", "notation",
               "problem", "question")
STATEMENT_KINDS = ("definition", "lemma", "proposition", "theorem", "corollary", "remark", "example") + OTHER_KINDS
_KINDS_RX = "|".join(STATEMENT_KINDS)
# a TeX statement: \begin{lemma}[title], or thmtools's \begin{restatable}[title]{lemma}{name} (restated by \name*)
TEX_ENV = re.compile(rf"\\begin\{{restatable\}}(?:\[(?P<rtitle>[^\]\n]{{0,120}})\])?"
                     rf"\{{(?P<rkind>{_KINDS_RX})\}}\{{[^}}]*\}}|"
                     rf"\\begin\{{(?P<kind>{_KINDS_RX})\}}(?:\[(?P<title>[^\]\n]{{0,120}})\])?")
TEX_LABEL = re.compile(r"\s*\\label\{([^}]+)\}")
# a printed statement heading: at a line's start (after at most a margin note such as the knowledge
# package's "▷Proven p.10"), or after LIPIcs's "▶" marker anywhere; then the kind and its number
# ("2.3", "A.1"), then what only a heading has after it: a period, a parenthesised title or source
# ("(Minimal Circuit).", "([18, Theorem 1])."), a capital ("Lemma 5.1 Let", Springer's style), or the
# line's end with a capital opening the next line (lecture notes' "Definition 1" over its text); or a
# colon ("Claim 1:", "Theorem 2 (Name):") with a capital after it, on its line or the next.
# Prose that opens a line with a reference ("Corollary 15 is reminiscent of ...", "Lemma 12, ...",
# "Lemma 3: we have ...") has none of these.
_PRINTED_KIND = "|".join(k.capitalize() for k in STATEMENT_KINDS) + "|Satz|Korollar|Bemerkung|Beispiel"
_REF_KIND = _PRINTED_KIND + "|Hypotheses"  # a reference or question may name the plural: "Hypotheses 1 and 2"
_CAP = "A-ZÀ-ÖØ-Þ"
PRINTED = re.compile(r"(?m)(?:^[ \t]*(?:[▷▶►][^\n]{0,24}?[ \t]*)?|[▶►][ \t]*)"
                     rf"(?P<kind>{_PRINTED_KIND})[ \t]+(?P<number>(?:[A-Z]\.)?\d+(?:\.\d+)*)"
                     rf"(?P<head>\.(?=\s|$)|[ \t]*\((?:[^()\n]|\([^()\n]*\))*\)\.?(?=[ \t]*(?:$|[{_CAP}\[(]))"
                     rf"|(?:[ \t]*\((?:[^()\n]|\([^()\n]*\))*\))?:(?=[ \t]+[{_CAP}\[(]|[ \t]*\n[ \t]*[{_CAP}])"
                     rf"|[ \t]+(?=[{_CAP}\[])|[ \t]*(?=\n[ \t]*[{_CAP}]))(?P<rest>[^\n]{{0,120}})")
# a heading alone on its line at a block's start (after a blank line): "Definition 8" over its text
PRINTED_ALONE = re.compile(rf"(?m)(?:(?<=\n\n)|(?<=\A))[ \t]*(?P<kind>{_PRINTED_KIND})[ \t]+"
                           r"(?P<number>(?:[A-Z]\.)?\d+(?:\.\d+)*)(?P<head>[ \t]*)(?P<rest>)$")
# German papers
PRINTED_KINDS = {"satz": "theorem", "korollar": "corollary", "bemerkung": "remark", "beispiel": "example",
                 "hypotheses": "hypothesis"}


def kind_plural(kind: str) -> str:
    """A statement kind's plural, as a sentence prints it: "lemmas", "corollaries", "hypotheses"."""
    if kind.endswith("is"):
        return kind[:-2] + "es"
    if kind.endswith("y") and kind[-2:-1] not in tuple("aeiou"):
        return kind[:-1] + "ies"
    return kind + "s"


# where a printed statement's text ends: its proof, an end marker (LIPIcs's "◀"), or a sentence closing a paragraph
_STATEMENT_END = re.compile(r"\n[ \t]*(?:Proof\b|Beweis\b)|◀|[.!?]\s*\n[ \t]*\n")
STATEMENT_MAX = 1200  # characters of a printed statement's text at most
RESTATED_OPENING = 6  # letters and digits a restatement repeats at its start (a formula's text layer differs after)
DUPLICATE_GAP = 600  # characters: the same heading again this close is the text layer repeating it
LONG_LINK = 8  # chunks: nearer links are the text's own continuity
TITLES = frozenset("""mr mrs miss ms dr sir lady lord madame monsieur mme mlle m captain capt colonel col
general gen father mother aunt uncle cousin king queen prince princess duke duchess count countess baron
professor prof rev reverend saint st""".split())


# ---------------------------------------------------------------------------------------------
# statements


def heading_end(text: str, part) -> int:
    """Where a part's printed heading ends: its title's last line as the text prints it, found from the
    part's start ("PART THE SECOND, CHAPTER II: A MEETING OF THE QUIRE" is titled with its part's label,
    which the page above the chapter does not print); the title's length where it is not found."""
    last = part.title.rsplit(", ", 1)[-1]
    at = text.find(last, part.char_start, part.char_start + len(part.title) + 400)
    return at + len(last) + 1 if at >= 0 else part.char_start + len(part.title) + 1


def _chunk_index(chunks: list[dict]):
    starts = [c["char_start"] for c in chunks]

    def at(pos: int) -> int:
        return max(0, bisect_right(starts, pos) - 1)

    return at


def statements(text: str, kind: str, chunks: list[dict], pages: list[dict] | None = None) -> list[dict]:
    """The statements of the document in order: {kind, label, number, title, char_start, char_end,
    cut, chunks, page, restates}. A printed statement's span is its heading and text, up to its proof,
    an end marker or the paragraph that closes it (at most STATEMENT_MAX characters, then up to a word's
    end, and `cut` is true). `page`: the page its heading is printed on, from `pages` (their
    char_start; a chunk running over a page break holds the end of one page and the start of the
    next), else its first chunk's first page. `restates`: the index of the statement's first
    occurrence when the paper states it again under the same number and in the same words (a theorem
    of the introduction restated before its proof), else None."""
    at = _chunk_index(chunks)
    out = []
    if kind == "tex":
        for i, m in enumerate(TEX_ENV.finditer(text), 1):
            kind = m.group("kind") or m.group("rkind")
            end = text.find(f"\\end{{{m.group('kind') or 'restatable'}}}", m.end())
            end = end if end >= 0 else min(len(text), m.end() + 400)
            lab = TEX_LABEL.match(text, m.end())
            out.append({"kind": kind, "label": lab.group(1) if lab else "", "number": str(i),
                        "title": (m.group("title") or m.group("rtitle") or "").strip(), "char_start": m.start(),
                        "char_end": end, "cut": False})
    else:
        found = {m.start("kind"): m for m in PRINTED_ALONE.finditer(text)}
        found |= {m.start("kind"): m for m in PRINTED.finditer(text)}
        for _, m in sorted(found.items()):
            k = m.group("kind").lower()
            k = PRINTED_KINDS.get(k, k)
            head = m.group("head").strip()
            title = head[1:].rsplit(")", 1)[0].strip() if head.startswith("(") else ""  # "(Name).", "(Name):"
            prev = next((s for s in reversed(out) if (s["kind"], s["number"]) == (k, m.group("number"))), None)
            if prev is not None and m.start() - prev["char_start"] < DUPLICATE_GAP:
                # the text layer printed the heading twice (a formula's pieces): keep the one that reads as a heading
                if prev["head"].startswith((".", "(", ":")) or not head.startswith((".", "(", ":")):
                    continue
                out.remove(prev)
            out.append({"kind": k, "label": "", "number": m.group("number"), "title": title[:80],
                        "char_start": m.start("kind"), "char_end": m.end("head"), "head": head})
        for i, s in enumerate(out):
            s["opening"] = re.sub(r"\W+", "", text[s["char_end"]:s["char_end"] + 200])[:RESTATED_OPENING]
            stop = out[i + 1]["char_start"] if i + 1 < len(out) else len(text)
            cap = s["char_start"] + STATEMENT_MAX
            end = _STATEMENT_END.search(text, s["char_end"], min(stop, cap))
            s["cut"] = end is None and stop > cap
            if end:
                s["char_end"] = end.start() + (1 if end.group(0)[:1] in ".!?" else 0)
            elif s["cut"]:  # at a space, not inside a word ("its past random bit")
                space = max(text.rfind(" ", s["char_end"], cap + 1), text.rfind("\n", s["char_end"], cap + 1))
                s["char_end"] = space if space > 0 else cap
            else:
                s["char_end"] = stop
            del s["head"]
    first: dict[tuple[str, str, str], int] = {}
    page_starts = [p["char_start"] for p in pages or ()]
    for i, s in enumerate(out):
        a, b = at(s["char_start"]), at(max(s["char_start"], s["char_end"] - 1))
        s["chunks"] = list(range(a, b + 1))
        s["page"] = pages[max(0, bisect_right(page_starts, s["char_start"]) - 1)]["number"] if pages else \
            chunks[a]["page_first"] if chunks else 1
        # the same heading over other words is another statement (an appendix that numbers from 1.1 again)
        s["restates"] = first.setdefault((s["kind"], s["number"], s.pop("opening", "")), i) if kind != "tex" else None
        if s["restates"] == i:
            s["restates"] = None
    return out


def statement_text(text: str, s: dict) -> str:
    """A statement's text (heading included), its lines joined."""
    return flat(text[s["char_start"]:s["char_end"]])


_NUM = r"(?:[A-Z]\.)?\d+(?:\.\d+)*"
# "Lemma 13", "Lemmas 31 and 32", "Theorem 2.1, 2.3": a statement referred to in the text
STATEMENT_REF = re.compile(rf"\b(?P<kind>{_REF_KIND})s?[ \t\n]+"
                           rf"(?P<nums>{_NUM}(?:[ \t\n]*(?:,|and|&)[ \t\n]*{_NUM})*)")
_CITED = re.compile(r"\[[^\[\]\n]{0,40}$")  # "[25, Lemma 5.1]": another paper's statement, not this one's
PROOF_HEAD = re.compile(r"\s*(?:\\end\{\w+\}\s*)?(?:\\begin\{proof\}|Proof\b|Beweis\b)")
TEX_REF = re.compile(r"\\(?:ref|cref|Cref|autoref|Autoref)\*?\{([^}]+)\}")  # a TeX source's citations
PROOF_OF = re.compile(rf"(?m)^[ \t]*(?:Proof|Beweis)\b[^\n]{{0,24}}?\bof[ \t]+(?:the[ \t]+)?(?P<kind>{_PRINTED_KIND})"
                      rf"[ \t]+(?P<number>{_NUM})")
PROOF_END = re.compile(r"◀|⊓⊔|□|∎|\bQ\.E\.D\.|\\end\{proof\}")
PROOF_MAX = 6000  # characters of a proof read for its references at most
RELY_MIN_WEIGHT = 0.05  # a retrieval with a smaller fusion weight barely entered the chunk's reading


def find_statement(stmts: list[dict], kind: str, number: str) -> int | None:
    """The index of the statement printed as `kind` `number` (its first occurrence), or None."""
    kind = PRINTED_KINDS.get(kind.lower(), kind.lower())
    return next((i for i, s in enumerate(stmts) if s["kind"] == kind and s["number"] == number), None)


def statement_refs(text: str, a: int, b: int, stmts: list[dict]) -> list[int]:
    """The statements of the outline that text[a:b] refers to, by kind and number ("Lemma 3") or, in a
    TeX source, by label (`\\ref{lemma-flat}`), in order of first reference (another paper's,
    "[25, Lemma 5.1]", left out)."""
    out: list[int] = []
    by_label = {t["label"]: j for j, t in enumerate(stmts) if t.get("label")}
    refs = [(m.start(), [by_label.get(x.strip()) for x in m.group(1).split(",")]) for m in TEX_REF.finditer(text, a, b)]
    for m in STATEMENT_REF.finditer(text, a, b):
        if (_CITED.search(text, max(a, m.start() - 40), m.start())
                or text[max(0, m.start() - 2):m.start()].strip() in ("▶", "►")):
            continue  # another paper's statement; a heading the text layer printed inside this one
        refs.append((m.start(), [find_statement(stmts, m.group("kind"), num)
                                 for num in re.findall(_NUM, m.group("nums"))]))
    for _, found in sorted(refs, key=lambda r: r[0]):
        out += [i for i in found if i is not None and i not in out]
    return out


def proof_spans(text: str, stmts: list[dict], i: int) -> list[tuple[int, int]]:
    """Where statement i is proved: the proof right after it ("Proof." opening the next paragraph, a
    TeX source's `\\begin{proof}`) and any "Proof of Theorem 8" elsewhere, each up to its end mark
    (◀, ⊓⊔, □, `\\end{proof}`), the next statement or PROOF_MAX characters."""
    s = stmts[i]
    starts = [t["char_start"] for t in stmts]

    def span(a: int) -> tuple[int, int]:
        nxt = min((x for x in starts if x > a), default=len(text))
        stop = min(nxt, a + PROOF_MAX)
        end = PROOF_END.search(text, a, stop)
        return a, (end.end() if end else stop)

    out = []
    if s.get("restates") is None and PROOF_HEAD.match(text, s["char_end"]) and \
            PROOF_HEAD.match(text, s["char_end"]).end() - s["char_end"] < 200:
        out.append(span(s["char_end"]))
    for m in PROOF_OF.finditer(text):
        if find_statement(stmts, m.group("kind"), m.group("number")) == i:
            out.append(span(m.start()))
    return out


def statement_uses(text: str, stmts: list[dict], chunks: list[dict], dependency_map: Sequence[dict], i: int,
                   skip: set[int] = frozenset()) -> list[dict]:
    """What statement i relies on: [{statement, kind, number, page, index, cited, retrieved}], the
    cited first in order of reference, then the retrieved, strongest first. `cited`: where the
    statement's text or its proof (`proof_spans`) names it ("statement", "proof"); `retrieved`: the
    strongest fusion weight with which a chunk of the statement or of its proof retrieved one of
    that statement's chunks while the model read it (the dependency map of prefill), or None."""
    me = stmts[i]
    same = {j for j, t in enumerate(stmts) if (t["kind"], t["number"]) == (me["kind"], me["number"])}
    proofs = proof_spans(text, stmts, i)
    cited: dict[int, list[str]] = {}
    for j in statement_refs(text, me["char_start"], me["char_end"], stmts):
        cited.setdefault(j, []).append("statement")
    for a, b in proofs:
        for j in statement_refs(text, a, b, stmts):
            if "proof" not in cited.setdefault(j, []):
                cited[j].append("proof")
    at = _chunk_index(chunks)
    readers = set(me["chunks"])
    for a, b in proofs:
        readers |= set(range(at(a), at(max(a, b - 1)) + 1))
    owner = {c: j for j, t in enumerate(stmts) for c in t["chunks"]}
    retrieved: dict[int, float] = {}  # fusion weights below RELY_MIN_WEIGHT are no reliance
    for r in dependency_map:
        c = int(r["chunk"])
        if c not in readers or c in skip:
            continue
        for jc, w in zip(r.get("retrieved", []), r.get("weights", [])):
            j = owner.get(int(jc))
            if j is not None and j not in same and int(jc) not in skip and float(w) >= RELY_MIN_WEIGHT:
                retrieved[j] = max(retrieved.get(j, 0.0), float(w))
    order = [j for j in cited if j not in same]
    order += sorted((j for j in retrieved if j not in cited), key=lambda j: (-retrieved[j], j))
    return [{"statement": f"{stmts[j]['kind'].capitalize()} {stmts[j]['number']}", "kind": stmts[j]["kind"],
             "number": stmts[j]["number"], "page": stmts[j]["page"], "index": j, "cited": cited.get(j, []),
             "retrieved": round(retrieved[j], 4) if j in retrieved else None} for j in order]


_ASKS_USES = re.compile(r"\b(?:uses?|used|using|rel(?:y|ies|ied)\s+on|depends?\s+on|needs?|requires?|based\s+on|"
                        r"cites?|invokes?|builds?\s+on|prerequisites?)\b", re.I)
_STATEMENT_Q = re.compile(rf"^\s*(?:(?:what|which|whats|what's)\b[^?]{{0,48}}?|"
                          rf"(?:state|quote|recall|give|show)\b[^?]{{0,12}}?)?"
                          rf"\b(?P<kind>{_REF_KIND})s?[ \t]+(?P<number>{_NUM})\b(?P<rest>[^\n]*)$", re.I)


_WHAT_IS = re.compile(r"\s*(?:(?:what|what's|whats)(?:\s+(?:is|was|does|do|did))?|"
                      r"state|quote|recall|give|show(?:\s+me)?)?"
                      r"\s*(?:the\s+)?(?:(?:statement|text|content)\s+of\s+)?(?:the\s+)?", re.I)
_SAYS = re.compile(r"(?:say|says|state|states|assert|asserts|claim|claims|define|defines|mean|means|ask|asks|"
                   r"about|)", re.I)  # "What does Problem 2 ask?"


def statement_question(question: str) -> dict | None:
    """"What is Definition 1.4?", "State Lemma 3", "Theorem 2.1?", "What is Claim 5?": {"kind", "number",
    "uses": False}; "What does Theorem 8 use?", "Which results does Lemma 3 rely on?": {..., "uses": True};
    None for any other question (one that names two statements, asks something inside one, or names a
    kind without a number: "What is the main claim?")."""
    question = " ".join(question.split())
    m = _STATEMENT_Q.match(question)
    if not m or len(re.findall(rf"\b(?:{_REF_KIND})s?\s+{_NUM}", question, re.I)) > 1:
        return None
    rest = m.group("rest").strip(" ?.!")
    head = question[:m.start("kind")]
    uses = bool(_ASKS_USES.search(rest) or _ASKS_USES.search(head))
    if not uses and not (_WHAT_IS.fullmatch(head) and _SAYS.fullmatch(rest)):
        return None  # "What is L in Lemma 3?": a question about the statement, for the reader
    k = m.group("kind").lower()
    return {"kind": PRINTED_KINDS.get(k, k), "number": m.group("number").upper(), "uses": uses}


def used_by(stmts: list[dict], dependency_map: Sequence[dict], skip: set[int] = frozenset()) -> None:
    """Fill each statement's "used_by": [{chunk, weight}] of the later chunks (outside the
    statement) that retrieved one of its chunks, strongest first."""
    owner = {c: i for i, s in enumerate(stmts) for c in s["chunks"]}
    found: dict[int, dict[int, float]] = defaultdict(dict)
    for row in dependency_map:
        src = int(row["chunk"])
        if src in skip:
            continue
        for j, w in zip(row.get("retrieved", []), row.get("weights", [])):
            i = owner.get(int(j))
            if i is not None and src not in stmts[i]["chunks"]:
                found[i][src] = max(found[i].get(src, 0.0), float(w))
    for i, s in enumerate(stmts):
        s["used_by"] = [{"chunk": c, "weight": round(w, 4)}
                        for c, w in sorted(found[i].items(), key=lambda kv: (-kv[1], kv[0]))]


# ---------------------------------------------------------------------------------------------
# people and places


WHO = re.compile(r"\s*[Ww]ho\s+(?:is|was)\s+(?:the\s+)?(?P<name>[A-Z][\w’'.-]*(?:\s+(?:de\s+|d’|d')?[A-Z][\w’'.-]*)*)")


def who_name(question: str) -> str | None:
    """The name asked about in "Who is X?" / "Who was X, ...?" (a capitalised name), else None."""
    m = WHO.match(question)
    return m.group("name").rstrip(".’'") if m else None


def first_mention(text: str, name: str, skip_spans: Sequence[tuple[int, int]] = ()) -> int | None:
    """Where `name` is first mentioned outside `skip_spans` (front and back matter): the whole name,
    else the name without its titles, else its last word; None when it is not in the text."""
    words = name.replace(".", ". ").split()
    bare = [w for w in words if w.lower().rstrip(".") not in TITLES]
    tries = [words, bare, bare[-1:] if len(bare) > 1 and len(bare[-1]) > 2 else []]
    for ws in tries:
        if not ws:
            continue
        rx = re.compile(r"\b" + r"\s*".join(re.escape(w) for w in ws) + r"(?![\w])")
        for m in rx.finditer(text):
            if not any(a <= m.start() < b for a, b in skip_spans):
                return m.start()
    return None


# ---------------------------------------------------------------------------------------------
# the whole outline


def long_links(dependency_map: Sequence[dict], skip: set[int], n: int = 12) -> list[dict]:
    """The strongest retrievals between chunks more than LONG_LINK apart, boilerplate left out, drawn
    from the whole document: the document cut into `n` equal stretches, one link from each stretch's
    chunks, its strongest whose target lies in a stretch no link chosen so far reaches (else its
    strongest); a stretch with none leaves its place to a second link of the others, and so on.
    Strongest first (of equal weights, the one reaching farther back). The n strongest overall sat
    together: on a 271-page novel all within pp. 2-9, where an early chunk's few candidates make its
    fusion weights large; and a late chunk's strongest links often all reach back to the opening."""
    links = [{"source": int(r["chunk"]), "target": int(j), "weight": float(w)}
             for r in dependency_map if int(r["chunk"]) not in skip
             for j, w in zip(r.get("retrieved", []), r.get("weights", []))
             if int(j) not in skip and int(r["chunk"]) - int(j) > LONG_LINK]
    if not links or n < 1:
        return []
    strongest = lambda x: (-x["weight"], x["target"] - x["source"], x["source"])  # noqa: E731
    size = max(int(r["chunk"]) for r in dependency_map) + 1
    stretch_of = lambda c: c * n // size  # noqa: E731
    by_stretch: dict[int, list[dict]] = defaultdict(list)
    for ln in links:
        by_stretch[stretch_of(ln["source"])].append(ln)
    left = [sorted(v, key=strongest) for _, v in sorted(by_stretch.items())]
    chosen: list[dict] = []
    reached: set[int] = set()
    while len(chosen) < n and any(left):
        for v in sorted((v for v in left if v), key=lambda v: strongest(v[0])):
            if len(chosen) >= n:
                break
            pick = next((ln for ln in v if stretch_of(ln["target"]) not in reached), v[0])
            v.remove(pick)
            chosen.append(pick)
            reached.add(stretch_of(pick["target"]))
    return sorted(chosen, key=strongest)


def statement_name(s: dict) -> str:
    """"lemma lemma-flat-base-change" / "definition 2.3": a statement's kind and label (or number)."""
    return f"{s['kind']} {s['label'] or s['number']}"


def document_statements(library, doc_id: str, chunks: list[dict] | None = None) -> list[dict]:
    """`statements` of a stored document (its chunks read once when the caller has them)."""
    chunks = library.chunks(doc_id) if chunks is None else chunks
    pages = library.pages(doc_id, with_text=True)
    return statements(joined_text(pages, pages_apart=True), library.document(doc_id)["kind"], chunks, pages)


def named_links(dependency_map: Sequence[dict], skip: set[int], stmts: list[dict], chunks: list[dict],
                labels: dict[int, str]) -> list[dict]:
    """`long_links`, each end named by what it is: the statement it lies in, else its page."""
    owner = {c: st for st in stmts for c in st["chunks"]}

    def what(c: int) -> str:
        st = owner.get(c)
        if st is not None:
            return statement_name(st)
        return f"p. {labels.get(chunks[c]['page_first'], chunks[c]['page_first'])}"

    return [{**ln, "source_is": what(ln["source"]), "target_is": what(ln["target"]),
             "source_page": chunks[ln["source"]]["page_first"], "target_page": chunks[ln["target"]]["page_first"]}
            for ln in long_links(dependency_map, skip) if ln["source"] < len(chunks)]


def build(library, doc_id: str, dependency_map: Sequence[dict]) -> dict:
    """{"doc_id", "kind", "parts", "statements", "names", "links"} (see the module docstring); each
    statement with its "used_by" and its "uses" (`statement_uses`: the graph of what relies on what)."""
    doc = library.document(doc_id)
    chunks = library.chunks(doc_id)
    pages = library.pages(doc_id, with_text=True)
    labels = {p["number"]: p["label"] for p in pages}
    text = joined_text(pages)
    boiler = set(chunk_matter(library, doc_id, chunks))
    stmts = statements(joined_text(pages, pages_apart=True), doc["kind"], chunks, pages)
    used_by(stmts, dependency_map, boiler)
    for i, st in enumerate(stmts):  # what each relies on: cited in it or its proof, retrieved while read
        st["uses"] = [] if st.get("restates") is not None else \
            [{k: u[k] for k in ("statement", "index", "cited", "retrieved")}
             for u in statement_uses(text, stmts, chunks, dependency_map, i, boiler)]
    skip_spans = [(chunks[i]["char_start"], chunks[i]["char_end"]) for i in sorted(boiler)]
    people = []
    part_list = document_parts(library, doc_id)
    if len(stmts) < 5:  # papers have statements; books have people and places
        at = _chunk_index(chunks)
        starts = [p["char_start"] for p in pages]
        heads = [(p.char_start, heading_end(text, p)) for p in part_list if p.source in ("outline", "headings")]
        for o in cast(text, skip_spans):
            # introduced by the first mention outside a chapter's heading: "CHAPTER V. Advice from a
            # Caterpillar" was the Caterpillar's introducing sentence (seen in the browser on Alice)
            first = next((q for q in sorted(o["positions"]) if q >= o["first"]
                          and not any(h0 <= q < h1 for h0, h1 in heads)), o["first"])
            a, b = introducing_sentence(text, first)
            c = at(first)
            people.append({"name": o["name"], "kind": o["kind"], "mentions": o["mentions"], "aliases": o["aliases"],
                           "introduced": {"text": flat(text[a:b]), "chunk": c,
                                          "page": chunks[c]["page_first"], "char_start": a, "char_end": b},
                           "pages": sorted({pages[max(0, bisect_right(starts, q) - 1)]["number"]
                                            for q in o["positions"]})})
    links = named_links(dependency_map, boiler, stmts, chunks, labels)
    parts = [p.to_json() for p in part_list]
    for pt in parts:  # the printed label, as the statements and links show theirs
        pt["page_label"] = labels.get(pt["page_first"], str(pt["page_first"]))
    for s in stmts:
        s["page_label"] = labels.get(s["page"], str(s["page"]))
    return {"doc_id": doc_id, "kind": doc["kind"], "parts": parts, "statements": stmts, "names": people,
            "links": links}


def relied_on(stmts: list[dict], dependency_map: Sequence[dict], chunk: int) -> list[dict]:
    """What chunk `chunk` retrieved while it was read: [{chunk, weight, statement}] (statement: the
    "kind label" of the statement (`statements`) it lies in, or None)."""
    owner = {c: statement_name(s) for s in stmts for c in s["chunks"]}
    row = next((r for r in dependency_map if int(r["chunk"]) == chunk), None)
    if row is None:
        return []
    return [{"chunk": int(j), "weight": float(w), "statement": owner.get(int(j))}
            for j, w in zip(row["retrieved"], row["weights"])]


def outline_text(o: dict, title: str = "") -> str:
    """The outline as the CLI prints it."""
    again = sum(s.get("restates") is not None for s in o["statements"])
    lines = [f"{title or o['doc_id'][:12]}: {len(o['parts'])} parts, {len(o['statements'])} statements"
             f"{f' ({again} restated)' if again else ''}, {len(o['names'])} names"]
    lines.append("\nParts:")
    lines += [f"  {p['number']:3}. {p['title'][:70]}  (p. {p['page_label']})" for p in o["parts"]]
    if o["statements"]:
        lines.append("\nStatements (used by: the later chunks that retrieved them while reading):")
        for s in o["statements"]:
            used = ", ".join(str(u["chunk"]) for u in s["used_by"][:8]) or "-"
            more = f" (+{len(s['used_by']) - 8})" if len(s["used_by"]) > 8 else ""
            name = f"{s['label'] or s['number']}{' (restated)' if s.get('restates') is not None else ''}"
            lines.append(f"  {s['kind']:11} {name:40} p. {s['page_label']:>5}  "
                         f"chunk {s['chunks'][0]:5}  used by {used}{more}")
            cites = [u["statement"] for u in s.get("uses") or [] if u["cited"]]
            seen = [u["statement"] for u in s.get("uses") or [] if not u["cited"]]
            if cites or seen:
                lines.append("      uses " + "; ".join(
                    x for x in (", ".join(cites[:6]) + " (cited)" * bool(cites),
                                ", ".join(seen[:4]) + " (retrieved)" * bool(seen)) if x))
    for kinds, head in ((("person",), "People"), (("place",), "Places"), (("name",), "Other names")):
        got = [n for n in o["names"] if n["kind"] in kinds]
        if not got:
            continue
        lines.append(f"\n{head} (also called; introduced by; pages where they recur):")
        for n in got:
            intro = n["introduced"]["text"]
            intro = intro if len(intro) <= 140 else intro[:137].rsplit(" ", 1)[0] + "..."
            intro = intro if intro.startswith(("\u201c", '"')) else f"\u201c{intro}\u201d"
            aka = f"; also {', '.join(n['aliases'][:4])}" if n.get("aliases") else ""
            lines.append(f"  {n['name']} ({n['mentions']} mentions{aka}): p. {n['introduced']['page']} "
                         f"{intro}; pages {page_ranges(n['pages'])}")
    if o["links"]:
        lines.append("\nStrongest long links (a chunk retrieving one far back):")
        for ln in o["links"]:
            lines.append(f"  chunk {ln['source']} ({ln['source_is']}) -> chunk {ln['target']} ({ln['target_is']}), "
                         f"weight {ln['weight']:.2f}")
    return "\n".join(lines)
