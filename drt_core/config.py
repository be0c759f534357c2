"""The configuration of the Differentiable Retrieval Transformer and its baselines: its fields, their
checks, the presets, and the two classes that hold them: `DRTConfig` (drt_core/hf_config.py, the
transformers PretrainedConfig of the fixed contract) and `RunConfig` (here: a checkpoint's config.json
read without importing transformers, what the engine serves with).

One config for all architectures of this repository, so they share layers and checkpoint
format (`arch` selects):
    "drt"              the DRT of docs/spec.md §1-§3 (landmarks, chunk encoder, causal retrieval, GCA)
    "sliding_window"   a plain ALiBi sliding-window LM (the paper's "Base LM +2 layers")
    "full_attention"   a causal full-attention LM with RoPE (what people use today)
    "fixed_retriever"  RPT-style: DRT's chunk memory and GCA, but chunks chosen by a frozen
                       sentence embedder (MiniLM) instead of the learned landmark scores
    "landmark"         Landmark Attention (Mohtashami & Jaggi 2023): the sliding_window stack (ALiBi,
                       no window) with a landmark token after every chunk_size - 1 tokens, trained
                       with the grouped softmax; at inference each token retrieves the chunk_topk
                       blocks its landmark scores rank first, per head and per layer (landmark.py)

Every field is declared once, with its default and what it is, in one of the tables below:
ARCHITECTURE (the paper's), IMPLEMENTATION (the baselines' and the implementation's choices, no
effect on a DRT's numbers), PAPER_FLAVOUR (our extensions at their "off" values: the paper's model)
and SPECIAL_IDS. DRTConfig takes those keys and no others: a typo is refused with the list of valid
keys, and a retired extension (RETIRED) loads only at its "off" value.
"""

from __future__ import annotations

import json
from pathlib import Path

ARCHS = ("drt", "sliding_window", "full_attention", "fixed_retriever", "landmark")

# -- 1. the paper's architecture (docs/spec.md §1-§3) -------------------------------------------
ARCHITECTURE: dict = dict(
    arch="drt",
    vocab_size=8192,
    hidden_size=192,
    num_heads=3,
    intermediate_size=512,  # SwiGLU hidden size (~8/3 D, rounded to a multiple of 16)
    lower_layers=2,
    encoder_layers=1,
    upper_groups=(2,),  # layers per retrieval group; G = len
    window=256,  # self-attention sees itself plus `window` previous (augmented) positions
    chunk_size=64,  # 63 real tokens + 1 landmark
    chunk_topk=4,  # chunks retrieved per query chunk
    # +1 in each retrieved chunk's softmax: the reference code's zeroed landmark slot
    # (docs/spec.md §3.3), so the paper's model; False is plain softmax, an ablation
    softmax_one=True,
    rms_eps=1e-5,
    rope_theta=10000.0,
    init_std=0.02,
)

# -- 2. the baselines and the implementation ----------------------------------------------------
IMPLEMENTATION: dict = dict(
    baseline_layers=None,  # depth of sliding_window / full_attention baselines
    retriever_temperature=0.05,  # fixed_retriever: softmax temperature of cosine scores
    gca_backend="auto",  # "auto" | "reference" | "triton" (kernels.gca); same numbers
)

