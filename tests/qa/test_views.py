"""Spoiler-safe reading (`ask --before-page N`) and the whole library (`ask --all`), on a real
(random, tiny) model: causal retrieval makes the truncated reading exact."""

from __future__ import annotations

import hashlib

import pytest

from qa.ask import ask, ask_all
from qa.views import BeforePage
from qa.summary import summarize
from qa.errors import QAError
from ingest.pipeline import ingest, prefill_document


@pytest.fixture(scope="module", params=["reader", "cross-encoder"])
def engine(request):
    """A random tiny model with the shipped tokenizer and answer reader; the second with the shipped
    cross-encoder too (ask's default path)."""
    from pathlib import Path

    import torch

    from drt_core.hf_config import DRTConfig
    from drt_core.engine import Engine
    from drt_core.modeling import DRTForCausalLM
    import shutil
    import tempfile

    shipped = Path(__file__).resolve().parents[2] / "checkpoints" / "drt-tiny"
    out = Path(tempfile.mkdtemp(prefix="drt-before-page-"))
    torch.manual_seed(0)
    DRTForCausalLM(DRTConfig.from_preset("tiny", vocab_size=8192)).save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "reader.safetensors",
                 "reader.json", "common_words.txt",
                 *(("cross_encoder.safetensors", "cross_encoder.json") if request.param == "cross-encoder" else ())):
        if (shipped / name).exists():
            shutil.copy(shipped / name, out / name)
    yield Engine.from_pretrained(out, device="cpu")
    shutil.rmtree(out, ignore_errors=True)


def test_before_page_retrieves_nothing_at_or_after_it_and_matches_the_truncated_document(library, engine, assets):
    res = ingest(assets / "emma-pp2-21.pdf", library=library, engine=engine)
    doc = res.doc_id
    q = "Who is Mr. Knightley?"
    view = BeforePage(library, doc, 8)
    out = ask(library, engine, doc, q, max_new_tokens=8, before_page=8)
    assert out["evidence"] and all(p < 8 for e in out["evidence"] for p in e["pages"])
    assert out["quote"] is None or all(p < 8 for p in out["quote"]["pages"])
    assert out["trace"]["answer"]["before_page"] == 8
    short = ask(library, engine, truncated(library, engine, doc, view), q, max_new_tokens=8)
    assert short["answer"] == out["answer"]
    assert ([(e["chunk"], e["weight"]) for e in short["evidence"]]
            == [(e["chunk"], e["weight"]) for e in out["evidence"]])


def test_a_cut_starts_from_the_stored_snapshot_before_it_with_the_same_numbers(library, engine, assets, monkeypatch):
    """Spoiler-safe reading prefilled the document from its start up to the cut (54 s on a 200K-token
    book). The stored state now keeps a snapshot of its carry every state_io.SNAPSHOT_TOKENS, and the
    cut starts from the last one before it, on the stored chunks: the same answer and evidence as
    from the start, and as the document truncated there."""
    from drt_core import state_io
    from ingest.pipeline import ready_state
    from qa import views

    monkeypatch.setattr(state_io, "SNAPSHOT_TOKENS", 3000)  # a snapshot at each of the excerpt's checkpoints
    doc = ingest(assets / "emma-pp2-21.pdf", library=library, engine=engine).doc_id
    full = ready_state(library, engine, doc)
    snaps = full.memory.meta["snapshots"]
    assert len(snaps) >= 2 and all((full.directory / s["file"]).exists() for s in snaps)
    view = BeforePage(library, doc, 15)
    start = engine.prefix(full, view.n_tokens)
    assert start.n_tokens == max(s["n_tokens"] for s in snaps if s["n_tokens"] <= view.n_tokens) > 0
    assert engine.prefix(full, snaps[0]["n_tokens"] - 1) is None  # before the first snapshot: from the start
    stray = full.directory / "snap-7.safetensors"  # written by a prefill killed before its commit
    stray.write_bytes(b"torn")
    engine.open_state(full.directory)
    assert not stray.exists() and all((full.directory / s["file"]).exists() for s in snaps)
    views._PREFIXES.clear()
    a = views.prefix_state(view, engine, doc, view.n_tokens, full=full)
    views._PREFIXES.clear()
    b = views.prefix_state(view, engine, doc, view.n_tokens)
    views._PREFIXES.clear()
    assert (a.n_tokens, a.n_chunks) == (b.n_tokens, b.n_chunks) == (view.n_tokens, view.limit)
    q = "Who is Mr. Knightley?"
    assert engine.question_scores(a, q).tolist() == engine.question_scores(b, q).tolist()
    out = ask(library, engine, doc, q, max_new_tokens=8, before_page=15)  # through the snapshot
    short = ask(library, engine, truncated(library, engine, doc, view), q, max_new_tokens=8)
    assert short["answer"] == out["answer"]
    assert ([(e["chunk"], e["weight"]) for e in short["evidence"]]
            == [(e["chunk"], e["weight"]) for e in out["evidence"]])


