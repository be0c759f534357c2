"""Teacher-forced retrieval for fine-tuning: the forced selection, the oracle warm-up, the
retrieval cross-entropy, the copy task and the retrieval targets of NIAH examples."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from drt_core.train.tasks import cite, common, needles, repeat
from drt_core import tokenizer as T
from drt_core.hf_config import DRTConfig
from drt_core.drt import select_topk
from drt_core.modeling import DRTForCausalLM
from drt_core.train.objective import force_selection, forced_retrieval_loss, scorer_loss, training_forward


@pytest.fixture(scope="module")
def hay():
    from pathlib import Path

    assets = Path(__file__).resolve().parents[1] / "assets"
    return np.asarray(T.encode((assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8")), dtype=np.int64)


def _scores(C=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(2, C, C, generator=g)
    ids = torch.arange(C)
    return s.masked_fill(~(ids[None, :] < ids[:, None]), float("-inf"))


def test_force_selection_puts_the_chunk_in_and_keeps_the_best_natural_picks():
    s = _scores()
    idx, w = select_topk(s, 3, gumbel=False)
    forced = torch.full((2, 9), -1)
    forced[0, 8] = int(s[0, 8, :8].argmin())  # the worst eligible chunk of row 8
    forced[1, 5] = int(idx[1, 5, 1])  # already selected: the selection must not change
    nidx, nw = force_selection(idx, s, forced)
    # rows without a forced chunk are untouched
    untouched = forced < 0
    assert torch.equal(nidx[untouched], idx[untouched]) and torch.allclose(nw[untouched], w[untouched])
    # row (0, 8): forced chunk + the two best natural picks, weights = softmax of the clean scores
    assert set(nidx[0, 8].tolist()) == {int(forced[0, 8])} | set(idx[0, 8, :2].tolist())
    assert torch.allclose(nw[0, 8], torch.softmax(s[0, 8, nidx[0, 8]], -1))
    assert set(nidx[1, 5].tolist()) == set(idx[1, 5].tolist())
    assert torch.allclose(nw[1, 5].sort().values, w[1, 5].sort().values)


def test_force_selection_several_chunks_oracle_and_short_rows():
    s = _scores()
    idx, w = select_topk(s, 4, gumbel=False)
    forced = torch.full((2, 9, 2), -1)
    forced[0, 7] = torch.tensor([1, 2])
    forced[0, 2] = torch.tensor([0, 1])  # row 2 has only 2 eligible chunks
    forced[1, 6] = torch.tensor([3, 3])  # a duplicate counts once
    nidx, nw = force_selection(idx, s, forced, oracle=True)
    assert {1, 2} <= set(nidx[0, 7].tolist())
    assert torch.allclose(nw[0, 7].sum(), torch.tensor(1.0))
    assert nw[0, 7][(nidx[0, 7] == 1) | (nidx[0, 7] == 2)].tolist() == [0.5, 0.5]
    assert sorted(nidx[0, 2][nw[0, 2] > 0].tolist()) == [0, 1] and (nw[0, 2] > 0).sum() == 2
    assert nidx[1, 6].tolist().count(3) == 1 and nw[1, 6][nidx[1, 6] == 3].item() == 1.0
    assert torch.all(nw[1, 7] == 0)  # oracle: rows without a forced chunk read nothing
    # row 0 has nothing eligible: weights stay 0 (no NaN)
    assert torch.all(nw[:, 0] == 0) and torch.isfinite(nw).all()


def test_forced_retrieval_loss_is_the_cross_entropy_of_the_forced_chunks():
    s = _scores()
    forced = torch.full((2, 9), -1)
    assert forced_retrieval_loss(s, forced) is None
    forced[0, 6], forced[1, 8] = 2, 5
    want = torch.stack([torch.nn.functional.cross_entropy(s[0, 6][None, :6], torch.tensor([2])),
                        torch.nn.functional.cross_entropy(s[1, 8][None, :8], torch.tensor([5]))]).mean()
    assert torch.allclose(forced_retrieval_loss(s, forced), want, atol=1e-6)
    two = torch.full((2, 9, 2), -1)
    two[0, 6] = torch.tensor([2, 4])
    p = torch.softmax(s[0, 6, :6], -1)
    assert torch.allclose(forced_retrieval_loss(s, two), -torch.log(p[2] + p[4]), atol=1e-6)


def test_distractor_weight_is_the_loss_over_a_haystack_with_each_other_chunk_repeated():
    """forced_retrieval_loss(..., distractors=M) equals the plain loss when every non-target chunk
    of a row appears M times (integer M), with one target or two; M = 1 is the plain loss."""
    s = _scores()
    forced = torch.full((2, 9, 2), -1)
    forced[0, 6, 0], forced[1, 8] = 2, torch.tensor([1, 5])
    assert torch.equal(forced_retrieval_loss(s, forced, 1.0), forced_retrieval_loss(s, forced))
    want = []
    for b, c, n, t in ((0, 6, 6, [2]), (1, 8, 8, [1, 5])):
        row = s[b, c, :n]
        others = row[[j for j in range(n) if j not in t]]
        big = torch.cat([row[t], others.repeat(3)])  # the targets first, each other chunk 3 times
        want.append(torch.logsumexp(big, 0) - torch.logsumexp(row[t], 0))
    got = forced_retrieval_loss(s, forced, 3.0)
    assert torch.allclose(got, torch.stack(want).mean(), atol=1e-6)
    assert got > forced_retrieval_loss(s, forced)


def test_model_oracle_reads_only_the_forced_chunk_and_the_loss_trains_the_scores():
    torch.manual_seed(0)
    cfg = DRTConfig.from_preset("tiny", hidden_size=64, num_heads=2, intermediate_size=128, window=64,
                                gca_backend="reference")
    m = DRTForCausalLM(cfg)
    ids = torch.randint(3, 8000, (1, 63 * 8))
    forced = torch.full((1, 8), -1)
    forced[0, 6] = 1
    out = training_forward(m, ids, forced_chunks=forced, forced_oracle=True, output_retrieval=True)
    r = out.retrieval[0]
    assert r["weights"][0, 6][r["idx"][0, 6] == 1].item() == 1.0 and r["weights"][0, 6].sum() == 1.0
    out.retrieval_loss.backward()
    assert m.lmk_norms[0].weight.grad is not None and m.lmk_norms[0].weight.grad.abs().sum() > 0
    # changing the forced chunk's tokens changes the served chunk (7); chunk 7 has the window
    # (64 positions = one chunk) over chunk 6 only, so chunk 1 reaches it only through GCA
    ids2 = ids.clone()
    ids2[0, 63:126] = torch.randint(3, 8000, (63,))
    with torch.no_grad():
        a = training_forward(m, ids, forced_chunks=forced, forced_oracle=True).logits[0, 7 * 63:]
        b = training_forward(m, ids2, forced_chunks=forced, forced_oracle=True).logits[0, 7 * 63:]
    assert (a - b).abs().max() > 1e-4


def test_build_repeat_copies_beyond_the_window_and_names_the_sources(hay):
    for seed in range(5):
        ex = repeat.build_repeat(hay[seed * 100:], 1260, random.Random(seed), gap=320)
        (s, e), (o, oe) = ex["copy_span"], ex["source_span"]
        ids = ex["ids"]
        assert len(ids) == 1260 and np.array_equal(ids[s:e], ids[o:oe]) and s - oe >= 320
        assert np.all(ex["weights"][s:e] == 5.0) and ex["weights"][:s].max() == 1.0
        for row, src in enumerate(ex["forced"]):
            c = row + 1  # the chunk this row serves
            copied = [q for q in range(c * 63, (c + 1) * 63) if s <= q < e]
            want = sorted({(q - (s - o)) // 63 for q in copied})
            assert [x for x in src.tolist() if x >= 0] == want
    with pytest.raises(common.TooShort):
        repeat.build_repeat(hay, 500, random.Random(0), gap=320)


def test_retrieval_targets_point_at_the_value(hay):
    enc = T.encode
    for task in ("single", "multikey", "2hop"):
        ex = needles.build(task, hay, 1500, random.Random(7), n_pairs=1 if task == "single" else 2,
                     needle_margin=300)
        first_q = ex.prompt_ends[0] - 62
        assert all(e <= first_q - 300 for _, e in ex.needle_spans)
        for (row, chunks), p, ans in zip(needles.retrieval_targets(ex), ex.prompt_ends, ex.answers):
            assert row == p // 63 - 1
            values = [v.strip() for v in ans.split(",")]
            for c, v in zip(chunks, values):
                first = enc(" " + v)[0]
                hits = [q for q in range(c * 63, c * 63 + 63) if ex.ids[q] == first]
                assert hits, (task, c, v)


def test_training_with_the_copy_warm_up_and_forced_retrieval(tmp_path):
    """Two steps of the fine-tuning recipe: oracle copy warm-up, then forced selection with the
    retrieval cross-entropy; the batch carries the forced chunks and the log the retrieval loss."""
    from drt_core.train.batches import Batches
    from drt_core.train.loop import train
    from tests.drt_core.record_golden import build_token_dir, golden_config

    data = build_token_dir(tmp_path / "data")
    cfg = golden_config(data, tmp_path / "run", steps=2, seq_len=1260, batch_size=3, task="repeat,multikey,single",
                        task_len_min=1260, task_pairs=2, task_margin=300, force_retrieval=1.0, force_steps=2,
                        oracle_steps=1, retrieval_loss=1.0, gca_out_scale=2.0, gca_lr_mult=3.0,
                        log_file=str(tmp_path / "run" / "log.jsonl"))
    (tmp_path / "run").mkdir()
    ids, labels, weights, forced, targets = Batches(cfg, 1, 0).get(0)
    assert ids.shape == (3, 1260) and forced.shape == (3, 20, 2)
    assert all(bool((forced[i] >= 0).any()) for i in range(3))  # every task row has a target
    res = train(cfg)
    assert len(res["history"]) == 2 and all(np.isfinite(h["loss"]) for h in res["history"])
    import json

    log = [json.loads(line) for line in open(tmp_path / "run" / "log.jsonl")]
    assert all("ret_loss" in r for r in log)  # step 2 forces with p = 0.5: rows still forced
    # each step's log names its rows' tasks, in the order the batch drew them
    assert [r["task"] for r in log] == ["repeat,multikey,single", "multikey,single,repeat"]


def test_row_tasks_name_the_rows_the_batch_builds(tmp_path):
    """Batches.row_tasks: the task cycle per row and step, "lm" for the plain-text rows past
    task_frac, each rank its own slice; and the rows built match (the needle row carries a
    retrieval target, the plain row none)."""
    from drt_core.train.batches import Batches
    from tests.drt_core.record_golden import build_token_dir, golden_config

    data = build_token_dir(tmp_path / "data")
    cfg = golden_config(data, tmp_path / "run", steps=1, seq_len=1260, batch_size=2, task="single,multikey,repeat",
                        task_frac=0.75, task_len_min=1260, task_pairs=2, task_margin=300, retrieval_loss=1.0)
    # a global batch of 4 rows over 2 ranks: round(4 * 0.75) = 3 task rows, then one plain row
    assert Batches(cfg, 2, 0).row_tasks(0) == ["single", "multikey"]
    assert Batches(cfg, 2, 1).row_tasks(0) == ["repeat", "lm"]
    assert Batches(cfg, 2, 1).row_tasks(1) == ["single", "lm"]
    ids, labels, weights, forced, targets = Batches(cfg, 2, 1).get(1)
    assert bool((targets[0] >= 0).any())  # the single-needle row has its target
    assert not bool((targets[1] >= 0).any()) and bool((weights[1] == 1).all())  # the plain row
    cfg.tasks.task = None
    assert Batches(cfg, 1, 0).row_tasks(0) == ["lm", "lm"]


def test_task_losses_probe_reads_logged_and_cycled_tasks():
    from bench.task_losses import task_losses

    logged = [{"step": s, "task": t, "ret_loss": v} for s, t, v in
              [(1, "cite", 2.0), (2, "single", 0.0), (3, "cite", 4.0), (4, "single", 1.0), (5, "cite", 6.0)]]
    assert task_losses(logged, every=4) == [(1, 4, {"cite": (3.0, 2), "single": (0.5, 2)}), (5, 5, {"cite": (6.0, 1)})]
    old = [{k: v for k, v in r.items() if k != "task"} for r in logged]  # logs from before the task field
    assert task_losses(old, every=4, cycle="cite,single") == task_losses(logged, every=4)
    assert task_losses(old + [{"step": 6, "loss": 1.0}], every=10) == [(1, 6, {"all": (2.6, 5)})]


def test_training_the_retrieval_scorer_alone_leaves_the_rest_untouched(tmp_path):
    """--train-only encoder.,lmk_norms. --lm-loss 0: only those parameters move, from the retrieval
    loss alone; the language model's other weights stay bit-identical."""
    from drt_core.train.loop import train
    from drt_core.train.model import build_model
    from tests.drt_core.record_golden import build_token_dir, golden_config

    data = build_token_dir(tmp_path / "data")
    init = tmp_path / "init"
    torch.manual_seed(0)
    build_model(golden_config(data, tmp_path / "x")).save_pretrained(init)
    cfg = golden_config(data, tmp_path / "run", steps=2, seq_len=1260, batch_size=2, task="multikey",
                        task_len_min=1260, task_pairs=2, task_margin=300, retrieval_loss=1.0, lm_loss=0.0,
                        train_only="encoder.,lmk_norms.", init=str(init), lr=1e-2, warmup=1)
    train(cfg)
    before = DRTForCausalLM.from_pretrained(init).state_dict()
    after = DRTForCausalLM.from_pretrained(tmp_path / "run" / "model").state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved and all(k.startswith(("encoder.", "lmk_norms.")) for k in moved)
    assert any(k.startswith("lmk_norms.") for k in moved)
    # the same with a query and a key encoder added (--set query_encoder=1 --set key_encoder=1):
    # they start as copies of the chunk encoder, and only they and the projection move
    cfg = cfg.replace(out=str(tmp_path / "run2"), init=str(tmp_path / "run" / "model"),
                      train_only="query_projs.,query_enc.,key_enc.",
                      model_overrides={"query_encoder": 1, "key_encoder": 1}, steps=1)
    train(cfg)
    grown = DRTForCausalLM.from_pretrained(tmp_path / "run2" / "model").state_dict()
    moved = {k for k in grown if k not in after or not torch.equal(after[k], grown[k])}
    assert "query_projs.0.weight" in moved
    assert all(k.startswith(("query_projs.", "query_enc.", "key_enc.")) for k in moved)
    assert any(k.startswith("key_enc.") for k in moved)  # the keys' encoder learns from the first step
    assert grown["query_projs.0.weight"].abs().sum() > 0
    # after one step from a zero projection the encoder has had no gradient yet: still the copy
    # (up to the decoupled weight decay of that step, a factor 1 - lr * wd)
    torch.testing.assert_close(grown["query_enc.layers.0.qkv.weight"],
                               after["encoder.layers.0.qkv.weight"] * (1 - 1e-4))
    # key_context added to a model that has a key encoder: that encoder keeps its (trained) weights
    # instead of being copied again from the chunk encoder, and the new attention starts at zero
    trained = DRTForCausalLM.from_pretrained(tmp_path / "run2" / "model")
    with torch.no_grad():
        trained.key_enc.layers[0].qkv.weight.add_(0.5)  # far from the chunk encoder's copy
    trained.save_pretrained(tmp_path / "init3")
    cfg = cfg.replace(out=str(tmp_path / "run3"), init=str(tmp_path / "init3"), train_only="key_enc.",
                      model_overrides={"key_context": 8})
    train(cfg)
    ctx = DRTForCausalLM.from_pretrained(tmp_path / "run3" / "model").state_dict()
    w = trained.state_dict()["key_enc.layers.0.qkv.weight"]
    assert (ctx["key_enc.layers.0.qkv.weight"] - w).abs().max() < 0.02  # one AdamW step of lr 1e-2
    assert ctx["key_enc.context.o.weight"].abs().sum() > 0
    assert all(torch.equal(ctx[k], v) for k, v in trained.state_dict().items() if not k.startswith("key_enc."))


