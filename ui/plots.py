"""Drawings for the web UI, as self-contained SVG strings (no JavaScript, no network, no pyplot).

- `retrieval_heatmap_svg`: one row per generated chunk, one column per document chunk laid out
  along the pages (page ticks), colour = the relevance score the retriever gave that chunk, the
  selected top-k outlined. A row without scores (a summary sentence, a quoted sentence: what the
  model retrieved while it read it at prefill) is coloured by its fusion weights. Wide documents
  are binned (a bin shows its best score; clicking it
  picks the bin's best chunk for that row).
- `dependency_map_svg`: the causal dependency map from prefill: x = the querying chunk, y = the
  chunk it retrieved (both on page axes), colour and size = fusion weight.

Every clickable mark carries `data-*` attributes (`data-row`, `data-gen`, `data-chunk` for heatmap
cells; `data-src`, `data-dst` for map links) that `ui.tabs` turn into Gradio events with the
`CLICK_JS` handler below. All text in the SVG is escaped: titles and labels come from documents.
"""

from __future__ import annotations

import html
import math
from typing import Sequence

from qa.evidence import weight_text  # one way to print a fusion weight (the tabs read it as plots.weight_text)

# viridis, 9 stops (matplotlib's values), interpolated linearly
_VIRIDIS = [
    (0.267, 0.005, 0.329),
    (0.278, 0.175, 0.483),
    (0.229, 0.322, 0.546),
    (0.173, 0.449, 0.558),
    (0.128, 0.567, 0.551),
    (0.153, 0.680, 0.504),
    (0.369, 0.789, 0.383),
    (0.678, 0.864, 0.190),
    (0.993, 0.906, 0.144),
]
EMPTY_FILL = "#e8e8ec"
TOPK_STROKE = "#e4572e"

# Delegated click handler for gr.HTML(js_on_load=...): survives re-renders of the value, because
# it listens on the component's root element. `trigger` and `element` are given by Gradio.
CLICK_JS = """
element.addEventListener('click', function (ev) {
  var t = ev.target && ev.target.closest ? ev.target.closest('[data-chunk],[data-src]') : null;
  if (!t || !element.contains(t)) return;
  element.querySelectorAll('.drt-picked').forEach(function (e) { e.classList.remove('drt-picked'); });
  t.classList.add('drt-picked');
  var d = t.dataset;
  if (d.src !== undefined) {
    trigger('link_click', {src: Number(d.src), dst: Number(d.dst)});
  } else {
    trigger('cell_click', {row: Number(d.row || -1), gen: Number(d.gen || -1), chunk: Number(d.chunk)});
  }
});
"""

CSS = """
.drt-plot svg { width: 100%; height: auto; display: block; font-family: sans-serif; }
.drt-plot [data-chunk], .drt-plot [data-src] { cursor: pointer; }
.drt-plot rect[data-chunk]:hover { stroke: #222; stroke-width: 1; }
.drt-plot circle[data-src]:hover { stroke: #222; stroke-width: 1.5; }
.drt-plot .drt-picked { stroke: #d00 !important; stroke-width: 2.5 !important; }
.drt-plot .drt-note { color: #666; font-size: 0.9em; padding: 0.4em 0; }
"""


def viridis(x: float) -> str:
    """Colour of x in [0, 1] as #rrggbb."""
    if not math.isfinite(x):
        return EMPTY_FILL
    x = min(1.0, max(0.0, x)) * (len(_VIRIDIS) - 1)
    i = min(int(x), len(_VIRIDIS) - 2)
    f = x - i
    a, b = _VIRIDIS[i], _VIRIDIS[i + 1]
    r, g, bl = (a[k] + (b[k] - a[k]) * f for k in range(3))
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(bl * 255):02x}"


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


def _fmt(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".") if abs(x - round(x)) > 1e-9 else str(int(round(x)))


def robust_range(values: Sequence[float], q: float = 0.95) -> tuple[float, float, bool]:
    """(lo, hi, clipped): hi is the q-quantile, so a few huge values (a chapter heading that
    every chunk retrieves) do not flatten the colours of everything else."""
    v = sorted(x for x in values if x is not None and math.isfinite(x))
    if not v:
        return 0.0, 1.0, False
    lo, top = v[0], v[-1]
    hi = v[min(len(v) - 1, int(q * (len(v) - 1)))]
    if hi <= lo:
        hi = top
    return lo, hi, hi < top