def truncated(library, engine, doc: str, view: BeforePage) -> str:
    """The document truncated where the reading stops: the same pages, chunks and token ids,
    stored anew and prefilled; its id."""
    pages = library.pages(doc, with_text=True)
    chunks = library.chunks(doc)[: view.limit]
    ids = library.token_ids(doc)[: view.n_tokens]
    cut = pages[chunks[-1]["page_last"] - 1]
    kept = [p for p in pages if p["number"] < cut["number"]] + [
        dict(cut, text=cut["text"][: chunks[-1]["char_end"] - cut["char_start"]], char_end=chunks[-1]["char_end"])]
    d = dict(library.document(doc), id=hashlib.sha256(b"truncated").hexdigest(), n_pages=len(kept),
             n_chunks=len(chunks), n_tokens=len(ids), warnings=[])
    d.pop("created_at", None)
    d.pop("prefill", None)
    library.add_document(d, [{k: p[k] for k in ("number", "label", "char_start", "char_end", "text")} for p in kept],
                         chunks, ids)
    prefill_document(library, engine, d["id"])
    return d["id"]


def test_story_so_far_shows_nothing_from_page_n_on_and_matches_the_truncated_document(library, engine, assets):
    doc = ingest(assets / "emma-pp2-21.pdf", library=library, engine=engine).doc_id
    view = BeforePage(library, doc, 12)
    so_far = summarize(library, engine, doc, before_page=12)
    rows = so_far["trace"]["sentences"]
    assert rows and all(p < 12 for r in rows for p in r["pages"])
    assert all(p < 12 for e in so_far["evidence"] for p in e["pages"])
    assert so_far["trace"]["before_page"] == 12 and so_far["summary"].startswith("The story so far, before page 12.")
    whole = summarize(library, engine, doc)
    assert any(p >= 12 for r in whole["trace"]["sentences"] for p in r["pages"])  # the cut is real
    short = summarize(library, engine, truncated(library, engine, doc, view))
    assert ([(r["text"], r["pages"], r["chunks"]) for r in short["trace"]["sentences"]]
            == [(r["text"], r["pages"], r["chunks"]) for r in rows])


def test_before_page_errors(library, engine, assets):
    res = ingest(assets / "emma-pp2-21.pdf", library=library, engine=engine)
    with pytest.raises(QAError, match="between 2 and 20"):
        ask(library, engine, res.doc_id, "Who?", before_page=99)
    with pytest.raises(QAError, match="between 2 and 20"):
        BeforePage(library, res.doc_id, 1)


def test_ask_all_groups_answers_by_document(library, engine, assets):
    a = ingest(assets / "emma-pp2-21.pdf", library=library, engine=engine).doc_id
    b = ingest(assets / "frankenstein_excerpt.txt", library=library, engine=engine).doc_id
    out = ask_all(library, engine, "Who is Mr. Knightley?", max_new_tokens=8)
    got = [d["doc_id"] for d in out["documents"]]
    assert sorted(got) == sorted([a, b]) and out["question"] == "Who is Mr. Knightley?"
    for d in out["documents"]:
        assert {"answer", "evidence", "trace", "title"} <= set(d)
        assert all(e["chunk"] < library.document(d["doc_id"])["n_chunks"] for e in d["evidence"])


