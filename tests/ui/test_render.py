"""ui.render's small text helpers."""

from ui.render import cut_title


def test_a_long_part_title_is_cut_at_a_word_not_inside_one():
    """Chapters numbered afresh in their parts carry the part's label (ingest.parts), and the Summary
    menu cut titles at 60 characters inside a word: "... YALBURY WOOD AND THE KEEPER'S HO" (ingest 13)."""
    title = "PART THE SECOND, CHAPTER VI: YALBURY WOOD AND THE KEEPER'S HOUSE"
    assert cut_title(title, 90) == title
    assert cut_title(title, 60) == "PART THE SECOND, CHAPTER VI: YALBURY WOOD AND THE KEEPER'S …"
    assert cut_title("Next-Neighbor Queries via Run-of-0's Samples", 40) == "Next-Neighbor Queries via Run-of-0's …"
