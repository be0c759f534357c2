"""Docs that cannot rot (issue 52, item 8).

(a) Every relative Markdown link `[x](path)` / `[x](path#anchor)` in the READMEs and docs/**/*.md
    points to a file of this repository, and its anchor is one of that file's headings (GitHub's
    slugs). http(s)/mailto links and links inside code blocks or code spans are not checked.
(b) Every repository file that the product code's docstrings, comments and help strings cite
    (a token ending in .md/.py/.json/.sh/.toml, or starting with docs/) exists. The repository
    stands alone: a citation of ../shared is reported too.
(c) The same for the docs' own mentions of docs (`drt_spec.md`, `docs/foo.md`), links or not,
    docs/history/ (dated logs) left out.

Each test fails with the full list of what is missing, one `file:line: ...` a row.
"""

import io
import re
import tokenize
import unicodedata
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- (a) Markdown links and anchors

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", re.I)


def markdown_files() -> list[Path]:
    """README.md, docs/**/*.md, and every other README.md of the repository."""
    files = {ROOT / "README.md", *(ROOT / "docs").rglob("*.md")}
    for d in ("kernels", "research", "tests", "bench", "drt_core", "ingest", "ui", "store"):
        files |= set((ROOT / d).rglob("README.md"))
    return sorted(f for f in files if f.is_file())


def outside_fences(text: str):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for no, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1) == fence:
                fence = None
        elif m:
            fence = m.group(1)
        else:
            yield no, line


