"""Citations in held-out Stacks chapters: does the model retrieve the statement a passage cites?

`python -m bench.citations [--home DIR] [--chapters stacks/algebraic.tex,...] [--json]`
`python -m bench.citations --papers ../shared/fresh/papers --home DIR`: the same on research papers, each
ingested as its TeX source (its \\inputs inlined: `paper_sources`); a statement's label is the one right
after a numbered definition, lemma, theorem, proposition or corollary as the paper declares them
(`paper_statement_labels`), and `\\cref`, `\\Cref`, `\\autoref` cite as `\\ref` does.

Each chapter (the data split's test chapters by default) is ingested and prefilled by the shipped
model like any document (`drt-reader ingest`); its dependency map is what every chunk retrieved
while it was read. For every `\\ref{X}` whose `\\label{X}` belongs to a definition, lemma,
proposition, theorem or corollary at least MIN_GAP chunks earlier in the same chapter:

    drt       hit when the label's chunk is among what the citing chunk or the next one retrieved
              (retrieval group 0, the one the dependency map shows; "all groups" beside it)
    bm25      SQLite FTS5 BM25 ranking the chunks before the citing one by the citing chunk's text,
              and those before the next by the next chunk's text, labels and refs stripped from
              every text; hit when the label's chunk is in either top k (k = the model's chunk_topk)
    minilm    the same with cosine similarity of frozen MiniLM embeddings
    chance    2k / (number of earlier chunks), averaged

`--label-styles prefix+cref,suffix,...` (with Stacks chapters): each chapter's labels renamed as papers
write them (drt_core.train.tasks.cite.restyle_labels; the styles taken in turn, "+cref" citing with
\\cref), written under HOME/sources: a development measure of other label styles without the papers.

It also checks the outline (`drt-reader outline`): the share of the chapter's statement
environments (counted by `\\begin{...}` in the source) that it lists with a page.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from bisect import bisect_right
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN_GAP = 4
# data/splits.json's test chapters
TEST_CHAPTERS = ("stacks/algebraic.tex", "stacks/categories.tex", "stacks/crystalline.tex", "stacks/pic.tex")
KINDS = ("definition", "lemma", "proposition", "theorem", "corollary")
_LABEL = re.compile(r"\\label\{([^}]+)\}")
_REF = re.compile(r"\\(?:ref|cref|Cref|autoref|Autoref|thmref)\*?\{([^}]+)\}")  # \cref{a,b}: each
_STRIP = re.compile(r"\\(?:label|ref|cref|Cref|autoref|Autoref|thmref|cite)\*?\{[^}]*\}")


def pairs(text: str, chunk_starts: list[int], min_gap: int = MIN_GAP,
          statement_labels: set[str] | None = None) -> list[tuple[int, int, str]]:
    """(citing chunk, label chunk, label) for refs to statements labelled >= min_gap chunks earlier.
    A statement's label: one whose prefix is a statement kind (the Stacks Project's "lemma-...") or,
    for a paper, one of `statement_labels` (`paper_statement_labels`)."""
    at = lambda pos: max(0, bisect_right(chunk_starts, pos) - 1)  # noqa: E731
    labels = {}
    for m in _LABEL.finditer(text):
        ok = m.group(1) in statement_labels if statement_labels is not None else m.group(1).split("-", 1)[0] in KINDS
        if ok and m.group(1) not in labels:
            labels[m.group(1)] = at(m.start())
    out = set()
    for m in _REF.finditer(text):
        for name in m.group(1).split(","):
            t = labels.get(name.strip())
            if t is not None and at(m.start()) - t >= min_gap:
                out.add((at(m.start()), t, name.strip()))
    return sorted(out)


def paper_statement_labels(tex: str) -> set[str]:
    """The labels of a paper's numbered definitions, lemmas, theorems, propositions and corollaries:
    a `\\label` right after the environment's opening, the environments named as the class and the
    `\\newtheorem` declarations print them (bench.paper_statements)."""
    from bench.paper_statements import theorem_envs

    envs, _, _ = theorem_envs(tex)
    kinds = {e for e, (printed, counter) in envs.items()
             if counter is not None and printed.strip().lower().startswith(KINDS)}
    rx = re.compile(r"\\begin\{restatable\}\s*(?:\[[^\]]*\])?\s*\{(?P<renv>[^}]+)\}\s*\{[^}]*\}|"
                    r"\\begin\{(?P<env>[^}]+)\}\s*(?:\[[^\]]*\])?")
    out = set()
    for m in rx.finditer(tex):
        if (m.group("renv") or m.group("env")) in kinds:
            lab = re.match(r"\s*\\label\{([^}]+)\}", tex[m.end():m.end() + 300])
            if lab:
                out.add(lab.group(1))
    return out


def paper_sources(papers: Path, out_dir: Path) -> list[tuple[Path, set[str]]]:
    """Each paper of `papers` (folders with a PDF and its TeX, as bench.paper_statements reads them)
    as one TeX file (its \\inputs inlined, comments and false branches dropped) written under
    `out_dir`, with its statements' labels."""
    from bench.paper_statements import drop_false_branches, flatten, main_tex

    out_dir.mkdir(parents=True, exist_ok=True)
    got = []
    for folder in sorted(p for p in papers.iterdir() if p.is_dir() and any(p.glob("*.tex"))):
        tex = drop_false_branches(flatten(main_tex(folder)))
        path = out_dir / f"{folder.name}.tex"
        if not path.exists() or path.read_text(encoding="utf-8") != tex:
            path.write_text(tex, encoding="utf-8")
        got.append((path, paper_statement_labels(tex)))
    return got


