"""qa.ask.generate: the one generation path of the app, the CLI and the UI."""

from __future__ import annotations

from types import SimpleNamespace

from qa.ask import NO_REPEAT_NGRAM, generate


def test_answers_are_generated_greedily_without_repeated_ngrams():
    seen = {}

    class Eng:
        def generate(self, state, question, **kw):
            seen.update(kw)
            yield SimpleNamespace(text_delta="the fortnight", done=False)
            yield SimpleNamespace(text_delta="", done=True, answer="the fortnight", trace=None)

    deltas = []
    answer, trace, _ = generate(Eng(), None, "Who is Emma?", max_new_tokens=8, on_delta=deltas.append)
    assert answer == "the fortnight" and deltas == ["the fortnight"] and trace is None
    assert seen == {"max_new_tokens": 8, "temperature": 0.0, "no_repeat_ngram": NO_REPEAT_NGRAM}
    assert NO_REPEAT_NGRAM >= 2


def test_sentence_spans_cut_at_sentence_ends_and_blank_lines():
    from qa.ask import sentence_spans

    text = "First one. Emma Woodhouse, handsome, clever, and rich, had lived.\n\nThird here!  "
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "First one.", "Emma Woodhouse, handsome, clever, and rich, had lived.", "Third here!"]
    # a page break inside a sentence (the next page goes on in lower case) ends nothing; a heading does
    text = ("and dynamically linked subprograms\n\nthat the work requires. Done.\n\nChapter 4\n\nHe was. "
            "A title:\n\nlow.")
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "and dynamically linked subprograms\n\nthat the work requires.", "Done.", "Chapter 4", "He was.",
        "A title:", "low."]


def test_retrieval_z():
    from qa.ask import retrieval_z

    trace = {"chunks": [{"scores": [0.0, 0.0, 0.0, 9.0, 0.0, 0.0, 100.0]}]}
    z = retrieval_z(trace, 6)  # the question's own chunk (index 6) is not the document's
    assert abs(z - (9.0 - 1.5) / (sum((x - 1.5) ** 2 for x in [0, 0, 0, 9, 0, 0]) / 6) ** 0.5) < 1e-9
    assert retrieval_z({"chunks": []}, 6) is None and retrieval_z({"chunks": [{"scores": None}]}, 3) is None
    assert retrieval_z(trace | {"chunks": [{"scores": [1.0, 1.0]}]}, 2) is None  # no spread


def _chunked_library(text):
    """A library stand-in holding `text` cut into 63-token chunks (one page each)."""
    from drt_core.tokenizer import encode_with_offsets

    ids, offs = encode_with_offsets(text)
    rows, pos, c = [], 0, 0
    while pos < len(ids):  # chunks of 63 tokens, their character spans from the offsets
        e = min(pos + 63, len(ids))
        a, b = offs[pos][0], (offs[e][0] if e < len(ids) else len(text))
        rows.append({"idx": c, "tok_start": pos, "tok_end": e, "char_start": a, "char_end": b, "text": text[a:b],
                     "page_first": c + 1, "page_last": c + 1})
        pos, c = e, c + 1
    lib = SimpleNamespace(chunks=lambda doc_id, idx=None: rows if idx is None else [r for r in rows if r["idx"] in idx])
    return lib, rows


def test_quote_from_evidence_quotes_the_sentence_sharing_the_rarest_question_words():
    """The quote: in the retrieved chunk, the sentence with the most in-document idf of the
    question's words (not the one with the most common words), with its neighbours, within the
    limit; its text is the document's, its pages those of the chunks it spans."""
    from qa.abstain import DocVocabulary
    from qa.ask import quote_from_evidence

    text = ("It was a dark night and the house was cold. " * 6
            + "The house of Emma Woodhouse was handsome and her father was rich. "
            + "She was the youngest of the two daughters. "
            + "The rain fell on the roofs of the house. " * 8)
    lib, rows = _chunked_library(text)
    vocab = DocVocabulary(r["text"] for r in rows)
    target = next(r["idx"] for r in rows if "Woodhouse" in r["text"])
    q = quote_from_evidence(lib, "doc", target, "Who is the father of Emma Woodhouse, and was the house cold?", vocab,
                            weight=0.75)
    assert q["sentence"] == "The house of Emma Woodhouse was handsome and her father was rich."
    # the two sentences after it join first (QUOTE_GROW), then the one before
    assert q["text"].startswith("It was a dark night")
    assert q["text"].endswith("the two daughters. The rain fell on the roofs of the house.")
    assert text[q["char_start"]:q["char_end"]] == " ".join(q["text"].split()) and q["weight"] == 0.75
    assert q["pages"] == sorted({r["idx"] + 1 for r in rows if r["char_end"] > q["char_start"]
                                 and r["char_start"] < q["char_end"]})
    after = ("The house of Emma Woodhouse was handsome and her father was rich. She was the youngest of the two "
             "daughters. The rain fell on the roofs of the house.")
    q = quote_from_evidence(lib, "doc", target, "Who is Emma Woodhouse?", vocab, limit=len(after) + 10)
    assert q["text"] == after  # room for two more sentences: the two after it, not the one before
    short = quote_from_evidence(lib, "doc", target, "Who is Emma Woodhouse?", vocab, limit=80)
    assert short["sentence"] in short["text"] and len(short["text"]) <= 80
    assert quote_from_evidence(lib, "doc", len(rows) + 3, "Who is Emma?", vocab) is None  # no such chunk


