"""The cast against cast lists written by reading: main characters' recall, person entries' precision.

    python -m bench.cast_eval [--set docs/eval/cast/sealed.jsonl] [--home runs/casthome] [--docs-root ../shared]
    python -m bench.cast_eval --set docs/eval/cast/sealed.jsonl@../shared --set docs/eval/cast/sealed_v4.jsonl@. ...

`--set` may be given more than once, each with its own documents' root after an "@" (else --docs-root's);
the means are then over all the books (the development lists: every set already read once).

Each book (its `read_as` file) is ingested and prefilled as the app does (resumable), and its
outline's cast (qa.outline.build, qa.cast) is compared with the list (format:
docs/eval/cast/README.md). Forms are compared lower-cased, without dots, a leading "the" and
curly apostrophes. A person entry (kind "person") is right when its forms (name and aliases)
meet the forms (name and aliases, not the ambiguous ones) of exactly one listed person, and no
earlier entry (more mentioned) already claimed that person; one person split over two entries
thus costs precision, two people merged into one entry too. Recall: the main characters claimed
by a right person entry. Also: how many entries typed "place" are listed places, and how many
are listed persons (typed wrong).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def norm(form: str) -> str:
    form = form.replace("’", "'").replace(".", " ").lower()
    form = re.sub(r"^the\s+", "", " ".join(form.split()))
    return form


def score_book(entries: list[dict], rec: dict) -> dict:
    people = [("main", p) for p in rec["main"]] + [("other", p) for p in rec.get("persons", [])]
    owner: dict[str, set[int]] = {}
    for i, (_, p) in enumerate(people):
        for f in [p["name"], *p.get("aliases", [])]:
            owner.setdefault(norm(f), set()).add(i)
    places = {norm(n["name"]) for n in rec.get("not_persons", []) if n.get("kind") == "place"}
    claimed: set[int] = set()
    right, wrong, rows = 0, 0, []
    for e in sorted((e for e in entries if e["kind"] == "person"), key=lambda e: -e["mentions"]):
        forms = [e["name"], *e.get("aliases", [])]
        who = set().union(*(owner.get(norm(f), set()) for f in forms))
        ok = len(who) == 1 and not (who & claimed)
        right += ok
        wrong += not ok
        claimed |= who if ok else set()
        rows.append({"name": e["name"], "forms": forms, "ok": ok, "persons": sorted(people[i][1]["name"] for i in who)})
    main = [i for i, (k, _) in enumerate(people) if k == "main"]
    typed_place = [e for e in entries if e["kind"] == "place"]
    forms_of = lambda e: {norm(f) for f in [e["name"], *e.get("aliases", [])]}  # noqa: E731
    missed = [people[i][1]["name"] for i in main if i not in claimed]
    return {"person_entries": right + wrong, "right": right, "wrong_entries": [r for r in rows if not r["ok"]],
            "main_missed": missed,
            "precision": right / max(1, right + wrong),
            "main": len(main), "main_found": len(set(main) & claimed),
            "recall": len(set(main) & claimed) / max(1, len(main)),
            "place_entries": len(typed_place),
            "places_listed": sum(bool(forms_of(e) & places) for e in typed_place),
            "persons_typed_place": sum(bool(any(owner.get(f) for f in forms_of(e))) for e in typed_place)}


def parse_sets(sets: list[str], docs_root: str) -> list[tuple[str, str]]:
    """[(list file, documents' root)] from `--set` values "PATH" or "PATH@ROOT"."""
    return [(v.split("@", 1)[0], v.split("@", 1)[1] if "@" in v else docs_root) for v in sets]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", action="append", help="a cast list file, PATH or PATH@DOCS_ROOT (repeatable; "
                   "default docs/eval/cast/sealed.jsonl)")
    p.add_argument("--home", default="runs/casthome")
    p.add_argument("--docs-root", default=str(ROOT.parent / "shared"))
    p.add_argument("--model", default=str(ROOT / "checkpoints" / "drt-tiny"))
    p.add_argument("--json", action="store_true")
    p.add_argument("--wrong", action="store_true", help="also list each wrong entry and each main character missed")
    args = p.parse_args(argv)

    from ingest import pipeline
    from qa.outline import build
    from qa.summary import dependency_map
    from store.library import Library

    sets = parse_sets(args.set or [str(ROOT / "docs" / "eval" / "cast" / "sealed.jsonl")], args.docs_root)
    recs = [(rec, root) for path, root in sets
            for rec in map(json.loads, filter(str.strip, Path(path).read_text().splitlines()))]
    engine = pipeline.load_engine(args.model)
    books = []
    with Library(args.home) as lib:
        for rec, root in recs:
            res = pipeline.ingest(Path(root) / rec["read_as"], library=lib, engine=engine)
            o = build(lib, res.doc_id, dependency_map(lib, engine, res.doc_id))
            books.append({"doc": rec["doc"], **score_book(o["names"], rec)})
    n = len(books)
    out = {"set": args.set, "books": books,
           "mean_precision": sum(b["precision"] for b in books) / n, "mean_recall": sum(b["recall"] for b in books) / n}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    for b in books:
        print(f"{Path(b['doc']).name:45} main {b['main_found']}/{b['main']} ({b['recall']:.0%})  person entries "
              f"{b['right']}/{b['person_entries']} right ({b['precision']:.0%})  places {b['places_listed']}/"
              f"{b['place_entries']} listed, {b['persons_typed_place']} persons typed place")
        if args.wrong:
            for r in b["wrong_entries"]:
                print(f"    wrong: {' / '.join(r['forms'])} -> {r['persons'] or 'no listed person'}")
            print(f"    main missed: {', '.join(b['main_missed']) or 'none'}")
    print(f"mean: recall {out['mean_recall']:.1%}, precision {out['mean_precision']:.1%}")


if __name__ == "__main__":
    main()