def test_ask_all_abstains_in_a_document_without_the_titled_name(library, engine, assets, tmp_path):
    """Asked of the whole library, "Who is Colonel Brandon?" is not answered by a story whose Lady
    Brandon married a colonel: that document says "Not found" and names what it lacks. "Who is Lady
    Brandon?" lacks no word there; whether the cross-encoder's P reaches the calibrated threshold is
    the checkpoint's (shipped: 0.11 on this text), so the passage is quoted or listed as the closest."""
    story = tmp_path / "brandon.txt"
    story.write_text("THE BRANDONS\n\n" + ("Lady Brandon had married a colonel of the guards, and every "
                                            "summer she walked along the river to the mill. ") * 60)
    b = ingest(story, library=library, engine=engine).doc_id
    ingest(assets / "frankenstein_excerpt.txt", library=library, engine=engine)
    out = ask_all(library, engine, "Who is Colonel Brandon?", max_new_tokens=8)
    doc = next(d for d in out["documents"] if d["doc_id"] == b)
    assert doc["abstained"] and doc["missing_words"] == ["Colonel Brandon"]
    assert doc["answer"].startswith("Not found in this document")
    lady = ask(library, engine, b, "Who is Lady Brandon?", max_new_tokens=8, causal=False)
    assert lady["missing_words"] == []  # her name is in it: the rare-word test does not abstain
    shown = [lady["answer"]] + [p["text"] for p in lady.get("passages", [])]
    assert any("Lady Brandon had married" in t for t in shown)  # quoted, or listed as the closest passage


def _ngrams(text: str, n: int = 6) -> set[tuple[str, ...]]:
    import re

    w = re.findall(r"\w+", text.lower())
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def _shown_texts(out: dict) -> list[str]:
    """Every text a reader is shown with a (masked) answer."""
    texts = [out["answer"] or ""] + [e["text"] for e in out["evidence"]]
    q = out.get("quote") or {}
    texts += [q.get("text") or "", q.get("sentence") or "", q.get("short") or "", out.get("short_answer") or ""]
    texts += [p["text"] for p in out.get("passages") or []]
    return texts


@pytest.mark.parametrize("question", ["Who is Mr. Knightley?",
                                      "How long had Miss Taylor been in Mr. Woodhouse's family?"])
def test_a_masked_chunk_never_shows_in_the_answer(library, engine, assets, question):
    """Issue 58, item 3: with chunks masked, no quote, passage or evidence shows their text, even a
    sentence that crosses a chunk boundary into one (it showed in the quote before). Every other chunk
    of the excerpt's first 60 is masked, so any quote of more than one chunk would cross into one."""
    doc = ingest(assets / "emma-pp2-21.pdf", library=library, engine=engine).doc_id
    rows = library.chunks(doc)
    barred = [r["idx"] for r in rows[:60] if r["idx"] % 2 == 1]
    secret = set().union(*(_ngrams(r["text"]) for r in rows if r["idx"] in barred))
    secret -= set().union(*(_ngrams(r["text"]) for r in rows if r["idx"] not in barred))
    out = ask(library, engine, doc, question, max_new_tokens=8, mask=barred, causal=False)
    assert out["masked"] == sorted(barred)
    assert all(e["chunk"] not in barred for e in out["evidence"])
    for t in _shown_texts(out):
        assert not (_ngrams(t) & secret), t


