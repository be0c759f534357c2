"""The batch of step s for rank r: slice r of the global batch of (seed, s), a pure function of s,
so a resume replays the same data and N processes follow one process's loss curve on the global
batch. Plain text windows of the token files, or (`--task`) rows of the fine-tuning tasks
(drt_core.train.tasks) with the chunks forced into the selection and the retrieval targets."""

from __future__ import annotations

from pathlib import Path

import torch

from .options import TrainConfig


class Batches:
    """Batch of step s for rank r: slice r of the global batch of (seed, s). Pure function of s."""

    def __init__(self, cfg: TrainConfig, world: int, rank: int, tokenizer=None):
        from .data import WindowSampler

        self.cfg, self.world, self.rank = cfg, world, rank
        d = Path(cfg.data.dir)
        self.train = WindowSampler(self._mix(d, "train"), cfg.data.seq_len - 1, cfg.run.seed)
        self.val = WindowSampler(self._mix(d, "val"), cfg.data.seq_len - 1, cfg.run.seed + 1)
        self.tokenizer = tokenizer

    def _mix(self, d: Path, split: str):
        parts = []
        for name, wt in (("books", self.cfg.data.book_weight), ("stacks", 1.0 - self.cfg.data.book_weight)):
            p = d / name / f"{split}.bin"
            if wt > 0 and p.exists():
                parts.append((str(p), wt))
        if not parts:
            raise FileNotFoundError(f"no token files under {d}/{{books,stacks}}/{split}.bin; "
                                    "run `drt-reader data`")
        return parts

    def get(self, step: int):
        cfg = self.cfg
        G = cfg.data.batch_size * self.world
        sl = slice(self.rank * cfg.data.batch_size, (self.rank + 1) * cfg.data.batch_size)
        if cfg.tasks.task:
            ids, labels, weights, forced, targets = self._task_batch(step, G)
            return ids[sl], labels[sl], weights[sl], forced[sl], targets[sl]
        ids = self.train.batch(step, G)[sl]
        return ids, ids, None, None, None

    def row_tasks(self, step: int) -> list[str]:
        """The task of each of this rank's rows at `step` ("lm" for plain text rows), as _task_batch
        draws them: the log names them, so per-task losses can be read back from log.jsonl."""
        cfg = self.cfg
        G = cfg.data.batch_size * self.world
        B = cfg.data.batch_size
        return [self._task_of_row(step, i, G) for i in range(self.rank * B, (self.rank + 1) * B)]

    def _task_of_row(self, step: int, i: int, G: int) -> str:
        """Row i of the global batch of G rows: the first round(G * task_frac) rows cycle through
        --task, the rest are plain text ("lm")."""
        cfg = self.cfg
        if not cfg.tasks.task or i >= round(G * cfg.tasks.task_frac):
            return "lm"
        names = cfg.tasks.task.split(",")
        return names[(step + i) % len(names)]

    def stacks_window(self, step: int, i: int):
        """Row i of step `step` from the Stacks training chapters only (the "cite" task)."""
        from .data import WindowSampler

        if not hasattr(self, "_stacks"):
            self._stacks = WindowSampler([(str(Path(self.cfg.data.dir) / "stacks" / "train.bin"), 1.0)],
                                         self.cfg.data.seq_len - 1, self.cfg.run.seed + 7)
        return self._stacks.batch(step, i + 1)[i]

    def task_length(self, step: int) -> int:
        cfg = self.cfg
        frac = min(1.0, step / max(1, cfg.tasks.task_len_ramp))
        return int(cfg.tasks.task_len_min + frac * (cfg.data.seq_len - cfg.tasks.task_len_min))

    def force_prob(self, step: int) -> float:
        cfg = self.cfg
        if cfg.objective.force_retrieval <= 0:
            return 0.0
        if cfg.objective.force_steps <= 0:
            return cfg.objective.force_retrieval
        return cfg.objective.force_retrieval * max(0.0, 1.0 - step / cfg.objective.force_steps)

    def label_words(self) -> list[str]:
        """The words of every statement label name in the Stacks training chapters (--cite-rename's
        vocabulary), read once."""
        if getattr(self, "_label_words", None) is None:
            import numpy as np

            from .tasks.cite import statement_label_words
            from .tasks.common import tokenizer_path_of
            from ..tokenizer import decode

            hay = np.memmap(Path(self.cfg.data.dir) / "stacks" / "train.bin", dtype=np.uint16, mode="r")
            words = set()
            for a in range(0, len(hay), 1 << 20):  # label names cut at a boundary add a few partial words
                words.update(statement_label_words(decode(hay[a:a + (1 << 20)].astype(np.int64).tolist(),
                                                          tokenizer_path_of(self.tokenizer))))
            self._label_words = sorted(words)
        return self._label_words

    def hard_negatives(self):
        """The mined hub passages of --hard-negatives, [H, P] int64 (loaded once)."""
        if getattr(self, "_hubs", None) is None:
            import numpy as np

            from ..prompts import CHUNK_TOKENS

            hubs = np.load(self.cfg.tasks.hard_negatives)
            if hubs.ndim != 2 or hubs.shape[1] < CHUNK_TOKENS or not len(hubs):
                raise SystemExit(f"--hard-negatives {self.cfg.tasks.hard_negatives}: expected "
                                 f"[passages, tokens] with at least {CHUNK_TOKENS} tokens each, "
                                 f"got shape {hubs.shape}")
            self._hubs = hubs.astype(np.int64)
        return self._hubs

    def qa_row(self, length: int, rng) -> dict:
        """A "qa" row (tasks.questions.build_qa_example) from the mined training questions, with
        --qa-boilerplate passages written over chunks of its window that hold neither the passage
        nor the question, so that licence pages and contents lists compete with the gold passage."""
        import numpy as np

        from ..prompts import CHUNK_TOKENS
        from .tasks.common import TooShort, encoder, tokenizer_path_of
        from .tasks.questions import QAItems, build_qa_example

        if getattr(self, "_qa", None) is None:
            self._qa = QAItems(self.cfg.tasks.qa_data or Path(self.cfg.data.dir) / "qa", "train")
            self._qa_enc = encoder(tokenizer_path_of(self.tokenizer))
        for _ in range(16):
            item, doc = self._qa.draw(rng)
            try:
                ex = build_qa_example(doc, item, length, rng, encode=self._qa_enc,
                                      answer_weight=self.cfg.tasks.answer_weight,
                                      margin=self.cfg.tasks.task_margin)
                break
            except TooShort:
                continue
        else:
            raise RuntimeError("no mined question fits a row of this length")
        if self.cfg.tasks.qa_boilerplate:
            if getattr(self, "_boiler", None) is None:
                self._boiler = np.load(self.cfg.tasks.qa_boilerplate).astype(np.int64)
            S1 = CHUNK_TOKENS
            keep = set(ex["targets"]) | {ex["targets"][0] - 1, ex["targets"][-1] + 1}
            n_ctx_chunks = ex["row"]  # chunks before the question's
            free = [c for c in range(n_ctx_chunks) if c not in keep]
            rng.shuffle(free)
            for c in free[: self.cfg.tasks.qa_boilerplate_per_row]:
                row = self._boiler[rng.randrange(len(self._boiler))][:S1]
                ex["ids"][c * S1:(c + 1) * S1] = row
                ex["labels"][c * S1:(c + 1) * S1] = row
        return ex

    def _task_batch(self, step: int, G: int):
        """G rows of `task_length(step)` tokens: task examples (several needle/question pairs each,
        needles at least `task_margin` tokens before the questions), then plain LM rows. forced
        [G, C, 2] holds the chunks forced into the selection (-1 = none; modeling.force_selection),
        targets [G, C, 2] the chunks each row should retrieve (for the retrieval loss)."""
        import random

        from ..prompts import CHUNK_TOKENS
        from .tasks.cite import citation_targets, rename_labels
        from .tasks.common import tokenizer_path_of
        from .tasks.needles import build_training_example, retrieval_targets, splice_passages
        from .tasks.repeat import build_repeat
        from ..tokenizer import PAD_ID

        cfg = self.cfg
        length = self.task_length(step)
        C = -(-length // CHUNK_TOKENS)
        tok_dir = tokenizer_path_of(self.tokenizer)
        hay = self.train.batch(step, G)
        p_force = self.force_prob(step)
        ids = torch.zeros(G, length, dtype=torch.long)
        labels = torch.full((G, length), -100, dtype=torch.long)
        weights = torch.zeros(G, length)
        forced = torch.full((G, C, 2), -1, dtype=torch.long)
        targets = torch.full((G, C, 2), -1, dtype=torch.long)
        for i in range(G):
            rng = random.Random(cfg.run.seed * 1_000_003 + step * 1009 + i)
            name = self._task_of_row(step, i, G)
            if name == "lm":
                ids[i] = labels[i] = hay[i][:length]
                weights[i] = 1.0
            elif name == "cite":  # Stacks text: citing chunks should retrieve the cited statement
                ids[i] = labels[i] = self.stacks_window(step, i)[:length]
                weights[i] = 1.0
                if cfg.tasks.cite_rename and rng.random() < cfg.tasks.cite_rename:
                    ids[i] = torch.from_numpy(rename_labels(ids[i].numpy(), rng, self.label_words(), tok_dir))
                    labels[i] = ids[i].masked_fill(ids[i] == PAD_ID, -100)
                for row, chunks in citation_targets(ids[i].tolist(), tok_dir):
                    if row < C:
                        targets[i, row, : len(chunks)] = torch.tensor(chunks)
            elif name == "repeat":
                ex = build_repeat(hay[i].numpy(), length, rng, copy_weight=cfg.tasks.answer_weight)
                ids[i], labels[i] = torch.from_numpy(ex["ids"]), torch.from_numpy(ex["labels"])
                weights[i] = torch.from_numpy(ex["weights"])
                targets[i] = torch.from_numpy(ex["forced"])
                if p_force > 0:
                    forced[i] = targets[i]
            elif name == "qa":  # a window of a real document, a mined question about it, its answer
                ex = self.qa_row(length, rng)
                ids[i], labels[i] = torch.from_numpy(ex["ids"]), torch.from_numpy(ex["labels"])
                weights[i] = torch.from_numpy(ex["weights"])
                if ex["row"] < C:
                    t = torch.tensor(ex["targets"][:2])
                    targets[i, ex["row"], : len(t)] = t
                    if p_force > 0 and rng.random() < p_force:
                        forced[i, ex["row"]] = targets[i, ex["row"]]
            else:
                ex = build_training_example(
                    name, hay[i].tolist(), self.tokenizer, rng,
                    pairs=cfg.tasks.task_pairs, answer_weight=cfg.tasks.answer_weight, length=length,
                    needle_margin=cfg.tasks.task_margin, split_frac=cfg.tasks.task_split,
                )
                ids[i], labels[i] = torch.from_numpy(ex["ids"]), torch.from_numpy(ex["labels"])
                weights[i] = torch.from_numpy(ex["weights"])
                start = cfg.objective.target_needle_start
                for row, chunks in retrieval_targets(ex["example"], tok_dir, needle_start=start):
                    targets[i, row, : len(chunks[:2])] = torch.tensor(chunks[:2])
                    if p_force > 0 and rng.random() < p_force:
                        forced[i, row] = targets[i, row]
                if cfg.tasks.hard_negatives:  # mined hubs into the haystack (after the targets: needles kept)
                    row_ids = ids[i].numpy()
                    splice_passages(ex["example"], row_ids, self.hard_negatives(),
                                    cfg.tasks.hard_negatives_per_row,
                                    random.Random(f"hubs:{cfg.run.seed}:{step}:{i}"), CHUNK_TOKENS)
                    labels[i] = torch.where(labels[i] == -100, labels[i], ids[i])
        return ids, labels, weights, forced, targets
