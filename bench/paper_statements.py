"""Numbered statements of real papers: does the outline find, in each paper's PDF, the statements its TeX numbers?

`python -m bench.paper_statements [--papers DIR] [--home DIR] [--model DIR] [--json] [--show-missing] [--ask]`

DIR (default `../shared/fresh/papers`) holds one folder per paper: the PDF and the TeX source it was
compiled from (the main file, the one with `\\documentclass`, and what it `\\input`s). For each paper:

expected  the numbered definitions, lemmas, theorems, propositions, corollaries, remarks and examples
          (OLD_KINDS) and claims, invariants, observations, facts, conjectures, assumptions, hypotheses,
          notations, problems and questions (NEW_KINDS, listed by the outline since 2026-12-07) of the TeX, each
          with the number LaTeX prints, worked out from the source as LaTeX does:
          comments and `\\iffalse` / false `\\newif` branches dropped, `\\input` (and macros defined as
          `\\input`) inlined; the environments the class defines (LIPIcs: one counter `theorem` for
          all, within the section with `numberwithinsect`, the 2016 class printing the section in
          arabic even in the appendix; LLNCS: one counter with `envcountsame`) and those declared by
          `\\newtheorem`, `\\spnewtheorem` and `\\declaretheorem` (a shared counter `[other]`, a
          section counter `[section]`, starred ones unnumbered); `\\begin{restatable}{env}{name}`
          counts as `env`, its restatement `\\name*` prints the same number and is no new statement;
          every numbered environment on a shared counter (notes, exercises too) steps it.
found     the PDF ingested into a scratch library by the shipped model (`drt-reader ingest`) and
          its outline's statements (`qa.outline.document_statements`, what `drt-reader outline` lists).

`--ask` also asks "What is Lemma 3?" of every statement (`drt-reader ask`, minutes): the share of
answers that quote the outline's statement, and of those whose evidence (what the model retrieved for
the question) holds a chunk of it.

A statement is found when the outline lists its kind and number; found/expected counts each
(kind, number) at most as often as the TeX numbers it (the 2016 LIPIcs class prints the appendix's
"Theorem 1.1" again). "extra" are the outline's (kind, number) the TeX never prints (a restatement
of a numbered one is not extra). "old" and "new": found/expected of OLD_KINDS and of NEW_KINDS apart,
so the figure before the new kinds stays comparable.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OLD_KINDS = ("definition", "lemma", "theorem", "proposition", "corollary", "remark", "example")
NEW_KINDS = ("claim", "invariant", "observation", "fact", "conjecture", "assumption", "hypothesis", "notation",
             "problem", "question")
KINDS = OLD_KINDS + NEW_KINDS

# environments a class defines: {env: (printed name, counter it steps)}; "theorem" is their shared counter
_LIPICS = {e: (e.capitalize(), "theorem") for e in ("theorem", "lemma", "corollary", "proposition", "exercise",
                                                    "definition", "example", "note", "remark", "claim")}
_LLNCS = {e: (e.capitalize(), e) for e in ("theorem", "case", "conjecture", "corollary", "definition", "example",
                                           "exercise", "lemma", "note", "problem", "property", "proposition",
                                           "question", "solution", "remark")}

_INPUT = r"\\(?:input|include|subfile)\s*\{([^}]+)\}"


def strip_comments(src: str) -> str:
    """TeX without its comments (an unescaped % to the end of the line, the newline kept)."""
    return re.sub(r"(?<!\\)%[^\n]*", "", src)


def flatten(path: Path, depth: int = 0) -> str:
    """The main file with every `\\input` inlined (comments stripped), as TeX reads it."""
    src = strip_comments(path.read_text(encoding="utf-8", errors="replace"))
    aliases = re.findall(r"\\(?:newcommand|renewcommand|def)\s*\{?\\(\w+)\}?\s*\{\\input\}", src)
    rx = re.compile(_INPUT if not aliases else
                    r"\\(?:input|include|subfile|" + "|".join(map(re.escape, aliases)) + r")\s*\{([^}]+)\}")

    def inline(m: re.Match) -> str:
        name = m.group(1).strip()
        for cand in (path.parent / name, path.parent / f"{name}.tex", path.parent.parent / name,
                     path.parent.parent / f"{name}.tex"):
            if cand.is_file() and depth < 8:
                return flatten(cand, depth + 1) if cand.suffix in (".tex", "") else ""
        root = _root_dir(path)
        for cand in (root / name, root / f"{name}.tex"):
            if cand.is_file() and depth < 8:
                return flatten(cand, depth + 1)
        return ""

    return rx.sub(inline, src)


def _root_dir(path: Path) -> Path:
    d = path.parent
    while d != d.parent and not any(d.glob("*.pdf")):
        d = d.parent
    return d


_COND = re.compile(r"(?<!\\newif)(?<!\\newif )\\(if[a-zA-Z]*)|\\else\b|\\fi\b")


def drop_false_branches(src: str) -> str:
    """Drop `\\iffalse ... \\fi` and the true branch of a `\\newif` switch set false (`\\appendixfalse`)."""
    switches = set(re.findall(r"\\newif\s*\\if(\w+)", src))
    false = {s for s in switches if re.search(rf"\\{s}false\b", src) and not re.search(rf"\\{s}true\b", src)}
    conds = {"iffalse"} | {f"if{s}" for s in false}
    known = {"if", "ifx", "ifnum", "ifdim", "ifdefined", "ifcsname", "ifcat", "ifcase", "ifodd", "iffalse", "iftrue",
             "ifmmode", "ifvmode", "ifhmode"} | {f"if{s}" for s in switches}
    out, pos, stack = [], 0, []  # stack of (cond, dropping)
    for m in _COND.finditer(src):
        tok = m.group(1) or m.group(0)[1:]
        if tok.startswith("if") and tok not in known:
            continue  # \iff, \ifthenelse: no conditional
        dropping = any(d for _, d in stack)
        if not dropping:
            out.append(src[pos:m.start()])
        pos = m.end()
        if tok.startswith("if"):
            stack.append((tok, tok in conds))
        elif tok == "else" and stack:
            c, d = stack[-1]
            stack[-1] = (c, (not d) if c in conds else d)
        elif tok == "fi" and stack:
            stack.pop()
    if not any(d for _, d in stack):
        out.append(src[pos:])
    return "".join(out)


def theorem_envs(src: str) -> tuple[dict[str, tuple[str, str | None]], dict[str, str | None], str]:
    """({env: (printed name, counter or None when unnumbered)}, {counter: the counter it resets with
    ("section") or None}, the section number style: "arabic" or "thesection")."""
    cls = re.search(r"\\documentclass\s*(?:\[([^\]]*)\])?\s*\{([^}]+)\}", src)
    opts = {o.strip() for o in (cls.group(1) or "").split(",")} if cls else set()
    name = cls.group(2).strip() if cls else ""
    envs: dict[str, tuple[str, str | None]] = {}
    within: dict[str, str | None] = {}
    style = "thesection"
    if name.startswith("lipics"):
        envs |= {e: (n, c) for e, (n, c) in _LIPICS.items()}
        within["theorem"] = "section" if "numberwithinsect" in opts else None
        style = "arabic" if name == "lipics" else "thesection"  # the 2016 class: \arabic{section}.N
    elif name == "llncs":
        same = "envcountsame" in opts
        envs |= {e: (n, "theorem" if same else c) for e, (n, c) in _LLNCS.items()}
        sect = "envcountsect" in opts
        for _, c in envs.values():
            within[c] = "section" if sect else None
    for m in re.finditer(r"\\newtheorem(\*)?\s*\{([^}]+)\}\s*(?:\[([^\]]+)\])?\s*\{([^}]*)\}\s*(?:\[([^\]]+)\])?", src):
        star, env, shared, printed, sect = m.groups()
        counter = None if star else (shared or env)
        envs[env] = (printed, counter)
        if counter and not shared:
            within[counter] = sect
    for m in re.finditer(r"\\spnewtheorem(\*)?\s*\{([^}]+)\}\s*(?:\[([^\]]+)\])?\s*\{([^}]*)\}"
                         r"\s*(?:\[([^\]]+)\])?", src):
        star, env, shared, printed, sect = m.groups()
        counter = None if star else (shared or env)
        envs[env] = (printed, counter)
        if counter and not shared:
            within[counter] = sect
    for m in re.finditer(r"\\declaretheorem\s*(?:\[([^\]]*)\])?\s*\{([^}]+)\}", src):
        keys = dict(kv.split("=", 1) if "=" in kv else (kv, "") for kv in
                    (x.strip() for x in (m.group(1) or "").split(",")) if kv)
        env = m.group(2).strip()
        printed = keys.get("name", env.capitalize()).strip("{} ")
        numbered = keys.get("numbered", "yes").strip() != "no"
        counter = (keys.get("sibling") or keys.get("sharenumber") or env).strip() if numbered else None
        envs[env] = (printed, counter)
        if counter == env:
            within[env] = (keys.get("numberwithin") or keys.get("parent") or "").strip() or None
    return envs, within, style


def _kind(printed: str) -> str | None:
    low = printed.strip().lower()
    return next((k for k in KINDS if low.startswith(k)), None)


def expected(main: Path) -> list[dict]:
    """The TeX's numbered statements in order: {kind, number, env, label, title}."""
    src = drop_false_branches(flatten(main))
    envs, within, style = theorem_envs(src)
    body = src[src.find("\\begin{document}"):] if "\\begin{document}" in src else src
    counters: Counter = Counter()
    section, appendix = 0, False
    out = []
    rx = re.compile(r"\\section\s*(\*)?\s*(?:\[[^\]]*\])?\s*\{|\\appendix\b|"
                    r"\\begin\{restatable\}\s*(?:\[(?P<rtitle>[^\]]*)\])?\s*\{(?P<renv>[^}]+)\}\s*\{[^}]*\}|"
                    r"\\begin\{(?P<env>[^}]+)\}\s*(?:\[(?P<title>[^\]]*)\])?")
    for m in rx.finditer(body):
        tok = m.group(0)
        if tok.startswith("\\section"):
            if not m.group(1):
                section += 1
                for c, w in within.items():
                    if w == "section":
                        counters[c] = 0
            continue
        if tok.startswith("\\appendix"):
            section, appendix = 0, True
            continue
        env = m.group("renv") or m.group("env")
        if env not in envs:
            continue
        printed, counter = envs[env]
        if counter is None:
            continue  # unnumbered (starred) environments
        counters[counter] += 1
        n = str(counters[counter])
        if within.get(counter) == "section":
            sec = str(section) if style == "arabic" or not appendix else chr(ord("A") + section - 1)
            n = f"{sec}.{n}"
        kind = _kind(printed)
        if kind is None:
            continue  # notes, exercises, cases: they step the shared counter, the outline does not list them
        lab = re.match(r"\s*\\label\{([^}]+)\}", body[m.end():m.end() + 200])
        out.append({"kind": kind, "number": n, "env": env, "label": lab.group(1) if lab else "",
                    "title": (m.group("rtitle") or m.group("title") or "").strip()})
    return out


