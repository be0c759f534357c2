"""qa.pictures: who appears where (books), statements and what each relies on (papers)."""

from __future__ import annotations

import re

from pathlib import Path

from ingest.parts import document_text
from qa.outline import build
from qa.pictures import appearances, cast_grid, png, relies, statement_graph
from tests.ingest.docstore import store_text

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def book() -> str:
    one = "Anne Elliot walked. Anne smiled. \u201cNo,\u201d said Anne. Anne sat down by the fire. " * 3
    two = "Captain Wentworth came. Wentworth bowed. \u201cYes,\u201d said Wentworth. Anne looked. " * 3
    return "".join(f"\n\nCHAPTER {r}\n\n{t * 4}" for r, t in (("I", one), ("II", two), ("III", one + two)))


def test_cast_grid_rows_people_columns_parts(library):
    doc = store_text(library, book())
    o = build(library, doc, [])
    a = appearances(o)
    assert a["people"][0] == "Anne Elliot" and "Wentworth" in a["people"]  # (his most used form)
    assert len(a["parts"]) == 3
    went = a["share"][a["people"].index("Wentworth")]
    assert went[0] < went[1] and went[2] > 0  # named in chapter I only on the page it shares with II
    svg = cast_grid(o)
    assert svg.startswith("<svg") and svg.count('data-person="Anne Elliot"') == 3
    # the picture is as wide as its title (12 chapters cut it at "Who appears where (darker: nam")
    import re

    from qa.pictures import TITLE_EM

    width = int(re.search(r'width="(\d+)"', svg).group(1))
    title = re.search(r'<text x="4" y="14" font-size="12">([^<]*)</text>', svg).group(1)
    assert title.startswith("Who appears where") and width >= TITLE_EM * len(title.replace("&#x27;", "'"))


def test_statement_graph_cites_and_retrieved(tmp_path, library):
    src = (ASSETS / "stacks-brauer.tex").read_text()
    doc = store_text(library, src, kind="tex", page_chars=2000, chunk_chars=250, name="brauer.tex")
    o = build(library, doc, [])
    st = o["statements"]
    later = st[-1]["chunks"][0]
    dep = [{"chunk": later, "retrieved": [st[0]["chunks"][0]], "weights": [0.9]}]
    o = build(library, doc, dep)
    text = document_text(library, doc)
    arcs = relies(o)
    assert (len(st) - 1, 0, "retrieved") in arcs or (len(st) - 1, 0, "cites") in arcs
    cited = [(j, i) for j, i, how in arcs if how == "cites"]
    for j, i in cited:  # a cite is the earlier statement's label in the later one's text or proof
        assert str(st[i]["label"]) in text[st[j]["char_start"]:]
    assert {(j, i) for j, i, _ in arcs} == {(j, u["index"]) for j, s in enumerate(o["statements"])
                                            for u in s["uses"] if u["index"] < j}  # the outline's own "uses"
    svg = statement_graph(o)
    assert svg.count("<circle") == len(st) and svg.count("<path") == len(arcs)
    out = png(svg, tmp_path / "graph.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_statement_graph_draws_a_restated_statement_hollow_and_unlabelled():
    """itcs20's picture labelled its axis "... 19, 4, 21 ...": Theorem 4 stated again before its proof."""
    st = [{"kind": "theorem", "label": "", "number": str(n), "page": n, "uses": [], "restates": None}
          for n in range(1, 6)]
    st.insert(3, dict(st[1], restates=1))
    svg = statement_graph({"statements": st})
    circles = re.findall(r'<circle[^>]*fill="(#[0-9a-f]+)"[^>]*><title>([^<]*)</title>', svg)
    assert [fill for fill, _ in circles] == ["#333", "#333", "#333", "#fff", "#333", "#333"]
    assert circles[3][1].startswith("theorem 2 (restated)")
    assert re.findall(r'<text[^>]*text-anchor="middle">([^<]*)</text>', svg) == ["1", "2", "3", "4", "5"]


def test_a_person_named_first_in_a_chapter_heading_is_introduced_by_the_text(library):
    """Alice's "CHAPTER V. Advice from a Caterpillar" was the Caterpillar's introducing sentence: a
    chapter's heading introduces no one, the first mention after it does."""
    text = book().replace("\n\nCHAPTER II\n\n", "\n\nCHAPTER II. Captain Wentworth Comes\n\n", 1)
    doc = store_text(library, text)
    o = build(library, doc, [])
    assert not [n["name"] for n in o["names"] if n["introduced"]["text"].startswith("CHAPTER")]
    went = next(n for n in o["names"] if n["name"] == "Captain Wentworth")
    assert went["introduced"]["text"] == "Captain Wentworth came."


def test_a_person_named_in_a_heading_printed_over_two_lines_is_introduced_by_the_text(library):
    """Alice's PDF prints "CHAPTER V. Advice from a" / "  Caterpillar" (two lines): the heading's second
    line introduced the Caterpillar once the part's title held both (2026-12-07)."""
    text = book().replace("\n\nCHAPTER II\n\n", "\n\nCHAPTER II. A Long Visit from\n  Captain Wentworth\n\n", 1)
    doc = store_text(library, text)
    o = build(library, doc, [])
    assert "CHAPTER II. A Long Visit from Captain Wentworth" in [p["title"] for p in o["parts"]]
    went = next(n for n in o["names"] if n["name"].endswith("Wentworth"))
    assert went["introduced"]["text"] == "Captain Wentworth came."


def test_a_short_books_grid_is_drawn_with_larger_cells(library):
    """Walk 11: The Time Machine's 12 chapters drew the who-appears-where grid 300 px wide on a
    1,200 px page. A short book's cells grow (to 36 px); a long one's stay 14 px."""
    doc = store_text(library, book())
    svg = cast_grid(build(library, doc, []))
    widths = {int(w) for w in re.findall(r'<rect[^>]*width="(\d+)"', svg)}
    assert widths == {35}  # 3 parts: the largest cells
    long = {"names": [{"name": "Anne", "kind": "person", "mentions": 9, "pages": list(range(1, 200, 3))}],
            "parts": [{"number": i, "title": f"Chapter {i}", "page_first": i, "page_last": i} for i in range(1, 121)]}
    assert {int(w) for w in re.findall(r'<rect[^>]*width="(\d+)"', cast_grid(long))} == {13}
