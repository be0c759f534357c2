"""bench.paper_statements: the numbered statements a paper's TeX prints, worked out as LaTeX numbers them."""

from __future__ import annotations

from bench.paper_statements import compare, drop_false_branches, expected

MAIN = r"""\documentclass[a4paper,numberwithinsect]{lipics}
\newtheorem{claim}[theorem]{Claim}
\newtheorem{proposition}[theorem]{Proposition}
\newtheorem*{fact}{Theorem}
\newif\ifappendix
\appendixfalse
\newcommand{\sectioninput}{\input}
\begin{document}
\section{Introduction}
\begin{theorem}[Main]\label{thm-main} A. \end{theorem}
% \begin{lemma} commented out \end{lemma}
\begin{definition} B. \end{definition}
\begin{claim} steps the shared counter \end{claim}
\begin{lemma*} unnumbered \end{lemma*}
\begin{fact} unnumbered too \end{fact}
\iffalse \begin{lemma} never printed \end{lemma} \fi
\ifappendix \begin{lemma} only in the long version \end{lemma} \else \begin{remark} R. \end{remark} \fi
$a \iff b$
\section*{No number}
\section{Results}
\begin{restatable}[Key]{lemma}{keylemma} C. \end{restatable}
\sectioninput{part}
\appendix
\section{Proofs}
\keylemma*
\begin{corollary} E. \end{corollary}
\end{document}
"""


def test_expected_numbers_follow_the_class_and_the_declarations(tmp_path):
    (tmp_path / "main.tex").write_text(MAIN)
    (tmp_path / "part.tex").write_text("\\begin{proposition}\\label{prop-d} D. \\end{proposition}\n")
    got = [(s["kind"], s["number"]) for s in expected(tmp_path / "main.tex")]
    # one counter within the section (claims on it too, and expected since the outline reads claims), the
    # 2016 LIPIcs class numbering the appendix in arabic
    assert got == [("theorem", "1.1"), ("definition", "1.2"), ("claim", "1.3"), ("remark", "1.4"), ("lemma", "2.1"),
                   ("proposition", "2.2"), ("corollary", "1.1")]
    assert expected(tmp_path / "main.tex")[0]["label"] == "thm-main"


def test_llncs_envcountsame_and_own_counters(tmp_path):
    body = ("\\begin{document}\\begin{definition}a\\end{definition}\\begin{lemma}b\\end{lemma}"
            "\\begin{theorem}c\\end{theorem}\\end{document}")
    (tmp_path / "a.tex").write_text("\\documentclass[envcountsame]{llncs}\n" + body)
    assert [s["number"] for s in expected(tmp_path / "a.tex")] == ["1", "2", "3"]
    (tmp_path / "b.tex").write_text("\\documentclass{llncs}\n" + body)
    assert [s["number"] for s in expected(tmp_path / "b.tex")] == ["1", "1", "1"]


def test_false_branches_and_compare():
    # an unknown test keeps both branches
    assert drop_false_branches("a \\iffalse b \\fi c \\ifx\\x\\y d \\else e \\fi") == "a  c \\x\\y d  e "
    exp = [{"kind": "theorem", "number": "1.1"}, {"kind": "theorem", "number": "1.1"}, {"kind": "lemma", "number": "2"}]
    got = [{"kind": "theorem", "number": "1.1"}, {"kind": "lemma", "number": "3"}]
    r = compare(exp, got)
    assert (r["found"], r["expected"], r["missing"], r["extra"]) == (1, 3, ["theorem 1.1", "lemma 2"], ["lemma 3"])
