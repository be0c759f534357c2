"""bench.citations: which (citing chunk, statement chunk) pairs a chapter has."""

from __future__ import annotations

from bench.citations import pairs, ranked_before


def test_pairs_keep_statements_cited_far_enough_back():
    text = ("\\begin{lemma}\\label{lemma-a} A. \\end{lemma} " + "x " * 200
            + "\\begin{remark}\\label{remark-b} B. \\end{remark} " + "y " * 200
            + "By Lemma \\ref{lemma-a} and Remark \\ref{remark-b} and \\ref{lemma-a} again. \\ref{lemma-missing}")
    starts = list(range(0, len(text), 50))  # a chunk every 50 characters
    got = pairs(text, starts, min_gap=4)
    cite = text.index("\\ref{lemma-a}") // 50
    assert got == [(cite, 0, "lemma-a")]  # remarks are no statements; a repeat in one chunk counts once
    assert pairs(text, starts, min_gap=cite + 1) == []


def test_ranked_before_only_looks_back():
    assert ranked_before([0.1, 0.9, 0.5, 2.0], 3, 2) == [1, 2]


def test_a_papers_statement_labels_and_cref():
    from bench.citations import paper_statement_labels

    tex = ("\\documentclass{lipics}\\newtheorem{claim}[theorem]{Claim}\\begin{document}"
           "\\begin{theorem}[Main]\\label{thm:main} A. \\end{theorem}"
           "\\begin{restatable}{lemma}{key}\\label{lem:key} B. \\end{restatable}"
           "\\begin{claim}\\label{cl:c} C. \\end{claim}\\section{S}\\label{sec:s}"
           "\\begin{lemma*}\\label{lem:star} D. \\end{lemma*}" + "x " * 300
           + "By \\cref{thm:main,lem:key} and Claim~\\ref{cl:c} in \\autoref{sec:s}. \\end{document}")
    labels = paper_statement_labels(tex)
    assert labels == {"thm:main", "lem:key"}  # claims, sections and unnumbered lemmas are no statements
    got = pairs(tex, list(range(0, len(tex), 50)), min_gap=4, statement_labels=labels)
    assert [lab for _, _, lab in got] == ["thm:main", "lem:key"]  # one \\cref, two citations


def test_restyled_validation_chapters_keep_their_statement_pairs(tmp_path):
    """--label-styles: each chapter written with its labels renamed (styles in turn, "+cref"), and
    its statements' new names pick the same citations as the Stacks names did."""
    from pathlib import Path

    from bench.citations import restyled_sources

    src = Path(__file__).resolve().parents[1] / "assets" / "stacks-brauer.tex"
    text = src.read_text(encoding="utf-8")
    starts = list(range(0, len(text), 50))
    before = pairs(text, starts, min_gap=4)
    (a, la), (b, lb) = restyled_sources([src, src], ["suffix", "numbered+cref"], tmp_path)
    assert a.name == "stacks-brauer@suffix.tex" and b.name == "stacks-brauer@numbered+cref.tex"
    assert all(n.endswith(":lem") or n.endswith(":prop") or n.endswith(":thm") or n.endswith(":def") for n in la)
    for path, labels in ((a, la), (b, lb)):
        out = path.read_text(encoding="utf-8")
        got = pairs(out, list(range(0, len(out), 50)), min_gap=4, statement_labels=labels)
        assert len(got) == len(before) > 0
    assert "\\cref{lem:" in b.read_text(encoding="utf-8")
