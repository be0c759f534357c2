"""DRTConfig: the configuration of the Differentiable Retrieval Transformer and its baselines.

One config class for all architectures of this repository, so they share layers and checkpoint
format (`arch` selects):
    "drt"              the DRT of docs/spec.md §1-§3 (landmarks, chunk encoder, causal retrieval, GCA)
    "sliding_window"   a plain ALiBi sliding-window LM (the paper's "Base LM +2 layers")
    "full_attention"   a causal full-attention LM with RoPE (what people use today)
    "fixed_retriever"  RPT-style: DRT's chunk memory and GCA, but chunks chosen by a frozen
                       sentence embedder (MiniLM) instead of the learned landmark scores
    "landmark"         Landmark Attention (Mohtashami & Jaggi 2023): the sliding_window stack (ALiBi,
                       no window) with a landmark token after every chunk_size - 1 tokens, trained
                       with the grouped softmax; at
                       inference each token retrieves the chunk_topk blocks its landmark scores rank
                       first, per head and per layer (drt_core/landmark.py)
"""

from __future__ import annotations

from transformers import PretrainedConfig

ARCHS = ("drt", "sliding_window", "full_attention", "fixed_retriever", "landmark")

# Every extension of ours at its "off" value: the paper's model (docs/spec.md). Each is off by
# default too, so a checkpoint's config.json that lacks one loads as before; the `paper` preset
# names them all anyway, so it stays the paper's model whatever a later default says.
PAPER_FLAVOUR: dict = dict(
    detach_fusion_weights=False, smear_keys=False, smear_init=0.0,
    copy_head=False, copy_bigram=False, copy_global=False, copy_match=0, copy_recall=0, copy_recall_age=0,
    copy_qk_cap=0.0, copy_span=0, copy_lead=0, copy_groups="last",
    key_encoder=0, key_context=0, query_key=False, query_encoder=0,
    lexical=False, lexical_doc_df=0.0, lexical_words=0.0, lexical_window=0.0, lexical_word_carry=False, abstain_z=None, stream_preamble=None,
    bm25_weight=0.0, bm25_window=0,
)
EXTENSIONS: tuple[str, ...] = tuple(PAPER_FLAVOUR)

# Presets: sizes (`tiny`, `small`) and the paper's model (`paper`). `tiny` is sized for two CPU
# cores: D=192 with 3 heads of 64 keeps the GCA head dim of the paper (d=64, the kernels' main case)
# while the whole model stays ~4M parameters. Measured on this 2-core EPYC with bf16 autocast,
# training at 4032 tokens/sample: D=256 ~1.3K tok/s, D=192 ~4.2K, D=128 ~6.2K; D=192 is the largest
# that pretrains on 10M tokens in under an hour and it ships in the repository (16 MB in fp32). The
# window (256 augmented positions = 4 chunks) is much shorter than the ~4K training length, so most
# of the context is reachable only through retrieval, and chunk_topk=4 of ~60 candidate chunks
# enforces the selection sparsity that arXiv 2510.17196 names as a condition for length
# generalisation. The shipped checkpoints are `tiny` with extensions switched on in their
# config.json (`train --set copy_head=true ...`; docs/model.md lists them).
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


