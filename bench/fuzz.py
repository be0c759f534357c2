"""`drt-reader bench fuzz --seconds N`: seeded mutation fuzzing of the parse harness.

The harness is the parse worker's own code (`ingest.parse`: sniff, `_parse_mupdf` / `_parse_text`,
`_check_result`) run in ONE long-lived child process under the worker's memory limit, fed byte-wise
mutations (flips, inserts, deletes, splices, truncations, repeated blocks) of small valid PDFs, an
EPUB, TeX and text built here. The declared outcomes are a parsed document or an `IngestError`, or
an exception the worker turns into a one-line DamagedFile (RuntimeError, ValueError, MuPDF's
FzErrorBase). A finding is anything else: another exception type, a message with a newline, the
child dying on a signal, or one input running past --per-input seconds. Each finding's input is
saved under --out. (atheris would add coverage feedback, but only over Python code, and the work
here is MuPDF's C code, which OSS-Fuzz covers with sanitizers; this is the cheap smoke.)

The test suite runs 20 s (tests/reliability/test_fuzz.py); longer runs are this command.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def seeds() -> list[tuple[str, bytes]]:
    """Small valid inputs of every kind, built here (name, bytes)."""
    import pymupdf

    out = []
    doc = pymupdf.open()
    for i in range(3):
        page = doc.new_page(width=300, height=300)
        page.insert_text((20, 40), f"Page {i + 1}: the quick brown fox.", fontsize=10)
    out.append(("plain.pdf", doc.tobytes(garbage=0, deflate=True)))
    out.append(("objstm.pdf", doc.tobytes(garbage=3, deflate=True, use_objstms=1)))
    doc.set_toc([[1, "One", 1], [2, "Two", 2]])
    doc.set_page_labels([{"startpage": 0, "prefix": "", "style": "r", "firstpagenum": 1}])
    out.append(("outline.pdf", doc.tobytes()))
    out.append(("encrypted.pdf", doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")))
    doc.close()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:'
                   'names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="c.opf" '
                   'media-type="application/oebps-package+xml"/></rootfiles></container>')  # fmt: skip
        z.writestr("c.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
                   '<manifest><item id="a" href="a.xhtml" media-type="application/xhtml+xml"/></manifest>'
                   '<spine><itemref idref="a"/></spine></package>')  # fmt: skip
        z.writestr("a.xhtml", '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>Chapter text.</p></body></html>')
    out.append(("book.epub", buf.getvalue()))
    out.append(("paper.tex", b"\\documentclass{article}\\title{T}\\begin{document}"
                             b"\\section{A}Text $x^2$.\\end{document}\n"))
    out.append(("notes.txt", "Plain text, caf\u00e9, \u65e5\u672c.\n\nSecond paragraph.\n".encode()))
    return out


def mutate(data: bytes, rng: random.Random, pool: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        op = rng.randrange(7)
        i = rng.randrange(len(b) + 1) if b else 0
        if op == 0 and b:  # flip bits
            b[min(i, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:  # insert random bytes
            b[i:i] = rng.randbytes(rng.randint(1, 16))
        elif op == 2 and b:  # delete a span
            del b[i : i + rng.randint(1, 64)]
        elif op == 3 and b:  # interesting values
            b[min(i, len(b) - 1)] = rng.choice((0, 0xFF, 0x7F, 0x80, ord("("), ord("<"), ord("0")))
        elif op == 4:  # splice from another seed
            other = rng.choice(pool)
            j = rng.randrange(len(other) + 1)
            b[i:i] = other[j : j + rng.randint(1, 256)]
        elif op == 5 and b:  # truncate
            del b[rng.randrange(len(b)) :]
        elif op == 6 and b:  # repeat a block
            j = rng.randrange(len(b))
            b[j:j] = bytes(b[j : j + rng.randint(1, 32)]) * rng.randint(2, 50)
    return bytes(b)


# -- the child: runs the worker's code on each input -----------------------------------------------


def _child(work: Path | None, memory_mb: int) -> None:
    import pymupdf

    from ingest import parse
    from ingest.errors import IngestError

    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.TOOLS.mupdf_display_warnings(False)
    limits = {"timeout_s": 30, "memory_mb": memory_mb, "max_file_mb": 64, "max_pages": 50, "max_chars": 2_000_000}
    parse._set_limits(limits)
    declared = (RuntimeError, ValueError, MemoryError, pymupdf.mupdf.FzErrorBase)
    for line in sys.stdin:
        path, name = json.loads(line)
        req = {"path": path, "name": name, "password": "u", "limits": limits}
        outcome = "ok"
        try:
            with open(path, "rb") as f:
                kind = parse.sniff(f.read(4096))
            if kind in ("pdf", "epub"):
                result = parse._parse_mupdf(pymupdf, req, kind)
            else:
                import charset_normalizer

                result = parse._parse_text(charset_normalizer, req, kind)
            parse._check_result(result, name, limits)
        except IngestError as e:
            outcome = "error" if "\n" not in str(e) else f"FINDING multi-line message: {e!r}"
        except declared:
            outcome = "declared"
        except Exception as e:  # noqa: BLE001 - that is what is looked for
            outcome = f"FINDING {type(e).__module__}.{type(e).__name__}: {str(e)[:200]}"
        pymupdf.TOOLS.mupdf_warnings(reset=True)
        print(json.dumps(outcome), flush=True)


def run(seconds: float, seed: int, out: Path, per_input_s: float = 10.0, memory_mb: int = 512) -> dict:
    """Fuzz for `seconds`; returns {"execs", "outcomes", "findings": [paths], "restarts"}."""
    import select

    rng = random.Random(seed)
    pool = seeds()
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from bench.fuzz import _child; _child(None, {memory_mb})"

    def start() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, cwd=str(ROOT), text=True)  # fmt: skip

    proc = start()
    stats = {"execs": 0, "outcomes": {}, "findings": [], "restarts": 0, "seed": seed}
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        name, base = rng.choice(pool)
        data = mutate(base, rng, [b for _, b in pool]) if rng.random() > 0.02 else base
        cur = work / f"current{Path(name).suffix}"
        cur.write_bytes(data)
        proc.stdin.write(json.dumps([str(cur), cur.name]) + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], per_input_s)
        line = proc.stdout.readline() if ready else ""
        if line:
            outcome = json.loads(line)
        else:  # died (a signal) or hung
            if not ready:
                proc.kill()
            rc = proc.wait()
            outcome = f"FINDING {'hang' if not ready else f'child died (exit {rc})'}"
            proc = start()
            stats["restarts"] += 1
        stats["execs"] += 1
        key = outcome if not outcome.startswith("FINDING") else "finding"
        stats["outcomes"][key] = stats["outcomes"].get(key, 0) + 1
        if outcome.startswith("FINDING"):
            f = out / f"finding-{stats['execs']:06d}{Path(name).suffix}"
            f.write_bytes(data)
            f.with_suffix(f.suffix + ".txt").write_text(outcome + "\n")
            stats["findings"].append(str(f))
    proc.stdin.close()
    proc.kill()
    proc.wait()
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="drt-reader bench fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=300.0, help="how long to fuzz (default 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("fuzz-out"), help="where findings are saved")
    ap.add_argument("--per-input", type=float, default=10.0, help="seconds one input may take")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    stats = run(a.seconds, a.seed, a.out, per_input_s=a.per_input)
    if a.json:
        print(json.dumps(stats))
    else:
        print(f"{stats['execs']} inputs in {a.seconds:g} s (seed {a.seed}): {stats['outcomes']}; "
              f"{len(stats['findings'])} finding(s){' in ' + str(a.out) if stats['findings'] else ''}")  # fmt: skip
    return 1 if stats["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