@pytest.mark.parametrize("engine", ["cross-encoder"], indirect=True)  # the passages shown are the cross-encoder's
def test_the_unmasked_answer_is_shown_as_the_answer_itself_was(library, engine, assets):
    """Walk 11, item 12: Mask and regenerate's *Before* column showed the unmasked answer without its
    "Also relevant" passages and with "(the passage is shown first under Evidence)", unlike the chat's
    rendering of the same answer: trace["answer"]["unmasked"] carried no passages. It carries what the
    rendering (ui.render.answer_md, the chat's and the column's) reads of it."""
    from ui.render import answer_md

    doc = ingest(assets / "emma-pp2-21.pdf", library=library, engine=engine).doc_id
    question = "How long had Miss Taylor been in Mr. Woodhouse's family?"
    plain = ask(library, engine, doc, question, max_new_tokens=8, causal=False)
    assert plain["passages"] and not plain["abstained"]
    out = ask(library, engine, doc, question, max_new_tokens=8, causal=False, mask=[plain["quote"]["chunk"]])
    before = out["unmasked"]
    assert before["passages"] == plain["passages"] and before["confidence"] == plain["confidence"]
    assert answer_md(before) == answer_md(plain) and "Also relevant" in answer_md(before)
    assert "shown first under Evidence" not in answer_md(before)


@pytest.mark.parametrize("engine", ["cross-encoder"], indirect=True)  # the cross-encoder's abstention
def test_who_is_someone_the_document_names_often_is_answered_by_the_introduction(library, engine, tmp_path,
                                                                                monkeypatch):
    """Tried as a new user would: "Who is Gilbert Blythe?" of a novel naming him 107 times said "Not
    found" (the cross-encoder's best P below the threshold). A person the document names at least
    WHO_MENTIONS times is answered with the passage that introduces them (their first mention),
    whatever the P; a name the document lacks still gets "Not found"."""
    from qa import ask as ask_mod
    from qa import rerank

    assert (engine.model_dir / "cross_encoder.safetensors").exists()
    story = tmp_path / "mill.txt"
    story.write_text("THE MILL\n\n" + "The river ran past the old mill all summer long, and the wheel turned. " * 30
                     + "Then Jonas Whitmore came to the valley, the new miller's apprentice from the coast. "
                     + "The wheel turned and the river ran on past the mill through the long dry summer. " * 30
                     + "Jonas Whitmore mended the sluice. " * 4)
    doc = ingest(story, library=library, engine=engine).doc_id
    assert ask_mod.named(library, doc, "Who is Jonas Whitmore?") == 5
    monkeypatch.setattr(rerank, "decide", lambda wins, cal: (True, 0.01))  # every P below the threshold
    out = ask(library, engine, doc, "Who is Jonas Whitmore?", max_new_tokens=8, causal=False)
    assert not out["abstained"] and out["quote"]["introduces"] == "Jonas Whitmore"
    assert "Jonas Whitmore came to the valley" in out["answer"]
    gone = ask(library, engine, doc, "Who is Ada Pennington?", max_new_tokens=8, causal=False)
    assert gone["abstained"] and gone["answer"].startswith("Not found in this document")


@pytest.mark.parametrize("engine", ["cross-encoder"], indirect=True)
def test_who_is_someone_named_often_is_answered_by_the_introduction_however_sure_the_reading(
        library, engine, tmp_path, monkeypatch):
    """Walk 11: "Who is Weena?" quoted a passing mention (p. 58, "Weena, who had been rolling a sea
    urchin ...") though the outline has her introduced on p. 38: the introduction was put first only
    when the cross-encoder was unsure. It now goes first whenever the document names the person
    WHO_MENTIONS times (the development pool's 52 "Who is X?" questions: 6 quotes gained, 1 lost)."""
    from qa import ask as ask_mod
    from qa import rerank

    story = tmp_path / "glass.txt"
    story.write_text("THE GLASS\n\n" + "The dust lay thick on the glass cases of the hall all day. " * 30
                     + "Then I found that her name was Weena, a little creature of the river people. "
                     + "The dust lay thick and the long hall was silent in the afternoon light. " * 30
                     + "Weena, who was a little girl of the river people, was rolling a sea urchin. " * 6)
    doc = ingest(story, library=library, engine=engine).doc_id
    assert ask_mod.named(library, doc, "Who is Weena?") >= ask_mod.WHO_MENTIONS
    monkeypatch.setattr(rerank, "decide", lambda wins, cal: (False, 0.99))  # sure of its reading
    out = ask(library, engine, doc, "Who is Weena?", max_new_tokens=8, causal=False)
    assert out["quote"]["introduces"] == "Weena" and "her name was Weena" in out["answer"]


