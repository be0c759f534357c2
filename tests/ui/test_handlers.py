"""The UI's handlers (ui.context, ui.jobs, ui.render, ui.tabs.*) as plain functions: no server, no browser.

One module-scoped library holds geotopo-pp1-10.pdf (10 pages, 117 chunks), ingested through the UI
handler with a Cancel in the middle of prefill and then a Resume; the other tests read it.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import gradio as gr
import pytest

from cli_io import UserError
from ingest.errors import IngestError, TooLarge
from ingest.pipeline import Progress
from tests.ingest.docstore import store_text
from tests.ui.conftest import fake_upload
from ui import context
from ui import jobs
from ui import plots
from ui import render
from ui.tabs import ask as ask_tab
from ui.tabs import library as library_tab
from ui.tabs import map as map_tab
from ui.tabs import outline as outline_tab
from ui.tabs import summary as summary_tab

# errors meant for people that the handlers pass on from qa and ingest (cli_io.UserError, the
# common root, and IngestError)
FOR_PEOPLE = (UserError, IngestError)
ASSETS = Path(__file__).resolve().parents[1] / "assets"
GEOTOPO = ASSETS / "geotopo-pp1-10.pdf"


# ---------------------------------------------------------------------------------------------
# fast: sizes, errors, progress, drawings
# ---------------------------------------------------------------------------------------------


def test_parse_size():
    assert context.parse_size("50mb") == 50 * 1024**2
    assert context.parse_size("1 GB") == 1024**3
    assert context.parse_size("300kb") == 300 * 1024
    assert context.parse_size(1234) == 1234
    for bad in ("", "mb", "12xb", "-1mb", "0"):
        with pytest.raises(context.UIError):
            context.parse_size(bad)


def test_upload_checks(tmp_path):
    ctx = context.UIContext(tmp_path / "home", tmp_path / "no-model", max_file_bytes="1kb", upload_root=tmp_path / "up")
    with pytest.raises(context.UIError, match="choose a file"):
        library_tab.check_upload(ctx, None)
    with pytest.raises(context.UIError, match="gone"):
        library_tab.check_upload(ctx, tmp_path / "missing.pdf")
    big = tmp_path / "big.pdf"
    big.write_bytes(b"%PDF-" + b"x" * 2000)
    with pytest.raises(TooLarge, match="limit of this server is 1 KB"):
        library_tab.check_upload(ctx, big)
    # only files inside the upload cache are ever deleted
    assert library_tab.discard_upload(ctx, big) is False and big.exists()
    up = fake_upload(ctx, ASSETS / "empty.txt")
    assert library_tab.discard_upload(ctx, up) is True
    assert not up.exists() and not up.parent.exists() and ctx.upload_root.exists()


def test_user_errors_become_escaped_gr_errors(tmp_path):
    ctx = context.UIContext(tmp_path / "home", tmp_path / "no-model", max_file_bytes=10, upload_root=tmp_path / "up")
    check = context.user_facing(library_tab.check_upload)
    evil = tmp_path / "<img src=x onerror=alert(1)>.pdf"
    evil.write_bytes(b"%PDF-1.4 too large")
    with pytest.raises(gr.Error) as e:
        check(ctx, evil)
    assert "<img" not in e.value.message and "&lt;img" in e.value.message

    @context.user_facing
    def boom():
        raise RuntimeError("secret /etc/path details")

    with pytest.raises(gr.Error) as e:
        boom()
    assert "secret" not in e.value.message and "RuntimeError" in e.value.message

    @context.user_facing
    def gen():
        yield 1
        raise context.UIError("pick a document first")

    with pytest.raises(gr.Error, match="pick a document first"):
        list(gen())


def test_stage_board_shows_stages_chunks_speed_and_eta():
    b = jobs.StageBoard("book.pdf")
    b.update(Progress("hash", 10, 10, message="document abc"))
    b.update(Progress("parse", 0, 1, message="parsing book.pdf"))
    b.update(Progress("parse", 1, 1, message="10 pages, 30,000 characters"))
    b.update(Progress("tokenize", 50, 100, message="tokenizing"))
    b.update(Progress("store", 1, 1, message="stored"))
    b.update(Progress("prefill", 63 * 40, 63 * 100, 900.0, 4.2, "prefilling"))
    md = b.markdown()
    assert "✓ parsing — 10 pages" in md
    assert "✓ tokenizing" in md and "✓ storing" in md
    assert "▶ **prefilling** — 40 / 100 chunks (40%)" in md
    assert "900 tokens/s" in md and "ETA 4 s" in md
    b.update(Progress("prefill", 6300, 6300, 900.0, 0.0, "prefilling"))
    b.update(Progress("done", 1, 1, message="done"))
    assert "✓ prefilling — 100 / 100 chunks (100%)" in b.markdown("Ready")


def test_md_escape_keeps_text_verbatim():
    s = render.md_escape("<b>x</b> *bold* $x^2$ [link](javascript:alert(1)) # h")
    assert "<b>" not in s and "\\*bold\\*" in s and "\\$x^2\\$" in s and "\\[link\\]" in s


def test_jobs_are_per_session_and_kind(tmp_path):
    ctx = context.UIContext(tmp_path / "home", tmp_path / "m", upload_root=tmp_path / "up")
    assert jobs.cancel_job(ctx, "s1") == "Nothing to cancel."
    armed = ctx.arm("s1", "ingest")
    assert "Cancelling" in jobs.cancel_job(ctx, "s1", "ingest")  # cancel while it waits in the queue
    job = ctx.begin("s1", "ingest")
    assert job is armed and job.cancel.is_set()
    ctx.end("s1", "ingest", job)
    other = ctx.begin("s2", "ingest")
    assert not ctx.cancel("s1", "ingest") and not other.cancel.is_set()
    ctx.end("s2", "ingest", other)
    assert ctx.running() == 0


def test_ingest_cancelled_before_it_starts_does_nothing(tmp_path):
    """_ingest_job (shared by ingest and resume): Cancel pressed while the job waits in the queue
    ends it at once, before the file is read or the model loaded, and the job is released."""
    ctx = context.UIContext(tmp_path / "home", tmp_path / "no-model", upload_root=tmp_path / "up")
    up = fake_upload(ctx, GEOTOPO)
    ctx.arm("s1", "ingest")
    ctx.cancel("s1", "ingest")
    updates = list(library_tab.ingest_upload(ctx, up, session="s1"))
    assert [u.status.splitlines()[-1] for u in updates] == ["Cancelled before it started."]
    assert updates[-1].finished and updates[-1].doc_id is None and ctx.running() == 0
    assert Path(up).exists()  # not stored, so the upload is kept
    ctx.close()


def test_a_title_typed_after_the_drop_renames_the_added_document(tmp_path):
    """Walk 12: a dropped file is added at once, so the title typed after the drop counted for nothing
    ("Add to library" answered "already in the library"). Pressed with a title, the button now renames
    the document the upload added; without one, or with its own title, it says it is already added."""
    ctx = context.UIContext(tmp_path / "home", tmp_path / "no-model", upload_root=tmp_path / "up")
    doc_id = store_text(ctx.library, "To dwellers in a wood almost every species of tree has its voice.")
    ctx.last_added["s1"] = doc_id
    (same,) = library_tab.ingest_upload(ctx, None, title="  ", session="s1")
    assert "Already added:** T." in same.status and ctx.library.document(doc_id)["title"] == "T"
    (renamed,) = library_tab.ingest_upload(ctx, None, title=" Under the Greenwood Tree ", session="s1")
    assert renamed.finished and renamed.doc_id == doc_id and "**Renamed:** T is now **Under the Greenwood Tree**" \
        in renamed.status
    assert ctx.library.document(doc_id)["title"] == "Under the Greenwood Tree"
    gone = tmp_path / "up" / "2662.txt"  # the upload event's file, removed once stored
    ctx.ingested[str(gone)] = doc_id
    (again,) = library_tab.ingest_upload(ctx, gone, title="Under the Greenwood Tree", session="s2")
    assert "Already added:** Under the Greenwood Tree." in again.status
    (by_path,) = library_tab.ingest_upload(ctx, gone, title="The Mellstock Quire", session="s2")
    assert "Renamed" in by_path.status and ctx.library.document(doc_id)["title"] == "The Mellstock Quire"
    ctx.close()


# ---------------------------------------------------------------------------------------------
# with a model: ingest (cancel, resume), ask, summary, map, delete
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lib(tiny_model, tmp_path_factory):
    """A library with geotopo ingested through the UI: cancelled in prefill, then resumed."""
    base = tmp_path_factory.mktemp("ui-handlers")
    ctx = context.UIContext(base / "home", tiny_model, upload_root=base / "uploads")
    up = fake_upload(ctx, GEOTOPO)
    first = []
    for u in library_tab.ingest_upload(ctx, up, title="GeoTopo", session="tab-1"):
        first.append(u)
        if not u.finished and re.search(r"— [1-9][\d,]* / 117 chunks", u.status):
            assert jobs.cancel_job(ctx, "tab-1", "ingest").startswith("Cancelling")
    doc_id = first[-1].doc_id
    after_cancel = library_tab.list_documents(ctx)
    second = list(library_tab.resume_prefill(ctx, doc_id[:10], session="tab-1"))
    yield {"ctx": ctx, "doc_id": doc_id, "first": first, "second": second, "after_cancel": after_cancel,
           "upload": up}  # fmt: skip
    ctx.close()


def test_ingest_shows_stages_cancel_keeps_work_resume_finishes(lib):
    first, second = lib["first"], lib["second"]
    statuses = "\n".join(u.status for u in first)
    for stage in ("parsing", "tokenizing", "storing", "prefilling"):
        assert f"✓ {stage}" in statuses or f"**{stage}**" in statuses
    assert "tokens/s" in statuses and "ETA" in statuses
    last = first[-1]
    assert last.finished and last.result["status"] == "partial"
    assert 0 < last.result["tokens_prefilled"] < last.result["tokens"] == 7309
    assert "Stopped:" in last.status and "Resume" in last.status
    assert not lib["upload"].exists()  # stored: the upload was removed from the cache
    (d,) = lib["after_cancel"]
    assert d["state"] == "partial" and d["tokens_done"] == last.result["tokens_prefilled"]
    assert "resumable" in library_tab.documents_table(lib["ctx"], lib["after_cancel"])[0][4]
    # resume goes on from the checkpoint, not from zero
    assert "resuming" in second[1].status or "resuming" in "".join(u.status for u in second)
    assert second[-1].result == {"doc_id": lib["doc_id"], "status": "done", "tokens_prefilled": 7309,
                                 "tokens": 7309}  # fmt: skip
    assert "Ready:" in second[-1].status
    (d,) = library_tab.list_documents(lib["ctx"])
    assert (d["title"], d["pages"], d["chunks"], d["state"]) == ("GeoTopo", 10, 117, "ready")
    assert (library_tab.doc_choices(lib["ctx"], ready_only=True)
            == [(library_tab.doc_choices(lib["ctx"])[0][0], lib["doc_id"])])


def test_ingest_same_file_again_is_instant(lib):
    ctx = lib["ctx"]
    up = fake_upload(ctx, GEOTOPO)
    ups = list(library_tab.ingest_upload(ctx, up, session="tab-2"))
    assert ups[-1].result["status"] == "done" and "already in the library" in ups[-1].status


def test_add_to_library_after_the_upload_was_added_says_so(lib):
    """Issue 58, item 7: pressing "Add to library" once the upload was added (its field empty again)
    said "choose a file first" over the "Ready" it had shown; it now says the file is in. A session
    that added nothing is still asked to choose a file."""
    ctx = lib["ctx"]
    up = fake_upload(ctx, GEOTOPO)
    assert list(library_tab.ingest_upload(ctx, up, session="tab-3"))[-1].finished
    (again,) = list(library_tab.ingest_upload(ctx, None, session="tab-3"))
    assert again.finished and again.doc_id == lib["doc_id"] and "Already added" in again.status
    assert "choose another file" in again.status
    with pytest.raises(context.UIError, match="choose a file first"):
        list(library_tab.ingest_upload(ctx, None, session="tab-never"))


def test_ask_streams_then_gives_evidence_and_trace(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    events = list(ask_tab.ask_stream(ctx, doc_id, "  Was ist ein   topologischer Raum? ", max_new_tokens=24))
    partial = [e for e in events if not e["done"]]
    final = events[-1]
    assert final["done"] and not final["stopped"] and final["question"] == "Was ist ein topologischer Raum?"
    assert partial and all(len(a["answer"]) <= len(b["answer"]) for a, b in zip(partial, partial[1:]))
    assert final["trace"]["chunks"] and final["trace"]["n_doc_chunks"] >= 116
    ev = final["evidence"]
    assert ev and all(set(e) == {"chunk", "pages", "weight", "text", "causal_effect", "matter"} for e in ev)
    assert all(1 <= p <= 10 for e in ev for p in e["pages"])
    with pytest.raises(context.UIError, match="type a question"):
        list(ask_tab.ask_stream(ctx, doc_id, "   "))
    with pytest.raises(context.UIError, match="pick a document"):
        list(ask_tab.ask_stream(ctx, None, "q"))


def test_chat_turn_heatmap_and_pick(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    box, history, q = ask_tab.chat_user(ctx, doc_id, "What is a metric?", [], session="tab-3")
    assert box == "" and history == [{"role": "user", "content": "What is a metric?"}]
    outs = list(ask_tab.chat_bot(ctx, doc_id, q, history, [], max_new_tokens=16, session="tab-3"))
    assert len(outs) >= 2  # at least one streamed update before the final one
    assert outs[0][0][-1]["content"].endswith("▌")
    hist, answers, picker, heat, evidence, result = outs[-1]
    assert [m["role"] for m in hist] == ["user", "assistant", "assistant"]
    assert hist[-1]["metadata"]["title"].startswith("Retrieved by the model:")
    assert len(answers) == 1 and picker["value"] == 0 and picker["choices"][0][1] == 0
    assert 'data-chunk="' in heat and 'class="drt-topk"' in heat and "Evidence" in evidence
    assert set(result) == {"answer", "evidence", "trace"}
    c = result["trace"]["chunks"][0]["topk"][0]
    md = ask_tab.heatmap_pick(ctx, answers, 0, c, result["trace"]["chunks"][0]["gen_chunk"])
    assert f"**Chunk {c}**" in md and "p. " in md and "in the model's top-k, fusion weight" in md
    # a quoted answer's heatmap: the generated chunks' rows, then one per quoted sentence as the model read it
    assert answers[0]["quote"] and answers[0]["quote_rows"]
    n_gen, quoted = len(result["trace"]["chunks"]), answers[0]["quote_rows"]
    assert f'data-rows="{n_gen + len(quoted)}"' in heat and ">quote 1</text>" in heat
    assert all(r["text"] in " ".join(answers[0]["quote"]["text"].split()) for r in quoted)
    q = next(r for r in quoted if r["topk"])
    md = ask_tab.heatmap_pick(ctx, answers, 0, q["topk"][0], row=n_gen + quoted.index(q))
    assert "retrieved while the model read this quoted sentence" in md
    heat2, ev2, res2 = ask_tab.show_answer(ctx, answers, 0)
    assert heat2 == heat and res2 == result
    assert "No chunk 9999" in library_tab.passage_md(ctx, doc_id, 9999)


def test_mask_and_regenerate_shows_both_answers_and_causal_effects(lib):
    """Mask and regenerate (a chunk typed in, or filled in from a heatmap cell): the answer before
    and after masking side by side, the new evidence without the masked chunk and with each
    passage's causal effect beside its weight; errors for no answer and a bad chunk."""
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    outs = list(ask_tab.chat_bot(ctx, doc_id, "What is a metric?", [], [], max_new_tokens=16, session="tab-m"))
    answers = outs[-1][1]
    assert "causal effect" in outs[-1][4]  # the evidence list shows each passage's causal effect
    top = answers[0]["evidence"][0]["chunk"]
    before, after, ev, result, _ = ask_tab.mask_regenerate(ctx, answers, 0, float(top), 16)
    assert before.startswith("**Before** (nothing masked)") and after.startswith(f"**After** (chunk {top} masked)")
    assert set(result) == {"answer", "evidence", "trace"} and result["trace"]["answer"]["masked"] == [top]
    assert top not in [e["chunk"] for e in result["evidence"]]
    assert result["trace"]["answer"]["unmasked"]["answer"] == answers[0]["answer"]
    assert f"with chunk {top} masked" in ev and "weight" in ev and "causal effect" in ev
    with pytest.raises(context.UIError, match="ask a question first"):
        ask_tab.mask_regenerate(ctx, [], None, "3")
    with pytest.raises(context.UIError, match="type the chunk number"):
        ask_tab.mask_regenerate(ctx, answers, 0, "  ")
    with pytest.raises(FOR_PEOPLE, match="not a chunk number"):
        ask_tab.mask_regenerate(ctx, answers, 0, "3,x")
    with pytest.raises(FOR_PEOPLE, match="not in this document"):
        ask_tab.mask_regenerate(ctx, answers, 0, "5000")
    assert render.effect_text({"causal_effect": 1.5}) == " · causal effect +1.500" and render.effect_text({}) == ""


