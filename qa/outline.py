"""The document's structure, and what the model retrieved of it while reading.

statements  (papers) every definition, lemma, proposition, theorem and corollary: TeX environments
            (`\\begin{lemma}` with its `\\label`), or, in PDFs and text, lines that open with
            "Definition 2.3", "Lemma 4." and the like (German "Satz" and "Korollar" too). Each has its kind, label or number, page,
            chunks, and "used by": the later chunks whose selection during prefill (the
            dependency map) retrieved one of its chunks, with the fusion weight.
names       (books) the people and places: capitalised words and pairs ("Diggory Venn") that occur
            at least MIN_MENTIONS times, rarely in lower case, not at the start of a sentence only;
            a person when titles ("Mr.", "Madame") or speech ("said") surround it, a place when
            "in", "at", "to", "from" precede it, else a name. Each has the sentence that introduces
            it (its first mention outside front and back matter) and the pages where it recurs.
links       the dependency map's strongest long-range links (source and target more than
            LONG_LINK chunks apart, boilerplate left out), each named by what it joins.
relied_on   for any chunk, what it retrieved, with the statement each retrieved chunk belongs to.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter, defaultdict
from typing import Sequence

from ingest.boilerplate import chunk_matter
from ingest.parse import page_ranges
from ingest.parts import document_parts, document_text

STATEMENT_KINDS = ("definition", "lemma", "proposition", "theorem", "corollary")
TEX_ENV = re.compile(r"\\begin\{(" + "|".join(STATEMENT_KINDS) + r")\}(?:\[(?P<title>[^\]\n]{0,120})\])?")
TEX_LABEL = re.compile(r"\s*\\label\{([^}]+)\}")
PRINTED = re.compile(r"(?m)^[ \t]*(?P<kind>Definition|Lemma|Proposition|Theorem|Corollary|Satz|Korollar)[ \t]+"
                     r"(?P<number>\d+(?:\.\d+)*)\b\.?(?P<rest>[^\n]{0,120})")
PRINTED_KINDS = {"satz": "theorem", "korollar": "corollary"}  # German papers
MIN_MENTIONS = 5
MAX_NAMES = 60
LONG_LINK = 8  # chunks: nearer links are the text's own continuity
TITLES = frozenset("""mr mrs miss ms dr sir lady lord madame monsieur mme mlle m captain capt colonel col
general gen father mother aunt uncle cousin king queen prince princess duke duchess count countess baron
professor prof rev reverend saint st""".split())
SPEECH = frozenset("said says replied asked cried answered exclaimed whispered continued returned".split())
PLACE_PREP = frozenset("in at to from near towards toward into through".split())
_CAP = re.compile(r"\b[A-Z][a-z’']+(?:[-’'][A-Za-z]+)*\b")
_WORD = re.compile(r"[A-Za-z’']+")


# ---------------------------------------------------------------------------------------------
# statements


def _chunk_index(chunks: list[dict]):
    starts = [c["char_start"] for c in chunks]

    def at(pos: int) -> int:
        return max(0, bisect_right(starts, pos) - 1)

    return at


def statements(text: str, kind: str, chunks: list[dict]) -> list[dict]:
    """The statements of the document in order: {kind, label, number, title, char_start, char_end,
    chunks, page}."""
    at = _chunk_index(chunks)
    out = []
    if kind == "tex":
        for i, m in enumerate(TEX_ENV.finditer(text), 1):
            end = text.find(f"\\end{{{m.group(1)}}}", m.end())
            end = end if end >= 0 else min(len(text), m.end() + 400)
            lab = TEX_LABEL.match(text, m.end())
            out.append({"kind": m.group(1), "label": lab.group(1) if lab else "", "number": str(i),
                        "title": (m.group("title") or "").strip(), "char_start": m.start(), "char_end": end})
    else:
        for m in PRINTED.finditer(text):
            rest = m.group("rest").strip(" .:")
            kind = m.group("kind").lower()
            out.append({"kind": PRINTED_KINDS.get(kind, kind), "label": "", "number": m.group("number"),
                        "title": rest[:80], "char_start": m.start("kind"), "char_end": min(len(text), m.end() + 300)})
    for s in out:
        a, b = at(s["char_start"]), at(max(s["char_start"], s["char_end"] - 1))
        s["chunks"] = list(range(a, b + 1))
        s["page"] = chunks[a]["page_first"] if chunks else 1
    return out


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


def names(text: str, skip_spans: Sequence[tuple[int, int]] = ()) -> list[dict]:
    """The document's frequent proper names (see the module docstring): {name, kind, mentions,
    first} (first = char offset of the first mention outside `skip_spans`), most mentioned first."""
    lower = Counter(w.strip("'’") for w in _WORD.findall(text) if w.strip("'’")[:1].islower())
    count: Counter = Counter()
    first: dict[str, int] = {}
    mid: Counter = Counter()  # mentions not at a sentence start
    person: Counter = Counter()
    place: Counter = Counter()

    def skipped(pos: int) -> bool:
        return any(a <= pos < b for a, b in skip_spans)

    tokens = list(_CAP.finditer(text))
    i = 0
    while i < len(tokens):
        m = tokens[i]
        name, end, j = _strip_possessive(m.group()), m.end(), i + 1
        if name is None:  # a contraction ("I'll")
            i += 1
            continue
        # a pair of capitalised words separated by one space ("Diggory Venn") is one name
        if j < len(tokens) and text[end:tokens[j].start()] == " " and tokens[j].group().lower() not in TITLES:
            second = _strip_possessive(tokens[j].group())
            pair = f"{name} {second}"
            if second is not None and name.lower() not in TITLES and not name.endswith(("'s", "’s")):
                name, end, j = pair, tokens[j].end(), j + 1
        i = j
        key = name
        if key.split()[0].lower() in TITLES and " " not in key:
            continue
        count[key] += 1
        if key not in first and not skipped(m.start()):
            first[key] = m.start()
        before = text[max(0, m.start() - 24):m.start()]
        prev = _WORD.findall(before)
        titled = bool(prev) and (prev[-1].lower() in TITLES or prev[-1] == "M")  # "Mrs. Yeobright": no sentence start
        at_start = not titled and (not before.strip() or before.rstrip()[-1:] in '.!?"“”' or before.endswith("\n"))
        if not at_start:
            mid[key] += 1
        if titled or (prev and prev[-1].lower() in SPEECH):
            person[key] += 1
        if prev and prev[-1].lower() in PLACE_PREP:
            place[key] += 1
        after = _WORD.findall(text[end:end + 16])
        if after and after[0].lower() in SPEECH:
            person[key] += 1
    out = []
    for key, n in count.items():
        head = key.split()[0]
        if n < MIN_MENTIONS or mid[key] < 0.5 * n or key not in first:
            continue
        if lower.get(head.lower(), 0) > 0.2 * n or head.lower() in TITLES:
            continue  # an ordinary word capitalised ("Yes", "Heaven") or a title alone
        kind = ("person" if person[key] >= 2 else
                "place" if place[key] >= max(2, 0.3 * n) and person[key] == 0 else "name")
        out.append({"name": key, "kind": kind, "mentions": n, "first": first[key]})
    # a single word that is mostly part of a listed pair ("Diggory" of "Diggory Venn") is dropped
    pairs = [o for o in out if " " in o["name"]]
    out = [o for o in out if " " in o["name"] or not any(
        o["name"] in p["name"].split() and p["mentions"] >= 0.8 * o["mentions"] for p in pairs)]
    out.sort(key=lambda o: (-o["mentions"], o["name"]))
    return out[:MAX_NAMES]


def _strip_possessive(token: str) -> str | None:
    """"Eustacia's" -> "Eustacia"; "D’Artagnan" stays; a contraction ("I'll") -> None."""
    for q in ("'", "’"):
        if q in token:
            head, _, tail = token.partition(q)
            if tail in ("s", "S") and len(head) > 1:
                return head
            if len(head) == 1 and tail[:1].isupper():  # D’Artagnan, O'Brien
                return token
            return None
    return token


def mention_pages(text: str, name: str, pages: list[dict]) -> list[int]:
    starts = [p["char_start"] for p in pages]
    got = {pages[max(0, bisect_right(starts, m.start()) - 1)]["number"]
           for m in re.finditer(r"\b" + re.escape(name) + r"\b", text)}
    return sorted(got)


def sentence_at(text: str, pos: int, limit: int = 400) -> tuple[int, int]:
    """The sentence around `pos` (from the previous sentence end to the next), at most `limit` chars."""
    a = max(text.rfind(". ", max(0, pos - limit), pos), text.rfind("\n\n", max(0, pos - limit), pos),
            text.rfind("? ", max(0, pos - limit), pos), text.rfind("! ", max(0, pos - limit), pos))
    a = a + 2 if a >= 0 else max(0, pos - limit // 2)
    m = re.compile(r"[.!?][\"'’”]*(\s|$)").search(text, pos, min(len(text), pos + limit))
    b = m.end() if m else min(len(text), pos + limit // 2)
    return a, b


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
    """The strongest retrievals between chunks more than LONG_LINK apart, boilerplate left out."""
    links = [{"source": int(r["chunk"]), "target": int(j), "weight": float(w)}
             for r in dependency_map if int(r["chunk"]) not in skip
             for j, w in zip(r.get("retrieved", []), r.get("weights", []))
             if int(j) not in skip and int(r["chunk"]) - int(j) > LONG_LINK]
    links.sort(key=lambda x: (-x["weight"], x["source"]))
    return links[:n]


def statement_name(s: dict) -> str:
    """"lemma lemma-flat-base-change" / "definition 2.3": a statement's kind and label (or number)."""
    return f"{s['kind']} {s['label'] or s['number']}"


