"""Data: document split, token files, the data command, the window sampler."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from drt_core.train import data as D
from drt_core import tokenizer as T


def _corpora(root, assets, big: bool = False):
    """A small fake corpora dir. With big=True there are enough held-out candidates for the real
    rule (6 books <= 1.5 MB, 8 single-family Stacks chapters >= 60 KB)."""
    book = (assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8")
    tex = (assets / "stacks-brauer.tex").read_text(encoding="utf-8")
    for d in ("books", "shakespeare", "milton", "stacks"):
        (root / d).mkdir(parents=True)
    n_books = 9 if big else 5
    for i in range(n_books):
        (root / "books" / f"{100 + i}-book-{i}.txt").write_text(f"Book {i}.\n" + book[i * 3000 : i * 3000 + 4000])
    (root / "shakespeare" / "hamlet_gut.txt").write_text("To be, or not to be, that is the question.\n")
    (root / "shakespeare" / "tempest_gut.txt").write_text("Full fathom five thy father lies.\n")
    (root / "milton" / "comus_gut.txt").write_text("Sweet Echo, sweetest nymph that liv'st unseen.\n")
    chapters = ["algebra", "topology", "fields", "sheaves", "curves", "brauer", "weil", "quot", "chow", "sets"]
    chapters += ["morphisms", "spaces-morphisms", "more-morphisms"]  # one family of parallel chapters
    n_ch = len(chapters) if big else 6
    for name in chapters[:n_ch]:
        body = f"\\section{{{name}}}\n" + (tex * (3 if big else 1))[: 70_000 if big else 3000]
        (root / "stacks" / f"{name}.tex").write_text(body)
    for name in D.STACKS_NON_CHAPTER:
        (root / "stacks" / name).write_text("% not a chapter\n")
    return root


def test_list_documents_excludes_non_chapters(tmp_path, assets):
    root = _corpora(tmp_path / "c", assets)
    docs = D.list_documents(root)
    names = {d.rsplit("/", 1)[1] for d in docs["stacks"]}
    assert not names & D.STACKS_NON_CHAPTER
    assert len(docs["stacks"]) == 6
    assert "shakespeare/hamlet_gut.txt" in docs["books"] and "milton/comus_gut.txt" in docs["books"]


@pytest.mark.parametrize("big", [False, True])
def test_split_by_document_disjoint_and_deterministic(tmp_path, assets, big):
    root = _corpora(tmp_path / "c", assets, big=big)
    a = D.make_splits(root)
    b = D.make_splits(root)
    assert a == b
    assert D.make_splits(root, seed=1) != a or not big
    docs = D.list_documents(root)
    for c in D.CORPORA:
        tr, va, te = (set(a[s][c]) for s in D.SPLITS)
        assert not (tr & va) and not (tr & te) and not (va & te)
        assert tr | va | te == set(docs[c])
        assert tr, "training keeps documents"
    if big:
        assert len(a["val"]["books"]) == len(a["test"]["books"]) == 3
        assert len(a["val"]["stacks"]) == len(a["test"]["stacks"]) == 4
        held = a["val"]["stacks"] + a["test"]["stacks"]
        assert not any("morphisms" in h for h in held)  # families with parallel chapters stay in train
        assert all(h.startswith("books/") for h in a["val"]["books"] + a["test"]["books"])


def test_stacks_family():
    fam = D._stacks_family
    assert fam("stacks/spaces-more-morphisms.tex") == fam("stacks/morphisms.tex") == fam("stacks/more-morphisms.tex")
    assert fam("stacks/stacks-cohomology.tex") == fam("stacks/sites-cohomology.tex")
    assert fam("stacks/curves.tex") == "curves"


def test_data_command_writes_token_files(tmp_path, assets, capsys):
    import app

    root = _corpora(tmp_path / "c", assets)
    out = tmp_path / "data"
    rc = app.main(["data", "--corpora", str(root), "--out", str(out), "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert (out / "READY").exists()
    split = json.loads((out / "splits.json").read_text())
    for c in D.CORPORA:
        for s in D.SPLITS:
            arr = np.fromfile(out / c / f"{s}.bin", dtype=np.uint16)
            assert arr.size == res["tokens"][c][s]
            names = split[s][c]
            assert int((arr == T.EOT_ID).sum()) == len(names)  # one EOT per document
            if names:
                assert arr[-1] == T.EOT_ID
                expect = []
                for n in names:
                    expect += T.encode((root / n).read_text(encoding="utf-8")) + [T.EOT_ID]
                assert arr.tolist() == expect
    assert "preamble" not in json.dumps(split)


def test_data_command_trains_tokenizer(tmp_path, assets, capsys):
    import app

    root = _corpora(tmp_path / "c", assets)
    out, tok = tmp_path / "data", tmp_path / "tok"
    rc = app.main(
        ["data", "--corpora", str(root), "--out", str(out), "--train-tokenizer", "--vocab-size", "400",
         "--measure-sizes", "300,400", "--tokenizer-out", str(tok), "--json"]
    )
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert [r["vocab_size"] for r in res["tokenizer_training"]["table"]] == [300, 400]
    assert T.load_tokenizer(tok).vocab_size == 400
    arr = np.fromfile(out / "books" / "train.bin", dtype=np.uint16)
    assert arr.max() < 400


def test_data_command_bad_input(tmp_path, capsys):
    import app

    rc = app.main(["data", "--corpora", str(tmp_path / "missing"), "--out", str(tmp_path / "o"), "--json"])
    assert rc == 2
    assert "not found" in capsys.readouterr().err


def _bins(tmp_path):
    a = np.arange(0, 5000, dtype=np.uint16) % 100  # values < 100
    b = (np.arange(0, 3000, dtype=np.uint16) % 100) + 1000  # values >= 1000
    pa, pb = tmp_path / "a.bin", tmp_path / "b.bin"
    a.tofile(pa)
    b.tofile(pb)
    return pa, pb


def test_window_sampler_deterministic_and_per_rank(tmp_path):
    pa, pb = _bins(tmp_path)
    s1 = D.WindowSampler([(pa, 1.0), (pb, 1.0)], seq_len=32, seed=7)
    s2 = D.WindowSampler({str(pa): 1.0, str(pb): 1.0}, seq_len=32, seed=7)
    x = s1.batch(3, 8)
    assert x.shape == (8, 33) and str(x.dtype) == "torch.int64"
    assert (x == s2.batch(3, 8)).all()  # same (seed, step, rank)
    s1.batch(99, 4)  # call order does not matter
    assert (x == s1.batch(3, 8)).all()
    assert not (x == s1.batch(4, 8)).all()  # another step
    r0, r1 = s1.batch(3, 8, rank=0, world_size=2), s1.batch(3, 8, rank=1, world_size=2)
    assert not (r0 == r1).all()  # ranks differ
    assert not (x == D.WindowSampler([(pa, 1.0), (pb, 1.0)], 32, seed=8).batch(3, 8)).all()
    # rows are real consecutive windows of one file
    for row in x.tolist():
        if row[0] < 100:
            assert all(v < 100 for v in row) and all((q - p) % 100 == 1 for p, q in zip(row, row[1:]))
        else:
            assert all(v >= 1000 for v in row)
    s3 = pickle.loads(pickle.dumps(s1))
    assert (s3.batch(3, 8) == x).all()
    with pytest.raises(ValueError):
        s1.batch(0, 2, rank=2, world_size=2)


def test_window_sampler_weights(tmp_path):
    pa, pb = _bins(tmp_path)
    s = D.WindowSampler([(pa, 0.8), (pb, 0.2)], seq_len=16, seed=0)
    files = [f for step in range(200) for f, _ in s.draw(step, 10)]
    frac_a = files.count(0) / len(files)
    assert 0.75 < frac_a < 0.85
    s0 = D.WindowSampler([(pa, 1.0), (pb, 0.0)], seq_len=16, seed=0)
    assert all(f == 0 for step in range(20) for f, _ in s0.draw(step, 5))
    # offsets cover the file, including the last possible window
    offs = [o for step in range(300) for f, o in s.draw(step, 10) if f == 1]
    assert min(offs) >= 0 and max(offs) <= 3000 - 17 and max(offs) > 2800
    with pytest.raises(ValueError):
        D.WindowSampler([(pa, 1.0)], seq_len=10_000, seed=0)