class DRTConfig(PretrainedConfig):
    """The fields come in three groups (docs/model.md draws the data flow and tabulates them):

    1. the paper's architecture (docs/spec.md §1-§3): sizes, the lower layers, the chunk encoder,
       the landmark retrieval, the upper layers' GCA;
    2. the baselines' and the implementation's choices (no effect on a DRT's numbers);
    3. our extensions, each off by default (PAPER_FLAVOUR), each with what it does, the measurement
       that motivated it (docs/history/, docs/RESULTS.md) and its default. `extensions_on()` lists
       those a config switches on.
    """

    model_type = "drt"

    def __init__(
        self,
        # -- 1. the paper's architecture ---------------------------------------------------------
        arch: str = "drt",
        vocab_size: int = 8192,
        hidden_size: int = 192,
        num_heads: int = 3,
        intermediate_size: int = 512,  # SwiGLU hidden size (~8/3 D, rounded to a multiple of 16)
        lower_layers: int = 2,
        encoder_layers: int = 1,
        upper_groups: list[int] | tuple[int, ...] = (2,),  # layers per retrieval group; G = len
        window: int = 256,  # self-attention sees itself plus `window` previous (augmented) positions
        chunk_size: int = 64,  # 63 real tokens + 1 landmark
        chunk_topk: int = 4,  # chunks retrieved per query chunk
        # +1 in each retrieved chunk's softmax: the reference code's zeroed landmark slot
        # (docs/spec.md §3.3), so the paper's model; False is plain softmax, an ablation
        softmax_one: bool = True,
        rms_eps: float = 1e-5,
        rope_theta: float = 10000.0,
        init_std: float = 0.02,
        # -- 2. the baselines and the implementation -----------------------------------------------
        baseline_layers: int | None = None,  # depth of sliding_window / full_attention baselines
        retriever_temperature: float = 0.05,  # fixed_retriever: softmax temperature of cosine scores
        gca_backend: str = "auto",  # "auto" | "reference" | "triton" (kernels.gca); same numbers
        # -- 3. our extensions (all off by default: PAPER_FLAVOUR) --------------------------------
        # An ablation: the fusion weights carry no scorer gradient, so retrieval stays at its init.
        # Why: to test whether that gradient costs DRT perplexity against the fixed retriever; it
        # does not (rounds log, round 3). Default False.
        detach_fusion_weights: bool = False,
        # Smeared keys: each self-attention and chunk-memory key is a learned per-head mix of its own
        # and the previous position's (Olsson et al. 2022), so one layer can do what an induction
        # head needs two for. Why: no model of ours could copy (research/induction.py); it did not
        # help within the steps we could afford (rounds log, round 3). Default off; smear_init is
        # the initial logit of the own-key share (sigmoid; 0 -> 0.5).
        smear_keys: bool = False,
        smear_init: float = 0.0,
        # The copy head: a pointer over the retrieved chunks' tokens, mixed into the LM output by a
        # learned gate (pointer-generator). Why: copying through GCA did not emerge (answer
        # accuracy 0% with the needle's chunk retrieved and even forced); the pointer learned it
        # (first answer token 0.01 -> 0.77; rounds log, rounds 1 and 3). Default off.
        copy_head: bool = False,
        # The pointer matches the last two tokens, and its gate sees the token it would copy. Why:
        # round 3's pointer lost its place after a repeated digit or past the number's end (round 4).
        copy_bigram: bool = False,
        # One pointer softmax over all retrieved slots, log fusion weight as each chunk's prior,
        # instead of one per chunk scaled by its weight (round 4; not better alone, kept by stage 7+).
        copy_global: bool = False,
        # > 0: the pointer and its gate read exact suffix-match lengths (capped here) between the
        # text before the query and before each slot. Why: multi-key answers copied a distractor's
        # value, the key reaching the pointer only through the final state (round 5). Default 0.
        copy_match: int = 0,
        # > 0: slots up to this many after an n-gram that the question or answer so far holds get
        # learned biases (round 5: multi-key answered at 4K 1/20 -> 12/20, stage 8 -> 9). Default 0.
        copy_recall: int = 0,
        # > 0: those recall biases also read how long ago the n-gram was written (log2 buckets), to
        # tell hop 1's value from hop 2's in 2-hop (round 10; not met). Default 0.
        copy_recall_age: int = 0,
        # > 0: the pointer's learned scores are soft-capped at +-this (c tanh(s / c)), so the exact
        # biases can outweigh them: the learned score was 20-60 against biases of -8..+4 (round 10).
        # Default 0 (off).
        copy_qk_cap: float = 0.0,
        # The pointer also reads this many slots of the chunk after each retrieved one, so a value
        # cut by a chunk boundary is copied whole (round 5: single needle 15/20 -> 20/20 at 16K,
        # 2/5 -> 19/20 at 256K). Default 0.
        copy_span: int = 0,
        # ... and this many last slots of the chunk before each, so a chunk's first slots have their
        # words before them (round 7: split needles at 16K answered 12/20 -> 20/20). Default 0.
        copy_lead: int = 0,
        # "all": with G >= 2 groups the pointer reads every group's selection (2-hop, round 9).
        # Default "last" (the last group's, as before).
        copy_groups: str = "last",
        # > 0: landmark keys from a separate encoder of this many layers, not the memory's, so
        # retrieval trains without moving the K/V the upper layers read (round 6, run 10c: lemma
        # hit@4 5.6% -> 10.1% with query_encoder). Default 0 (keys from the chunk encoder).
        key_encoder: int = 0,
        # > 0: that key encoder also reads this many last slots of the chunk before. Why: two of
        # three 1M misses were needles written across a chunk boundary, the value's chunk holding no
        # word of the question (round 6); with it and split needles in training they rank 1 and 3
        # (round 7). Default 0.
        key_context: int = 0,
        # Landmark queries also read their own chunk's landmark key (projected) ...
        query_key: bool = False,
        # ... or, instead, > 0: a separate encoder of this many layers over their own chunk; the
        # query then reads the whole chunk it closes (round 6, runs 10a-10c). Default off / 0.
        query_encoder: int = 0,
        # Retrieval scores add a learned weighting of the exact tokens two chunks share. Why: on
        # real questions the dense scorer found the gold passage in its top 4 for 2.0% of the
        # hand-written questions (BM25 57.8%; RESULTS §6, round 18). Default off.
        lexical: bool = False,
        # > 0: and adds the shared tokens' idf in the document so far, times a learned scale starting
        # here. Why: offline, the in-document idf ranks the gold chunk in the top 4 for 53.9% of the
        # hand-written questions, the global weights for 36.3%
        # (docs/history/2026-12-02-real-questions.md; bench lexical_idf). Default 0.0; shipped: 1.0.
        lexical_doc_df: float = 0.0,
        # > 0: and adds, per WHOLE WORD the two chunks share (case folded, however the BPE cut it:
        # drt_core/words.py), the word's idf in the document so far, times a learned scale starting
        # here. Why: the 8,192-piece BPE cuts a name into common pieces ("Darcy" -> "ĠD" "ar" "cy"),
        # so the token terms match names through pieces found all over a book; on the mined
        # validation questions this term added at 1.0 lifts hit@4 from 81.7% to 90.8%
        # (docs/history/2026-12-03-word-lexical.md). Default 0.0.
        lexical_words: float = 0.0,
        # > 0 (needs lexical_words): a question word that a chunk lacks and the chunk before or after
        # it holds also counts for that chunk, at this share of the word term's weight (a passage is
        # wider than one 63-token chunk; modeling.word_overlap's neighbours). Not learned. Default 0.0.
        lexical_window: float = 0.0,
        # on (needs lexical_words): a word cut by a chunk boundary ("The pass|key is 84606") counts
        # whole in the chunk where it ends (words.word_ids' carry), not as two fragments that match
        # no question word. Default off (checkpoints before 2026-12-04).
        lexical_word_carry: bool = False,
        # ask: "Not found in this document" when the question's best chunk stands less than this
        # many standard deviations above the document's scores (calibrated by `drt-reader eval qa
        # --calibrate`; of six statistics, z was best on both sets: real-questions log). Not part of
        # the model's numbers (the engine fingerprint ignores it). Default None (never abstain).
        abstain_z: float | None = None,
        # > 0: at question time, every selection a question's generation makes (each landmark of its
        # fork, in every group) adds bm25_weight x the question's BM25 score of each document chunk
        # (drt_core/bm25.py: stop-words, stemming, saturation, length normalisation), over units of
        # the chunk and bm25_window chunks each side: the model's retrieval becomes BM25 plus the
        # learned scores, and what the trace, heatmap and evidence show is that selection. Prefill
        # is untouched, so stored states do not depend on it (the engine fingerprint ignores it).
        # Why: on books no choice was made on, BM25 found the passage as often as the learned scores
        # (issue 50; docs/qa.md). Default 0.0 (off).
        bm25_weight: float = 0.0,
        bm25_window: int = 0,
        # Token ids that every stream begins with, before its first real token: the self-attention
        # windows of every layer hold them at positions 0..P-1 (the batch forward prepends them to
        # each row, the engine to each new state, so training, the store and every measurement see
        # the same stream). They belong to no chunk: never retrieved, no landmark, no GCA, not
        # counted in a state's tokens. Why: pretraining rows begin mid-text, where a row's first
        # positions serve as the lower layers' attention sink, so a needle written in a stream's
        # first 14 tokens ranked 41st and 958th of 1,039 at 64K, and 4 tokens of text before it put
        # it first (round 17; issue 31). Default None (off).
        stream_preamble: list[int] | tuple[int, ...] | None = None,
        # -- the tokenizer's special ids ----------------------------------------------------------
        pad_token_id: int = 0,
        eos_token_id: int = 1,
        lmk_token_id: int = 2,
        tie_word_embeddings: bool = True,
        **kwargs,
    ):
        if arch not in ARCHS:
            raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} must be divisible by num_heads {num_heads}")
        if chunk_size < 2:
            raise ValueError("chunk_size must be >= 2 (real tokens + the landmark)")
        if chunk_topk < 1 or window < 1:
            raise ValueError(f"chunk_topk and window must be >= 1, got {chunk_topk} and {window}")
        if lower_layers < 0 or encoder_layers < 0 or (baseline_layers is not None and baseline_layers < 1):
            raise ValueError("layer counts must be >= 0 (baseline_layers >= 1)")
        if vocab_size <= max(pad_token_id, eos_token_id, lmk_token_id):
            raise ValueError(f"vocab_size {vocab_size} must exceed the special token ids")
        if gca_backend not in ("auto", "reference", "triton"):
            raise ValueError(f"gca_backend must be 'auto', 'reference' or 'triton', got {gca_backend!r}")
        if not upper_groups or any(n < 1 for n in upper_groups):
            raise ValueError("upper_groups must list at least one group of >= 1 layer, e.g. [2] or [1, 1]")
        self.arch = arch
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.lower_layers = lower_layers
        self.encoder_layers = encoder_layers
        self.upper_groups = list(upper_groups)
        self.window = window
        self.chunk_size = chunk_size
        self.chunk_topk = chunk_topk
        self.softmax_one = softmax_one
        self.rms_eps = rms_eps
        self.rope_theta = rope_theta
        self.init_std = init_std
        self.baseline_layers = baseline_layers
        self.retriever_temperature = retriever_temperature
        self.gca_backend = gca_backend
        if copy_head and arch not in ("drt", "fixed_retriever"):
            raise ValueError(f"copy_head needs chunk selections (arch 'drt' or 'fixed_retriever'), got {arch!r}")
        self.detach_fusion_weights = bool(detach_fusion_weights)
        if (copy_bigram or copy_global or copy_match or copy_recall or copy_span or copy_lead) and not copy_head:
            raise ValueError("copy_bigram, copy_global, copy_match, copy_recall, copy_span and copy_lead extend the "
                             "copy head: "
                             "set copy_head=true too")
        if not 0 <= int(copy_match) < chunk_size - 1:
            raise ValueError(f"copy_match must be in [0, {chunk_size - 1}) (a match stays inside a chunk), got {copy_match}")
        self.copy_head = bool(copy_head)
        self.copy_bigram = bool(copy_bigram)
        self.copy_global = bool(copy_global)
        self.copy_match = int(copy_match)
        if not 0 <= int(copy_recall) < chunk_size - 1:
            raise ValueError(f"copy_recall must be in [0, {chunk_size - 1}), got {copy_recall}")
        self.copy_recall = int(copy_recall)
        if not 0 <= int(copy_recall_age) <= 8:
            raise ValueError(f"copy_recall_age is a number of age buckets in [0, 8], got {copy_recall_age}")
        if int(copy_recall_age) and not self.copy_recall:
            raise ValueError("copy_recall_age refines copy_recall's biases: set copy_recall > 0 too")
        self.copy_recall_age = int(copy_recall_age)
        if float(copy_qk_cap) < 0:
            raise ValueError(f"copy_qk_cap is a bound on the pointer's scores (> 0) or 0 (off), got {copy_qk_cap}")
        if float(copy_qk_cap) and not copy_head:
            raise ValueError("copy_qk_cap bounds the copy head's scores: set copy_head=true too")
        self.copy_qk_cap = float(copy_qk_cap)
        if not 0 <= int(copy_span) <= chunk_size - 1:
            raise ValueError(f"copy_span must be in [0, {chunk_size - 1}], got {copy_span}")
        self.copy_span = int(copy_span)
        if not 0 <= int(copy_lead) <= chunk_size - 1:
            raise ValueError(f"copy_lead must be in [0, {chunk_size - 1}], got {copy_lead}")
        self.copy_lead = int(copy_lead)
        if copy_groups not in ("last", "all"):
            raise ValueError(f"copy_groups must be 'last' or 'all', got {copy_groups!r}")
        if copy_groups != "last" and not copy_head:
            raise ValueError("copy_groups extends the copy head: set copy_head=true too")
        self.copy_groups = str(copy_groups)
        if (query_key or query_encoder or key_encoder) and arch != "drt":
            raise ValueError(f"key_encoder, query_key and query_encoder need arch 'drt' (landmark scores), got {arch!r}")
        if query_key and query_encoder:
            raise ValueError("query_key and query_encoder are alternatives: set one")
        if int(query_encoder) < 0 or int(key_encoder) < 0:
            raise ValueError(f"query_encoder and key_encoder are numbers of layers >= 0, got {query_encoder}, {key_encoder}")
        self.key_encoder = int(key_encoder)
        if not 0 <= int(key_context) <= chunk_size - 1:
            raise ValueError(f"key_context must be in [0, {chunk_size - 1}], got {key_context}")
        if int(key_context) and not self.key_encoder:
            raise ValueError("key_context needs key_encoder > 0 (the context is read by the key encoder)")
        self.key_context = int(key_context)
        self.query_key = bool(query_key)
        self.query_encoder = int(query_encoder)
        if lexical and arch != "drt":
            raise ValueError(f"lexical needs arch 'drt' (it adds to the landmark scores), got {arch!r}")
        self.lexical = bool(lexical)
        if float(lexical_doc_df) < 0 or (lexical_doc_df and not lexical):
            raise ValueError(f"lexical_doc_df must be >= 0 and needs lexical, got {lexical_doc_df!r}")
        self.lexical_doc_df = float(lexical_doc_df)
        if float(lexical_words) < 0 or (lexical_words and not lexical):
            raise ValueError(f"lexical_words must be >= 0 and needs lexical, got {lexical_words!r}")
        self.lexical_words = float(lexical_words)
        if float(lexical_window) < 0 or (lexical_window and not lexical_words):
            raise ValueError(f"lexical_window must be >= 0 and needs lexical_words, got {lexical_window!r}")
        self.lexical_window = float(lexical_window)
        if lexical_word_carry and not lexical_words:
            raise ValueError("lexical_word_carry needs lexical_words")
        self.lexical_word_carry = bool(lexical_word_carry)
        self.abstain_z = None if abstain_z is None else float(abstain_z)
        if float(bm25_weight) < 0 or (bm25_weight and arch != "drt"):
            raise ValueError(f"bm25_weight must be >= 0 and needs arch 'drt', got {bm25_weight!r}")
        if int(bm25_window) < 0:
            raise ValueError(f"bm25_window must be >= 0, got {bm25_window!r}")
        self.bm25_weight, self.bm25_window = float(bm25_weight), int(bm25_window)
        pre = None if not stream_preamble else [int(t) for t in stream_preamble]
        if pre is not None and not all(0 <= t < vocab_size for t in pre):
            raise ValueError(f"stream_preamble holds token ids in [0, {vocab_size}), got {stream_preamble!r}")
        if pre is not None and lmk_token_id in pre:
            raise ValueError("stream_preamble must not hold the landmark token")
        if pre is not None and arch == "landmark":
            raise ValueError("stream_preamble is not built for arch 'landmark' (its blocks start at position 0)")
        self.stream_preamble = pre
        self.smear_keys = bool(smear_keys)
        self.smear_init = float(smear_init)
        self.lmk_token_id = lmk_token_id
        super().__init__(
            pad_token_id=pad_token_id,
            eos_token_id=eos_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )

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
    def from_preset(cls, name: str, **overrides) -> "DRTConfig":
        """`tiny`, `small` or `paper`, with keyword overrides (e.g. arch="sliding_window")."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        kw = dict(PRESETS[name])
        kw.update(overrides)
        return cls(**kw)
