"""ui.plots: the retrieval heatmap and the dependency map as clickable, escaped SVG."""

from __future__ import annotations

import pytest

from ui import plots

TRACE = {
    "n_doc_chunks": 10,
    "chunks": [
        {"gen_chunk": 11, "topk": [2, 7], "weights": [0.7, 0.3], "scores": [0.1 * i for i in range(11)], "groups": []},
        {"gen_chunk": 12, "topk": [9, 10], "weights": [0.9, 0.1], "scores": None, "groups": []},
    ],
}
PAGES = [1, 1, 1, 2, 2, 3, 3, 3, 4, 4]


def test_heatmap_matrix_and_binning():
    rows, bin_size, rng = plots.heatmap_matrix(TRACE, 10, max_cols=100)
    assert bin_size == 1 and len(rows) == 2 and len(rows[0]["cells"]) == 10
    assert rows[0]["cells"][3] == (pytest.approx(0.3), 3)
    assert rows[0]["marks"] == {2: (2, 0.7), 7: (7, 0.3)}
    # no scores: only the retrieved chunk is coloured; chunk 10 is past the document
    assert rows[1]["marks"] == {9: (9, 0.9)} and rows[1]["cells"][0][0] is None
    assert rng == (0.0, pytest.approx(0.9))
    rows, bin_size, _ = plots.heatmap_matrix(TRACE, 10, max_cols=4)
    assert bin_size == 3 and len(rows[0]["cells"]) == 4
    # a bin holding a retrieved chunk opens that chunk; the others open their best-scoring chunk
    assert rows[0]["cells"][0][1] == 2 and rows[0]["cells"][1][1] == 5 and rows[0]["cells"][2][1] == 7


def test_heatmap_svg_is_clickable_paged_and_escaped():
    svg = plots.retrieval_heatmap_svg(TRACE, PAGES, {1: "i", 2: "ii", 3: "1", 4: "2"}, title="<script>x</script>")
    assert svg.count('data-chunk="') == 20  # 2 rows x 10 columns
    assert svg.count('class="drt-topk"') == 3
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    for lab in (">i<", ">ii<", ">1<", ">2<"):
        assert lab in svg  # one tick per page, labelled with the printed label
    assert "No retrieval" in plots.retrieval_heatmap_svg({"chunks": []}, PAGES)


def test_a_top_k_chunk_the_fusion_gave_almost_nothing_reads_under_0001():
    """Walk 12: an outlined cell read "retrieved (top-k), weight 0.000": the chunk is in the model's
    top-k, and the softmax over the picked chunks' scores gave it a weight that rounds to 0."""
    trace = {"n_doc_chunks": 10, "chunks": [{"gen_chunk": 11, "topk": [2, 7], "weights": [0.99998, 0.00002],
                                             "scores": [float(i) for i in range(10)]}]}
    svg = plots.retrieval_heatmap_svg(trace, PAGES)
    assert svg.count('class="drt-topk"') == 2
    assert "chunk 7 in the model&#x27;s top-k, p. 3, fusion weight under 0.001" in svg and "0.000" not in svg
    assert [plots.weight_text(w) for w in (0.4123, 0.0005, 0.0004, 0.0)] == ["0.412", "0.001", "under 0.001", "0.000"]


def test_dependency_map_svg():
    dep = [{"chunk": c, "retrieved": [0, c - 1], "weights": [0.6, 0.4], "groups": [
        {"retrieved": [0, c - 1], "weights": [0.6, 0.4]}]} for c in range(2, 10)]  # fmt: skip
    links = plots.dependency_links(dep, 10)
    assert len(links) == 16 and (9, 0, 0.6) in links
    svg = plots.dependency_map_svg(dep, PAGES)
    assert svg.count("data-src=") == 16 and 'data-src="9" data-dst="0"' in svg
    assert "page of the querying chunk" in svg and "page of the retrieved chunk" in svg
    small = plots.dependency_map_svg(dep, PAGES, max_points=5)
    assert small.count("data-src=") == 5 and "strongest of 16" in small
    assert "too short" in plots.dependency_map_svg([], PAGES)


def test_a_long_documents_map_draws_the_strongest_link_of_each_square():
    """On a book of 2,000 chunks a chunk is 0.3 px wide: the dots were sub-pixel and piled up along
    the diagonal. Past 160 chunks each 4 px square shows one dot, its strongest link (clickable, with
    how many fell there); a short document keeps a dot per link."""
    import re

    n = 2000
    dep = [{"chunk": c, "retrieved": [c - 1, c - 2, 0], "weights": [0.5 + c / 1e5, 0.2 + c / 1e5, 0.1]}
           for c in range(2, n)]
    svg = plots.dependency_map_svg(dep, [c // 10 + 1 for c in range(n)])
    dots = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="2.00"[^>]*data-src="(\d+)" data-dst="(\d+)"', svg)
    per = n * plots.MIN_DOT_SPACING / 640
    squares = {(int(c / per), int(j / per)) for c in range(2, n) for j in (c - 1, c - 2, 0)}
    assert len(dots) == len(squares) and "5,994 links, the strongest per square" in svg
    assert all((float(x) - 70) % 4 == 2 for x, *_ in dots)  # on the squares' grid
    # the last square on the diagonal shows its strongest link: chunk 1999 to 1998 (weight 0.51999)
    assert ("1999", "1998") in {(s, d) for *_, s, d in dots} and ("1998", "1997") not in {(s, d) for *_, s, d in dots}
    short = plots.dependency_map_svg(dep[:50], [c // 10 + 1 for c in range(60)])
    assert short.count("<circle") == 150 and "per square" not in short