def main_tex(folder: Path) -> Path:
    """The folder's main TeX file: the one with \\documentclass (the first by name)."""
    for p in sorted(folder.glob("*.tex")):
        if "\\documentclass" in strip_comments(p.read_text(encoding="utf-8", errors="replace")):
            return p
    raise SystemExit(f"{folder}: no .tex file with \\documentclass")


def compare(exp: list[dict], got: list[dict]) -> dict:
    """found/expected per (kind, number), each counted at most as often as the TeX numbers it."""
    want = Counter((s["kind"], s["number"]) for s in exp)
    have = Counter((s["kind"], s["number"]) for s in got if s["kind"] in KINDS)
    found = sum(min(n, have[k]) for k, n in want.items())
    missing = sorted((k for k, n in want.items() if have[k] < n), key=_order)
    extra = sorted((k for k in have if k not in want), key=_order)
    def tally(kinds) -> list[int]:
        return [sum(min(n, have[k]) for k, n in want.items() if k[0] in kinds),
                sum(n for k, n in want.items() if k[0] in kinds)]

    by_kind = {kind: tally((kind,)) for kind in KINDS if tally((kind,))[1]}
    return {"expected": sum(want.values()), "found": found, "missing": [" ".join(k) for k in missing],
            "extra": [" ".join(k) for k in extra], "by_kind": by_kind, "old": tally(OLD_KINDS),
            "new": tally(NEW_KINDS)}


