"""ingest.ask.generate: the one generation path of the app, the CLI and the UI."""

from __future__ import annotations

from types import SimpleNamespace

from ingest.ask import NO_REPEAT_NGRAM, generate


def test_answers_are_generated_greedily_without_repeated_ngrams():
    seen = {}

    class Eng:
        def generate(self, state, question, **kw):
            seen.update(kw)
            yield SimpleNamespace(text_delta="the fortnight", done=False)
            yield SimpleNamespace(text_delta="", done=True, answer="the fortnight", trace=None)

    deltas = []
    answer, trace = generate(Eng(), None, "Who is Emma?", max_new_tokens=8, on_delta=deltas.append)
    assert answer == "the fortnight" and deltas == ["the fortnight"] and trace is None
    assert seen == {"max_new_tokens": 8, "temperature": 0.0, "no_repeat_ngram": NO_REPEAT_NGRAM}
    assert NO_REPEAT_NGRAM >= 2


def test_sentence_spans_cut_at_sentence_ends_and_blank_lines():
    from ingest.ask import sentence_spans

    text = "First one. Emma Woodhouse, handsome, clever, and rich, had lived.\n\nThird here!  "
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "First one.", "Emma Woodhouse, handsome, clever, and rich, had lived.", "Third here!"]


def test_retrieval_z_and_abstention_threshold():
    from ingest.ask import abstain_threshold, retrieval_z

    trace = {"chunks": [{"scores": [0.0, 0.0, 0.0, 9.0, 0.0, 0.0, 100.0]}]}
    z = retrieval_z(trace, 6)  # the question's own chunk (index 6) is not the document's
    assert abs(z - (9.0 - 1.5) / (sum((x - 1.5) ** 2 for x in [0, 0, 0, 9, 0, 0]) / 6) ** 0.5) < 1e-9
    assert retrieval_z({"chunks": []}, 6) is None and retrieval_z({"chunks": [{"scores": None}]}, 3) is None
    assert retrieval_z(trace | {"chunks": [{"scores": [1.0, 1.0]}]}, 2) is None  # no spread
    assert abstain_threshold(SimpleNamespace(cfg=SimpleNamespace(abstain_z=2.5))) == 2.5
    assert abstain_threshold(SimpleNamespace(cfg=SimpleNamespace())) is None


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
    return SimpleNamespace(chunks=lambda doc_id, idx=None: rows if idx is None else [r for r in rows if r["idx"] in idx]), rows


def test_quote_from_evidence_quotes_the_sentence_sharing_the_rarest_question_words():
    """The quote: in the retrieved chunk, the sentence with the most in-document idf of the
    question's words (not the one with the most common words), with its neighbours, within the
    limit; its text is the document's, its pages those of the chunks it spans."""
    from ingest.abstain import DocVocabulary
    from ingest.ask import quote_from_evidence

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
    assert q["text"].startswith("It was a dark night") and q["text"].endswith("the two daughters. The rain fell on the roofs of the house.")
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
    from ingest.abstain import DocVocabulary
    from ingest.ask import quote_chunk

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
    from ingest.abstain import DocVocabulary, missing_words
    from ingest.ask import abstain_reason

    vocab = DocVocabulary(["Athos recognised the cofinal functor in 1625.", "Porthos renamed his lackey."])
    common = frozenset({"who", "is", "the", "of", "passage", "find"})
    assert missing_words("Who is Raoul, the son of Athos?", vocab, common) == ["raoul", "son"]
    assert missing_words("Find the passage: Athos recognises the cofinality in 1627", vocab, common) == []
    assert vocab.uses("renames") and not vocab.uses("ren") and vocab.idf("athos") < vocab.idf("raoul")
    assert abstain_reason({"missing_words": ["raoul"]}) == "The document never mentions \u201craoul\u201d."
    assert abstain_reason({"missing_words": []}).startswith("No passage stood out")
