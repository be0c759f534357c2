"""The titled-name test of `ask` (qa.abstain.missing_names), measured on the documents' own text.

    python -m bench.name_abstain docs/eval/val/qa_val_written.jsonl docs/eval/qa_sealed.jsonl \
        docs/eval/qa_sealed_v2.jsonl --docs-root ../shared

For each question set's row whose document is under --docs-root: does the question give a titled
name (qa.abstain.names), and does the test fire in the question's own document (a false abstention
when the question is answerable)? Then each such question is asked of every OTHER document of the
sets, as `ask --all` does: how often the word test alone (qa.abstain.missing_words + decisive, with
the shipped common-word list) and the word and name tests together abstain there. The text is the
source file's (a PDF's text layer through pymupdf), not a library's chunks: the same words.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from qa.abstain import DocVocabulary, decisive, load_common_words, missing_names, missing_words, names


def _text(path: Path) -> str:
    if path.suffix.lower() == ".pdf":
        import pymupdf

        with pymupdf.open(path) as doc:
            return "\n".join(page.get_text() for page in doc)
    return path.read_text(encoding="utf-8", errors="replace")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.name_abstain")
    ap.add_argument("sets", nargs="+", help="question sets (JSONL with doc, question, answerable)")
    ap.add_argument("--docs-root", default="../shared")
    ap.add_argument("--model", default="checkpoints/drt-tiny", help="holds the common-word list")
    a = ap.parse_args(argv)
    common = load_common_words(a.model) or frozenset()
    rows = [json.loads(line) for f in a.sets for line in Path(f).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if (Path(a.docs_root) / r["doc"]).exists()]
    vocab = {d: DocVocabulary([_text(Path(a.docs_root) / d)]) for d in sorted({r["doc"] for r in rows})}

    def abstains(q: str, v: DocVocabulary, with_names: bool) -> bool:
        mw = missing_words(q, v, common)
        return (bool(mw) and decisive(q, mw)) or (with_names and bool(missing_names(q, v)))

    named = [r for r in rows if names(r["question"])]
    own = {k: [r for r in named if r.get("answerable", True) is k] for k in (True, False)}
    fired_own = {k: sum(bool(missing_names(r["question"], vocab[r["doc"]])) for r in own[k]) for k in own}
    pairs = [(r["question"], d) for r in named for d in vocab if d != r["doc"]]
    words_only = sum(abstains(q, vocab[d], False) for q, d in pairs)
    both = sum(abstains(q, vocab[d], True) for q, d in pairs)
    print(json.dumps({"documents": len(vocab), "questions": len(rows), "with_a_titled_name": len(named),
                      "fired_in_own_document": {"answerable": f"{fired_own[True]}/{len(own[True])}",
                                                "unanswerable": f"{fired_own[False]}/{len(own[False])}"},
                      "asked_of_other_documents": len(pairs),
                      "abstain_there_words_only": round(words_only / max(1, len(pairs)), 4),
                      "abstain_there_words_and_names": round(both / max(1, len(pairs)), 4)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