# -- 3. our extensions, at their "off" values: the paper's model (docs/spec.md) ------------------
# Each is off by default too, so a checkpoint's config.json that lacks one loads as before; the
# `paper` preset names them all, so it stays the paper's model whatever a later default says. What
# each does and why, here; the measurements that keep each, with their sources: docs/model.md.
PAPER_FLAVOUR: dict = dict(
    # The copy head: a pointer over the retrieved chunks' tokens, mixed into the LM output by a
    # learned gate (pointer-generator; copy_head.py). Why: copying through GCA did not emerge, even
    # with the needle's chunk forced into the selection; the pointer learned it.
    copy_head=False,
    # The pointer matches the last two tokens, and its gate sees the token it would copy. Why: the
    # pointer alone lost its place after a repeated digit or past the number's end.
    copy_bigram=False,
    # One pointer softmax over all retrieved slots, log fusion weight as each chunk's prior,
    # instead of one per chunk scaled by its weight (not better alone; the shipped model has it).
    copy_global=False,
    # > 0: the pointer and its gate read exact suffix-match lengths (capped here) between the text
    # before the query and before each slot. Why: multi-key answers copied a distractor's value,
    # the key reaching the pointer only through the final state.
    copy_match=0,
    # > 0: slots up to this many after an n-gram that the question or answer so far holds get
    # learned biases, so the pointer looks a value up by its key (multi-key needles).
    copy_recall=0,
    # > 0: those recall biases also read how long ago the n-gram was written (log2 buckets), to
    # tell hop 1's value from hop 2's in 2-hop answers (checkpoints/drt-tiny-2hop).
    copy_recall_age=0,
    # > 0: the pointer's learned scores are soft-capped at +-this (c tanh(s / c)), so the exact
    # biases can outweigh them: trained, the learned scores outgrew them (checkpoints/drt-tiny-2hop).
    copy_qk_cap=0.0,
    # The pointer also reads this many slots of the chunk after each retrieved one, so a value cut
    # by a chunk boundary is copied whole.
    copy_span=0,
    # ... and this many last slots of the chunk before each, so a chunk's first slots have their
    # words before them (needles split at a chunk boundary).
    copy_lead=0,
    # "all": with G >= 2 groups the pointer reads every group's selection (2-hop answers);
    # "last": the last group's.
    copy_groups="last",
    # > 0: landmark keys from a separate encoder of this many layers, not the memory's, so retrieval
    # trains without moving the K/V the upper layers read. 0: keys from the chunk encoder.
    key_encoder=0,
    # > 0: that key encoder also reads this many last slots of the chunk before. Why: needles
    # written across a chunk boundary, the value's chunk holding no word of the question, were missed.
    key_context=0,
    # > 0: landmark queries also read a separate encoder of this many layers over their own chunk,
    # so the query reads the whole chunk it closes (with key_encoder).
    query_encoder=0,
    # Retrieval scores add a learned weighting of the exact tokens two chunks share (lexical.py).
    # Why: on real questions the dense scores alone seldom ranked the gold passage in their top 4,
    # where BM25 often did.
    lexical=False,
    # > 0: and adds the shared tokens' idf in the document so far, times a learned scale starting
    # here. Why: weights learned on the training corpora cannot know that a name is on every page
    # of this book; the document's own idf does.
    lexical_doc_df=0.0,
    # > 0: and adds, per WHOLE WORD the two chunks share (case folded, however the BPE cut it:
    # words.py), the word's idf in the document so far, times a learned scale starting here. Why:
    # the 8,192-piece BPE cuts a name into common pieces ("Darcy" -> "ĠD" "ar" "cy"), so the token
    # terms match names through pieces found all over a book.
    lexical_words=0.0,
    # on (needs lexical_words): a word cut by a chunk boundary ("The pass|key is 84606") counts whole
    # in the chunk where it ends (words.word_ids' carry), not as two fragments that match no
    # question word.
    lexical_word_carry=False,
    # > 0 (needs lexical_words): a shared word also weighs gates_g * gq * gk * its idf in the document
    # so far, gq and gk learned readouts (a sigmoid of a linear map) of the lower-layer state at the
    # word's last token in the query chunk and in the key chunk, gates_g a learned scale starting here.
    # Why: which words of a passage name what it relies on depends on their context ("by Lemma
    # \ref{flat-base-change}"), which an idf alone cannot see: trained on the training split's \ref
    # links, the citing chunk's top 4 hold the cited statement about twice as often (RESULTS §6).
    lexical_gates=0.0,
    # Token ids that every stream begins with, before its first real token: the self-attention
    # windows of every layer hold them at positions 0..P-1 (the batch forward prepends them to each
    # row, the engine to each new state, so training, the store and every measurement see the same
    # stream). They belong to no chunk: never retrieved, no landmark, no GCA, not counted in a
    # state's tokens. Why: pretraining rows begin mid-text, where a row's first positions serve as
    # the lower layers' attention sink, so a needle written in a stream's first tokens was not
    # retrieved; a few tokens of text before it were enough.
    stream_preamble=None,
    # > 0: at question time, every selection a question's generation makes (each landmark of its
    # fork, in every group) adds bm25_weight x the question's BM25 score of each document chunk
    # (bm25.py: stop-words, stemming, saturation, length normalisation), over units of the chunk
    # and bm25_window chunks each side: the model's retrieval becomes BM25 plus the learned scores,
    # and what the trace, heatmap and evidence show is that selection. Prefill is untouched, so
    # stored states do not depend on it (the engine fingerprint ignores it). Why: on books no
    # choice was made on, BM25 found the passage as often as the learned scores (docs/qa.md).
    bm25_weight=0.0,
    bm25_window=0,
)
EXTENSIONS: tuple[str, ...] = tuple(PAPER_FLAVOUR)