def note(text: str) -> str:
    """A short message in place of a plot."""
    return f'<div class="drt-plot"><div class="drt-note">{_e(text)}</div></div>'


def page_label(number: int, labels: dict[int, str] | None) -> str:
    """ "12", or "12 (vii)" where the printed label differs; angle brackets shown as ‹ › (a label such
    as "<FEFF0031>", stored before ingest read hex labels, opened an HTML tag that hid the rest)."""
    lab = (labels or {}).get(number)
    lab = lab.replace("<", "‹").replace(">", "›") if lab else lab
    return str(number) if not lab or lab == str(number) else f"{number} ({lab})"


def page_ticks(chunk_pages: Sequence[int], labels: dict[int, str] | None = None) -> list[tuple[int, int, str]]:
    """(first chunk of the page, page number, label) for every page some chunk starts on."""
    out: list[tuple[int, int, str]] = []
    last = None
    for i, p in enumerate(chunk_pages):
        if p != last:
            lab = (labels or {}).get(p) or str(p)
            out.append((i, int(p), str(lab)))
            last = p
    return out


def _thin(ticks: list[tuple[float, str]], min_gap: float) -> list[tuple[float, str]]:
    """Keep ticks at least min_gap apart (the first always, then greedily)."""
    out: list[tuple[float, str]] = []
    for x, lab in ticks:
        if not out or x - out[-1][0] >= min_gap:
            out.append((x, lab))
    return out


# ---------------------------------------------------------------------------------------------
# retrieval heatmap
# ---------------------------------------------------------------------------------------------


def heatmap_matrix(
    trace: dict, n_chunks: int, max_cols: int = 480
) -> tuple[list[dict], int, tuple[float, float] | None]:
    """Bin a trace into at most max_cols columns.

    Returns (rows, bin_size, (lo, hi) of the scores or None). Each row: {"gen", "label", "cells":
    [(value or None, best chunk of the bin)], "marks": {column: (chunk, weight)}}. A row without
    scores (the selection was made at prefill time) shows its top-k weights instead.
    """
    n = max(int(n_chunks), 0)
    n_doc = int(trace.get("n_doc_chunks") or n)
    bin_size = max(1, math.ceil(n / max_cols)) if n else 1
    n_cols = math.ceil(n / bin_size) if n else 0
    rows: list[dict] = []
    lo, hi = math.inf, -math.inf
    for i, r in enumerate(trace.get("chunks") or []):
        scores = r.get("scores")
        topk = [int(c) for c in r.get("topk") or []]
        weights = [float(w) for w in r.get("weights") or []]
        vals: list[float | None] = [None] * n
        if scores is not None:
            for j, s in enumerate(scores[:n]):
                if s is not None and math.isfinite(float(s)):
                    vals[j] = float(s)
        cells: list[tuple[float | None, int]] = []
        for b in range(n_cols):
            a, z = b * bin_size, min(n, (b + 1) * bin_size)
            best, best_j = None, a
            for j in range(a, z):
                v = vals[j]
                if v is not None and (best is None or v > best):
                    best, best_j = v, j
            cells.append((best, best_j))
        marks: dict[int, tuple[int, float]] = {}
        for c, w in zip(topk, weights):
            if 0 <= c < min(n, n_doc) and w > 0:
                col = c // bin_size
                if col not in marks or w > marks[col][1]:
                    marks[col] = (c, w)
                    cells[col] = (cells[col][0], c)  # clicking a marked bin opens the retrieved chunk
        for v, _ in cells:
            if v is not None:
                lo, hi = min(lo, v), max(hi, v)
        rows.append({"gen": int(r.get("gen_chunk", i)), "label": f"gen {i + 1}", "cells": cells,
                     "marks": marks, "has_scores": scores is not None})  # fmt: skip
    rng = (lo, hi) if lo <= hi else None
    # rows without scores: colour the marked cells by their weight on the same scale
    for row in rows:
        if not row["has_scores"]:
            for col, (c, w) in row["marks"].items():
                v = w if rng is None else rng[0] + w * (rng[1] - rng[0])
                row["cells"][col] = (v, c)
    if rng is None:
        vals = [v for row in rows for v, _ in row["cells"] if v is not None]
        rng = (min(vals), max(vals)) if vals else None
    return rows, bin_size, rng


