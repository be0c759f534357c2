"""The shipped cross-encoder (qa.cross_encoder): it loads offline from the checkpoint and the MiniLM
package, tells an answer from a passage that only shares the question's words, and points its span
at the answer; its training examples are built as documented (qa.cross_encoder_train)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from qa.cross_encoder import FILE, CrossEncoder, Scorer, encode_pairs, load_tokenizer

SHIPPED = Path(__file__).resolve().parents[2] / "checkpoints" / "drt-tiny"


@pytest.fixture(scope="module")
def scorer():
    assert (SHIPPED / FILE).is_file(), "the shipped checkpoint carries its cross-encoder"
    return Scorer(SHIPPED)


QUESTION = "In what town did the miller's daughter open her shop?"
ANSWER = ("Two years after her father's death the miller's daughter left the valley and opened a small shop "
          "in Wexcombe, where she sold ribbons and lace to the farmers' wives on market days.")
DISTRACTOR = ("The miller's daughter was often seen on the road to the town, and the neighbours wondered what "
              "she could want there; the shop windows held nothing she could afford.")
OTHER = "The rain fell all night upon the heath, and by morning the ponds had overflowed into the lanes."


def test_the_answer_passage_outranks_one_that_only_shares_the_questions_words(scorer):
    reads = scorer.read(QUESTION, [DISTRACTOR, ANSWER, OTHER])
    rel = [r.relevance for r in reads]
    assert rel[1] > rel[0] and rel[1] > rel[2]
    a, b = reads[1].span
    assert "Wexcombe" in ANSWER[a:b] and len(ANSWER[a:b]) < 60


# both on every CPU (bf16 is only slower without units)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bf16_and_fp32_read_alike(dtype, scorer):
    other = Scorer(SHIPPED, dtype=dtype)
    assert next(other.model.parameters()).dtype == dtype
    got = other.read(QUESTION, [DISTRACTOR, ANSWER, OTHER])
    ref = scorer.read(QUESTION, [DISTRACTOR, ANSWER, OTHER])
    assert [round(r.relevance) for r in got] == pytest.approx([round(r.relevance) for r in ref], abs=1)
    assert max(range(3), key=lambda i: got[i].relevance) == 1 and got[1].span == ref[1].span


def test_loading_keeps_the_packages_embeddings_and_the_shipped_rest():
    from safetensors.torch import load_file

    shipped = load_file(str(SHIPPED / FILE))
    assert "bert.embeddings.word_embeddings.weight" not in shipped  # the package's table, not shipped again
    m = CrossEncoder.load(SHIPPED)
    sd = m.state_dict()
    for k in ("relevance.weight", "span.weight", "bert.encoder.layer.5.output.dense.weight"):
        assert torch.equal(sd[k], shipped[k].float())
    base = CrossEncoder.pretrained_base().state_dict()
    assert torch.equal(sd["bert.embeddings.word_embeddings.weight"], base["bert.embeddings.word_embeddings.weight"])


def test_pairs_are_cut_in_the_passage_and_offsets_point_into_it():
    tok = load_tokenizer(64)
    long = " ".join(["lace"] * 200)
    ids, mask, types, offsets = encode_pairs(tok, QUESTION + " " + "x" * 400, [ANSWER, long])
    assert ids.shape[0] == 2 and ids.shape[1] <= 64 and int(mask[1].sum()) == 64
    j, a, b = offsets[0][0]
    assert int(types[0, j]) == 1 and ANSWER[a:b].lower() == "two"


def test_training_examples_hold_the_answer_only_in_the_positive():
    from ingest.tokenize import make_encoder
    from qa.cross_encoder_train import NEGATIVES, doc_examples

    text = (Path(__file__).resolve().parents[1] / "assets" / "frankenstein_excerpt.txt").read_text()
    i = text.index("Geneva")
    item = {"question": "Where was the narrator born?", "answer": "Geneva", "ans_char": [i, i + 6], "qtype": "place"}
    exs = doc_examples(text, [item], random.Random(0), make_encoder(None))
    mined = [e for e in exs if e["kind"] == "place"]
    assert mined and all(len(e["passages"]) == 1 + NEGATIVES for e in mined)
    for e in mined:
        a, b = e["span"]
        assert e["passages"][0][a:b] == "Geneva"
        assert all("geneva" not in p.lower() for p in e["passages"][1:])
    for e in (e for e in exs if e["kind"] == "ict"):  # the cut sentence is the query, absent from its passage
        assert e["span"] is None and e["q"] not in " ".join(e["passages"][0].split())


def test_written_questions_give_groups_with_the_gold_span_and_unanswerable_ones_no_positive():
    """A question written by reading (eval qa's format) becomes groups whose first passage holds the
    answer where the gold passage says (found across the file's line breaks), the others not; an
    unanswerable one a group of negatives only, trained on the pointwise loss alone."""
    from ingest.tokenize import make_encoder
    from qa.cross_encoder_train import NEGATIVES, loss_of, written_examples
    from qa.written import locate
    from qa.eval_qa import TextFinder

    text = (Path(__file__).resolve().parents[1] / "assets" / "frankenstein_excerpt.txt").read_text()
    i = text.index("Geneva")
    gold = " ".join(text[max(0, i - 60): i + 40].split())  # whitespace as a person copies it
    items = [{"question": "Where was the narrator born?", "answer": "Geneva", "gold": gold, "answerable": True},
             {"question": "What was the name of the narrator's dog?", "answer": "", "gold": "", "answerable": False}]
    at = locate(text, TextFinder(text), items[0])
    assert at is not None and text[at[0]:at[1]] == "Geneva"
    items[0]["ans_char"] = list(at)
    exs = written_examples(text, items, random.Random(0), make_encoder(None), groups=2)
    written = [e for e in exs if e["kind"] == "written"]
    assert len(written) == 2 and len({tuple(e["passages"][1:]) for e in written}) == 2  # the next negatives
    for e in written:
        a, b = e["span"]
        assert e["passages"][0][a:b] == "Geneva" and len(e["passages"]) == 1 + NEGATIVES
        assert all("geneva" not in p.lower() for p in e["passages"][1:])
    (none,) = [e for e in exs if e["kind"] == "written-none"]
    assert none["none"] and none["span"] is None and len(none["passages"]) == 1 + NEGATIVES

    class Fixed(torch.nn.Module):  # relevance 0 everywhere: only the pointwise loss, log 2, is left
        def forward(self, ids, mask, types):
            z = torch.zeros(ids.shape[0])
            return z, torch.zeros(ids.shape), torch.zeros(ids.shape)

    loss = loss_of(Fixed(), load_tokenizer(), none, bf16=False)[0]
    assert abs(float(loss) - float(torch.log(torch.tensor(2.0)))) < 1e-6


def test_a_swapped_question_asks_the_same_of_another_person_of_the_book():
    """`--swaps`: an answerable written question asked of another person of the book is an unanswerable
    group (every word in the book, the answer about someone else); "Who is X?" is never swapped."""
    from qa.cross_encoder_train import names_of, swapped

    text = ('"Come," said Henchard. "No," said Lucetta. Mr. Farfrae came. ' * 3 + 'She said no. ' * 5)
    names = names_of(text)
    assert names == ["Farfrae", "Henchard", "Lucetta"]  # "She" said it too: no one
    q = swapped("Why did Henchard swear off drink?", names, random.Random(0))
    assert q in ("Why did Lucetta swear off drink?", "Why did Farfrae swear off drink?")
    assert swapped("Who is Henchard?", names, random.Random(0)) is None
    assert swapped("Why did the sailor leave?", names, random.Random(0)) is None


def test_sentence_groups_hold_the_answer_only_in_the_positive_sentence():
    """qa.cross_encoder_train.sentence_group: the answer's sentence read after the sentence before it
    (as qa.reader.sentence_unit reads a candidate) is the positive, with its span; the negatives are
    a sentence of the same window and the negative windows' sentences, none holding the answer."""
    from qa.cross_encoder_train import NEGATIVES, sentence_group

    pos = ("The mill stood by the river. " + ANSWER + " She never went back to the valley again, "
           "though the miller's old friends wrote to her every spring.")
    a = pos.index("Wexcombe")
    ex = {"q": QUESTION, "passages": [pos, DISTRACTOR, OTHER + " " + DISTRACTOR, OTHER], "span": (a, a + 8),
          "kind": "written"}
    g = sentence_group(ex, random.Random(0))
    assert g is not None and g["kind"] == "written-sentence" and len(g["passages"]) == 1 + NEGATIVES
    first = g["passages"][0]
    assert first == "The mill stood by the river. " + ANSWER  # the sentence before, then the answer's
    x, y = g["span"]
    assert first[x:y] == "Wexcombe"
    assert all("wexcombe" not in p.lower() for p in g["passages"][1:])
    assert "The mill stood by the river." in g["passages"][1:]  # the same window's other sentence
    assert not any("never went back" in p for p in g["passages"])  # read after the answer's: not a negative
    assert sentence_group(dict(ex, span=None), random.Random(0)) is None  # no answer span, no group


def test_written_documents_are_found_under_the_root_or_beside_their_question_file(tmp_path):
    """Training files name documents under ../shared; a sealed set that joins them names its texts
    relative to its own folder (docs/eval/texts_v4/...): both are read, each question located."""
    from qa.written import written_docs

    src = (Path(__file__).resolve().parents[1] / "assets" / "frankenstein_excerpt.txt").read_text()
    i = src.index("Geneva")
    gold = " ".join(src[max(0, i - 60): i + 40].split())
    root, sealed = tmp_path / "shared", tmp_path / "eval"
    (root / "books").mkdir(parents=True)
    (sealed / "texts").mkdir(parents=True)
    (root / "books" / "a.txt").write_text(src)
    (sealed / "texts" / "b.txt").write_text(src)
    row = {"type": "fact", "question": "Where was the narrator born?", "answer": "Geneva", "gold": gold,
           "answerable": True}
    (tmp_path / "train.jsonl").write_text(json.dumps({"id": "t1", "doc": "books/a.txt", **row}) + "\n")
    (sealed / "sealed.jsonl").write_text(json.dumps({"id": "s1", "doc": "texts/b.txt", **row}) + "\n")
    got = {d: items for d, _, items in written_docs([str(tmp_path / "train.jsonl"), str(sealed / "sealed.jsonl")],
                                                    str(root))}
    assert set(got) == {"books/a.txt", "texts/b.txt"}
    for d, items in got.items():
        (q,) = items
        assert q["ans_char"] and src[q["ans_char"][0]:q["ans_char"][1]] == "Geneva"