SPECIAL_IDS: dict = dict(pad_token_id=0, eos_token_id=1, lmk_token_id=2)

FIELDS: dict = {**ARCHITECTURE, **IMPLEMENTATION, **PAPER_FLAVOUR, **SPECIAL_IDS}
VALID_KEYS: tuple[str, ...] = (*FIELDS, "tie_word_embeddings")  # what DRTConfig takes, besides PretrainedConfig's

# Extensions that were switched off in every shipped model and measured as not helping, removed
# from the code (docs/model.md, "Retired extensions"), with the value that meant "off". A
# config.json that still names one at that value loads as before (the key is dropped); at any other
# value the checkpoint needs the code that is gone, and loading it fails with that message.
RETIRED: dict = dict(
    detach_fusion_weights=False,  # an ablation: no scorer gradient through the fusion weights
    smear_keys=False, smear_init=0.0,  # smeared keys: no copying within the steps we could afford
    query_key=False,  # the landmark query reading its own chunk's key: query_encoder did better
    lexical_window=0.0,  # the word term over neighbour chunks: within noise
    abstain_z=None,  # retrieval-z abstention: replaced by the reader's abstention test (reader.json)
)

# Presets: sizes (`tiny`, `small`) and the paper's model (`paper`). `tiny` is sized for two CPU
# cores while keeping the paper's GCA head dimension (d = 64, the kernels' main case); its window
# is much shorter than the training length, so most of the context is reachable only through
# retrieval (docs/model.md, "The sizes", has the measurements behind it). The shipped checkpoints
# are `tiny` with extensions switched on in their config.json (`train --set copy_head=true ...`).
PRESETS: dict[str, dict] = {
    "tiny": dict(
        hidden_size=192, num_heads=3, intermediate_size=512, lower_layers=2, encoder_layers=1,
        upper_groups=[2], window=256, chunk_topk=4,
    ),
    "small": dict(
        hidden_size=512, num_heads=8, intermediate_size=1376, lower_layers=4, encoder_layers=2,
        upper_groups=[4], window=512, chunk_topk=8,
    ),
    # the paper's model: the published 128M configuration (docs/spec.md §1.1) with every extension
    # off; upper_groups [3, 3] is "retrieval x2". Smaller sizes by override, e.g.
    # DRTConfig.from_preset("paper", hidden_size=192, num_heads=3, ...) (the tests do).
    "paper": dict(
        hidden_size=768, num_heads=12, intermediate_size=2048, lower_layers=6, encoder_layers=2,
        upper_groups=[6], window=512, chunk_topk=8, **PAPER_FLAVOUR,
    ),
}