def prose_lines(text: str):
    """(line number, line) of the lines outside fenced code blocks, code spans blanked."""
    for no, line in outside_fences(text):
        yield no, CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as rendered, lower-case, punctuation removed except
    `-` and `_`, each space a `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # _emphasis_, not snake_case
    text = "".join(
        c for c in text.lower() if c in " -_" or unicodedata.category(c)[0] in "LNM"
    )
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of a Markdown file: its headings' slugs (a repeated one gets -1, -2, ...) and
    any `<a name="...">`."""
    seen: dict[str, int] = {}
    out = set()
    text = path.read_text(encoding="utf-8")
    for _, line in prose_lines(text):
        out |= set(HTML_ANCHOR.findall(line))
    for _, line in outside_fences(text):  # headings may hold code spans: slug the raw line
        h = HEADING.match(line)
        if not h:
            continue
        s = slug(h.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return frozenset(out)


def link_problems(md: Path) -> list[str]:
    rel = md.relative_to(ROOT)
    problems = []
    for no, line in prose_lines(md.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:, ...
                continue
            path, _, anchor = target.partition("#")
            dest = (md.parent / unquote(path)).resolve() if path else md
            where = f"{rel}:{no}: [{target}]"
            if not dest.is_relative_to(ROOT):
                problems.append(f"{where} leaves the repository")
            elif not dest.exists():
                problems.append(f"{where}: no file {dest.relative_to(ROOT)}")
            elif anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
                problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return problems


def test_slugs_are_githubs():
    assert slug("6. Real questions (issues 29 and 50)") == "6-real-questions-issues-29-and-50"
    assert slug("Capacity (item 7): more tokens, measured") == "capacity-item-7-more-tokens-measured"
    assert slug("`ask --json`: the answer") == "ask---json-the-answer"
    assert slug("Needles (not worse?)") == "needles-not-worse"
    assert slug("snake_case and _emphasis_") == "snake_case-and-emphasis"


def test_markdown_links_and_anchors_resolve():
    files = markdown_files()
    assert ROOT / "README.md" in files and len(files) > 10
    problems = [p for md in files for p in link_problems(md)]
    assert not problems, "broken links in the docs:\n" + "\n".join(problems)


# ---------------------------------------------------------------- (b) files the product code cites

PRODUCT = ["app.py", "cli_io.py", "drt_core", "kernels", "ingest", "ui", "store", "bench"]
CITED = re.compile(
    r"(?<![\w./$<>{}-])(\.{0,2}/?(?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:md|py|json|sh|toml)"
    r"|docs/[\w./-]*[\w/])(?![\w-])"
)
# Files of other projects that comments cite by their own paths (the DRT reference code, the
# Landmark Attention code, runtime files under $DRT_HOME or a checkpoint), never ours to ship.
NOT_OURS = re.compile(
    r"^(ltriton/|model/|eval/|utils/|trainer/|preprocess/|scripts/|config/DRT/)"  # DRT reference
    r"|^lm_benchmark/|^llama_mem\.py$"  # Landmark Attention's reference
)
# a template: OUT/meta.json, bench/NAME.py (DESIGN.md or README.md is a file's name, not one)
PLACEHOLDER = re.compile(r"(^|/)([A-Z][A-Z_]*/|(NAME|FILE|PATH)\.)")


@cache
def repo_files() -> tuple[frozenset[str], frozenset[str]]:
    """(every file's path relative to the root, every file's name): the files a clone has (git's
    tracked files and the new ones it does not ignore), not what a run built here (data/, tmp/)."""
    import subprocess

    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    paths = {p for p in out.splitlines() if p and (ROOT / p).is_file()}
    return frozenset(paths), frozenset(Path(p).name for p in paths)


def product_sources() -> list[Path]:
    out = []
    for name in PRODUCT:
        p = ROOT / name
        out += [p] if p.is_file() else sorted(p.rglob("*.py")) + sorted(p.rglob("*.sh"))
    return [p for p in out if "__pycache__" not in p.parts]


def prose_of(path: Path):
    """(line, text) of each comment and string literal of a Python file (docstrings and help
    strings are string literals); of a shell script, its comments."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".sh":
        for no, line in enumerate(text.splitlines(), 1):
            if "#" in line:
                yield no, line[line.index("#"):]
        return
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING) or tok.type == getattr(
            tokenize, "FSTRING_MIDDLE", -1
        ):
            for i, line in enumerate(tok.string.splitlines()):
                yield tok.start[0] + i, line


def resolves(token: str, source: Path) -> bool:
    paths, names = repo_files()
    token = token.rstrip("/")
    if "/" not in token:  # a bare name: beside the source, or any file of that name
        return (source.parent / token).exists() or token in names
    here = (source.parent / token).resolve()
    if here.is_relative_to(ROOT):
        rel = here.relative_to(ROOT).as_posix()
        if rel in paths or any(p.startswith(rel + "/") for p in paths):
            return True
    t = token.removeprefix("./")
    return t in paths or any(p.startswith(t + "/") for p in paths)


def citation_problems(source: Path, lines=None, docs_only: bool = False) -> list[str]:
    """`file:line: token` for each cited file that is not in the repository. `lines`: (line, text)
    pairs, the source's comments and strings by default. `docs_only`: check only citations of
    documentation (.md, docs/), and of ../shared only its docs (a corpus there is a data source)."""
    rel = source.relative_to(ROOT).as_posix()
    problems = []
    for no, line in prose_of(source) if lines is None else lines:
        if "http://" in line or "https://" in line:
            line = re.sub(r"https?://\S+", " ", line)
        for token in CITED.findall(line):
            token = token.rstrip(".")
            if docs_only and not (token.endswith(".md") or token.startswith("docs/")):
                continue
            if token.startswith("../") and "shared/" in token:
                if not docs_only or "shared/docs/" in token:
                    problems.append(f"{rel}:{no}: {token} (outside the repository)")
            elif token.startswith((".", "/", "tmp/", "data/")) or PLACEHOLDER.search(token):
                # a path a user passes (./x.json, /tmp/..., tmp/...), what `drt-reader data` builds, a template
                continue
            elif "/" not in token and token.endswith(".json"):
                continue  # a bare .json name is a file a run writes or a checkpoint holds
            elif NOT_OURS.search(token) or resolves(token, source):
                continue
            else:
                problems.append(f"{rel}:{no}: {token}")
    return problems


def by_place(problem: str):
    f, no, _ = problem.split(":", 2)
    return f, int(no)


def test_citations_in_the_product_code_exist():
    sources = product_sources()
    assert any(s.name == "app.py" for s in sources) and len(sources) > 40
    problems = sorted({p for s in sources for p in citation_problems(s)}, key=by_place)
    assert not problems, "files cited by the code but not in the repository:\n" + "\n".join(
        problems
    )


def test_docs_cite_docs_that_exist():
    """The docs' own mentions of other docs (`drt_spec.md`, `docs/foo.md`), links or not. The
    dated logs in docs/history/ are records of their day and are not held to today's tree."""
    files = [f for f in markdown_files() if "history" not in f.relative_to(ROOT).parts]
    problems = []
    for md in files:
        lines = enumerate(md.read_text(encoding="utf-8").splitlines(), 1)
        problems += citation_problems(md, lines, docs_only=True)
    assert not problems, "docs cited by the docs but not in the repository:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "line,found",
    [
        ("see DESIGN.md, Contract 2", ["DESIGN.md"]),
        ("(docs/reliability.md §1)", ["docs/reliability.md"]),
        ("(`ltriton/gca.py`, drt_spec.md §4)", ["ltriton/gca.py", "drt_spec.md"]),
        ("checkpoints/drt-tiny/config.json and tests/assets/README.md.", [
            "checkpoints/drt-tiny/config.json", "tests/assets/README.md"]),
        ("docs/history/ and $DRT_HOME/meta.json, <doc>/meta.json", ["docs/history/"]),
        ("a .json suffix, x.jsonl, y.mdx", []),
    ],
)
def test_the_citation_pattern(line, found):
    assert CITED.findall(line) == found