def test_quote_chunk_prefers_the_retrieved_chunk_whose_passage_covers_the_question():
    """quote_chunk keeps the model's retrieved chunks and quotes the one maximising its retrieval
    score + window x the idf of the question words its neighbours hold and it lacks: a close second
    whose passage holds the question's other rare word wins; a far second does not; without scores
    or at window 0, the heaviest."""
    from qa.abstain import DocVocabulary
    from qa.ask import quote_chunk

    texts = ["Mrs. Weston came to tea.", "The old abbey of Donwell.", "Mr. Knightley owns it.",
             "The rain fell on Highbury.", "Donwell is grand.", "The rain fell again."]
    rows = [{"idx": i, "text": t} for i, t in enumerate(texts)]
    lib = SimpleNamespace(chunks=lambda doc_id, idx=None: [r for r in rows if idx is None or r["idx"] in idx])
    vocab = DocVocabulary(texts)
    ev = [{"chunk": 4, "weight": 0.6, "matter": None}, {"chunk": 1, "weight": 0.4, "matter": None}]
    q = "Who owns Donwell, Mr. Knightley?"  # chunk 1's neighbour (2) holds "knightley" and "owns"; chunk 4's do not
    near = [0.0, 1.0, 0.0, 0.0, 1.2, 0.0]
    assert quote_chunk(lib, "doc", ev, q, vocab, near, window=0.5)["chunk"] == 1
    far = [0.0, 1.0, 0.0, 0.0, 9.0, 0.0]
    assert quote_chunk(lib, "doc", ev, q, vocab, far, window=0.5)["chunk"] == 4
    assert quote_chunk(lib, "doc", ev, q, vocab, near, window=0.0)["chunk"] == 4
    assert quote_chunk(lib, "doc", ev, q, vocab, None, window=0.5)["chunk"] == 4
    # regression (hand-written musk-03): a contents-page chunk won by its neighbours' words
    tagged = [ev[0], ev[1] | {"matter": "contents"}]
    assert quote_chunk(lib, "doc", tagged, q, vocab, near, window=0.5)["chunk"] == 4


def test_missing_words_name_rare_words_the_document_never_uses():
    """Abstention's word test: a question word counts when it is not common (the model's list), not
    a number, and the document has neither it nor a word of the same stem."""
    from qa.abstain import DocVocabulary, missing_words
    from qa.ask import abstain_reason

    vocab = DocVocabulary(["Athos recognised the cofinal functor in 1625.", "Porthos renamed his lackey."])
    common = frozenset({"who", "is", "the", "of", "passage", "find"})
    assert missing_words("Who is Raoul, the son of Athos?", vocab, common) == ["raoul", "son"]
    assert missing_words("Find the passage: Athos recognises the cofinality in 1627", vocab, common) == []
    assert vocab.uses("renames") and not vocab.uses("ren") and vocab.idf("athos") < vocab.idf("raoul")
    assert abstain_reason({"missing_words": ["raoul"]}) == "The document never mentions \u201craoul\u201d."
    assert abstain_reason({"missing_words": []}).startswith("No passage stood out")


def test_reading_order_is_the_evidence_then_the_best_scored_chunks():
    from qa.ask import reading_order

    ev = [{"chunk": 5}, {"chunk": 2}]
    scores = [0.1, 9.0, 3.0, None, 7.0, 8.0, float("-inf")]
    assert reading_order(ev, scores, k=4) == [5, 2, 1, 4]
    assert reading_order(ev, None, k=4) == [5, 2]
    assert reading_order(ev * 3, scores, k=2) == [5, 2]