def test_masking_a_spoiler_safe_answer_reads_the_same_pages(lib):
    """Mask and regenerate asked a spoiler-safe answer's question again of the whole document: the
    re-answer could quote pages the reader had not reached, and its Before column was not the answer
    the chat showed. Both read the pages before the same page, and both columns say so."""
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    *_, last = ask_tab.chat_bot(ctx, doc_id, "Was ist ein topologischer Raum?", [], [], 16, before_page=4)
    answers = last[1]
    top = answers[-1]["evidence"][0]["chunk"]
    before, after, ev, result, _ = ask_tab.mask_regenerate(ctx, answers, len(answers) - 1, str(top), 16)
    made = result["trace"]["answer"]
    assert made["before_page"] == 4 and made["unmasked"]["before_page"] == 4
    assert made["unmasked"]["answer"] == answers[-1]["answer"]
    assert all(p < 4 for e in result["evidence"] + made["unmasked"]["evidence"] for p in e["pages"])
    assert "before p. 4" in before and "before p. 4" in after


def test_ask_masking_a_chunk_never_retrieved_changes_nothing(lib):
    """qa.ask.ask with a chunk that no selection picked (the answer's, the prompt's, the carried
    one) masked: the same answer, evidence (weights and causal effects) and trace, bit for bit, but
    for that chunk's score (None), the retrieval z-score over the others, and the mask's own record."""
    from drt_core import counterfactual
    from qa.ask import ask, retrieval_z
    from ingest.pipeline import ready_state

    ctx, doc_id, q = lib["ctx"], lib["doc_id"], "What is a metric?"
    eng = ctx.engine()
    st = ready_state(ctx.library, eng, doc_id)
    base = ask(ctx.library, eng, doc_id, q, max_new_tokens=16)
    ids = list(eng.generate(st, q, max_new_tokens=16, no_repeat_ngram=4))[-1].ids
    _, picked = counterfactual.answer_logprob(st, eng.prompt_ids(st, q), ids, frozenset())
    c = min(set(range(st.n_chunks)) - picked)
    out = ask(ctx.library, eng, doc_id, q, max_new_tokens=16, mask=[c])
    assert out["answer"] == base["answer"] and out["evidence"] == base["evidence"]
    tb, tm = base["trace"], out["trace"]
    assert tm.pop("masked") == [c] and tm["answer"].pop("masked") == [c]
    assert tm["answer"].pop("unmasked")["answer"] == base["answer"]
    # retrieval_z is a statistic over the scores, the masked chunk's left out
    assert tm["answer"].pop("retrieval_z") == pytest.approx(retrieval_z(tm, st.n_chunks), abs=1e-4)
    tb["answer"].pop("retrieval_z")
    assert tm["answer"] == tb["answer"]
    for rb, rm in zip(tb["chunks"], tm["chunks"], strict=True):
        if rb["scores"] is not None:
            assert rm["scores"][c] is None
            rm["scores"][c] = rb["scores"][c]
        assert rm == rb
    assert tm == tb