def test_scorer_only_gives_the_scorer_the_same_gradients_without_a_graph_through_the_upper_layers():
    """training_forward(scorer_only=True) (used by --lm-loss 0): same logits and retrieval loss; the retrieval
    loss's gradients on the encoder and query norms are those of the full graph (one group); the LM
    loss carries no graph."""
    cfg = DRTConfig.from_preset("tiny", hidden_size=64, num_heads=2, intermediate_size=128, window=64,
                                gca_backend="reference")
    torch.manual_seed(0)
    m = DRTForCausalLM(cfg).eval()
    C = 7
    ids = torch.randint(3, cfg.vocab_size, (2, C * cfg.chunk_tokens))
    targets = torch.full((2, C, 2), -1)
    targets[0, 5, 0], targets[1, 6, 0], targets[1, 3, :] = 1, 4, torch.tensor([0, 2])
    outs, grads = [], []
    for so in (False, True):
        m.zero_grad()
        out = training_forward(m, ids, ids, retrieval_targets=targets, scorer_only=so)
        out.retrieval_loss.backward()
        outs.append(out)
        grads.append({n: p.grad.clone() for n, p in m.named_parameters()
                      if p.grad is not None and n.startswith(("encoder.", "lmk_norms."))})
    full, so = outs
    # float noise only: with a graph, GCA and the window attention take their recomputing training paths
    assert torch.allclose(full.logits, so.logits, atol=1e-5, rtol=1e-4)
    assert torch.allclose(full.retrieval_loss, so.retrieval_loss)
    assert full.loss.requires_grad and not so.loss.requires_grad
    assert grads[1].keys() == grads[0].keys() and any(k.startswith("lmk_norms.") for k in grads[1])
    for k in grads[0]:
        assert torch.allclose(grads[0][k], grads[1][k], atol=1e-6), k


