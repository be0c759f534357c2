"""What the citation probes (cite_overfit.py, cite_lexpool.py) share: seeded 8K-token windows of the
Stacks training chapters with citation targets, run through the frozen lower layers once, and
hit@k of a row's selection."""
import numpy as np
import torch

from drt_core.tasks import citation_targets


def citation_windows(model, n: int, length: int = 63 * 128, min_targets: int = 5, seed: int = 0):
    """n windows as (lower-layer states x [1, C, S, D], token embeddings [1, C, S, D], targets
    T [1, C, 2] (-1 = none)); windows with fewer than min_targets citing rows are skipped."""
    cfg = model.config
    S, D = cfg.chunk_size, cfg.hidden_size
    hay = np.memmap("data/stacks/train.bin", dtype=np.uint16, mode="r")
    rng, wins = np.random.default_rng(seed), []
    while len(wins) < n:
        s = int(rng.integers(0, len(hay) - length))
        ids = torch.from_numpy(hay[s:s + length].astype(np.int64))[None]
        tg = citation_targets(ids[0].tolist())
        if len(tg) < min_targets:
            continue
        C = length // cfg.chunk_tokens
        T = torch.full((1, C, 2), -1, dtype=torch.long)
        for r, ch in tg:
            T[0, r, :len(ch)] = torch.tensor(ch)
        with torch.no_grad():
            aug, C = model.augment(ids)
            x, emb = model.lower_states(aug)
        wins.append((x.view(1, C, S, D), emb.view(1, C, S, D), T))
    return wins


def hits(scores: torch.Tensor, T: torch.Tensor, k: int = 4) -> list[bool]:
    """For each row with a target: is one of its targets among the row's top-k scores [1, C, C]?"""
    top = scores[0].topk(k, -1).indices
    rows = (T[0] >= 0).any(-1).nonzero().flatten()
    return [bool(set(top[r].tolist()) & set(T[0, r][T[0, r] >= 0].tolist())) for r in rows]
