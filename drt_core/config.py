"""DRTConfig: the configuration of the Differentiable Retrieval Transformer and its baselines.

One config class for all architectures of this repository, so they share layers and checkpoint
format (`arch` selects):
    "drt"              the DRT of drt_spec.md §1-§3 (landmarks, chunk encoder, causal retrieval, GCA)
    "sliding_window"   a plain ALiBi sliding-window LM (the paper's "Base LM +2 layers")
    "full_attention"   a causal full-attention LM with RoPE (what people use today)
    "fixed_retriever"  RPT-style: DRT's chunk memory and GCA, but chunks chosen by a frozen
                       sentence embedder (MiniLM) instead of the learned landmark scores
"""

from __future__ import annotations

from transformers import PretrainedConfig

ARCHS = ("drt", "sliding_window", "full_attention", "fixed_retriever")

# Presets. `tiny` is sized for two CPU cores: D=192 with 3 heads of 64 keeps the GCA head dim of the
# paper (d=64, the kernels' main case) while the whole model stays ~4M parameters. Measured on this
# 2-core EPYC with bf16 autocast, training at 4032 tokens/sample: D=256 ~1.3K tok/s, D=192 ~4.2K,
# D=128 ~6.2K; D=192 is the largest that pretrains on 10M tokens in under an hour and it ships in
# the repository (16 MB in fp32). The window (256
# augmented positions = 4 chunks) is much shorter than the ~4K training length, so most of the
# context is reachable only through retrieval, and chunk_topk=4 of ~60 candidate chunks enforces the
# selection sparsity that arXiv 2510.17196 names as a condition for length generalisation.
PRESETS: dict[str, dict] = {
    "tiny": dict(
        hidden_size=192, num_heads=3, intermediate_size=512, lower_layers=2, encoder_layers=1,
        upper_groups=[2], window=256, chunk_topk=4,
    ),
    "small": dict(
        hidden_size=512, num_heads=8, intermediate_size=1376, lower_layers=4, encoder_layers=2,
        upper_groups=[4], window=512, chunk_topk=8,
    ),
    # the published 128M configuration (drt_spec.md §1.1); upper_groups [3, 3] is "retrieval x2"
    "paper": dict(
        hidden_size=768, num_heads=12, intermediate_size=2048, lower_layers=6, encoder_layers=2,
        upper_groups=[6], window=512, chunk_topk=8,
    ),
}


class DRTConfig(PretrainedConfig):
    model_type = "drt"

    def __init__(
        self,
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
        softmax_one: bool = True,  # +1 in each retrieved chunk's softmax (the zeroed landmark slot)
        rms_eps: float = 1e-5,
        rope_theta: float = 10000.0,
        init_std: float = 0.02,
        baseline_layers: int | None = None,  # depth of sliding_window / full_attention baselines
        retriever_temperature: float = 0.05,  # fixed_retriever: softmax temperature of cosine scores
        gca_backend: str = "auto",  # "auto" | "reference" | "triton" (kernels.gca)
        detach_fusion_weights: bool = False,  # ablation: no scorer gradient (retrieval stays at init)
        copy_head: bool = False,  # pointer over the retrieved chunks' tokens, mixed into the LM output
        copy_bigram: bool = False,  # the pointer matches the last two tokens; its gate sees what it would copy
        copy_global: bool = False,  # one pointer softmax over all retrieved slots (log fusion weight as prior)
        copy_match: int = 0,  # > 0: the pointer and its gate read exact suffix-match lengths (capped here)
        copy_recall: int = 0,  # > 0: slots up to this many after an n-gram the question / answer holds get biases
        copy_recall_age: int = 0,  # > 0: those biases also read how recently the n-gram was written (buckets)
        copy_qk_cap: float = 0.0,  # > 0: the pointer's learned scores soft-capped at +-this (tanh), 0 = off
        copy_span: int = 0,  # the pointer also reads this many slots of the chunk after each retrieved one
        copy_lead: int = 0,  # ... and this many last slots of the chunk before each
        copy_groups: str = "last",  # "all": with G >= 2 groups the pointer reads every group's selection
        key_encoder: int = 0,  # > 0: landmark keys from a separate encoder of this many layers (not the memory's)
        key_context: int = 0,  # > 0: that key encoder also reads this many last slots of the chunk before
        query_key: bool = False,  # landmark queries also read their own chunk's landmark key (projected)
        query_encoder: int = 0,  # > 0: instead, a separate encoder of this many layers over their own chunk
        smear_keys: bool = False,  # per-head mix of each key with the previous position's (copying)
        smear_init: float = 0.0,  # initial logit of that mix's own-key share (sigmoid; 0 -> 0.5)
        lexical: bool = False,  # retrieval scores add a learned weighting of the exact tokens two chunks share
        lexical_doc_df: float = 0.0,  # > 0: and adds the tokens' idf in the document so far, times a learned scale starting here
        abstain_z: float | None = None,  # ask: "not found" when the question's best chunk stands less than this
        # many standard deviations above the document's scores (calibrated by `drt-reader eval qa --calibrate`)
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
        if copy_head and arch != "drt":
            raise ValueError(f"copy_head needs arch 'drt' (it reads the streamed selections), got {arch!r}")
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
        self.abstain_z = None if abstain_z is None else float(abstain_z)
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
    def uses_chunks(self) -> bool:
        return self.arch in ("drt", "fixed_retriever")

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "DRTConfig":
        """`tiny`, `small` or `paper`, with keyword overrides (e.g. arch="sliding_window")."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        kw = dict(PRESETS[name])
        kw.update(overrides)
        return cls(**kw)