class ConfigFields:
    """What every configuration of this repository is, whichever class holds it: the FIELDS as
    attributes (each with its default and what it is above; docs/model.md draws the data flow and
    tabulates the extensions) and the sizes derived from them. `DRTConfig` is these with transformers'
    PretrainedConfig (the model's config by the fixed contract, docs/design.md; drt_core/hf_config.py,
    also `drt_core.DRTConfig`); `RunConfig` is these alone, what the
    engine serves a checkpoint with, without importing transformers."""

    # derived sizes
    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def chunk_tokens(self) -> int:
        """Real tokens per chunk (63 by default)."""
        return self.chunk_size - 1

    @property
    def num_groups(self) -> int:
        return len(self.upper_groups)

    @property
    def preamble_len(self) -> int:
        """P: positions the stream preamble takes before a stream's first token (0 when off)."""
        return len(self.stream_preamble or ())

    @property
    def uses_chunks(self) -> bool:
        return self.arch in ("drt", "fixed_retriever")

    @property
    def inserts_landmarks(self) -> bool:
        """A landmark token follows every chunk_tokens real tokens of the stream (DRT's chunks,
        Landmark Attention's blocks)."""
        return self.uses_chunks or self.arch == "landmark"

    def extensions_on(self) -> dict:
        """{field: value} of our extensions that this config switches on ({} for the paper's model)."""
        return {k: getattr(self, k) for k in EXTENSIONS if getattr(self, k) != PAPER_FLAVOUR[k]}

    @classmethod
    def from_preset(cls, name: str, **overrides):
        """`tiny`, `small` or `paper`, with keyword overrides (e.g. arch="sliding_window")."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        kw = dict(PRESETS[name])
        kw.update(overrides)
        return cls(**kw)


def settle(kwargs: dict) -> dict:
    """The FIELDS' values taken out of `kwargs` (what is left is not ours), checked (_validate) and
    each as its type (JSON gives 1 for 1.0, a list for a tuple)."""
    v = {k: kwargs.pop(k, d) for k, d in FIELDS.items()}
    drop_retired(kwargs)
    _validate(v)
    v["upper_groups"] = list(v["upper_groups"])
    v["softmax_one"] = bool(v["softmax_one"])
    for k, off in PAPER_FLAVOUR.items():
        if isinstance(off, (bool, int, float, str)):
            v[k] = type(off)(v[k])
    v["stream_preamble"] = None if not v["stream_preamble"] else [int(t) for t in v["stream_preamble"]]
    return v


# transformers' own keys at PretrainedConfig's defaults, as `DRTConfig.to_dict()` gives them: the
# fingerprint of the stored states hashes them (drt_core/state_io.state_config), so RunConfig, which
# does not import transformers, gives the same dict; tests/drt_core/test_runtime.py checks it
HF_DEFAULTS: dict = {
    "output_hidden_states": False, "output_attentions": False, "return_dict": True, "chunk_size_feed_forward": 0,
    "is_encoder_decoder": False, "id2label": {0: "LABEL_0", 1: "LABEL_1"}, "label2id": {"LABEL_0": 0, "LABEL_1": 1},
    "problem_type": None, "model_type": "drt",
}


class RunConfig(ConfigFields):
    """A checkpoint's configuration read without transformers (`RunConfig.from_json(folder /
    "config.json")`): the fields as DRTConfig sets them, transformers' keys kept as written, and
    `to_dict()` as DRTConfig's. What the engine serves with (drt_core/runtime.py)."""

    def __init__(self, tie_word_embeddings: bool = True, **kwargs):
        for k, x in settle(kwargs).items():
            setattr(self, k, x)
        self.tie_word_embeddings = bool(tie_word_embeddings)
        self._hf = kwargs  # transformers' keys a config.json holds (model_type, architectures, ...)

    @classmethod
    def from_json(cls, path: str | Path) -> "RunConfig":
        return cls(**json.loads(Path(path).read_text()))

    def to_dict(self) -> dict:
        id2label = self._hf.get("id2label")
        hf = {**HF_DEFAULTS, **self._hf}
        if id2label is not None:  # JSON keys are strings; PretrainedConfig makes them ints
            hf["id2label"] = {int(k): x for k, x in id2label.items()}
        return {**hf, **{k: getattr(self, k) for k in FIELDS}, "tie_word_embeddings": self.tie_word_embeddings}


def drop_retired(kwargs: dict) -> None:
    """Drop retired extensions at their "off" value (RETIRED); refuse them at any other value."""
    for k in [k for k in kwargs if k in RETIRED]:
        x = kwargs.pop(k)
        if x not in (RETIRED[k], None, 0, 0.0, False):
            raise ValueError(f"config {k}={x!r}: this extension was retired (docs/model.md, 'Retired extensions'); "
                             "the checkpoint needs an older drt-reader")


def _validate(v: dict) -> None:
    """Refuse values the model cannot be built with, or that an option needs another for."""
    def need(ok: bool, msg: str) -> None:
        if not ok:
            raise ValueError(msg)

    arch, S = v["arch"], v["chunk_size"]
    need(arch in ARCHS, f"arch must be one of {ARCHS}, got {arch!r}")
    need(v["hidden_size"] % v["num_heads"] == 0,
         f"hidden_size {v['hidden_size']} must be divisible by num_heads {v['num_heads']}")
    need(S >= 2, "chunk_size must be >= 2 (real tokens + the landmark)")
    need(v["chunk_topk"] >= 1 and v["window"] >= 1,
         f"chunk_topk and window must be >= 1, got {v['chunk_topk']} and {v['window']}")
    need(v["lower_layers"] >= 0 and v["encoder_layers"] >= 0
         and (v["baseline_layers"] is None or v["baseline_layers"] >= 1),
         "layer counts must be >= 0 (baseline_layers >= 1)")
    need(v["vocab_size"] > max(v["pad_token_id"], v["eos_token_id"], v["lmk_token_id"]),
         f"vocab_size {v['vocab_size']} must exceed the special token ids")
    need(v["gca_backend"] in ("auto", "reference", "triton"),
         f"gca_backend must be 'auto', 'reference' or 'triton', got {v['gca_backend']!r}")
    need(bool(v["upper_groups"]) and all(n >= 1 for n in v["upper_groups"]),
         "upper_groups must list at least one group of >= 1 layer, e.g. [2] or [1, 1]")
    # the copy head and its options
    copy = v["copy_head"]
    need(not copy or arch in ("drt", "fixed_retriever"),
         f"copy_head needs chunk selections (arch 'drt' or 'fixed_retriever'), got {arch!r}")
    need(copy or not any(v[k] for k in ("copy_bigram", "copy_global", "copy_match", "copy_recall", "copy_span",
                                         "copy_lead")),
         "copy_bigram, copy_global, copy_match, copy_recall, copy_span and copy_lead extend the copy head: "
         "set copy_head=true too")
    need(0 <= int(v["copy_match"]) < S - 1,
         f"copy_match must be in [0, {S - 1}) (a match stays inside a chunk), got {v['copy_match']}")
    need(0 <= int(v["copy_recall"]) < S - 1, f"copy_recall must be in [0, {S - 1}), got {v['copy_recall']}")
    need(0 <= int(v["copy_recall_age"]) <= 8,
         f"copy_recall_age is a number of age buckets in [0, 8], got {v['copy_recall_age']}")
    need(not int(v["copy_recall_age"]) or int(v["copy_recall"]),
         "copy_recall_age refines copy_recall's biases: set copy_recall > 0 too")
    need(float(v["copy_qk_cap"]) >= 0,
         f"copy_qk_cap is a bound on the pointer's scores (> 0) or 0 (off), got {v['copy_qk_cap']}")
    need(not float(v["copy_qk_cap"]) or copy, "copy_qk_cap bounds the copy head's scores: set copy_head=true too")
    need(0 <= int(v["copy_span"]) <= S - 1, f"copy_span must be in [0, {S - 1}], got {v['copy_span']}")
    need(0 <= int(v["copy_lead"]) <= S - 1, f"copy_lead must be in [0, {S - 1}], got {v['copy_lead']}")
    need(v["copy_groups"] in ("last", "all"), f"copy_groups must be 'last' or 'all', got {v['copy_groups']!r}")
    need(v["copy_groups"] == "last" or copy, "copy_groups extends the copy head: set copy_head=true too")
    # retrieval
    need(not (v["query_encoder"] or v["key_encoder"]) or arch == "drt",
         f"key_encoder and query_encoder need arch 'drt' (landmark scores), got {arch!r}")
    need(int(v["query_encoder"]) >= 0 and int(v["key_encoder"]) >= 0,
         f"query_encoder and key_encoder are numbers of layers >= 0, got {v['query_encoder']}, {v['key_encoder']}")
    need(0 <= int(v["key_context"]) <= S - 1, f"key_context must be in [0, {S - 1}], got {v['key_context']}")
    need(not int(v["key_context"]) or int(v["key_encoder"]),
         "key_context needs key_encoder > 0 (the context is read by the key encoder)")
    lex = v["lexical"]
    need(not lex or arch == "drt", f"lexical needs arch 'drt' (it adds to the landmark scores), got {arch!r}")
    need(float(v["lexical_doc_df"]) >= 0 and (not v["lexical_doc_df"] or lex),
         f"lexical_doc_df must be >= 0 and needs lexical, got {v['lexical_doc_df']!r}")
    need(float(v["lexical_words"]) >= 0 and (not v["lexical_words"] or lex),
         f"lexical_words must be >= 0 and needs lexical, got {v['lexical_words']!r}")
    need(not v["lexical_word_carry"] or v["lexical_words"], "lexical_word_carry needs lexical_words")
    need(float(v["lexical_gates"]) >= 0 and (not v["lexical_gates"] or v["lexical_words"]),
         f"lexical_gates must be >= 0 and needs lexical_words, got {v['lexical_gates']!r}")
    need(float(v["bm25_weight"]) >= 0 and (not v["bm25_weight"] or arch == "drt"),
         f"bm25_weight must be >= 0 and needs arch 'drt', got {v['bm25_weight']!r}")
    need(int(v["bm25_window"]) >= 0, f"bm25_window must be >= 0, got {v['bm25_window']!r}")
    pre = v["stream_preamble"]
    if pre:
        need(all(0 <= int(t) < v["vocab_size"] for t in pre),
             f"stream_preamble holds token ids in [0, {v['vocab_size']}), got {pre!r}")
        need(v["lmk_token_id"] not in [int(t) for t in pre], "stream_preamble must not hold the landmark token")
        need(arch != "landmark", "stream_preamble is not built for arch 'landmark' (its blocks start at position 0)")

