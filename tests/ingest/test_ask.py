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


def test_sentence_around_finds_the_sentence_and_caps_its_length():
    from ingest.ask import sentence_around

    text = "First one. Emma Woodhouse, handsome, clever, and rich, had lived. Third here!"
    a, b = sentence_around(text, text.index("clever"))
    assert text[a:b] == "Emma Woodhouse, handsome, clever, and rich, had lived."
    a, b = sentence_around(text, 0)
    assert text[a:b] == "First one."
    long = "word " * 200
    a, b = sentence_around(long, 500, limit=100)
    assert b - a <= 100 and a <= 500 < b


def test_retrieval_z_and_abstention_threshold():
    from ingest.ask import abstain_threshold, retrieval_z

    trace = {"chunks": [{"scores": [0.0, 0.0, 0.0, 9.0, 0.0, 0.0, 100.0]}]}
    z = retrieval_z(trace, 6)  # the question's own chunk (index 6) is not the document's
    assert abs(z - (9.0 - 1.5) / (sum((x - 1.5) ** 2 for x in [0, 0, 0, 9, 0, 0]) / 6) ** 0.5) < 1e-9
    assert retrieval_z({"chunks": []}, 6) is None and retrieval_z({"chunks": [{"scores": None}]}, 3) is None
    assert retrieval_z(trace | {"chunks": [{"scores": [1.0, 1.0]}]}, 2) is None  # no spread
    assert abstain_threshold(SimpleNamespace(cfg=SimpleNamespace(abstain_z=2.5))) == 2.5
    assert abstain_threshold(SimpleNamespace(cfg=SimpleNamespace())) is None


def test_quote_from_pointer_quotes_the_sentence_the_model_points_into():
    from ingest.ask import quote_from_pointer
    from drt_core.tokenizer import encode

    text = ("It was a dark night. " * 6 + "Emma Woodhouse, handsome, clever, and rich, seemed to unite blessings. "
            + "The rain fell on the roofs. " * 8)
    ids = encode(text)
    rows, pos, c = [], 0, 0
    from drt_core.tokenizer import encode_with_offsets

    _, offs = encode_with_offsets(text)
    while pos < len(ids):  # chunks of 63 tokens, their character spans from the offsets
        e = min(pos + 63, len(ids))
        a, b = offs[pos][0], (offs[e][0] if e < len(ids) else len(text))
        rows.append({"idx": c, "tok_start": pos, "tok_end": e, "char_start": a, "char_end": b, "text": text[a:b],
                     "page_first": c + 1, "page_last": c + 1})
        pos, c = e, c + 1
    lib = SimpleNamespace(chunks=lambda doc_id, idx=None: rows if idx is None else [r for r in rows if r["idx"] in idx])
    target = next(i for i, (s, _) in enumerate(offs) if s >= text.index("clever"))
    pointer = {"gate": 0.7, "slots": [(target, 0.5), (3, 0.2), (target, 0.1), (len(ids) + 5, 0.9)]}
    q = quote_from_pointer(lib, "doc", pointer, len(ids))
    assert q["text"] == "Emma Woodhouse, handsome, clever, and rich, seemed to unite blessings."
    assert q["chunk"] == target // 63 and q["weight"] == 0.6  # two slots at one position add up
    assert text[q["char_start"]:q["char_end"]] == q["text"] and q["pages"] == [target // 63 + 1]
    assert quote_from_pointer(lib, "doc", {"slots": [(len(ids) + 1, 1.0)]}, len(ids)) is None  # past the document
    assert quote_from_pointer(lib, "doc", None, len(ids)) is None
