"""`python research/cite_lexical.py`: how much of the lemma case study the label names alone
solve (an upper bound on what a scorer that reads them could reach, not a retriever we ship). On
the same held-out citation pairs as `bench.lemma_retrieval`, chunk c's "query" is the set of names
it \\ref's and chunk e's "key" the names it \\label's; hit@4 over the earlier chunks, scored (1) by
shared exact names, (2) by shared label-name words only (a bag of words: "lemma-flat-base-change"
-> flat, base, change), ties broken towards chunks with more labels."""
import sys

import torch

sys.path.insert(0, ".")
from bench.lemma_retrieval import chapter_pairs, default_chapters  # noqa: E402
from drt_core.tasks import LABEL_RE, REF_RE, chunk_of_char  # noqa: E402
from drt_core.tokenizer import encode_with_offsets  # noqa: E402


def words(names):
    return {w for x in names for w in x.split("-")[1:]}


def main() -> None:
    hits_exact = hits_word = n = 0
    for path in default_chapters():
        text = path.read_text(encoding="utf-8", errors="replace")
        ids, offsets = encode_with_offsets(text)
        starts = [s for s, _ in offsets]
        C = len(ids) // 63 + 1
        refs, labs = [set() for _ in range(C)], [set() for _ in range(C)]
        for regex, sets in ((REF_RE, refs), (LABEL_RE, labs)):
            for m in regex.finditer(text):
                sets[chunk_of_char(starts, m.start())].add(m.group(1))
        for c, t, _ in chapter_pairs(text, offsets):
            n += 1
            exact = torch.tensor([len(refs[c] & labs[e]) + 1e-3 * len(words(refs[c]) & words(labs[e]))
                                  for e in range(c)])
            bag = torch.tensor([len(words(refs[c]) & words(labs[e])) + 1e-3 * len(labs[e]) for e in range(c)])
            hits_exact += int(t in exact.topk(min(4, c)).indices.tolist())
            hits_word += int(t in bag.topk(min(4, c)).indices.tolist())
    print(f"{n} pairs: exact label names hit@4 {hits_exact / n:.3f}; label-name words only {hits_word / n:.3f}")


if __name__ == "__main__":
    main()
