"""drt_core.train.word_gates: the citation rows of a LaTeX chapter, and steps on the gates alone."""

from __future__ import annotations

import torch

from drt_core.hf_config import DRTConfig
from drt_core.modeling import DRTForCausalLM
from drt_core.train.word_gates import chapter_loss, chapter_rows, hit_rate


def _chapter(tmp_path):
    """A chapter whose lemmas are cited 8+ chunks after their statement, among filler paragraphs."""
    words = "scheme morphism module sheaf ring field space cover limit functor algebra group".split()
    g = torch.Generator().manual_seed(0)
    filler = lambda n: " ".join(words[int(i)] for i in torch.randint(0, len(words), (n,), generator=g))  # noqa: E731
    parts = []
    for name in ("flat-base-change", "finite-presentation", "open-immersion"):
        parts.append(f"\\begin{{lemma}}\n\\label{{lemma-{name}}}\nLet $X$ be a {filler(30)}.\n\\end{{lemma}}\n")
        parts.append(filler(300) + "\n")
    for name in ("open-immersion", "flat-base-change", "finite-presentation"):
        parts.append(f"By Lemma \\ref{{lemma-{name}}} the {filler(40)}.\n" + filler(200) + "\n")
    path = tmp_path / "chapter.tex"
    path.write_text("".join(parts), encoding="utf-8")
    return path


def test_chapter_rows_and_a_few_steps_on_the_gates_alone(tmp_path):
    """chapter_rows finds the citing chunks and the chunks they cite (4+ chunks back); the loss is the
    engine's own scores' (model.chunk_scores) and Adam on the gates alone lowers it, moving nothing else."""
    torch.manual_seed(0)
    cfg = DRTConfig.from_preset("tiny", hidden_size=32, num_heads=2, intermediate_size=64, upper_groups=[2],
                                window=64, lexical=True, lexical_doc_df=1.0, lexical_words=2.0, lexical_gates=1.0)
    model = DRTForCausalLM(cfg).eval()
    ch = chapter_rows(model, _chapter(tmp_path))
    assert ch is not None and len(ch["pairs"]) == 3
    assert all(c - t >= 4 for c, t in ch["pairs"]) and ch["target"].sum() == 3
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for n, p in model.named_parameters():
        p.requires_grad_(n.startswith("lexical.gate"))
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-2)
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = chapter_loss(model, ch)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    moved = {n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])}
    assert moved == {"lexical.gates", "lexical.gate.weight", "lexical.gate.bias"}
    assert 0.0 <= hit_rate(model, ch, 4) <= 1.0


def test_chapter_rows_of_a_restyled_chapter_cite_the_same_statements(tmp_path):
    """--label-styles: a chapter read with its labels as papers write them ("lem:2", "\\cref{...}")
    has its citations in the same chunks as the chapter as written."""
    torch.manual_seed(0)
    cfg = DRTConfig.from_preset("tiny", hidden_size=32, num_heads=2, intermediate_size=64, upper_groups=[2],
                                window=64, lexical=True, lexical_doc_df=1.0, lexical_words=2.0, lexical_gates=1.0)
    model = DRTForCausalLM(cfg).eval()
    path = _chapter(tmp_path)
    plain = chapter_rows(model, path)
    for style, cref in (("numbered", True), ("suffix", False), ("camel", True)):
        ch = chapter_rows(model, path, style, cref)
        assert ch["name"] == "chapter@" + style + ("+cref" if cref else "")
        assert len(ch["pairs"]) == 3 and {t for _, t in ch["pairs"]} == {t for _, t in plain["pairs"]}
