"""Prompts and NIAH tasks: seeded, reproducible, the documented geometry, phrasing split."""

from __future__ import annotations

import random

import numpy as np
import pytest

from drt_core import prompts as P
from drt_core.train.tasks import cite, common, needles, phrasings
from drt_core import tokenizer as T


@pytest.fixture(scope="module")
def hay(tmp_path_factory):
    from pathlib import Path

    assets = Path(__file__).resolve().parents[2] / "assets"
    ids = T.encode((assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8"))
    return np.asarray(ids, dtype=np.uint16)


# ---------------------------------------------------------------- prompts


def test_qa_suffix_format():
    assert P.qa_suffix("What is it?") == "\n\nQuestion: What is it?\nAnswer:"
    assert P.qa_suffix("  multi\nline   q ") == "\n\nQuestion: multi line q\nAnswer:"
    assert P.summary_suffix() == "\n\nSummary:"
    assert P.answer_text("48213") == " 48213"
    with pytest.raises(ValueError):
        P.qa_suffix("   ")


def test_layout_prompt_geometry():
    for n_ctx in list(range(0, 130)) + [1000, 4095, 65536]:
        for n_prompt in (1, 2, 13, 62, 63, 64, 130):
            prompt = list(range(10, 10 + n_prompt))
            laid = P.layout_prompt(n_ctx, prompt)
            n_pad = len(laid) - n_prompt
            assert 0 <= n_pad < 2 * 63 - 1
            assert laid[:n_pad] == [T.PAD_ID] * n_pad and laid[n_pad:] == prompt
            p = n_ctx + len(laid) - 1  # the last prompt token's position
            assert p % 63 == 0  # last prompt token on the first slot of a chunk
            assert (n_ctx + len(laid)) % 63 == 1
            first = n_ctx + n_pad  # the prompt's first token: never in the context's last chunk
            assert n_ctx == 0 or first // 63 > (n_ctx - 1) // 63
            if n_prompt <= 63:  # the chunk before the answer's holds pads and prompt only
                assert n_ctx <= (p // 63 - 1) * 63 or n_prompt == 1
    assert P.layout_prompt(0, [5], chunk_tokens=10) == [5]
    assert len(P.layout_prompt(3, [5, 6], chunk_tokens=10)) == 18  # 3 + 7 + 6 pads + 2 -> last at 20
    assert len(P.layout_prompt(10, [5, 6], chunk_tokens=10)) == 11  # already at a boundary: 9 pads + 2
    with pytest.raises(ValueError):
        P.layout_prompt(5, [])


def test_qa_prompt_ids_ends_with_answer_colon():
    ids = P.qa_prompt_ids(100, "Who wrote it?")
    assert (100 + len(ids) - 1) % 63 == 0
    assert T.decode([i for i in ids if i != T.PAD_ID]) == P.qa_suffix("Who wrote it?")
    assert T.decode(ids[-1:]) == ":"
    assert T.decode([i for i in P.summary_prompt_ids(7) if i != T.PAD_ID]) == "\n\nSummary:"
    assert P.clean_answer(" 48213\nmore") == "48213"


# ---------------------------------------------------------------- tasks


@pytest.mark.parametrize("task", phrasings.TASK_NAMES)
def test_seeded_and_reproducible(task, hay):
    g_state, np_state = random.getstate(), np.random.get_state()
    a = needles.build(task, hay, 1500, 11)
    b = needles.build(task, hay, 1500, random.Random(11))
    c = needles.build(task, hay, 1500, 12)
    assert random.getstate() == g_state  # the global RNGs are never touched
    assert all((x == y).all() for x, y in zip(np_state[1:2], np.random.get_state()[1:2]))
    assert (a.ids == b.ids).all() and (a.labels == b.labels).all() and (a.weights == b.weights).all()
    assert a.answers == b.answers and a.needle_spans == b.needle_spans
    assert not (a.ids == c.ids).all() and a.answers != c.answers


@pytest.mark.parametrize("task", phrasings.TASK_NAMES)
@pytest.mark.parametrize("length", [600, 1000, 1237, 4097])
def test_geometry_and_labels(task, length, hay):
    n_pairs = 1 if task == "single" else 2
    e = needles.build(task, hay, length, length, n_pairs=n_pairs)
    assert e.ids.shape == e.labels.shape == e.weights.shape == (length,)
    assert e.ids.dtype == np.int64 and e.weights.dtype == np.float32
    assert len(e.answers) == len(e.answer_spans) == len(e.prompt_ends) == n_pairs
    for q, ans, (s, t), p in zip(e.questions, e.answers, e.answer_spans, e.prompt_ends):
        assert p % 63 == 0  # the ":" of "Answer:" on the first slot of a chunk
        assert s == p + 1  # the answer starts right after it, in the same chunk
        prompt = T.encode(P.qa_suffix(q))
        assert e.ids[p - len(prompt) + 1 : p + 1].tolist() == prompt
        assert T.decode(e.ids[s:t]) == P.answer_text(ans)
        assert T.decode(e.ids[t : t + 1]) == "\n"
        assert (e.weights[s : t + 1] == 5.0).all()
        assert all(c.isdigit() or c in "; " for c in ans)
    # needles lie in the context, at least 2 chunks before the first question
    for (s, t), text in zip(e.needle_spans, e.needles):
        assert T.decode(e.ids[s:t]) == " " + text
        assert t <= e.n_context - 2 * 63
    # labels: ids except pads; pads carry no weight
    pad = e.weights == 0
    assert (e.labels[pad] == -100).all() and (e.labels[~pad] == e.ids[~pad]).all()
    assert (e.ids[pad] == T.PAD_ID).all()
    assert (e.ids[: e.n_context] != T.PAD_ID).all()
    assert e.meta["n_right_pad"] < 63 * n_pairs + 70


def test_twohop_separator_never_continues_a_needles_first_code():
    # Regression (round 10): with the answer "v1, v2", the copy head's exact suffix match after "v1,"
    # pointed into "From v1, the next stop is v2" at " the", the needle's own continuation.
    needles, _ = phrasings.phrasing_templates("2hop", "all")
    for tpl in needles:
        after_a = tpl.split("{a}", 1)[1]
        assert not after_a.lstrip(" ").startswith(phrasings.TWOHOP_SEP), tpl
        assert phrasings.TWOHOP_SEP not in tpl


def test_needle_depth(hay):
    for depth in (0.0, 0.25, 0.5, 0.9, 1.0):
        e = needles.single(hay, 3000, 5, depth=depth)
        (s, _), = e.needle_spans
        max_pos = e.n_context - len(T.encode(" " + e.needles[0])) - 2 * 63
        assert abs(s - depth * max_pos) <= 260  # snapped to a nearby sentence end
    with pytest.raises(ValueError):
        needles.single(hay, 3000, 5, depth=1.5)


def test_task_semantics(hay):
    m = needles.multikey(hay, 2000, 3)
    assert len(m.needles) == 6 and len(set(m.needles)) == 6
    key = next(k for k in (f"{a}-{b}" for a in phrasings.KEY_ADJECTIVES for b in phrasings.KEY_NOUNS)
               if k in m.question)
    real = [n for n in m.needles if key in n]
    assert len(real) == 1 and m.answer in real[0]
    h = needles.two_hop(hay, 2000, 3)
    v1, v2 = h.answer.split("; ")
    assert phrasings.twohop_values(h.answer) == [v1, v2] and phrasings.twohop_answer(v1, v2) == h.answer
    import re

    (start,) = re.findall(r"\d+", h.question)
    text = " ".join(h.needles)
    assert len(h.needles) == 4  # two chains of two hops
    assert any(start in n and v1 in n for n in h.needles) and any(v1 in n and v2 in n for n in h.needles)
    assert text.count(start) == 1
    s = needles.single(hay, 2000, 3)
    assert len(s.needles) == 1 and s.answer in s.needles[0]
    assert 5 <= len(s.answer) <= 7 and s.answer[0] != "0"
    with pytest.raises(ValueError):
        needles.single(hay, 2000, 3, n_pairs=2)
    with pytest.raises(ValueError):
        needles.single(hay, 150, 3)  # too short to hold a needle and a question


def test_heldout_phrasings_disjoint(hay):
    for task in phrasings.TASK_NAMES:
        tn, tq = phrasings.phrasing_templates(task, "train")
        hn, hq = phrasings.phrasing_templates(task, "heldout")
        assert len(tn) >= 6 and len(hn) >= 2 and len(tq) >= 6 and len(hq) >= 2
        assert not set(tn) & set(hn) and not set(tq) & set(hq)
        for seed in range(6):
            e = needles.build(task, hay, 1200, seed, phrasings="heldout")
            trained = {q for q in tq}
            assert not any(_matches(t, e.question) for t in trained)
            assert any(_matches(t, e.question) for t in hq)
            assert any(_matches(t, e.needles[0]) for t in hn)


def _matches(template: str, text: str) -> bool:
    import re

    pat = re.escape(template)
    for f in ("value", "key", "a", "b", "start"):
        pat = pat.replace(re.escape("{" + f + "}"), r"[\w-]+")
    return re.fullmatch(pat, text) is not None


def test_short_haystack_is_tiled(hay):
    e = needles.single(hay[:200], 1500, 1)
    assert e.ids.shape == (1500,)


def test_score_answer():
    assert needles.score_answer(" 48213\nblah", "48213")
    assert needles.score_answer("\n48213", "48213")
    assert not needles.score_answer(" 48214", "48213")
    assert needles.score_answer(" 111, 222 and more", "111, 222")
    assert not needles.score_answer(" 222, 111", "111, 222")
    assert not needles.score_answer("", "111")


def test_build_training_example_for_train_loop(hay):
    tok = T.load_tokenizer()
    hs = hay[:504].tolist()
    a = needles.build_training_example("multikey", hs, tok, random.Random(4), pairs=4, answer_weight=3.0)
    b = needles.build_training_example("multikey", hs, None, random.Random(4), pairs=4, answer_weight=3.0)
    assert (a["ids"] == b["ids"]).all() and len(a["ids"]) == 504
    assert 1 <= a["pairs"] <= 4 and len(a["answers"]) == a["pairs"]
    assert all(p % 63 == 0 for p in a["prompt_ends"])
    assert a["weights"].max() == 3.0
    s = needles.build_training_example("single", hay[:1000].tolist(), tok, random.Random(4), pairs=4)
    assert s["pairs"] == 1
    with pytest.raises(common.TooShort):
        needles.build_training_example("2hop", hay[:150].tolist(), tok, random.Random(4), pairs=4)


def test_value_span_is_the_answer_inside_its_needle(hay):
    """value_span (the NIAH bench's chunk-boundary column): the ids at the span decode to the
    answer with its leading space, inside the real needle, for single and multi-key; and some
    seeds put a value across a chunk boundary, others not (both cases occur)."""
    across = set()
    for seed in range(40):
        ex = needles.single(hay, 3000, seed, depth=(seed + 0.5) / 40) if seed % 2 else needles.multikey(hay, 3000, seed)
        v0, v1 = needles.value_span(ex, 0)
        assert T.decode(ex.ids[v0:v1].tolist()) == " " + ex.answer
        s, e = ex.needle_spans[ex.meta["real_needles"][0]]
        assert s <= v0 < v1 <= e
        (_, (target, *_)), *_ = needles.retrieval_targets(ex)  # the bench reads its hit chunk from value_span
        assert v0 // 63 == target
        across.add(v0 // 63 != (v1 - 1) // 63)
    assert across == {True, False}
    with pytest.raises(ValueError):
        needles.value_span(needles.two_hop(hay, 2000, 3))


@pytest.mark.parametrize("task", ["single", "multikey"])
def test_split_needles_start_their_value_in_a_new_chunk(task, hay):
    """split_frac=1 (train --task-split): every needle's value starts in the first SPLIT_SLOTS
    slots of its chunk, so the words that name it are in the chunk before, and the retrieval
    target is the value's chunk; the text is otherwise intact (needles whole, disjoint, the
    haystack in order). Without it such needles are rare (natural positions)."""
    n_split = n_plain = n = 0
    for seed in range(12):
        ex = needles.build(task, hay, 3000, seed, n_pairs=1 if task == "single" else 3, split_frac=1.0)
        plain = needles.build(task, hay, 3000, seed, n_pairs=1 if task == "single" else 3)
        assert sorted(ex.needles) == sorted(plain.needles) and ex.answers == plain.answers
        spans = sorted(ex.needle_spans)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # needles never overlap
        assert all(T.decode(ex.ids[s:e].tolist()).strip() in ex.needles for s, e in ex.needle_spans)
        targets = dict(needles.retrieval_targets(ex))
        for q in range(len(ex.answers)):
            v0, v1 = needles.value_span(ex, q)
            assert T.decode(ex.ids[v0:v1].tolist()) == " " + ex.answers[q]
            n += 1
            n_split += v0 % 63 < needles.SPLIT_SLOTS
            n_plain += needles.value_span(plain, q)[0] % 63 < needles.SPLIT_SLOTS
            s, _ = next(sp for sp in ex.needle_spans if sp[0] <= v0 < sp[1])
            assert s // 63 < v0 // 63 or v0 % 63 == s % 63  # the needle's words begin in the chunk before
        assert all(t[0] == needles.value_span(ex, q)[0] // 63 for q, (row, t) in enumerate(sorted(targets.items())))
    assert n_split == n and n_plain < n / 3
    with pytest.raises(ValueError, match="split_frac"):
        needles.build(task, hay, 3000, 0, split_frac=1.5)


@pytest.mark.parametrize("task", ["single", "multikey"])
def test_splice_passages_writes_hubs_at_chunk_ends_and_never_touches_needles_or_questions(task, hay):
    """train --hard-negatives: each passage (a chunk and the 16 tokens its key reads before it)
    ends at a chunk's end; the needles, their chunks and everything from the first question on
    are unchanged, so the retrieval targets are too; passages never share a chunk."""
    passages = np.arange(5000, 5000 + 3 * 79, dtype=np.int64).reshape(3, 79)
    for seed in range(6):
        ex = needles.build(task, hay, 3000, seed, n_pairs=1 if task == "single" else 3)
        ids = ex.ids.copy()
        done = needles.splice_passages(ex, ids, passages, 12, random.Random(seed))
        assert len(done) == 12
        for c in done:
            assert any(np.array_equal(ids[(c + 1) * 63 - 79:(c + 1) * 63], p) for p in passages)
        changed = np.flatnonzero(ids != ex.ids)
        protected = {p for a, b in ex.needle_spans for p in range(a // 63 * 63, (b - 1) // 63 * 63 + 63)}
        assert not protected & set(changed.tolist())
        assert changed.max() < ex.n_context // 63 * 63
        assert all(np.array_equal(ids[a:b], ex.ids[a:b]) for a, b in ex.needle_spans)
        spliced = needles.NIAHExample(**{**ex.__dict__, "ids": ids})
        assert needles.retrieval_targets(spliced) == needles.retrieval_targets(ex)
        assert len({c for c in done} | {c - 1 for c in done}) == 2 * len(done)  # no shared chunk
    # a short haystack: fewer free chunks than asked, never an error
    ex = needles.build(task, hay, 700, 0, n_pairs=1)
    assert len(needles.splice_passages(ex, ex.ids.copy(), passages, 50, random.Random(0))) < 50


def test_rename_labels_renames_statement_labels_consistently_and_keeps_the_citations():
    """train --cite-rename: every statement label name is replaced in its \\label and its \\refs by
    one new name of the same kind from the vocabulary (none of the old names survive); section
    labels are kept; the citation pairs are the same chunks' pairs up to the shift that
    re-tokenising brings; the row keeps its length (pads at the end, or cut)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "assets" / "stacks-brauer.tex").read_text(encoding="utf-8")
    ids = np.asarray(T.encode(text)[:6000], dtype=np.int64)
    ids[3000] = T.EOT_ID  # two documents in one window
    words = cite.statement_label_words(text)
    assert "brauer" in words and all(w.isalpha() for w in words)
    before = T.decode(ids.tolist())
    out = cite.rename_labels(ids, random.Random(0), words)
    assert len(out) == len(ids) and (out == T.EOT_ID).sum() == 1
    after = T.decode(out.tolist())
    old = {m.group(1) for m in re.finditer(r"\\(?:label|ref)\{([^}]+)\}", before)}
    new = {m.group(1) for m in re.finditer(r"\\(?:label|ref)\{([^}]+)\}", after)}
    statements = {n for n in old if n.split("-")[0] in cite.STATEMENT_KINDS}
    assert statements and not statements & new
    assert old - statements <= new  # section labels unchanged
    for n in new - (old - statements):
        kind, *rest = n.split("-")
        assert kind in cite.STATEMENT_KINDS and set(rest) <= set(words)
    pairs_before = cite.citation_targets(ids.tolist())
    pairs_after = cite.citation_targets(out.tolist())
    assert abs(len(pairs_after) - len(pairs_before)) <= 2 and len(pairs_after) > 5
    # the same seed renames the same way; another does not
    assert np.array_equal(cite.rename_labels(ids, random.Random(0), words), out)
    assert not np.array_equal(cite.rename_labels(ids, random.Random(1), words), out)


def test_build_qa_example_layout_and_targets():
    """A qa row: a window holding the passage (at least `margin` tokens before its end), the
    question laid out by prompts.layout_prompt, the answer; the retrieval row is the one serving
    the answer's chunk and its targets are the chunks of the answer and of the passage's start."""
    import random

    from drt_core.train.tasks.common import TooShort
    from drt_core.train.tasks.questions import build_qa_example

    doc = np.arange(100, 100 + 5000) % 7000 + 3
    item = {"question": "Who is X?", "answer": "a man", "passage_tok": [2000, 2080], "ans_tok": [2040, 2045]}
    enc = lambda s: [10 + (ord(ch) % 50) for ch in s]  # noqa: E731  a toy tokenizer: one id per character
    for seed in range(20):
        ex = build_qa_example(doc, item, 1500, random.Random(seed), encode=enc, margin=320)
        ids, w0 = ex["ids"], ex["window_start"]
        assert len(ids) == len(ex["labels"]) == len(ex["weights"]) == 1500
        n_win = ex["row"] * 63  # the window ends in the chunks before the question's
        assert w0 <= 2000 and 2080 + 320 <= w0 + n_win + 62
        assert list(ids[2000 - w0: 2080 - w0]) == list(doc[2000:2080])  # the passage, in place
        a0, a1 = ex["answer_span"]
        assert (a0 - 1) % 63 == 0 and ex["row"] == (a0 - 1) // 63 - 1  # the prompt's last token starts a chunk
        assert list(ids[a0:a1]) == enc(" a man")
        assert ex["targets"] == sorted({(2040 - w0) // 63, (2000 - w0) // 63})
        assert (ex["labels"][ids == 0] == -100).all() and (ex["weights"][a0:a1] == 5.0).all()
    with pytest.raises(TooShort):
        build_qa_example(doc, item, 300, random.Random(0), encode=enc)
    short = doc[:900]  # a document shorter than the window: the row is right-padded
    ex = build_qa_example(short, {**item, "passage_tok": [100, 150], "ans_tok": [120, 125]}, 1500, random.Random(1),
                          encode=enc)
    assert ex["window_start"] == 0 and (ex["ids"][-50:] == 0).all() and (ex["labels"][-50:] == -100).all()


@pytest.mark.parametrize("style", cite.LABEL_STYLES)
def test_restyle_labels_renames_every_label_consistently_and_keeps_the_citations(style):
    """word_gates --label-styles: each label is renamed in its \\label and every \\ref as papers write
    them (one new name per label, no two alike; references to other chapters kept); with cref,
    "Lemma \\ref{" is "\\cref{"; the chapter's citation pairs cite the same statements."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "assets" / "stacks-brauer.tex").read_text(encoding="utf-8")
    for cref in (False, True):
        out, renamed = cite.restyle_labels(text, style, cref)
        old = [m.group(1) for m in re.finditer(r"\\label\{([^}]+)\}", text)]
        assert set(renamed) == set(old) and len(set(renamed.values())) == len(set(old))
        if style != "stacks":
            assert not set(old) & set(renamed.values())
            assert not re.search(r"\\(?:label|ref|cref)\{(?:lemma|section)-", out)
        refs = re.findall(r"\\(?:ref|cref)\{([^}]+)\}", out)
        outside = set(refs) - set(renamed.values())  # other chapters' labels ("algebra-lemma-...") are kept
        assert refs and outside and not outside & set(renamed)
        assert ("Lemma \\ref{" in out) == (not cref) and ("\\cref{" in out) == cref
        statements = cite.statement_labels(renamed)
        one = list(range(len(text)))  # one chunk per character: compare the cited names
        got = {(renamed[n]) for _, _, n in cite.citation_pairs(text, one, 40)}
        assert got and {n for _, _, n in cite.citation_pairs(out, list(range(len(out))), 40, statements)} == got
    with pytest.raises(ValueError, match="unknown label style"):
        cite.restyle_labels(text, "fancy")