def test_read_answer_quotes_the_readers_sentence_with_its_short_answer():
    """ask's trained-reader path: the reader reads the evidence chunks and the next best-scored ones
    with their neighbours; the quote is its sentence grown by the next ones, with the short answer
    (a span of it), the chunk, pages and the reader's confidence; confidence() applies the calibrated
    test shipped beside it."""

    from qa import ask
    from qa.reader import Reader
    from drt_core.bm25 import BM25

    text = ("It rained all week in the town, and nobody went out of doors. " * 6
            + "The cottage was called Barton Cottage. It stood in a green valley near the sea. "
            + "Nothing else happened that year in the valley or the town. " * 6)
    lib, rows = _chunked_library(text)
    lib.home = "mem"
    lib.pages = lambda doc_id, with_text=False, numbers=None: [
        {"number": r["page_first"], "text": r["text"]} for r in rows if numbers is None or r["page_first"] in numbers]

    reader = coverage_reader()
    bm = BM25([r["text"] for r in rows])
    eng = SimpleNamespace(bm25_index=lambda state: bm)
    target = next(r["idx"] for r in rows if "Barton" in r["text"])
    other = (target + 3) % len(rows)
    q = "What was the cottage called?"
    scores = [0.0] * len(rows)
    scores[target] = 5.0
    ask._STATS.clear()
    quote, reading, b = ask.read_answer(lib, eng, None, "doc", q, [{"chunk": other, "weight": 1.0}], reader, scores)
    assert "The cottage was called Barton Cottage." in quote["text"] and quote["chunk"] == target
    assert quote["short"] == "Barton" and quote["short"] in quote["text"] and quote["weight"] == 0.0
    assert quote["retrieved"] is False and quote["rank"] == 2  # read after the evidence chunk, not retrieved
    assert quote["pages"] and " ".join(text[quote["char_start"]:quote["char_end"]].split()) == quote["text"]
    assert b is not None and b.shape == (len(rows),)
    assert ask.confidence(reader, lib, "doc", q, reading, b) is None  # no calibrated test shipped
    from qa.abstain_model import FEATURES

    test = {"features": list(FEATURES), "mean": [0.0] * len(FEATURES), "std": [1.0] * len(FEATURES),
            "w": [0.0] * len(FEATURES), "b": 0.0}
    sure = Reader(reader.sentence, reader.span, {"abstain": dict(test, threshold=-1.0)})
    unsure = Reader(reader.sentence, reader.span, {"abstain": dict(test, threshold=1.0)})
    assert ask.confidence(sure, lib, "doc", q, reading, b)["abstain"] is False
    assert ask.confidence(unsure, lib, "doc", q, reading, b)["abstain"] is True
    assert "no passage answers it" in ask.abstain_reason(
        {"confidence": ask.confidence(unsure, lib, "doc", q, reading, b)})
    off = Reader(reader.sentence, reader.span, {"abstain": dict(test, threshold=None)})
    c = ask.confidence(off, lib, "doc", q, reading, b)  # shipped uncalibrated: scored, never abstains
    assert c["abstain"] is False and c["threshold"] is None and isinstance(c["score"], float)


def test_the_rare_word_test_abstains_on_a_missing_name_or_two_missing_words_only():
    """A single missing lower-case word is most often the question's paraphrase ("hilltop",
    "renamed"): not decisive. A missing name ("Raoul"), or two missing words, are. Accents are
    folded: the question's "étale" is the LaTeX source's "\\'etale"."""
    from qa.abstain import DocVocabulary, decisive, missing_words

    vocab = DocVocabulary(["Athos and Porthos went up the hill to the top, and an \\'etale morphism was found."])
    common = frozenset({"who", "is", "the", "what", "did", "they", "see", "from", "son", "of", "went", "up"})
    assert "etale" not in missing_words("Which étale morphism?", vocab, common)
    assert "etale" in missing_words("Which étale morphism?", DocVocabulary(["no such word here"]), common)
    m = missing_words("What did they see from the hilltop?", vocab, common)
    assert m == ["hilltop"] and not decisive("What did they see from the hilltop?", m)
    m = missing_words("Who is Raoul, the son of Athos?", vocab, common)
    assert m == ["raoul"] and decisive("Who is Raoul, the son of Athos?", m)
    assert decisive("what of gerbes and stacks", ["gerbes", "stacks"])
    assert not decisive("Raoul went up", ["raoul"])  # the question's first word: capitalised by position only