def _order(k: tuple[str, str]) -> tuple:
    return tuple(int(x) if x.isdigit() else ord(x[0]) for x in k[1].split(".")), k[0]


def ask_statements(lib, engine, doc_id: str, exp: list[dict]) -> dict:
    """Ask "What is Lemma 3?" of every expected statement: how many answers quote the outline's
    statement, and for how many the model's evidence (what it retrieved for the question: its
    selection with BM25's and the cross-encoder's terms, never the outline) holds a chunk of it;
    "old" and "new": the same for OLD_KINDS and NEW_KINDS apart."""
    from qa.ask import ask
    from qa.outline import document_statements, find_statement

    stmts = document_statements(lib, doc_id)
    keys = ("asked", "quoted", "evidence_holds", "evidence_first")
    tally = {group: dict.fromkeys(keys, 0) for group in ("all", "old", "new")}
    for key in dict.fromkeys((s["kind"], s["number"]) for s in exp):
        name = f"{key[0].capitalize()} {key[1]}"
        res = ask(lib, engine, doc_id, f"What is {name}?", max_new_tokens=4, causal=False)
        i = find_statement(stmts, *key)
        ev = [int(e["chunk"]) for e in res["evidence"]]
        got = {"asked": 1, "quoted": (res.get("quote") or {}).get("statement") == name,
               "evidence_holds": i is not None and bool(set(ev) & set(stmts[i]["chunks"])),
               "evidence_first": i is not None and bool(ev) and ev[0] in stmts[i]["chunks"]}
        for group in ("all", "new" if key[0] in NEW_KINDS else "old"):
            for k in keys:
                tally[group][k] += int(got[k])
    return {**tally["all"], "old": tally["old"], "new": tally["new"]}


