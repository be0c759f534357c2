"""The passages shown after a quote ("Also relevant") do not repeat it (qa.evidence.also_relevant); the
CLI, the UI and export show the same (walk 14: a neighbouring chunk's window printed the quoted
sentence again)."""

from qa.evidence import ELIDED, also_relevant

QUOTE = {"chunk": 76, "text": "Yes, two black hens. Fresleven--that was the fellow's name, a Dane--thought himself "
                              "wronged somehow in the bargain, so he went ashore.",
         "sentence": "Fresleven--that was the fellow's name, a Dane--thought himself wronged somehow in the bargain, "
                     "so he went ashore.", "pages": [5]}
NEXT = {"chunk": 77, "p": 0.83, "pages": [5],
        "text": "was left of the body, that I heard the original quarrel arose from a misunderstanding about some "
                "hens. Yes, two black hens. Fresleven--that was the fellow's name, a Dane--thought himself\n"
                "wronged somehow in the bargain, so he went ashore."}
OTHER = {"chunk": 447, "p": 0.1, "pages": [27], "text": "Its title was, An Inquiry into some Points of Seamanship, "
                                                        "by a man Towser, Towson--some such name."}


def test_a_passage_shows_what_the_quote_did_not():
    rest = also_relevant([QUOTE | {"p": 0.9}, NEXT, OTHER], QUOTE)
    assert [p["chunk"] for p in rest] == [77, 447]
    assert "Fresleven" not in rest[0]["text"] and ELIDED in rest[0]["text"]
    assert rest[0]["text"].startswith("was left of the body, that I heard the original quarrel")
    assert rest[1] is OTHER  # a passage that does not repeat the quote is shown as it is
    # a passage that is nothing but the quote is not shown at all; a short one that does not repeat it is
    assert also_relevant([dict(NEXT, text=QUOTE["text"] + " So.")], QUOTE) == []
    short = dict(OTHER, text="Another passage.")
    assert also_relevant([short], QUOTE) == [short]


def test_the_cli_the_ui_and_export_show_it_once():
    from qa.cli import answer_text
    from ui.render import answer_md

    out = {"answer": QUOTE["text"], "quote": QUOTE, "passages": [NEXT, OTHER], "abstained": False}
    for shown in (answer_text(out), answer_md(out)):
        assert shown.count("Fresleven") == 1, shown
        assert "the original quarrel" in shown and "Towser" in shown