def test_a_calibrated_abstention_makes_a_not_found_answer(monkeypatch):
    """_make_answer with a reader whose calibrated test abstains: "Not found", no quote, no short
    answer, the evidence kept (it crashed on the missing quote's short answer before)."""
    import numpy as np

    from drt_core.bm25 import BM25
    from qa import ask
    from qa.abstain_model import FEATURES
    from qa.reader import SENTENCE_FEATURES, SPAN_FEATURES, Reader, Scorer

    text = "It rained all week in the town. " * 8 + "The cottage was called Barton Cottage. " + "Nothing else. " * 8
    lib, rows = _chunked_library(text)
    lib.home = "mem2"
    lib.pages = lambda doc_id, with_text=False, numbers=None: [
        {"number": r["page_first"], "text": r["text"]} for r in rows if numbers is None or r["page_first"] in numbers]
    F, G = len(SENTENCE_FEATURES), len(SPAN_FEATURES)
    zero = lambda n: Scorer({"mean": np.zeros(n, np.float32), "std": np.ones(n, np.float32),  # noqa: E731
                             "W1": np.zeros((1, n), np.float32), "b1": np.zeros(1, np.float32),
                             "w2": np.zeros(1, np.float32), "w": np.zeros(n, np.float32)})
    test = {"features": list(FEATURES), "mean": [0.0] * len(FEATURES), "std": [1.0] * len(FEATURES),
            "w": [0.0] * len(FEATURES), "b": 0.0, "threshold": 1.0}
    reader = Reader(zero(F), zero(G), {"abstain": test})
    monkeypatch.setattr(ask, "_reader", lambda engine: reader)
    bm = BM25([r["text"] for r in rows])
    eng = SimpleNamespace(evidence=lambda state, trace: [(1, 1.0)], bm25_index=lambda state: bm,
                          cfg=SimpleNamespace(bm25_weight=2.0))
    trace = {"chunks": [{"scores": [1.0] * len(rows)}]}
    ask._STATS.clear()
    out = ask._make_answer(lib, eng, "doc", "What was the cottage called?", SimpleNamespace(n_chunks=len(rows)),
                           "", trace, [])
    assert out["answer"] == ask.NOT_FOUND and out["made"]["quote"] is None and out["made"]["short_answer"] is None
    assert out["made"]["confidence"]["abstain"] is True and out["evidence"]
    assert "no passage answers it" in ask.abstain_reason(out["made"])


def test_a_missing_accented_name_is_decisive():
    from qa.abstain import decisive

    assert decisive("Who is Fère?", ["fere"])


def test_a_titled_name_the_document_never_mentions_abstains_though_its_words_are_there():
    """ask --all asked "Who is Colonel Brandon?" of a novel with a Lady Brandon and a colonel, and
    quoted her: a titled name is looked up as a whole. Where the document has it, across a line
    break, nothing is missing; an untitled phrase ("Russian Emperor") is left alone."""
    from qa import ask
    from qa.abstain import names

    text = ("Lady Brandon had married a colonel of the guards, and the Russian ambassador dined with the "
            "emperor. " * 6 + "Then Mr.\nKnightley came in from the garden. " + "It rained. " * 30)
    lib, rows = _chunked_library(text)
    lib.home = "names"
    eng = SimpleNamespace(model_dir=None)
    assert ask.missing_words(lib, eng, "doc", "Who is Colonel Brandon?") == ["Colonel Brandon"]
    assert ask.missing_words(lib, eng, "doc", "Who is Lady Brandon, and whom did she marry?") == []
    assert ask.missing_words(lib, eng, "doc", "Why did Mr. Knightley come in?") == []
    assert ask.missing_words(lib, eng, "doc", "Whom did the Russian Emperor dine with?") == []
    assert ask.missing_words(lib, eng, "doc", "Where did Lady Brandon Gardens stand?") == []  # "Lady Brandon" is
    assert ask.abstain_reason({"missing_words": ["Colonel Brandon"]}) == (
        "The document never mentions \u201cColonel Brandon\u201d.")
    assert names("What did Sir Walter Elliot say to Lady Russell?") == [["Sir", "Walter", "Elliot"],
                                                                         ["Lady", "Russell"]]
    assert names("Colonel Brandon is whose friend?") == [["Colonel", "Brandon"]]
    assert names("Who Is Lady Russell") == [] and names("Why does Anne Elliot refuse him?") == []


