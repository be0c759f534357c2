"""Pictures of a document's outline, where a reader would rather look than read.

cast_grid         (books) who appears where: one row per person (the cast's most named, in order of
                  first appearance), one column per part; a cell is darker the larger the share of
                  the part's pages that name the person.
statement_graph   (papers) the statements in order on a line, and an arc from each statement back to
                  each earlier one it relies on (the outline's "uses"): explicitly (it or its proof
                  cites the earlier one's number or label) or as the model read it (a chunk of it
                  retrieved a chunk of the earlier one while prefilling).

Both are SVG strings (the UI shows them as they are); `png(svg, path)` renders one with pymupdf for
`drt-reader outline DOC --plot FILE.png`.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

MAX_PEOPLE = 20
MAX_PARTS = 80
TITLE_EM = 7  # pixels a character of a 12-px sans-serif title takes, about


def appearances(o: dict) -> dict:
    """{"people", "parts", "share"}: share[i][j] = the share of part j's pages naming person i."""
    people = [n for n in o["names"] if n["kind"] == "person"][:MAX_PEOPLE]
    people.sort(key=lambda n: (min(n["pages"]) if n["pages"] else 0, -n["mentions"]))
    parts = [p for p in o["parts"] if p.get("source") != "front matter"][:MAX_PARTS]
    share = []
    for n in people:
        pages = set(n["pages"])
        row = []
        for p in parts:
            span = range(p["page_first"], p["page_last"] + 1)
            row.append(sum(q in pages for q in span) / max(1, len(span)))
        share.append(row)
    return {"people": [n["name"] for n in people], "parts": [p["title"] for p in parts],
            "numbers": [p["number"] for p in parts], "share": share}


GRID_WIDTH = 760  # pixels the who-appears-where grid may fill before its cells shrink to 14


def cast_grid(o: dict) -> str:
    """The characters-by-parts grid as SVG ("" when the outline has no people or no parts)."""
    a = appearances(o)
    if not a["people"] or not a["parts"]:
        return ""
    left, top = 8 + 7 * max(len(p) for p in a["people"]), 40
    # cells of 14 px at least, larger for a short book (walk 11: 12 chapters drew 300 px of a 1,200 px page)
    cell = max(14, min(36, (GRID_WIDTH - left) // len(a["parts"])))
    title = "Who appears where (darker: named on more of the part's pages)"
    # wide enough for the title too: a book of 12 chapters cut it at "(darker: nam"
    w, h = max(left + cell * len(a["parts"]) + 10, 8 + TITLE_EM * len(title)), top + cell * len(a["people"]) + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
           f'font-size="11" role="img" aria-label="Who appears where: people by parts">',
           f'<text x="4" y="14" font-size="12">{escape(title)}</text>']
    for j, num in enumerate(a["numbers"]):  # (one per part)
        x = left + j * cell
        if j % max(1, len(a["parts"]) // 20) == 0:
            out.append(f'<text x="{x + 2}" y="{top - 4}" font-size="9">{num}</text>')
    for i, name in enumerate(a["people"]):
        y = top + i * cell
        out.append(f'<text x="{left - 6}" y="{y + cell // 2 + 4}" text-anchor="end">{escape(name)}</text>')
        for j, v in enumerate(a["share"][i]):
            shade = int(245 - 200 * min(1.0, v))
            out.append(f'<rect x="{left + j * cell}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                       f'fill="rgb({shade},{shade},255)" data-person="{escape(name)}" data-part="{a["numbers"][j]}">'
                       f'<title>{escape(name)} in {escape(a["parts"][j][:60])}: {v:.0%} of its pages</title></rect>')
    out.append(f'<text x="{left}" y="{h - 6}" font-size="10">parts (chapters) left to right</text></svg>')
    return "".join(out)


def _name(s: dict) -> str:
    return f"{s['kind']} {s['label'] or s['number']}"


def relies(o: dict) -> list[tuple[int, int, str]]:
    """(later, earlier, how) index pairs of statements, from the outline's "uses"
    (qa.outline.statement_uses): "cites" (the later or its proof names the earlier) or "retrieved"
    (a chunk of the later retrieved a chunk of the earlier while the model read it)."""
    return sorted({(j, u["index"], "cites" if u["cited"] else "retrieved")
                   for j, s in enumerate(o["statements"]) for u in s["uses"] if u["index"] < j})


def statement_graph(o: dict) -> str:
    """The statements and what each relies on, as an arc diagram in SVG ("" without statements)."""
    st = o["statements"]
    if len(st) < 2:
        return ""
    step = max(6, min(24, 1000 // len(st)))
    w, base = 40 + step * len(st), 260
    arcs = relies(o)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{base + 40}" font-family="sans-serif" '
           'font-size="11" role="img" aria-label="Statements and what each relies on">',
           '<text x="10" y="14" font-size="12">Statements in order; arcs back to what each relies on '
           '(dark: cites it; light: retrieved it while read)</text>']
    for j, i, how in arcs:
        x1, x2 = 20 + i * step, 20 + j * step
        r = (x2 - x1) / 2
        colour = "#1f4e9c" if how == "cites" else "#9ab8e8"
        out.append(f'<path d="M {x2} {base} A {r} {min(r, base - 30)} 0 0 0 {x1} {base}" fill="none" '
                   f'stroke="{colour}" stroke-width="1.2" data-from="{escape(_name(st[j]))}" '
                   f'data-to="{escape(_name(st[i]))}"><title>{escape(_name(st[j]))} {how} '
                   f'{escape(_name(st[i]))}</title></path>')
    for i, s in enumerate(st):
        x = 20 + i * step
        # a statement stated again (itcs20's Theorem 1 before its proof) is hollow and unlabelled: its
        # number among the later ones' ("19, 4, 21") read as a misordered axis
        again = s.get("restates") is not None
        out.append(f'<circle cx="{x}" cy="{base}" r="3" fill="{"#fff" if again else "#333"}" stroke="#333">'
                   f'<title>{escape(_name(s))}{" (restated)" if again else ""}, p. '
                   f'{escape(str(s.get("page_label", s.get("page", ""))))}</title></circle>')
        if i % max(1, len(st) // 25) == 0 and not again:
            out.append(f'<text x="{x}" y="{base + 16}" font-size="9" text-anchor="middle">'
                       f'{escape(str(s["label"] or s["number"]))[:8]}</text>')
    out.append("</svg>")
    return "".join(out)


def picture(o: dict) -> str:
    """The outline's picture: the statement graph for a paper, the cast grid for a book."""
    return statement_graph(o) if len(o["statements"]) >= 5 else cast_grid(o)


def png(svg: str, path: str | Path, dpi: int = 144) -> Path:
    """Render `svg` to a PNG file with pymupdf."""
    import pymupdf

    doc = pymupdf.open(stream=svg.encode("utf-8"), filetype="svg")
    pix = doc[0].get_pixmap(dpi=dpi)
    path = Path(path)
    pix.save(str(path))
    return path