@pytest.mark.parametrize("qenc", [None, "encoder", "both", "context"])
def test_scorer_loss_is_the_forward_retrieval_loss_with_its_gradients(qenc):
    """objective.scorer_loss (what --lm-loss 0 trains for one group, without the upper layers) equals
    forward(...).retrieval_loss, value and gradients, also with query_encoder's
    projection and a key encoder (with key_context, one that reads the chunk before)."""
    both = qenc in ("both", "context")
    cfg = DRTConfig.from_preset("tiny", hidden_size=64, num_heads=2, intermediate_size=128, window=64,
                                gca_backend="reference",
                                query_encoder=1 if qenc in ("encoder", "both", "context") else 0,
                                key_encoder=int(both), key_context=5 if qenc == "context" else 0)
    torch.manual_seed(0)
    m = DRTForCausalLM(cfg).eval()
    if qenc:
        with torch.no_grad():
            m.query_projs[0].weight.normal_(0, 0.2)
            if qenc == "context":
                m.key_enc.context.o.weight.normal_(0, 0.2)
    C = 7
    ids = torch.randint(3, cfg.vocab_size, (2, C * cfg.chunk_tokens - 5))
    targets = torch.full((2, C, 2), -1)
    targets[0, 5, 0], targets[1, 6, 0], targets[1, 3, :] = 1, 4, torch.tensor([0, 2])
    losses, grads = [], []
    for fast in (False, True):
        m.zero_grad()
        M = 4.0 if qenc == "context" else 1.0  # --retrieval-distractors: the same weight on both paths
        loss = (scorer_loss(m, ids, targets, M) if fast
                else training_forward(m, ids, retrieval_targets=targets, retrieval_distractors=M).retrieval_loss)
        loss.backward()
        losses.append(loss.detach())
        grads.append({n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None
                      and n.startswith(("encoder.", "lmk_norms.", "query_projs.", "query_enc.", "key_enc.", "lower.",
                                        "embed."))})
    torch.testing.assert_close(losses[0], losses[1])
    assert grads[0].keys() == grads[1].keys()
    assert any(k.startswith("query_projs.") for k in grads[0]) == (qenc is not None)
    assert any(k.startswith("query_enc.") for k in grads[0]) == (qenc in ("encoder", "both", "context"))
    assert any(k.startswith("key_enc.") for k in grads[0]) == both
    assert any(k.startswith("key_enc.context.") for k in grads[0]) == (qenc == "context")
    for k in grads[0]:
        torch.testing.assert_close(grads[0][k], grads[1][k], atol=1e-6, rtol=1e-4)
    none = torch.full((2, C), -1)
    assert scorer_loss(m, ids, none) is None