def test_abstain_words_fold_accents_as_nfkd_without_combining_marks():
    """qa.abstain.words (a translate table since) equals the plain fold: NFKD, combining marks dropped."""
    import random
    import unicodedata

    from qa.abstain import words
    from qa.baselines import words as plain

    def fold(text):
        return plain("".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch)))

    rnd = random.Random(0)
    chars = [chr(c) for c in range(0x20, 0x3000) if not 0xD800 <= c <= 0xDFFF]
    texts = ["Fère étale \u2019s naïve Zoë", "حَبيبي habibi", "plain", "ﬁne Å ñ"]
    texts += ["".join(rnd.choice(chars) for _ in range(40)) for _ in range(300)]
    assert all(words(t) == fold(t) for t in texts)
    assert words("Fère étale") == ["fere", "etale"]


def test_passages_on_contents_or_index_pages_are_shown_last(library):
    """GNU Libtasn1's manual, tried as a new user would: the answer's 'Also relevant' were two chunks
    of its function index ("asn1_der_decoding . . . . 20")."""
    from types import SimpleNamespace

    from qa.ask import matter_last
    from tests.ingest.docstore import store_text

    index = "Function and Data Index\n" + "\n".join(f"asn1_f{i} {'. ' * 12}{i + 5}" for i in range(14))
    body = "The function decodes the DER encoding of a structure and fills it with the values found. " * 8
    doc_id = store_text(library, body + index, page_chars=len(body) + 2)
    chunks = library.chunks(doc_id)
    on_index = [c["idx"] for c in chunks if c["page_first"] == 2]
    on_body = [c["idx"] for c in chunks if c["page_last"] == 1]
    wins = [SimpleNamespace(chunk=c) for c in [on_index[0], on_body[0], on_index[1], on_body[1], on_body[2]]]
    got = [w.chunk for w in matter_last(library, doc_id, wins, 3)]
    assert got == on_body[:3]
    assert [w.chunk for w in matter_last(library, doc_id, wins[:2], 3)] == [on_body[0], on_index[0]]