def retrieval_heatmap_svg(
    trace: dict | None,
    chunk_pages: Sequence[int],
    page_labels: dict[int, str] | None = None,
    *,
    title: str = "Retrieval: generated chunk × document chunk",
    value_name: str = "relevance",
    row_labels: Sequence[str] | None = None,
    row_titles: Sequence[str] | None = None,
    mark_name: str = "top-k",
    max_cols: int = 480,
) -> str:
    """The retrieval heatmap of one answer (see the module docstring) as an HTML <svg> string.
    `row_labels` name the rows (else "gen 1", ...); `row_titles`, their hover text (else "generated
    chunk N"): a summary's rows are its sentences."""
    n = len(chunk_pages)
    if not trace or not trace.get("chunks"):
        return note("No retrieval to show: no generated chunk retrieved from the document.")
    if n == 0:
        return note("The document has no chunks.")
    rows, bin_size, _ = heatmap_matrix(trace, n, max_cols)
    lo, hi, clipped = robust_range([v for row in rows for v, _ in row["cells"] if v is not None])
    if row_labels:
        for row, lab in zip(rows, row_labels):
            row["label"] = lab
    n_cols = len(rows[0]["cells"])
    W, left, right, top, bottom = 960.0, 78.0, 86.0, 30.0, 50.0
    row_h = 40.0 if len(rows) <= 3 else 26.0 if len(rows) <= 12 else max(8.0, 312.0 / len(rows))
    pw = W - left - right
    ph = row_h * len(rows)
    H = top + ph + bottom
    cw = pw / n_cols
    span = (hi - lo) or 1.0
    out = [
        f'<div class="drt-plot" data-kind="heatmap" data-rows="{len(rows)}" data-cols="{n_cols}">',
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W:.0f} {H:.0f}" role="img" '
        f'aria-label="{_e(title)}">',
        f'<text x="{left}" y="18" font-size="13" font-weight="bold">{_e(title)}</text>',
    ]
    for ri, row in enumerate(rows):
        y = top + ri * row_h
        tip = row_titles[ri] if row_titles and ri < len(row_titles) else f"generated chunk {row['gen']}"
        gen_title = _e(tip)
        out.append(
            f'<text x="{left - 6}" y="{y + row_h / 2 + 4:.1f}" font-size="11" text-anchor="end">'
            f'<title>{gen_title}</title>{_e(row["label"])}</text>'
        )
        for ci, (v, c) in enumerate(row["cells"]):
            fill = EMPTY_FILL if v is None else viridis((v - lo) / span)
            out.append(
                f'<rect x="{left + ci * cw:.2f}" y="{y:.1f}" width="{cw + 0.05:.2f}" height="{row_h - 1:.1f}" '
                f'fill="{fill}" data-row="{ri}" data-gen="{row["gen"]}" data-chunk="{c}"/>'
            )
        # a row without scores is coloured only where it retrieved: a thin outline keeps narrow cells' colour
        stroke = 2.0 if row["has_scores"] or cw >= 8 else max(0.5, cw / 6)
        for ci, (c, w) in sorted(row["marks"].items()):
            pages = page_label(int(chunk_pages[c]), page_labels)
            tip = _e(f"{row['label']}: chunk {c} in the model's top-k, p. {pages}, fusion weight {weight_text(w)}")
            out.append(
                f'<rect class="drt-topk" x="{left + ci * cw + 0.5:.2f}" y="{y + 0.5:.1f}" '
                f'width="{max(cw - 1, 1.5):.2f}" height="{row_h - 2:.1f}" fill="none" stroke="{TOPK_STROKE}" '
                f'stroke-width="{stroke:g}" pointer-events="none" data-row="{ri}" data-mark="{c}">'
                f"<title>{tip}</title></rect>"
            )
    # page axis
    ya = top + ph
    out.append(f'<line x1="{left}" y1="{ya + 2}" x2="{left + pw}" y2="{ya + 2}" stroke="#888"/>')
    ticks = [(left + (i / bin_size) * cw, lab) for i, _, lab in page_ticks(chunk_pages, page_labels)]
    for x, lab in _thin(ticks, 30.0):
        out.append(f'<line x1="{x:.1f}" y1="{ya + 2}" x2="{x:.1f}" y2="{ya + 7}" stroke="#888"/>')
        out.append(f'<text x="{x:.1f}" y="{ya + 19}" font-size="10" text-anchor="middle">{_e(lab)}</text>')
    binned = f", {bin_size} chunks per column" if bin_size > 1 else ""
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{ya + 38}" font-size="11" text-anchor="middle" fill="#444">'
        f"document chunks along the pages (page ticks){_e(binned)}</text>"
    )
    # colour bar + legend
    bx, bw = W - right + 14, 12.0
    steps = 24
    for s in range(steps):
        v = 1 - s / (steps - 1)
        out.append(
            f'<rect x="{bx}" y="{top + s * (ph / steps):.2f}" width="{bw}" height="{ph / steps + 0.3:.2f}" '
            f'fill="{viridis(v)}"/>'
        )
    out.append(f'<text x="{bx + bw + 4}" y="{top + 9}" font-size="9">{"≥" if clipped else ""}{_e(f"{hi:.2f}")}</text>')
    out.append(f'<text x="{bx + bw + 4}" y="{top + ph}" font-size="9">{_e(f"{lo:.2f}")}</text>')
    out.append(f'<text x="{bx - 2}" y="{top - 6}" font-size="10">{_e(value_name)}</text>')
    out.append(
        f'<rect x="{bx}" y="{ya + 28}" width="10" height="10" fill="none" stroke="{TOPK_STROKE}" stroke-width="2"/>'
        f'<text x="{bx + 14}" y="{ya + 37}" font-size="10">{_e(mark_name)}</text>'
    )
    out.append("</svg></div>")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# dependency map