def test_citation_pairs_and_targets():
    """A \\ref of a statement points at the chunk of its \\label when that is earlier; section
    labels, forward references and unknown labels are ignored."""
    filler = "word " * 70  # > 63 tokens: pushes what follows into a later chunk
    text = ("\\begin{lemma}\\label{lemma-a} Stuff.\\end{lemma}\\label{section-s} " + filler +
            "By Lemma \\ref{lemma-a} and Section \\ref{section-s} and \\ref{lemma-b} and \\ref{lemma-nope}. " +
            filler + "\\begin{lemma}\\label{lemma-b} More.\\end{lemma} Again \\ref{lemma-a}.")
    ids = T.encode(text)
    targets = cite.citation_targets(ids)
    rows = dict(targets)
    assert all(chunks == [0] for chunks in rows.values())  # only lemma-a (chunk 0) is cited after its label
    assert len(rows) == 2  # the first citing chunk, and the last "Again \ref{lemma-a}"
    c1, c2 = sorted(rows)
    assert 0 < c1 < c2
    # the citing chunk really holds the \ref
    from drt_core.tokenizer import decode

    assert "\\ref{lemma-a}" in decode(ids[c2 * 63:(c2 + 1) * 63] + ids[(c2 + 1) * 63:(c2 + 2) * 63]) or \
        "ref{lemma-a}" in decode(ids[c2 * 63 - 8:(c2 + 1) * 63])