def test_a_papers_reference_list_is_tagged_and_never_quoted(library):
    """itcs20, tried as a new user would: ask quoted a bibliography entry ("In Proceedings of the 2019 ACM
    Symposium on Principles of Distributed Computing, pages 471–480.") as the answer. The reference list
    (the part ingest.parts makes of the one "References" line, up to the appendix after it) is matter
    like a licence or contents page, labelled "reference list", and the reader never quotes it; the
    text before it and the appendix after it are no such matter."""

    from ingest.boilerplate import chunk_matter, matter_label
    from ingest.parts import document_text
    from qa import ask
    from qa.reader import DocStats
    from drt_core.bm25 import BM25
    from tests.ingest.docstore import store_text

    body = "It was a quiet day in the town and nobody said a word about it. " * 12
    found = "Our local coloring algorithm first appeared at a symposium on distributed computing. "
    refs = "References\n\n" + "".join(
        f"{i} A. Author and B. Author. A title number {i}. In Proceedings of the 2019 ACM Symposium on "
        f"Principles of Distributed Computing, pages {i}71–{i}80.\n" for i in range(1, 9))
    sections = [(1, "Introduction", body * 2 + found + body), (1, "Graphs", body),
                (1, "Open Problems", body + "\n\n" + refs), (1, "Omitted Proofs", body)]
    text = "A PAPER\n\n" + "".join(f"\n\n{t}\n\n{b}" for _, t, b in sections)
    outline = [{"level": lv, "title": t, "page": text.index(f"\n{t}\n") // 1200 + 1} for lv, t, _ in sections]
    doc = store_text(library, text, outline=outline, page_chars=1200)
    chunks = library.chunks(doc)
    full = document_text(library, doc)
    assert "\nReferences\n" in full  # (no page break cuts it)
    a, b = full.index("References\n"), full.index("\nOmitted Proofs")
    tags = chunk_matter(library, doc, chunks)
    inside = [c["idx"] for c in chunks if a <= c["char_start"] and c["char_end"] <= b]
    assert inside and all(tags.get(i) == "references" for i in inside)
    assert not any(tags.get(c["idx"]) for c in chunks if c["char_end"] <= a or c["char_start"] >= b)
    assert matter_label({"matter": tags[inside[0]]}) == "reference list"

    reader = coverage_reader()
    eng = SimpleNamespace(bm25_index=lambda state: BM25([c["text"] for c in chunks]))
    ask._STATS[(str(library.home), doc, None)] = DocStats([c["text"] for c in chunks])
    entry = next(c["idx"] for c in chunks if c["idx"] in inside and "Symposium" in c["text"])
    mine = next(c["idx"] for c in chunks if "local coloring" in c["text"])
    q = "What appeared at the ACM Symposium on Principles of Distributed Computing?"
    ev = [{"chunk": entry, "weight": 0.6, "matter": "references"}, {"chunk": mine, "weight": 0.4, "matter": None}]
    quote, _, _ = ask.read_answer(library, eng, None, doc, q, ev, reader, None)
    assert quote["chunk"] == mine and "local coloring" in quote["text"] and "Proceedings" not in quote["text"]
    assert ask.quotable(library, doc, [entry, mine]) == [mine]


def test_no_sentence_of_a_reference_list_is_quoted_from_a_chunk_it_shares(library):
    """itcs20's chunk 873 holds the end of Open Problems and the list's first entry: too little of the
    list to be tagged, so the reader could quote the entry, or a quote grown from the section's last
    sentence could run on into it. The list's characters are blank in every passage the reader reads."""

    from ingest.boilerplate import chunk_matter
    from ingest.parts import document_text
    from qa import ask
    from qa.reader import DocStats
    from drt_core.bm25 import BM25
    from tests.ingest.docstore import store_text

    body = "It was a quiet day in the town and nobody said a word about it. " * 12
    refs = "References\n\n" + "".join(
        f"{i} A. Author. A title number {i}. In Proceedings of the 2019 ACM Symposium on Principles of "
        f"Distributed Computing, pages {i}71–{i}80.\n" for i in range(1, 9))
    sections = [(1, "Introduction", body * 3), (1, "Open Problems", body * 2 + "\n\n" + refs),
                (1, "Omitted Proofs", body)]
    text = "A PAPER\n\n" + "".join(f"\n\n{t}\n\n{b}" for _, t, b in sections)
    outline = [{"level": lv, "title": t, "page": text.index(f"\n{t}\n") // 1200 + 1} for lv, t, _ in sections]
    doc = store_text(library, text, outline=outline, page_chars=1200)
    chunks = library.chunks(doc)
    a = document_text(library, doc).index("References\n")
    tags = chunk_matter(library, doc, chunks)
    shared = next(c for c in chunks if c["char_start"] < a < c["char_end"])
    assert tags.get(shared["idx"]) is None  # (the case: too little of the list to be tagged)

    reader = coverage_reader()
    eng = SimpleNamespace(bm25_index=lambda state: BM25([c["text"] for c in chunks]))
    ask._STATS[(str(library.home), doc, None)] = DocStats([c["text"] for c in chunks])
    q = "Who said a word about the quiet day in the town?"
    quote, _, _ = ask.read_answer(library, eng, None, doc, q, [{"chunk": shared["idx"], "weight": 1.0}], reader, None)
    assert "quiet day" in quote["text"] and "Author" not in quote["text"] and "References" not in quote["text"]
    ps, _ = ask.pool_passages(library, doc, [shared["idx"]])
    assert ps and "Author" not in ps[0].text and len(ps[0].text) == sum(
        len(c["text"]) for c in chunks if abs(c["idx"] - shared["idx"]) <= 1)


def coverage_reader():
    """A reader whose sentence score is the question's coverage and whose span score the capitals'
    share: a stand-in for the trained one where a test needs only its choices to be predictable."""
    import numpy as np

    from qa.reader import SENTENCE_FEATURES, SPAN_FEATURES, Reader, Scorer

    def linear(feature, names):
        F = len(names)
        w = np.zeros(F, np.float32)
        w[names.index(feature)] = 1.0
        return Scorer({"mean": np.zeros(F, np.float32), "std": np.ones(F, np.float32),
                       "W1": np.zeros((1, F), np.float32), "b1": np.zeros(1, np.float32),
                       "w2": np.zeros(1, np.float32), "w": w})

    return Reader(linear("cov", SENTENCE_FEATURES), linear("cap_frac", SPAN_FEATURES), {})
