"""QA mining (drt_core.mine): verbatim answers, gold passages, phrasing sets, token spans, the files."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from drt_core.mine.book import mine_book
from drt_core.mine.build import build_qa_data, char_to_token_span, main, mine_document
from drt_core.mine.items import (MAX_PER_TYPE, PASSAGE_MAX, PASSAGE_MIN, QTYPES, TEMPLATES, answer_target,
                                 phrasing_of, render, template_fields)
from drt_core.mine.spans import fit_passage, spread_sample
from drt_core.mine.stacks import mine_stacks
from drt_core import tokenizer as T

# A small made-up novel: named people with speech attributions, numbers, places.
STORY = "\n\n".join(
    [
        "CHAPTER I",
        "Mr. Halloran, a retired sea captain with a wooden leg, lived at Kelmscott with his niece.",
        "Anna Verey, who kept the accounts of the household, had lived there for eleven years.",
        "“The tide will turn before noon,” said Anna, looking out at the grey water.",
        "“Then we shall sail at once,” said Mr. Halloran, and he went down to the harbour.",
        "They travelled from Kelmscott to Bramwell in a cart that cost them fifteen shillings.",
        "Anna replied that the road was long and that the horse was tired.",
        "In 1742 the old bridge at Bramwell was carried away by a flood in the spring.",
        "“I have never seen such rain in my whole life,” said Anna to the ferryman.",
        "Mr. Halloran laughed and said that he had seen worse weather off the Cape.",
        "At Bramwell they found an inn kept by a widow who had three tall sons.",
        "“We must be home by Sunday or the cows will not be milked,” said Mr. Halloran.",
        "Anna smiled at him and counted the money again, for she trusted nobody with it.",
        "The carrier, a silent man, drove them back from Bramwell through the marshes.",
        "“Nobody ever listens to a word that I say in this house,” cried Anna.",
        "Mr. Halloran replied that he listened to every word, which was not true.",
        "Anna said nothing more that evening and went up to bed with her candle.",
        "Mr. Halloran sat by the fire until midnight, thinking of the ships he had lost.",
    ]
)

PLAY = """THE TRAGEDY OF THE GREY HARBOUR

by Nobody in Particular




Persons represented.

MARCUS, a Sea Captain, Brother to the Duke.
LUCILLA, Daughter to Marcus.
OSWALD, Steward to the Duke of Harbour.

SCENE: A harbour town.



ACT I.

SCENE I. The quay at morning.

MARCUS.
The wind is fair and all the boats are ready on the shore;
We sail before the sun has climbed above the eastern hill.

LUCILLA.
Then I will stay and keep the lamp alight within the tower,
And watch the water every night until my father comes.

OSWALD.
My lord, the Duke has sent for you; he waits within the hall,
And bids me say the matter will not suffer long delay.