def test_stop_an_answer(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    ctx.arm("tab-4", "ask")
    assert "Stopping" in jobs.cancel_job(ctx, "tab-4", "ask")  # stopped while queued: never runs
    (ev,) = list(ask_tab.ask_stream(ctx, doc_id, "q?", session="tab-4"))
    assert ev["done"] and ev["stopped"] and ev["answer"] == ""
    events = []
    for ev in ask_tab.ask_stream(ctx, doc_id, "Was ist eine Metrik?", max_new_tokens=200, session="tab-5"):
        events.append(ev)
        if not ev["done"]:
            ctx.cancel("tab-5", "ask")
    assert events[-1]["stopped"] and len(events[-1]["answer"]) < 200 * 8
    assert ctx.running() == 0


def test_summary_modes_are_labelled(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    md, ev, heat, out = summary_tab.summary_view(ctx, doc_id, "extractive")
    assert md.startswith("### Extractive") and out["mode"] == "extractive" and out["evidence"]
    assert 'data-chunk="' in heat and "retrieved" in heat
    check = Path(ctx.engine().model_dir) / "summary_check.json"
    assert not check.exists()  # no check: the extractive summary, and one line saying why
    md, ev, heat, out = summary_tab.summary_view(ctx, doc_id, "abstractive", max_new_tokens=8)
    assert md.startswith("### Extractive") and "abstractive summaries are off" in md and out["mode"] == "extractive"
    check.write_text('{"abstractive_rouge_l": 0.3, "extractive_rouge_l": 0.1}')  # a model that passed
    try:
        md, ev, heat, out = summary_tab.summary_view(ctx, doc_id, "abstractive", max_new_tokens=8)
    finally:
        check.unlink()
    assert md.startswith("### Abstractive") and out["trace"]["mode"] == "abstractive"
    with pytest.raises(context.UIError, match="unknown summary mode"):
        summary_tab.summarize_doc(ctx, doc_id, "poetic")


def test_summary_of_a_part_or_pages(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    choices = summary_tab.summary_parts(ctx, doc_id)
    assert choices[0] == ("Whole document", summary_tab.WHOLE_DOCUMENT) and len(choices) > 2
    number = choices[2][1]
    md, _, _, out = summary_tab.summary_view(ctx, doc_id, "extractive", chapter=number)
    assert {s["part"] for s in out["trace"]["sentences"]} <= {number} and len(out["trace"]["parts"]) == 1
    md, _, _, out = summary_tab.summary_view(ctx, doc_id, "extractive", pages="3-4")
    assert all(set(s["pages"]) & {3, 4} for s in out["trace"]["sentences"])
    with pytest.raises(FOR_PEOPLE, match="page range"):
        summary_tab.summary_view(ctx, doc_id, "extractive", pages="4-3")
    with pytest.raises(FOR_PEOPLE, match="no chapter 999"):
        summary_tab.summary_view(ctx, doc_id, "extractive", chapter=999)


def test_the_summary_heatmap_has_a_row_per_sentence_and_a_cell_shows_its_passage(lib):
    """Issue 60, item 6: one row per summary sentence (what the model retrieved while it read it, from
    the dependency map), one column per document chunk; a clicked cell says what its row's sentence
    gave that chunk, as the Ask tab's heatmap does."""
    from qa.summary import dependency_map

    ctx, doc_id = lib["ctx"], lib["doc_id"]
    md, ev, heat, out = summary_tab.summary_view(ctx, doc_id, "extractive")
    tr, n = out["trace"], len(ctx.layout(doc_id)[0])
    sents, rows = tr["sentences"], tr["chunks"]
    assert sents and len(rows) == len(sents) and tr["n_doc_chunks"] == n == 117
    assert f'data-rows="{len(sents)}" data-cols="{n}"' in heat
    labels = [f">{i + 1} · p. {s['pages'][0]}</text>" for i, s in enumerate(sents)]  # the rows' labels
    assert all(lab in heat for lab in labels)
    by_chunk = {r["chunk"]: r for r in dependency_map(ctx.library, ctx.engine(), doc_id)}
    i, row = next((i, r) for i, r in enumerate(rows) if r["topk"])
    assert row["reading"] == [c for c in sents[i]["chunks"] if c in by_chunk]
    groups = [g for c in row["reading"] for g in by_chunk[c]["groups"]]
    assert set(row["topk"]) == {j for g in groups for j in g["retrieved"]}
    assert f'data-mark="{row["topk"][0]}"' in heat
    c = row["topk"][0]
    picked = summary_tab.summary_pick(ctx, out, c, i)
    assert f"**Chunk {c}**" in picked and f"While it read sentence {i + 1}" in picked
    assert "with fusion weight" in picked
    assert "Summarize first." == summary_tab.summary_pick(ctx, None, c)


def test_the_story_so_far_field_shows_nothing_from_page_n_on(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    md, ev, heat, out = summary_tab.summary_view(ctx, doc_id, "extractive", before_page=4)
    tr = out["trace"]
    assert tr["before_page"] == 4 and "The story so far, before page 4" in md
    assert tr["sentences"] and all(p < 4 for s in tr["sentences"] for p in s["pages"])
    assert out["evidence"] and all(p < 4 for e in out["evidence"] for p in e["pages"])
    chunk_pages = ctx.layout(doc_id)[0]
    assert all(chunk_pages[j] < 4 for r in tr["chunks"] for j in r["topk"] + r["reading"])
    n = tr["n_doc_chunks"]
    assert 0 < n < len(chunk_pages) and f'data-cols="{n}"' in heat  # the columns stop before page 4
    assert max(int(c) for c in re.findall(r'data-chunk="(\d+)"', heat)) < n
    whole = summary_tab.summary_view(ctx, doc_id, "extractive")[3]
    assert "before_page" not in whole["trace"]
    assert any(p >= 4 for s in whole["trace"]["sentences"] for p in s["pages"])  # the cut is real
    for empty in (None, "", 0):  # an empty field: the whole document
        assert "before_page" not in summary_tab.summarize_doc(ctx, doc_id, before_page=empty)["trace"]
    with pytest.raises(FOR_PEOPLE, match="between 2 and 10"):
        summary_tab.summary_view(ctx, doc_id, "extractive", before_page=99)
    with pytest.raises(context.UIError, match="not a page number"):
        summary_tab.summary_view(ctx, doc_id, "extractive", before_page="abc")


def test_a_failed_summary_clears_the_previous_ones_heatmap_and_evidence(lib):
    """Walk 11, item 10: after a summary error, the previous summary's heatmap and evidence stayed
    under the message (the event answered gr.skip() for them), as if they were its; they are
    cleared, with the record a clicked cell reads and the passage clicked last."""
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    md, ev, heat, out, record, *picked = summary_tab.summarize_outputs(ctx, doc_id, "extractive", 0, "", None)
    assert 'data-chunk="' in heat and ev and record is out
    assert picked == [gr.skip()] * 3  # a new summary leaves the clicked passage as it was
    md, ev, heat, out, record, *picked = summary_tab.summarize_outputs(ctx, doc_id, "extractive", 0, "4-3", None)
    assert md.startswith("**✗**") and "page range" in md
    assert ev == "" and heat == plots.note(summary_tab.HEATMAP_NOTE) and 'data-chunk="' not in heat
    assert out is None and record is None and picked == ["", "", None]


def test_outline_and_what_a_chunk_relied_on(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    md = outline_tab.outline_view(ctx, doc_id)
    assert "### Statements" in md and "| definition 1" in md
    o = outline_tab.outline_doc(ctx, doc_id)
    pic = outline_tab.outline_picture(ctx, doc_id, o)  # a paper: its statements and what each relies on
    assert "<svg" in pic and pic.count("<circle") == len(o["statements"])
    st = next(s for s in o["statements"] if s["used_by"])
    user = st["used_by"][0]["chunk"]
    got = outline_tab.relied_on_view(ctx, doc_id, user)
    assert f"**Chunk {user}**" in got and f"{st['kind']} {st['number']}" in got
    with pytest.raises(context.UIError, match="not in this document"):
        outline_tab.relied_on_view(ctx, doc_id, 10**6)
    assert "Pick a document" in outline_tab.relied_on_view(ctx, doc_id, None)


def test_outline_parts_and_statements_as_a_reader_sees_them(lib):
    """itcs20's outline tab read "32 parts (front matter)", cut titles inside a word ("...Run-of-0's Sam"),
    gave statements the printed label alone ("3") beside the parts' "p. 9 (5)" and listed a restated
    theorem as a second Theorem 1."""
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    o = outline_tab.outline_doc(ctx, doc_id)
    title = "Next-Neighbor Queries via Run-of-0's Sampling and a Title Longer Than Sixty"
    o["parts"] = [{"number": 0, "title": "front matter", "page_first": 1, "source": "front matter"},
                  {"number": 1, "title": title, "page_first": 3, "source": "outline"}]
    first = o["statements"][0]
    o["statements"] = [first, dict(first, restates=0)]
    md = outline_tab.outline_view(ctx, doc_id, o)
    _, labels = ctx.layout(doc_id)
    assert "**2 parts** (outline): " in md
    assert f"1. {render.md_escape(title[:57])} … (p. {plots.page_label(3, labels)})" in md  # "... and a Title …"
    rows = [ln for ln in md.splitlines() if ln.startswith(f"| {first['kind']} ")]
    page = render.md_escape(plots.page_label(first["page"], labels))
    assert [r.split(" | ")[1] for r in rows] == [page, page] and "restated" in rows[1] and "restated" not in rows[0]


def test_document_map_and_picks(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    svg, info = map_tab.doc_map_view(ctx, doc_id)
    assert "data-src=" in svg and "117 chunks on 10 pages" in info
    dep = map_tab.doc_map(ctx, doc_id)
    row = next(r for r in dep if len(r["retrieved"]) > 1)
    both = map_tab.doc_map_pick(ctx, doc_id, row["chunk"], row["retrieved"][0])
    assert f"**Querying chunk {row['chunk']}**" in both and f"**Retrieved chunk {row['retrieved'][0]}**" in both
    alone = map_tab.doc_map_pick(ctx, doc_id, row["chunk"])
    assert "Retrieved (weight" in alone
    assert "retrieved nothing" in map_tab.doc_map_pick(ctx, doc_id, 0)


def test_not_prefilled_and_delete(lib):
    ctx = lib["ctx"]
    up = fake_upload(ctx, ASSETS / "frankenstein_excerpt.txt")
    stop = threading.Event()
    ups = []
    for u in library_tab.ingest_upload(ctx, up, session="tab-6"):
        ups.append(u)
        if "▶ **prefilling**" in u.status and not stop.is_set():
            stop.set()
            ctx.cancel("tab-6", "ingest")
    doc = ups[-1].doc_id
    if ups[-1].result["status"] == "partial":  # cancel won the race: the UI says what to do
        with pytest.raises(context.UIError, match="press Resume"):
            list(ask_tab.ask_stream(ctx, doc, "Who wrote the letters?"))
        assert doc not in [v for _, v in library_tab.doc_choices(ctx, ready_only=True)]
    assert (ctx.home / "states" / doc).exists()
    assert "Deleted" in library_tab.delete_document(ctx, doc[:8])
    assert not (ctx.home / "states" / doc).exists()
    assert [d["doc_id"] for d in library_tab.list_documents(ctx)] == [lib["doc_id"]]
    assert library_tab.delete_document(ctx, None) == "Nothing deleted."


def test_bad_and_encrypted_files(tiny_model, tmp_path):
    ctx = context.UIContext(tmp_path / "home", tiny_model, upload_root=tmp_path / "uploads")
    up = fake_upload(ctx, ASSETS / "random-bytes.pdf")
    seen = []
    with pytest.raises(Exception) as e:
        for u in library_tab.ingest_upload(ctx, up):
            seen.append(u)
    assert isinstance(e.value, UserError) and "**Failed:**" in seen[-1].status
    assert up.exists()  # not stored: the upload stays for another try
    enc = fake_upload(ctx, ASSETS / "005-libreoffice-writer-password.pdf")
    with pytest.raises(Exception, match="(?i)password"):
        list(library_tab.ingest_upload(ctx, enc))
    assert library_tab.list_documents(ctx) == []  # nothing half-written
    last = list(library_tab.ingest_upload(ctx, enc, password="openpassword"))[-1]
    assert last.result["status"] == "done" and not enc.exists()
    ctx.close()


def test_answer_md_shows_a_quote_with_its_page_or_an_abstention():
    from ui.render import answer_md

    q = {"text": "Emma Woodhouse, handsome, clever, and rich.", "chunk": 3, "pages": [2]}
    md = answer_md({"answer": q["text"], "quote": q, "short_answer": "handsome"})
    assert md.startswith("**handsome**") and "> Emma Woodhouse" in md and "p. 2, chunk 3" in md
    q = {"text": "It was dark. Emma Woodhouse was rich. She had lived.", "sentence": "Emma Woodhouse was rich.",
         "chunk": 3, "pages": [2]}
    assert "> It was dark. **Emma Woodhouse was rich.** She had lived." in answer_md({"answer": q["text"], "quote": q})
    # the trained reader's short answer is the bold part of the quote, not a line of its own
    q = dict(q, short="rich")
    md = answer_md({"answer": q["text"], "quote": q, "short_answer": "rich"})
    assert "> It was dark. Emma Woodhouse was **rich**. She had lived." in md and not md.startswith("**rich**")
    md = answer_md({"answer": "Not found in this document.", "abstained": True, "quote": None})
    assert md.startswith("**Not found in this document.**") and ">" not in md and "No passage stood out" in md
    md = answer_md({"answer": "Not found in this document.", "abstained": True, "quote": None,
                    "missing_words": ["raoul"]})
    assert "never mentions \u201craoul\u201d" in md
    assert "the model wrote nothing" in answer_md({"answer": "", "quote": None})


def test_passages_from_licence_contents_or_index_pages_are_tagged():
    """Issue 29 item 4: the tag ask puts on a passage (ingest.boilerplate.chunk_matter) is shown."""
    from ui.render import answer_md, evidence_md

    ev = [{"chunk": 7, "pages": [230], "weight": 0.6, "text": "Project Gutenberg...", "matter": "licence"},
          {"chunk": 2, "pages": [3], "weight": 0.4, "text": "Emma Woodhouse...", "matter": None},
          {"chunk": 1, "pages": [1], "weight": 0.1, "text": "CONTENTS...", "matter": "contents"}]
    md = evidence_md(ev)
    assert md.count("*licence page*") == 1 and md.count("*contents page*") == 1
    assert "**p. 230** · *licence page* · chunk 7" in md and "**p. 3** · chunk 2" in md
    q = {"text": "Project Gutenberg...", "chunk": 7, "pages": [230], "matter": "licence"}
    assert "p. 230, *licence page*, chunk 7" in answer_md({"answer": q["text"], "quote": q})
    assert "licence page" not in answer_md({"answer": "x", "quote": dict(q, matter=None)})


def test_answer_md_says_when_the_quote_is_from_a_chunk_the_model_scored_but_did_not_retrieve():
    from ui.render import answer_md

    q = {"text": "The cottage was called Barton Cottage.", "short": "Barton", "chunk": 7, "pages": [3],
         "retrieved": False, "rank": 6}
    md = answer_md({"answer": q["text"], "quote": q, "short_answer": "Barton"})
    assert "**Barton**" in md and "scored this chunk 6th, after the chunks it retrieved" in md
    assert "scored this chunk" not in answer_md({"answer": q["text"], "quote": dict(q, retrieved=True)})


def test_the_page_of_a_passage_and_the_export(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    img, caption = ask_tab.page_view(ctx, doc_id, 5)
    assert img.width > 300 and img.height > 300 and caption.startswith("Chunk 5 highlighted on p. ")
    row = next(r for r in ctx.library.chunks(doc_id) if r["page_last"] > r["page_first"])  # over a page break
    both, caption = ask_tab.page_view(ctx, doc_id, row["idx"])
    assert "runs over the page break" in caption and both.height > img.height * 1.5
    with pytest.raises(context.UIError, match="not in this document"):
        ask_tab.page_view(ctx, doc_id, 10**6)
    assert ask_tab.page_view(ctx, None, 3) == (None, "")
    path = Path(ask_tab.export_conversation(ctx, doc_id))
    assert path.suffix == ".md" and path.read_text().startswith("# GeoTopo")


def test_export_this_conversation_or_every_question_on_the_document(lib):
    """Walk 11, item 11: the export gave every question ever asked of the document (two browser
    sessions'), not this chat's. "Export this conversation" gives the chat's questions and their
    masked re-answers; "Export all questions on this document" still gives every one."""
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    *_, (_, others, *_) = ask_tab.chat_bot(ctx, doc_id, "Was ist eine Metrik?", [], [], 16, session="tab-x")
    *_, (_, answers, *_) = ask_tab.chat_bot(ctx, doc_id, "What is a metric?", [], [], 16, session="tab-y")
    top = answers[0]["evidence"][0]["chunk"]
    *_, answers = ask_tab.mask_regenerate(ctx, answers, 0, str(top), 16)
    asked = [r["question_id"] for r in ctx.library.conversation(doc_id)]
    mine = ask_tab.conversation_questions(answers, doc_id)
    assert mine == asked[-2:] and answers[0]["question_id"] == asked[-2] and others[0]["question_id"] == asked[-3]
    md = Path(ask_tab.export_conversation(ctx, doc_id, answers)).read_text().split("## Summary")[0]
    assert f"One conversation: 2 of the {len(asked)} questions" in md and md.count("\n### ") == 2
    assert "Was ist eine Metrik?" not in md and md.count("What is a metric?") == 2
    assert f"chunk {top} barred from retrieval" in md
    every = Path(ask_tab.export_conversation(ctx, doc_id)).read_text().split("## Summary")[0]
    assert every.count("\n### ") == len(asked) and "Was ist eine Metrik?" in every
    with pytest.raises(context.UIError, match="no question about this document"):
        ask_tab.export_conversation(ctx, doc_id, [])


def test_user_errors_are_said_in_place(lib, tmp_path):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    box, history, pending = ask_tab.chat_user(ctx, None, "What is it?", [])
    assert box == "What is it?" and pending == "" and history[-1]["role"] == "assistant"
    assert "pick a document first" in history[-1]["content"] and history[-1]["content"].startswith("**✗**")
    _, history, pending = ask_tab.chat_user(ctx, doc_id, "   ", [])
    assert pending == "" and "type a question first" in history[-1]["content"]
    empty = context.UIContext(tmp_path / "empty-home", ctx.model, upload_root=tmp_path / "up")
    try:
        _, history, _ = ask_tab.chat_user(empty, None, "Hi?", [])
        assert "the library is empty" in history[-1]["content"]
        assert library_tab.library_note(library_tab.list_documents(empty)) == library_tab.EMPTY_LIBRARY
    finally:
        empty.close()
    docs = library_tab.list_documents(ctx)
    note = library_tab.library_note(docs)
    assert library_tab.newest_ready(docs) == doc_id and note.startswith(f"{len(docs)} document")
    assert "document(s)" not in library_tab.library_note(docs)  # (walk 11: "1 document(s).")
    assert context.error_text(ValueError("x")).startswith("internal error (ValueError)")


def test_a_failed_stage_is_marked_not_left_running():
    board = jobs.StageBoard("x.pdf")
    board.update(Progress("parse", 0, 1, message="parsing x.pdf"))
    assert "▶ **parsing**" in board.markdown()
    board.fail()
    md = board.markdown("**Failed:** bad")
    assert "▶" not in md and "✗ parsing" in md


def test_all_documents_and_spoiler_safe_reading_in_the_chat(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    # spoiler-safe: no evidence at or after page 4
    *_, last = ask_tab.chat_bot(ctx, doc_id, "Was ist ein topologischer Raum?", [], [], 16, before_page=4)
    history, answers = last[0], last[1]
    assert answers[-1]["evidence"] and all(p < 4 for e in answers[-1]["evidence"] for p in e["pages"])
    # every document at once: one message, answers grouped by document, each added to the picker
    other = next(u for u in library_tab.ingest_upload(ctx, fake_upload(ctx, ASSETS / "frankenstein_excerpt.txt"),
                                                      session="tab-9")
                 if u.finished)
    try:
        assert ask_tab.chat_user(ctx, context.ALL_DOCS, "Who is Margaret?", [])[2] == "Who is Margaret?"
        *_, last = ask_tab.chat_bot(ctx, context.ALL_DOCS, "Who is Margaret?", [], [], 16)
        history, answers = last[0], last[1]
        assert len(answers) == 2 and {a["doc_id"] for a in answers} == {doc_id, other.doc_id}
        assert "**GeoTopo**" in history[-1]["content"] and "---" in history[-1]["content"]
        with pytest.raises(context.UIError, match="pick one document"):
            ask_tab.export_conversation(ctx, context.ALL_DOCS)
    finally:
        library_tab.delete_document(ctx, other.doc_id)


def test_the_answer_shows_before_its_causal_effects(lib):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    steps = list(ask_tab.chat_bot(ctx, doc_id, "Was ist eine Metrik?", [], [], 16))
    early = [s for s in steps if isinstance(s[0], list) and "Measuring each passage" in s[0][-1]["content"]]
    assert early, "the answer was not shown before its causal effects"
    final = steps[-1]
    assert final[1][-1]["evidence"] and all("causal_effect" in e for e in final[1][-1]["evidence"])
    assert steps.index(early[0]) < len(steps) - 1
    # regression: a heatmap cell clicked before the effects arrive finds the answer ("Ask a question first." before)
    shown_now = early[0][1]
    assert len(shown_now) == 1
    assert "Chunk" in ask_tab.heatmap_pick(ctx, shown_now, 0, shown_now[0]["evidence"][0]["chunk"])


def test_a_document_being_prefilled_is_listed_as_such(lib, monkeypatch):
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    monkeypatch.setattr(library_tab, "_state_of", lambda d, fp: ("partial", 630, 6300))
    ctx.prefilling.add(doc_id)
    try:
        (d,) = library_tab.list_documents(ctx)
        assert d["state"] == "prefilling"
        # no count of its own: the table, listed once, said 0% while the progress panel said 69%
        assert library_tab._state_text(d) == "prefilling now (6,300 tokens; its progress is shown above)"
        assert "prefilling now" in library_tab.library_note([d]) and library_tab.newest_ready([d]) is None
    finally:
        ctx.prefilling.discard(doc_id)
    (d,) = library_tab.list_documents(ctx)
    assert d["state"] == "partial" and "resumable" in library_tab._state_text(d)


def test_resume_is_offered_only_where_there_is_something_to_resume(lib, monkeypatch, tmp_path):
    """Walk 11, item 14: "Resume prefill" was offered for a ready document. It starts hidden and is
    shown for a document whose prefill stopped part way or never began for this model; not for a
    ready one, one being prefilled now, or none."""
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    with gr.Blocks():
        assert library_tab.layout(ctx).resume_btn.visible is False
    assert not library_tab.resumable(ctx, doc_id)  # ready
    assert not library_tab.resumable(ctx, None) and not library_tab.resumable(ctx, "no-such-document")
    for state in ("partial", "pending", "not prefilled"):
        monkeypatch.setattr(library_tab, "_state_of", lambda d, fp: (state, 630, 6300))
        assert library_tab.resumable(ctx, doc_id), state
    ctx.prefilling.add(doc_id)
    try:
        assert not library_tab.resumable(ctx, doc_id)  # under way
    finally:
        ctx.prefilling.discard(doc_id)


def test_the_chunk_number_fields_start_empty_and_read_what_is_typed(lib):
    """Walk 11, item 14: the chunk-number fields (Ask, Outline, Map) started at 0, a chunk no one chose
    (Gradio's number field shows and sends 0 when it has no value, placeholder or not), and the map's
    optional retrieved chunk then showed chunk 0 beside the querying chunk, not what it retrieved.
    They are text boxes, empty until a chunk is chosen; a number typed in reads as before."""
    ctx, doc_id = lib["ctx"], lib["doc_id"]
    with gr.Blocks():
        a, o, m = ask_tab.layout(gr.State([]), gr.State("")), outline_tab.layout(), map_tab.layout()
    for field in (a.pick_chunk, o.chunk, m.src, m.dst):
        assert isinstance(field, gr.Textbox) and not field.value and field.placeholder, field.label
    assert [context.chunk_number(v) for v in (None, "", " 12 ", 12, 12.0)] == [None, None, 12, 12, 12]
    for bad in ("abc", "-3", "1.5", "١٢"):
        with pytest.raises(context.UIError, match="not a chunk number"):
            context.chunk_number(bad)
    rec = {"doc_id": doc_id, "trace": {"chunks": []}}
    assert ask_tab.heatmap_pick(ctx, [rec], 0, "") == "Pick a chunk."
    assert ask_tab.heatmap_pick(ctx, [rec], 0, "5") == ask_tab.heatmap_pick(ctx, [rec], 0, 5)
    assert ask_tab.page_view(ctx, doc_id, "") == (None, "") and ask_tab.page_view(ctx, doc_id, "5")[1].startswith(
        "Chunk 5 highlighted")
    assert "type a chunk number" in outline_tab.relied_on_view(ctx, doc_id, "")
    assert outline_tab.relied_on_view(ctx, doc_id, "40") == outline_tab.relied_on_view(ctx, doc_id, 40)
    row = next(r for r in map_tab.doc_map(ctx, doc_id) if r["retrieved"])
    alone = map_tab.doc_map_pick(ctx, doc_id, str(row["chunk"]), "")  # what it retrieved, not chunk 0
    assert "Retrieved (weight" in alone and alone == map_tab.doc_map_pick(ctx, doc_id, row["chunk"])
    assert "**Retrieved chunk 0**" in map_tab.doc_map_pick(ctx, doc_id, str(row["chunk"]), "0")


def test_the_evidence_note_lists_its_pages_as_runs_not_one_span():
    """Four passages on pp. 23, 141-142 and 205 were labelled 'pp. 23-205', as if one passage ran over
    180 pages; the note names the runs."""
    from ui.render import pages_runs
    from ui.tabs.ask import _evidence_note

    ev = [{"chunk": c, "pages": ps, "weight": 0.5, "text": "some words"} for c, ps in
          ((3, [23]), (90, [141, 142]), (91, [142]), (130, [205]))]
    assert _evidence_note(ev, {})["metadata"]["title"] == "Retrieved by the model: 4 passages (pp. 23, 141–142, 205)"
    # walk 11: "Evidence: 4 passages (pp. 8, 14, 81)" under a quote from p. 5, read from the question's pool
    assert _evidence_note(ev[:1], {})["metadata"]["title"] == "Retrieved by the model: 1 passage (p. 23)"
    assert pages_runs([7]) == "p. 7" and pages_runs(range(1, 40, 2), limit=3) == "pp. 1, 3, 5, …"
    assert pages_runs([4, 5, 8, 9]) == "pp. 4–5, 8–9" and pages_runs([]) == ""


def test_picking_a_document_builds_its_first_questions_statistics(lib):
    """Picking a document in the Ask tab builds what its first question would (qa.ask.warm): its
    reader statistics and words are cached before the question; "All documents", nothing and an
    unknown document are left alone."""
    from qa import ask as ask_mod

    ctx, doc_id = lib["ctx"], lib["doc_id"]
    ask_mod._STATS.clear()
    ask_mod._VOCABULARIES.clear()
    assert ask_tab.warm_document(ctx, doc_id)
    key = (str(ctx.library.home), doc_id, None)
    assert key in ask_mod._STATS and key in ask_mod._VOCABULARIES
    assert not ask_tab.warm_document(ctx, None) and not ask_tab.warm_document(ctx, context.ALL_DOCS)
    assert not ask_tab.warm_document(ctx, "no-such-document")


def test_a_page_label_never_opens_an_html_tag():
    """A library stored before ingest read hex labels holds "<FEFF0031>": shown raw in the outline's
    Markdown it opened a tag and hid everything after "(p. 1 (" (tried as a new user would)."""
    from ui.plots import page_label
    from ui.render import pages_text

    labels = {1: "<FEFF0031>", 2: "vii", 3: "3"}
    assert page_label(1, labels) == "1 (‹FEFF0031›)" and page_label(2, labels) == "2 (vii)"
    assert page_label(3, labels) == "3" and pages_text(1, 2, labels) == "pp. 1 (‹FEFF0031›)–2 (vii)"


def test_a_small_fusion_weight_reads_below_0_001_not_zero():
    """The outline's "Relied on (weight 0.000 ...)" read as if the model had not used the chunk: a
    retrieved chunk's weight that rounds to 0 is shown "< 0.001" (the outline, the map, the evidence)."""
    from ui.render import evidence_md, weight_text

    assert weight_text(0.0001) == "< 0.001" and weight_text(0.0) == "0.000" and weight_text(0.5) == "0.500"
    assert weight_text(0.0005) == "0.001" and weight_text(1) == "1.000"
    md = evidence_md([{"chunk": 2, "pages": [3], "weight": 0.9999, "text": "A."},
                      {"chunk": 5, "pages": [4], "weight": 0.0001, "text": "B."}])
    assert "weight 1.000" in md and "weight < 0.001" in md and "0.000" not in md
