"""The cross-encoder's thresholds on a pool of development question sets: abstention and the short answer.

    python -m bench.dev_pool VAL_RUN V5_RUN ...

Each file is `drt-reader --model CK eval qa ... --calibrate --baselines "" --json` run with no threshold
set (CK's cross_encoder.json: `abstain_below` and `short_above` null), so every row carries the best
passage's P, the offered span and its scores. Prints, per set and pooled: the share of answerable and
unanswerable questions below a few thresholds and below the pooled rule's (at most 10% of the
answerable below), the AUC of P; the precision of the short answer at the top-k span scores; and
logistic fits of P with the other signals a row carries (qa.abstain_model.fit_abstention, the
reader's), fitted on all sets but one and read on that one: does any signal beside P separate
unanswerable questions better?
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from qa.abstain_model import fit_abstention

_STOP = set("the a an of to in on at by for with from and or but is was were are be been who what whom whose which "
            "where when why how did does do had has have his her their its he she it they them him this that these "
            "those as into than then there any all not no many much one two name named called".split())


def _words(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP and len(w) > 2}


def coverage(question: str, text: str) -> float:
    """The share of the question's content words (5-letter stems) found in `text`."""
    q = _words(question)
    return len(q & _words(text)) / max(len(q), 1)


def auc(y: np.ndarray, s: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties half."""
    pos, neg = s[y == 1], s[y == 0]
    return float(((pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()) / (len(pos) * len(neg)))


FEATURES = ("logit P", "coverage of the quote", "coverage of its sentence", "reader score", "reader margin",
            "reader prob", "span score", "retrieval z")


def rows_of(path: Path) -> list[dict]:
    out = []
    for r in json.loads(path.read_text())["rows"]:
        x = r["drt"]
        q = x.get("quote") or {}
        rd = q.get("reader") or {}
        p = min(max(float(x["p"]), 1e-4), 1 - 1e-4)
        out.append({"set": path.stem, "answerable": bool(r["answerable"]), "p": float(x["p"]),
                    "span": x.get("span_score"), "offered": bool(x.get("short_raw")),
                    "right": float(x.get("short_right") or 0.0),
                    "f": [np.log(p / (1 - p)), coverage(r["question"], q.get("text") or ""),
                          coverage(r["question"], q.get("sentence") or ""), rd.get("score", 0) / 10,
                          rd.get("margin", 0), rd.get("prob", 0), x.get("span_score") or 0, (x.get("z") or 0) / 10]})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--max-false", type=float, default=0.10)
    args = ap.parse_args(argv)
    rows = [r for f in args.files for r in rows_of(f)]
    sets = list(dict.fromkeys(r["set"] for r in rows))
    ans = sorted(r["p"] for r in rows if r["answerable"])
    t = ans[int(args.max_false * len(ans))] - 1e-6
    print(f"{len(rows)} questions, {len(ans)} answerable; pooled threshold (at most {args.max_false:.0%} of the "
          f"answerable below): {t:.6f}")

    def below(rs, th):
        a = [r["p"] < th for r in rs if r["answerable"]]
        u = [r["p"] < th for r in rs if not r["answerable"]]
        return f"{100 * np.mean(a):.1f}/{100 * np.mean(u):.1f}" if a and u else "-"

    for th in (0.235, 0.3, 0.4, 0.5, t):
        per = " ".join(f"{s} {below([r for r in rows if r['set'] == s], th)}" for s in sets)
        print(f"  below {th:.3f} (answerable/unanswerable %): {per}; pooled {below(rows, th)}")
    y = np.array([r["answerable"] for r in rows], dtype=float)
    print("AUC of P: " + " ".join(f"{s} {auc(y[m], np.array([r['p'] for r in rows])[m]):.3f}"
                                  for s in sets for m in [np.array([r['set'] == s for r in rows])])
          + f"; pooled {auc(y, np.array([r['p'] for r in rows])):.3f}")
    offered = sorted(((r["span"], r["right"]) for r in rows if r["span"] is not None and r["offered"] and r["p"] >= t),
                     key=lambda z: -z[0])
    print(f"short answers offered above the threshold: {len(offered)}; precision at the top k span scores:")
    print("  " + ", ".join(f"top {k} (>= {offered[k - 1][0]:.3f}) {np.mean([o for _, o in offered[:k]]):.2f}"
                           for k in (5, 10, 15, 20, 30, 40, 60, 80, 100) if k <= len(offered)))
    x = np.array([r["f"] for r in rows])
    g = np.array([r["set"] for r in rows])
    print("logistic fits, fitted on the other sets and read on each (AUC, answerable/unanswerable % abstaining "
          "at the fitted sets' 10% rule):")
    for cols in ([0], [0, 1], [0, 2], [0, 3, 4, 5], [0, 6], [0, 7], [0, 1, 3, 5, 7], list(range(len(FEATURES)))):
        out = []
        for s in sets:
            tr, te = g != s, g == s
            fit = fit_abstention(x[tr][:, cols], y[tr], max_false=args.max_false)  # the reader's own fit
            st = ((x[te][:, cols] - fit["mean"]) / fit["std"]) @ np.asarray(fit["w"]) + fit["b"]
            out.append(f"{s} {auc(y[te], st):.2f} {100 * np.mean(st[y[te] == 1] < fit['threshold']):.0f}/"
                       f"{100 * np.mean(st[y[te] == 0] < fit['threshold']):.0f}")
        print(f"  {' + '.join(FEATURES[c] for c in cols)}: " + "; ".join(out))


if __name__ == "__main__":
    main()