def restyled_sources(paths: list[Path], styles: list[str], out_dir: Path) -> list[tuple[Path, set[str]]]:
    """Each Stacks chapter of `paths` with its labels restyled (styles taken in turn; "STYLE+cref"
    cites with \\cref), written under `out_dir`, with its statements' new labels."""
    from drt_core.train.tasks.cite import restyle_labels, statement_labels

    out_dir.mkdir(parents=True, exist_ok=True)
    got = []
    for i, path in enumerate(paths):
        style, _, cref = styles[i % len(styles)].partition("+")
        tex, renamed = restyle_labels(path.read_text(encoding="utf-8", errors="replace"), style, cref == "cref")
        statements = statement_labels(renamed, KINDS)
        out = out_dir / f"{path.stem}@{style}{'+cref' if cref else ''}.tex"
        if not out.exists() or out.read_text(encoding="utf-8") != tex:
            out.write_text(tex, encoding="utf-8")
        got.append((out, statements))
    return got


def ranked_before(scores, limit: int, k: int) -> list[int]:
    """The k best chunk indices below `limit` by `scores` (a list, higher is better)."""
    return sorted(range(min(limit, len(scores))), key=lambda i: (-scores[i], i))[:k]


def run(home: str, chapters: list[Path], model: str, with_minilm: bool = True,
        labels: dict[Path, set[str]] | None = None, papers: bool = False) -> dict:
    from ingest import pipeline
    from qa.baselines import BM25Index
    from qa.outline import build
    from ingest.parts import document_text
    from qa.summary import dependency_map
    from store.library import Library

    engine = pipeline.load_engine(model)
    k = int(engine.cfg.chunk_topk)
    per, total = [], {"pairs": 0, "drt": 0, "drt_all": 0, "bm25": 0, "minilm": 0, "chance": 0.0,
                      "envs": 0, "listed": 0}
    with Library(home) as lib:
        for path in chapters:
            res = pipeline.ingest(path, library=lib, engine=engine)
            if res.status != "done":
                raise SystemExit(f"prefill of {path} did not finish ({res.status}); run again to resume")
            chunks = lib.chunks(res.doc_id)
            text = document_text(lib, res.doc_id)
            dep = dependency_map(lib, engine, res.doc_id)
            rows = {int(r["chunk"]): r for r in dep}
            ps = pairs(text, [c["char_start"] for c in chunks], statement_labels=(labels or {}).get(path))
            texts = [_STRIP.sub(" ", c["text"]) for c in chunks]
            bm = BM25Index(texts)
            emb = None
            if with_minilm:
                from drt_core.fixed_retriever import embed_texts

                emb = embed_texts(texts, device="cpu").cpu().numpy()
            got = {"pairs": len(ps), "drt": 0, "drt_all": 0, "bm25": 0, "minilm": 0, "chance": 0.0}
            for q, t, _ in ps:
                drt, drt_all = set(), set()
                for c in (q, q + 1):
                    r = rows.get(c)
                    if r is not None:
                        drt |= set(r["retrieved"])
                        drt_all |= {j for g in r.get("groups", []) for j in g["retrieved"]}
                got["drt"] += t in drt
                got["drt_all"] += t in (drt_all or drt)
                lex, sem = set(), set()
                for c in (q, q + 1):
                    if c >= len(chunks):
                        continue
                    s = dict(bm.search(texts[c], len(chunks)))
                    lex |= set(ranked_before([s.get(i, -1e9) for i in range(c)], c, k))
                    if emb is not None:
                        sem |= set(ranked_before((emb[:c] @ emb[c]).tolist(), c, k))
                got["bm25"] += t in lex
                got["minilm"] += t in sem
                got["chance"] += min(1.0, 2 * k / max(1, q))
            src = path.read_text(encoding="utf-8", errors="replace")
            envs = None if papers else sum(src.count(f"\\begin{{{kind}}}") for kind in KINDS)
            o = build(lib, res.doc_id, dep)
            listed = sum(1 for s in o["statements"] if s["kind"] in KINDS and s.get("page"))
            if envs is None:  # a paper: its statement environments as bench.paper_statements counts them
                from bench.paper_statements import expected

                envs = sum(1 for s in expected(path) if s["kind"] in KINDS)
                listed = sum(1 for s in o["statements"] if s["kind"] in KINDS and s.get("page"))
            got |= {"envs": envs, "listed": min(listed, envs)}
            per.append({"chapter": path.name, **got})
            for key in total:
                total[key] += got[key]
    n = max(1, total["pairs"])
    share = {key: round(total[key] / n, 4) for key in ("drt", "drt_all", "bm25", "minilm", "chance")}
    share["outline"] = round(total["listed"] / max(1, total["envs"]), 4)
    return {"k": k, "min_gap": MIN_GAP, "chapters": per, "total": total, "share": share}