def document_statements(library, doc_id: str, chunks: list[dict] | None = None) -> list[dict]:
    """`statements` of a stored document (its chunks read once when the caller has them)."""
    chunks = library.chunks(doc_id) if chunks is None else chunks
    return statements(document_text(library, doc_id), library.document(doc_id)["kind"], chunks)


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
    """{"doc_id", "kind", "parts", "statements", "names", "links"} (see the module docstring)."""
    doc = library.document(doc_id)
    chunks = library.chunks(doc_id)
    pages = library.pages(doc_id)
    labels = {p["number"]: p["label"] for p in pages}
    text = document_text(library, doc_id)
    boiler = set(chunk_matter(library, doc_id, chunks))
    stmts = statements(text, doc["kind"], chunks)
    used_by(stmts, dependency_map, boiler)
    skip_spans = [(chunks[i]["char_start"], chunks[i]["char_end"]) for i in sorted(boiler)]
    people = []
    if len(stmts) < 5:  # papers have statements; books have people and places
        at = _chunk_index(chunks)
        for o in names(text, skip_spans):
            a, b = sentence_at(text, o["first"])
            c = at(o["first"])
            people.append({"name": o["name"], "kind": o["kind"], "mentions": o["mentions"],
                           "introduced": {"text": " ".join(text[a:b].split()), "chunk": c,
                                          "page": chunks[c]["page_first"], "char_start": a, "char_end": b},
                           "pages": mention_pages(text, o["name"], pages)})
    links = named_links(dependency_map, boiler, stmts, chunks, labels)
    parts = [p.to_json() for p in document_parts(library, doc_id)]
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
    lines = [f"{title or o['doc_id'][:12]}: {len(o['parts'])} parts, {len(o['statements'])} statements, "
             f"{len(o['names'])} names"]
    lines.append("\nParts:")
    lines += [f"  {p['number']:3}. {p['title'][:70]}  (p. {p['page_first']})" for p in o["parts"]]
    if o["statements"]:
        lines.append("\nStatements (used by: the later chunks that retrieved them while reading):")
        for s in o["statements"]:
            used = ", ".join(str(u["chunk"]) for u in s["used_by"][:8]) or "-"
            more = f" (+{len(s['used_by']) - 8})" if len(s["used_by"]) > 8 else ""
            lines.append(f"  {s['kind']:11} {s['label'] or s['number']:40} p. {s['page_label']:>5}  "
                         f"chunk {s['chunks'][0]:5}  used by {used}{more}")
    if o["names"]:
        lines.append("\nPeople and places (introduced by; pages where they recur):")
        for n in o["names"]:
            intro = n["introduced"]["text"]
            intro = intro if len(intro) <= 140 else intro[:137].rsplit(" ", 1)[0] + "..."
            intro = intro if intro.startswith(("\u201c", '"')) else f"\u201c{intro}\u201d"
            lines.append(f"  {n['name']} ({n['kind']}, {n['mentions']} mentions): p. {n['introduced']['page']} "
                         f"{intro}; pages {page_ranges(n['pages'])}")
    if o["links"]:
        lines.append("\nStrongest long links (a chunk retrieving one far back):")
        for ln in o["links"]:
            lines.append(f"  chunk {ln['source']} ({ln['source_is']}) -> chunk {ln['target']} ({ln['target_is']}), "
                         f"weight {ln['weight']:.2f}")
    return "\n".join(lines)
