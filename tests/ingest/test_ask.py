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