def text_table(res: dict) -> str:
    lines = [f"citations to statements >= {res['min_gap']} chunks back; k = {res['k']} per row, rows c and c+1",
             f"{'chapter':22} {'pairs':>5} {'DRT':>7} {'DRT all':>8} {'BM25':>7} {'MiniLM':>7} {'chance':>7} "
             f"{'outline':>9}"]
    for r in res["chapters"] + [{"chapter": "all", **res["total"]}]:
        n = max(1, r["pairs"])
        lines.append(f"{r['chapter']:22} {r['pairs']:5} {100 * r['drt'] / n:6.1f}% {100 * r['drt_all'] / n:7.1f}% "
                     f"{100 * r['bm25'] / n:6.1f}% {100 * r['minilm'] / n:6.1f}% {100 * r['chance'] / n:6.1f}% "
                     f"{r['listed']:>4}/{r['envs']:<4}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.citations", description=__doc__.split("\n")[0])
    ap.add_argument("--home", default=str(ROOT / "tmp" / "citations"), help="library to ingest the chapters into")
    ap.add_argument("--model", default=str(ROOT / "checkpoints" / "drt-tiny"))
    ap.add_argument("--corpora", default=str(ROOT.parent / "shared" / "corpora"))
    ap.add_argument("--chapters", default=None,
                    help="comma-separated paths under --corpora (default: the test split's)")
    ap.add_argument("--papers", default=None, help="a folder of papers (TeX and PDF, as bench.paper_statements "
                    "reads them): measure their TeX sources instead of Stacks chapters")
    ap.add_argument("--label-styles", default=None, help="with Stacks chapters: rename their labels as papers "
                    "do, the styles (prefix, suffix, camel, short, numbered, each optionally +cref) taken in turn")
    ap.add_argument("--no-minilm", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.chapters:
        names = [c.strip() for c in args.chapters.split(",") if c.strip()]
    else:
        names = list(TEST_CHAPTERS)
    labels = None
    if args.papers:
        got = paper_sources(Path(args.papers), Path(args.home) / "sources")
        paths, labels = [p for p, _ in got], dict(got)
    else:
        paths = [Path(args.corpora) / c for c in names]
        if args.label_styles:
            try:
                got = restyled_sources(paths, args.label_styles.split(","), Path(args.home) / "sources")
            except ValueError as e:  # an unknown style
                ap.error(f"--label-styles: {e}")
            paths, labels = [p for p, _ in got], dict(got)
    res = run(args.home, paths, args.model, with_minilm=not args.no_minilm, labels=labels, papers=bool(args.papers))
    print(json.dumps(res) if args.json else text_table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