def test_retrieval_targets_add_the_needle_start_when_it_is_written_across_chunks(hay):
    """needle_start: single/multikey needles that begin in an earlier chunk than their value get
    that chunk as a second target; needles inside one chunk, and 2-hop, keep one target per hop."""
    seen = {True: 0, False: 0}
    for seed in range(40):
        for task in ("single", "multikey"):
            ex = needles.build(task, hay, 1500, random.Random(seed), n_pairs=1 if task == "single" else 2,
                         needle_margin=300)
            plain, both = needles.retrieval_targets(ex), needles.retrieval_targets(ex, needle_start=True)
            for k, ((row, ch), (row2, ch2)) in enumerate(zip(plain, both)):
                s, _ = ex.needle_spans[ex.meta["real_needles"][k]]
                across = s // 63 != ch[0]
                seen[across] += 1
                assert row == row2 and ch2 == (ch + [s // 63] if across else ch)
    assert seen[True] and seen[False]  # both cases occurred
    ex = needles.build("2hop", hay, 1500, random.Random(3), n_pairs=2, needle_margin=300)
    assert needles.retrieval_targets(ex, needle_start=True) == needles.retrieval_targets(ex)


def test_task_split_writes_the_training_needles_across_chunk_boundaries(tmp_path):
    """train --task-split 1: every needle row's retrieval target is a chunk whose first slots hold
    the value, with the needle's words in the chunk before (needles.build split_frac); 0 keeps the
    natural positions, where such rows are rare."""
    from drt_core import tokenizer as T
    from drt_core.train.batches import Batches
    from tests.drt_core.record_golden import build_token_dir, golden_config

    data = build_token_dir(tmp_path / "data")
    counts = {}
    for frac in (1.0, 0.0):
        cfg = golden_config(data, tmp_path / "run", steps=2, seq_len=1890, batch_size=4, task="multikey,single",
                            task_len_min=1890, task_pairs=3, task_margin=300, retrieval_loss=1.0, task_split=frac)
        split = total = 0
        for step in range(3):
            ids, _, _, _, targets = Batches(cfg, 1, 0).get(step)
            for i, row in (targets[..., 0] >= 0).nonzero().tolist():
                c = int(targets[i, row, 0])
                head = ids[i, c * 63: c * 63 + needles.SPLIT_SLOTS].tolist()
                total += 1
                split += any(T.decode([t]).strip().isdigit() for t in head)
        counts[frac] = (split, total)
    assert counts[1.0][0] == counts[1.0][1] > 10
    assert counts[0.0][0] < counts[0.0][1] / 2


def test_train_retrieval_distractors_reaches_the_loss(tmp_path):
    """`train --retrieval-distractors M` (below 1 refused) reaches the scorer's loss: the first
    step's logged retrieval loss, same model and batch, is higher with M = 50 than with M = 1."""
    import argparse
    import json

    from drt_core.train.loop import train
    from drt_core.train.model import build_model
    from drt_core.train.flags import add_args, config_from_args
    from tests.drt_core.record_golden import build_token_dir, golden_config

    p = argparse.ArgumentParser()
    add_args(p)
    cfg = config_from_args(p.parse_args(["--retrieval-distractors", "16"]))
    assert cfg.objective.retrieval_distractors == 16.0
    with pytest.raises(SystemExit):
        p.parse_args(["--retrieval-distractors", "0.5"])
    data = build_token_dir(tmp_path / "data")
    init = tmp_path / "init"
    torch.manual_seed(0)
    build_model(golden_config(data, tmp_path / "x")).save_pretrained(init)
    first = {}
    for M in (1.0, 50.0):
        cfg = golden_config(data, tmp_path / f"run{M}", steps=1, seq_len=1260, batch_size=2, task="multikey",
                            task_len_min=1260, task_pairs=2, task_margin=300, retrieval_loss=1.0, lm_loss=0.0,
                            train_only="encoder.,lmk_norms.", init=str(init), retrieval_distractors=M,
                            log_file=str(tmp_path / f"run{M}.jsonl"))
        train(cfg)
        rows = [json.loads(x) for x in open(tmp_path / f"run{M}.jsonl")]
        first[M] = next(r["ret_loss"] for r in rows if "ret_loss" in r)
    assert first[50.0] > first[1.0] + 1.0


def test_train_hard_negatives_reach_the_rows(tmp_path):
    """`train --hard-negatives HUBS.npy`: the mined passages go into the NIAH rows (same seed and
    model, the first step's retrieval loss changes); a file of the wrong shape is refused."""
    import argparse
    import json

    import numpy as np

    from drt_core.train.loop import train
    from drt_core.train.model import build_model
    from drt_core.train.flags import add_args, config_from_args
    from tests.drt_core.record_golden import build_token_dir, golden_config

    p = argparse.ArgumentParser()
    add_args(p)
    a = config_from_args(p.parse_args(["--hard-negatives", "h.npy", "--hard-negatives-per-row", "5"]))
    assert (a.tasks.hard_negatives, a.tasks.hard_negatives_per_row) == ("h.npy", 5)
    data = build_token_dir(tmp_path / "data")
    init = tmp_path / "init"
    torch.manual_seed(0)
    build_model(golden_config(data, tmp_path / "x")).save_pretrained(init)
    rng = np.random.default_rng(0)
    np.save(tmp_path / "hubs.npy", rng.integers(10, 500, size=(4, 79)))
    np.save(tmp_path / "bad.npy", np.zeros((4, 10), dtype=np.int64))
    first = {}
    for name in ("", "hubs.npy", "bad.npy"):
        cfg = golden_config(data, tmp_path / f"run{name}", steps=1, seq_len=1260, batch_size=2, task="multikey",
                            task_len_min=1260, task_pairs=2, task_margin=300, retrieval_loss=1.0, lm_loss=0.0,
                            train_only="encoder.,lmk_norms.", init=str(init),
                            hard_negatives=str(tmp_path / name) if name else "", hard_negatives_per_row=6,
                            log_file=str(tmp_path / f"run{name}.jsonl"))
        if name == "bad.npy":
            with pytest.raises(SystemExit, match="hard-negatives"):
                train(cfg)
            continue
        train(cfg)
        rows = [json.loads(x) for x in open(tmp_path / f"run{name}.jsonl")]
        first[name] = next(r["ret_loss"] for r in rows if "ret_loss" in r)
    assert abs(first["hubs.npy"] - first[""]) > 1e-4


def test_interpolate_probe_mixes_only_the_tensors_that_differ():
    from bench.interpolate import interpolate

    same, a1, b1 = torch.randn(3, 2), torch.zeros(4), torch.ones(4)
    out = interpolate({"same": same, "w": a1}, {"same": same.clone(), "w": b1}, alpha=0.25)
    assert out["same"] is same  # bit-identical tensors are A's own
    assert torch.equal(out["w"], torch.full((4,), 0.25))
    with pytest.raises(SystemExit, match="shapes differ"):
        interpolate({"w": a1}, {"w": torch.ones(5)}, 0.5)
    with pytest.raises(SystemExit, match="tensor names"):
        interpolate({"w": a1}, {"v": b1}, 0.5)
    # --partial: B holds a subset (a scorer kept apart); alpha 1 puts B's tensors into A exactly
    part = interpolate({"same": same, "w": a1}, {"w": b1}, alpha=1.0, partial=True)
    assert part["same"] is same and torch.equal(part["w"], b1)
    with pytest.raises(SystemExit, match="A lacks"):
        interpolate({"w": a1}, {"v": b1}, 1.0, partial=True)


def test_interpolate_only_takes_the_named_tensors_of_b(tmp_path, monkeypatch):
    """`interpolate.py A B OUT --alpha 1 --only copy_head.`: OUT holds B's copy head and A's other
    tensors (B's other tensors, here a different scorer, are left out), with A's config."""
    import json

    from safetensors.torch import load_file, save_file

    from bench import interpolate as ip

    for name, v in (("a", 0.0), ("b", 1.0)):
        (tmp_path / name).mkdir()
        save_file({"copy_head.q": torch.full((2,), v), "key_enc.w": torch.full((3,), v)},
                  tmp_path / name / "model.safetensors")
        (tmp_path / name / "config.json").write_text(json.dumps({"who": name}))
    out = tmp_path / "out"
    monkeypatch.setattr("sys.argv", ["interpolate.py", str(tmp_path / "a"), str(tmp_path / "b"), str(out),
                                     "--alpha", "1", "--only", "copy_head."])
    ip.main()
    got = load_file(out / "model.safetensors")
    assert torch.equal(got["copy_head.q"], torch.ones(2)) and torch.equal(got["key_enc.w"], torch.zeros(3))
    assert json.loads((out / "config.json").read_text()) == {"who": "a"}
    monkeypatch.setattr("sys.argv", ["interpolate.py", str(tmp_path / "a"), str(tmp_path / "b"), str(out),
                                     "--only", "nothing."])
    with pytest.raises(SystemExit, match="no tensor"):
        ip.main()