def run(papers: Path, home: str, model: str, ask: bool = False) -> list[dict]:
    from ingest import pipeline
    from qa.outline import document_statements
    from store.library import Library

    engine = pipeline.load_engine(model)
    rows = []
    with Library(home) as lib:
        for folder in sorted(p for p in papers.iterdir() if p.is_dir()):
            pdfs = sorted(folder.glob("*.pdf"))
            if not pdfs:
                continue
            tex = main_tex(folder)
            exp = expected(tex)
            res = pipeline.ingest(pdfs[0], library=lib, engine=engine)
            if res.status != "done":
                raise SystemExit(f"prefill of {pdfs[0]} did not finish ({res.status}); run again to resume")
            got = document_statements(lib, res.doc_id)
            rows.append({"paper": folder.name, "pdf": pdfs[0].name, "tex": tex.name, "doc_id": res.doc_id,
                         "listed": len(got), **compare(exp, got)})
            if ask:
                rows[-1]["ask"] = ask_statements(lib, engine, res.doc_id, exp)
    return rows


def text_table(rows: list[dict], show_missing: bool = False) -> str:
    lines = [f"{'paper':42} {'found':>5} / {'expected':<8} {'share':>6}  {'extra':>5}  {'old':>7}  {'new':>7}  by kind"]
    for r in rows:
        kinds = ", ".join(f"{k} {a}/{b}" for k, (a, b) in r["by_kind"].items())
        lines.append(f"{r['paper']:42} {r['found']:5} / {r['expected']:<8} "
                     f"{100 * r['found'] / max(1, r['expected']):5.1f}%  {len(r['extra']):5}  "
                     f"{'/'.join(map(str, r['old'])):>7}  {'/'.join(map(str, r['new'])):>7}  {kinds}")
        if "ask" in r:
            for a, which in ((r["ask"]["old"], "old"), (r["ask"]["new"], "new")):
                n = max(1, a["asked"])
                lines.append(f"    ask \"What is X?\" of {a['asked']} ({which} kinds): "
                             f"quoted from the outline {100 * a['quoted'] / n:.1f}%, "
                             f"the model's evidence holds it {100 * a['evidence_holds'] / n:.1f}% "
                             f"(first {100 * a['evidence_first'] / n:.1f}%)")
        if show_missing:
            lines.append(f"    missing: {', '.join(r['missing']) or '-'}")
            lines.append(f"    extra:   {', '.join(r['extra']) or '-'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.paper_statements", description=__doc__.split("\n")[0])
    ap.add_argument("--papers", default=str(ROOT.parent / "shared" / "fresh" / "papers"),
                    help="a folder of paper folders (each: the PDF and its TeX source)")
    ap.add_argument("--home", default=str(ROOT / "tmp" / "paper_statements"), help="scratch library to ingest into")
    ap.add_argument("--model", default=str(ROOT / "checkpoints" / "drt-tiny"))
    ap.add_argument("--show-missing", action="store_true", help="list the statements missed and the extra ones")
    ap.add_argument("--ask", action="store_true", help="also ask \"What is X?\" of every statement (minutes)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = run(Path(args.papers), args.home, args.model, ask=args.ask)
    print(json.dumps(rows) if args.json else text_table(rows, args.show_missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