MARCUS.
Tell him I come as soon as I have spoken with my daughter,
For I shall be away at sea for forty days at least.
"""


def _check_items(items, text, phrasing="train"):
    """Every item: verbatim answer, passage contains it (100-400 chars), a template of the set."""
    assert items
    for it in items:
        assert it.qtype in QTYPES
        assert text[it.ans_start : it.ans_end] == it.answer and it.answer.strip() == it.answer
        assert it.passage_start <= it.ans_start < it.ans_end <= it.passage_end
        assert PASSAGE_MIN <= it.passage_end - it.passage_start <= PASSAGE_MAX
        assert it.question and not any("{%s}" % f in it.question for f in template_fields(it.template))
        if phrasing in ("train", "heldout"):
            assert it.template in TEMPLATES[it.qtype][phrasing]
        assert "\n" not in answer_target(it.answer)


def test_templates_disjoint_and_complete():
    for qtype in QTYPES:
        t = TEMPLATES[qtype]
        assert len(t["train"]) >= 5 and len(t["heldout"]) >= 2
        assert not set(t["train"]) & set(t["heldout"])
        # every combination of slots a miner fills has a phrasing in both sets
        for which in ("train", "heldout"):
            fields = {template_fields(x) for x in t[which]}
            other = {template_fields(x) for x in t["heldout" if which == "train" else "train"]}
            assert all(any(f <= g or g <= f for g in other) for f in fields), (qtype, which)
        for x in t["train"]:
            assert phrasing_of(qtype, x) == "train"
        for x in t["heldout"]:
            assert phrasing_of(qtype, x) == "heldout"


def test_render_uses_only_filled_slots():
    rng = random.Random(0)
    for _ in range(50):
        q, t = render("definition", {"term": "skew field", "a_term": ""}, rng)
        assert "{a_term}" not in t and "{subject}" not in t and "skew field" in q
    q, t = render("number", {"topic": "x y z", "what": "year", "noun": ""}, random.Random(1), "heldout")
    assert t in TEMPLATES["number"]["heldout"] and "{noun}" not in t
    with pytest.raises(ValueError):
        render("definition", {"term": "x"}, rng, "sometimes")


def test_mine_stacks_brauer(assets):
    text = (assets / "stacks-brauer.tex").read_text(encoding="utf-8")
    items = mine_stacks(text, random.Random(0))
    _check_items(items, text)
    kinds = {it.qtype for it in items}
    assert {"definition", "statement", "find"} <= kinds
    defs = {it.question: it for it in items if it.qtype == "definition"}
    skew = [it for q, it in defs.items() if "skew field" in q and "{\\it skew field}" in it.answer]
    assert skew and text[skew[0].passage_start :].startswith("\\begin{definition}")
    stm = [it for it in items if it.qtype == "statement" and "brauer algebraically closed" in it.question]
    assert stm and stm[0].answer == "The Brauer group of an algebraically closed field is zero."
    # statements never start with the label or list markup
    assert not any(it.answer.startswith(("\\label", "\\item", "\\begin")) for it in items)


def test_mine_stacks_skips_formula_only_environments():
    text = "\\begin{lemma}\n\\label{lemma-x}\n$$a = b + c = d$$\n\\end{lemma}\n" + "Some prose. " * 20
    assert mine_stacks(text, random.Random(0)) == []


def test_mine_book_story_types():
    items = mine_book(STORY, random.Random(0))
    _check_items(items, STORY)
    by = {}
    for it in items:
        by.setdefault(it.qtype, []).append(it)
    assert {"character", "speaker", "number", "place", "find"} <= set(by)
    who = {it.question: it.answer for it in by["character"]}
    assert any("Halloran" in q and a.startswith("a retired sea captain") for q, a in who.items())
    said = {it.answer for it in by["speaker"]}
    assert said <= {"Anna", "Mr. Halloran"} and said
    for it in by["speaker"]:  # the quoted words are in the passage
        quote = it.question.split('"')[1]
        assert quote in " ".join(STORY[it.passage_start : it.passage_end].split())
    nums = {it.answer for it in by["number"]}
    assert nums & {"fifteen shillings", "1742", "eleven years", "three"}
    assert {it.answer for it in by["place"]} <= {"Kelmscott", "Bramwell"}
    for it in by["find"]:
        s = STORY.rfind("\n\n", 0, it.ans_start)
        assert STORY[s : it.ans_start].strip()  # the quoted beginning precedes the answer


def test_mine_book_frankenstein_excerpt(assets):
    text = (assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8")
    items = mine_book(text, random.Random(3))
    _check_items(items, text)
    counts = {t: sum(it.qtype == t for it in items) for t in QTYPES}
    assert counts["find"] > 50 and counts["number"] > 3
    assert all(n <= MAX_PER_TYPE for n in counts.values())
    # spread: the find items come from all through the excerpt, not only its start
    starts = sorted(it.ans_start for it in items if it.qtype == "find")
    assert starts[0] < len(text) * 0.2 and starts[-1] > len(text) * 0.8


def test_play_characters_and_speakers():
    items = mine_document("shakespeare/grey_harbour_gut.txt", PLAY, random.Random(0))
    _check_items(items, PLAY)
    who = {it.question: it.answer for it in items if it.qtype == "character"}
    assert any("Marcus" in q and a == "a Sea Captain, Brother to the Duke" for q, a in who.items())
    assert any("Lucilla" in q and a == "Daughter to Marcus" for q, a in who.items())
    speakers = [it for it in items if it.qtype == "speaker"]
    assert speakers and {it.answer for it in speakers} <= {"MARCUS", "LUCILLA", "OSWALD"}
    for it in speakers:
        quote = it.question.split('"')[1]
        assert quote in " ".join(PLAY[it.passage_start : it.passage_end].split())


def test_heldout_and_both_phrasings(assets):
    text = (assets / "stacks-brauer.tex").read_text(encoding="utf-8")
    held = mine_stacks(text, random.Random(0), phrasings="heldout")
    _check_items(held, text, "heldout")
    book = mine_book(STORY, random.Random(0), phrasings="heldout")
    _check_items(book, STORY, "heldout")
    both = mine_stacks(text, random.Random(0), phrasings="both")
    _check_items(both, text, "both")
    assert {phrasing_of(it.qtype, it.template) for it in both} == {"train", "heldout"}


def test_deterministic_for_a_seed(assets):
    text = (assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8")
    a = mine_document("books/84-frankenstein.txt", text, random.Random(7))
    b = mine_document("books/84-frankenstein.txt", text, random.Random(7))
    c = mine_document("books/84-frankenstein.txt", text, random.Random(8))
    assert a == b and a != c


def test_spread_sample():
    rng = random.Random(0)
    got = spread_sample(list(range(1000)), 10, rng)
    assert len(got) == 10 and got == sorted(got)
    assert all(i * 100 <= g < (i + 1) * 100 for i, g in enumerate(got))
    assert spread_sample([3, 1, 2], 10, rng) == [1, 2, 3]


def test_fit_passage_bounds():
    text = "word " * 200
    lo, hi = fit_passage(text, 500, 510, 500, 504)
    assert lo <= 500 and 504 <= hi and PASSAGE_MIN <= hi - lo <= PASSAGE_MAX
    lo, hi = fit_passage(text, 0, 1000, 600, 604)
    assert lo <= 600 and 604 <= hi and hi - lo <= PASSAGE_MAX
    assert fit_passage(text, 0, 1000, 0, 500) is None  # answer longer than a passage
    end = "word " * 100 + "The last words.\n\n"  # the answer ends the document
    a = end.index("last")
    lo, hi = fit_passage(end, a - 4, a + 10, a, a + 10, ([a - 4], [a + 11]))
    assert hi - lo >= PASSAGE_MIN and lo <= a and end[hi - 1] != " "


def test_char_to_token_span():
    text = "Émile said: the quick brown fox, 1742 — jumps over the lazy dog.\nNext line here."
    ids, offs = T.encode_with_offsets(text)
    for word in ("Émile", "quick brown", "1742", "—", "lazy dog.", "Next line"):
        s = text.index(word)
        e = s + len(word)
        ts, te = char_to_token_span(offs, s, e)
        assert 0 <= ts < te <= len(ids)
        assert word in T.decode(ids[ts:te])
        # minimal: the first and last tokens overlap the span
        assert offs[ts][1] > s and offs[te - 1][0] < e


def _fake_corpora(root, assets):
    for d in ("books", "shakespeare", "milton", "stacks"):
        (root / d).mkdir(parents=True)
    frank = (assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8")
    (root / "books" / "84-frankenstein.txt").write_text(frank[:12000], encoding="utf-8")
    (root / "books" / "1-story.txt").write_text(STORY, encoding="utf-8")
    (root / "books" / "2-secret.txt").write_text(
        "SECRETWORD " + STORY.replace("Anna", "Zelda"), encoding="utf-8"
    )
    (root / "shakespeare" / "grey_harbour_gut.txt").write_text(PLAY, encoding="utf-8")
    (root / "stacks" / "brauer.tex").write_text(
        (assets / "stacks-brauer.tex").read_text(encoding="utf-8"), encoding="utf-8"
    )
    splits = {
        "seed": 1,
        "train": {
            "books": ["books/84-frankenstein.txt", "shakespeare/grey_harbour_gut.txt"],
            "stacks": ["stacks/brauer.tex"],
        },
        "val": {"books": ["books/1-story.txt"], "stacks": []},
        "test": {"books": ["books/2-secret.txt"], "stacks": []},
    }
    (root / "splits.json").write_text(json.dumps(splits))
    return root


def test_build_qa_data(tmp_path, assets):
    root = _fake_corpora(tmp_path / "corpora", assets)
    out = tmp_path / "data"
    counts = build_qa_data(root, root / "splits.json", out, seed=0)
    qa = out / "qa"
    assert sorted(p.name for p in qa.iterdir()) == [
        "meta.json",
        "train.bin",
        "train.jsonl",
        "val.bin",
        "val.jsonl",
    ]
    meta = json.loads((qa / "meta.json").read_text())
    assert {s: meta["splits"][s]["per_type"] for s in ("train", "val")} == counts
    for split in ("train", "val"):
        ids = np.fromfile(qa / f"{split}.bin", dtype=np.uint16)
        rows = [json.loads(x) for x in (qa / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]
        assert len(rows) == sum(counts[split].values()) > 0
        assert meta["splits"][split]["tokens"] == len(ids)
        docs = {}
        for r in rows:
            assert r["doc"] != "books/2-secret.txt"
            docs[r["doc"]] = (r["doc_start"], r["doc_len"])
            s0, n = r["doc_start"], r["doc_len"]
            assert ids[s0 + n] == T.EOT_ID
            doc = ids[s0 : s0 + n]
            a, b = r["ans_tok"]
            p, q = r["passage_tok"]
            assert 0 <= p <= a < b <= q <= n
            assert r["target"] in " ".join(T.decode(doc[a:b].tolist()).split())
            assert r["phrasing"] == phrasing_of(r["qtype"], r["template"])
            if split == "train":
                assert r["phrasing"] == "train"
        text = (root / rows[0]["doc"]).read_text(encoding="utf-8")
        s0, n = docs[rows[0]["doc"]]
        assert ids[s0 : s0 + n].tolist() == T.encode(text)  # the document's own ids
    val = [json.loads(x) for x in (qa / "val.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["doc"] for r in val} == {"books/1-story.txt"}
    assert "SECRETWORD" not in T.decode(np.fromfile(qa / "train.bin", dtype=np.uint16).tolist())
    assert not list(qa.glob("*.tmp"))
    with pytest.raises(ValueError):
        build_qa_data(root, root / "splits.json", out, splits=("train", "test"))


def test_cli_json(tmp_path, assets, capsys):
    root = _fake_corpora(tmp_path / "corpora", assets)
    data = tmp_path / "data"
    data.mkdir()
    (data / "splits.json").write_text((root / "splits.json").read_text())
    assert main(["--corpora", str(root), "--data", str(data), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert set(got["counts"]) == {"train", "val"} and (data / "qa" / "train.jsonl").exists()