# ---------------------------------------------------------------------------------------------


def dependency_links(dep_map: Sequence[dict], n_chunks: int) -> list[tuple[int, int, float]]:
    """(querying chunk, retrieved chunk, weight) over every retrieval group, weight > 0."""
    out: list[tuple[int, int, float]] = []
    for row in dep_map:
        c = int(row.get("chunk", -1))
        groups = row.get("groups") or [{"retrieved": row.get("retrieved", []), "weights": row.get("weights", [])}]
        for g in groups:
            for j, w in zip(g.get("retrieved") or g.get("topk") or [], g.get("weights") or []):
                j, w = int(j), float(w)
                if 0 <= c < n_chunks and 0 <= j < n_chunks and w > 0:
                    out.append((c, j, w))
    return out


MIN_DOT_SPACING = 4.0  # pixels: below this many per chunk, the map draws one dot per square of this side


def _binned(links: list[tuple[int, int, float]], per: float) -> list[tuple[int, int, float, int]]:
    """A long document's links in squares of `per` chunks a side: per square, its strongest link and
    how many fell there: (querying chunk, retrieved chunk, weight, count)."""
    best: dict[tuple[int, int], list] = {}
    for c, j, w in links:
        key = (int(c / per), int(j / per))
        b = best.get(key)
        if b is None:
            best[key] = [c, j, w, 1]
        else:
            b[3] += 1
            if w > b[2]:
                b[0], b[1], b[2] = c, j, w
    return [tuple(b) for b in best.values()]