@pytest.mark.parametrize("engine", ["cross-encoder"], indirect=True)
def test_a_year_or_a_number_asked_for_and_not_in_the_best_passage_is_not_found(library, engine, tmp_path,
                                                                                monkeypatch):
    """Sealed and development sets ask "In what year ...?" and "How many ...?" of books that never say:
    the best passage then holds no year or number at all, and was quoted as the answer (12 of the
    development pool's 126 unanswerable questions, and no right quote lacked one). Such a quote cannot
    answer: "Not found", with the reason, and the closest passages still listed."""
    from qa import ask as ask_mod
    from qa import rerank

    story = tmp_path / "mill.txt"
    story.write_text("THE MILL\n\n" + "The river ran past the old mill all summer long, and the wheel turned. " * 30
                     + "The mill was built by the miller's grandfather in 1790, of grey stone from the hill. "
                     + "The wheel turned and the river ran on past the mill through the long dry summer. " * 30)
    doc = ingest(story, library=library, engine=engine).doc_id
    monkeypatch.setattr(rerank, "decide", lambda wins, cal: (False, 0.9))  # every reading sure of itself
    built = ask(library, engine, doc, "In what year was the mill built?", max_new_tokens=8, causal=False)
    assert not built["abstained"] and "1790" in built["answer"]
    wheels = ask(library, engine, doc, "How many fish did the river carry past the wheel?", max_new_tokens=8,
                 causal=False)
    assert wheels["abstained"] and wheels["answer"].startswith("Not found") and wheels["passages"], wheels["answer"]
    assert wheels["confidence"]["lacks"] == "number"
    assert "holds no number" in ask_mod.abstain_reason(wheels)
    who = ask(library, engine, doc, "What was the name of the miller's grandfather?", max_new_tokens=8, causal=False)
    assert who["abstained"] and who["confidence"]["lacks"] == "name" and who["passages"]
    assert "holds no name" in ask_mod.abstain_reason(who)


@pytest.mark.parametrize("engine", ["cross-encoder"], indirect=True)
def test_an_amount_asked_for_and_stated_once_in_the_quote_is_the_short_answer(library, engine, tmp_path,
                                                                               monkeypatch):
    """"How many acres ...?" quoted with the one sentence that states the acres: the amount is the
    bold short answer (qa.short), in the answer, the CLI's text and the chat; a question that asks for
    no amount gets none."""
    from qa import rerank
    from qa.cli import answer_text
    from ui.render import answer_md, md_escape

    story = tmp_path / "farm.txt"
    story.write_text("THE FARM\n\n" + "The river ran past the old farm all summer long, and the wheel turned. " * 30
                     + "Burke was trying to buy seventy-five acres of the bottom land from the widow. "
                     + "The wheel turned and the river ran on past the farm through the long dry summer. " * 30)
    doc = ingest(story, library=library, engine=engine).doc_id
    monkeypatch.setattr(rerank, "decide", lambda wins, cal: (False, 0.9))
    out = ask(library, engine, doc, "How many acres was Burke trying to buy?", max_new_tokens=8, causal=False)
    assert not out["abstained"] and out["short_answer"] == "seventy-five acres", out["quote"]
    assert out["quote"]["short"] == "seventy-five acres"
    assert "Short answer: seventy-five acres" in answer_text(out)
    assert answer_md(out).startswith(f"**{md_escape('seventy-five acres')}**")
    who = ask(library, engine, doc, "What was Burke trying to buy?", max_new_tokens=8, causal=False)
    assert not who["short_answer"]