def dependency_map_svg(
    dep_map: Sequence[dict],
    chunk_pages: Sequence[int],
    page_labels: dict[int, str] | None = None,
    *,
    title: str = "Document map: what each chunk retrieved while the document was read",
    max_points: int = 5000,
) -> str:
    """The dependency map (see the module docstring) as an HTML <svg> string."""
    n = len(chunk_pages)
    links = dependency_links(dep_map, n)
    if not links:
        return note("No dependency map: the document is too short for retrieval (two chunks or fewer).")
    total = len(links)
    S, left, top, bottom, right = 640.0, 70.0, 30.0, 52.0, 20.0
    W, H = left + S + right, top + S + bottom
    sc = S / max(n, 1)
    # a long document: one dot per square of MIN_DOT_SPACING pixels, `per` chunks a side
    per = n * MIN_DOT_SPACING / S if sc < MIN_DOT_SPACING else None
    cells = _binned(links, per) if per is not None else None
    if cells is not None:
        links = [(c, j, w) for c, j, w, _ in cells]
    if len(links) > max_points:
        links = sorted(links, key=lambda t: -t[2])[:max_points]
    _, wmax, _ = robust_range([w for _, _, w in links])
    wmax = wmax or 1.0
    counts = {(c, j): k for c, j, _, k in cells} if cells is not None else {}

    def px(c: float) -> float:
        return left + (c + 0.5) * sc

    def py(c: float) -> float:
        return top + S - (c + 0.5) * sc

    out = [
        f'<div class="drt-plot" data-kind="depmap" data-links="{len(links)}">',
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W:.0f} {H:.0f}" role="img" aria-label="{_e(title)}">',
        f'<text x="{left}" y="18" font-size="13" font-weight="bold">{_e(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{S}" height="{S}" fill="#fafafa" stroke="#bbb"/>',
        f'<line x1="{left}" y1="{top + S}" x2="{left + S}" y2="{top}" stroke="#ccc" stroke-dasharray="4 3"/>',
    ]
    ticks = page_ticks(chunk_pages, page_labels)
    for i, lab in _thin([(px(i - 0.5), lab) for i, _, lab in ticks], 30.0):
        out.append(f'<line x1="{i:.1f}" y1="{top + S}" x2="{i:.1f}" y2="{top + S + 5}" stroke="#888"/>')
        out.append(f'<text x="{i:.1f}" y="{top + S + 17}" font-size="10" text-anchor="middle">{_e(lab)}</text>')
    yt = [(top + S - i * sc, lab) for i, _, lab in ticks]
    for y, lab in _thin(sorted(yt, key=lambda t: t[0]), 16.0):
        out.append(f'<line x1="{left - 5}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="#888"/>')
        out.append(f'<text x="{left - 8}" y="{y + 3:.1f}" font-size="10" text-anchor="end">{_e(lab)}</text>')
    out.append(
        f'<text x="{left + S / 2}" y="{top + S + 38}" font-size="11" text-anchor="middle" fill="#444">'
        "page of the querying chunk</text>"
    )
    out.append(
        f'<text transform="translate(16 {top + S / 2}) rotate(-90)" font-size="11" text-anchor="middle" '
        'fill="#444">page of the retrieved chunk</text>'
    )
    for c, j, w in sorted(links, key=lambda t: t[2]):  # heavy links on top
        f = min(1.0, w / wmax)
        k = counts.get((c, j), 1)
        r = MIN_DOT_SPACING / 2 if cells is not None else max(0.9, min(sc * 0.9, 1.2 + 4.0 * f))
        x, y = (px(c), py(j)) if per is None else (left + (int(c / per) + 0.5) * MIN_DOT_SPACING,
                                                   top + S - (int(j / per) + 0.5) * MIN_DOT_SPACING)
        also = f" (the strongest of {k:,} links here)" if k > 1 else ""
        out.append(
            f'<circle cx="{x:.2f}" cy="{y:.2f}" r="{r:.2f}" fill="{viridis(f)}" fill-opacity="0.85" '
            f'data-src="{c}" data-dst="{j}" data-w="{w:.4f}">'
            f'<title>chunk {c} (p. {_e(page_label(int(chunk_pages[c]), page_labels))}) '
            f'retrieved chunk {j} (p. {_e(page_label(int(chunk_pages[j]), page_labels))}), '
            f'weight {weight_text(w)}{also}'
            "</title></circle>"
        )
    if cells is not None:  # (past max_points squares, the weakest squares are left out)
        out.append(
            f'<text x="{left + S}" y="18" font-size="10" text-anchor="end" fill="#666" '
            f'data-squares="{len(cells)}">{total:,} links, the strongest per square</text>'
        )
    elif total > len(links):
        out.append(
            f'<text x="{left + S}" y="18" font-size="10" text-anchor="end" fill="#666">'
            f"the {len(links):,} strongest of {total:,} links</text>"
        )
    out.append("</svg></div>")
    return "".join(out)
