"""drt_core.minibert.MiniBert, the pure-torch BERT encoder of the cross-encoder and the sentence
embedder: it computes what transformers' BertModel(add_pooling_layer=False) computes from the same
state dict (random weights at a small config, and the package's MiniLM), dropout included; the
shipped cross-encoder reads as the BertModel-based one did; the embedder gives AutoModel's
embeddings; and loading and running them never imports transformers (~3 s of `ask`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from drt_core.minibert import MiniBert, MiniBertConfig
from qa.cross_encoder import FILE, CrossEncoder, base_dir, encode_pairs, load_tokenizer

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "drt-tiny"
SMALL = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=40, type_vocab_size=2, layer_norm_eps=1e-12)
QUESTION = "In what town did the miller's daughter open her shop?"
PASSAGES = ["Two years after her father's death the miller's daughter left the valley and opened a small shop "
            "in Wexcombe, where she sold ribbons and lace to the farmers' wives on market days.",
            "The rain fell all night upon the heath.",
            "The miller's daughter was often seen on the road to the town, and the neighbours wondered what "
            "she could want there; the shop windows held nothing she could afford. " * 2]


class BertCrossEncoder(nn.Module):
    """The cross-encoder as it was before MiniBert (transformers' BertModel): the reference."""

    def __init__(self):
        super().__init__()
        from transformers import BertConfig, BertModel

        cfg = BertConfig.from_pretrained(str(base_dir()))
        self.bert = BertModel(cfg, add_pooling_layer=False)
        self.relevance = nn.Linear(cfg.hidden_size, 1)
        self.span = nn.Linear(cfg.hidden_size, 2)

    def forward(self, input_ids, attention_mask, token_type_ids):
        h = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                      token_type_ids=token_type_ids).last_hidden_state
        rel = self.relevance(h[:, 0]).squeeze(-1).float()
        se = self.span(h).float()
        return rel, se[..., 0], se[..., 1]

    @classmethod
    def load(cls, model_dir: Path) -> "BertCrossEncoder":
        from safetensors.torch import load_file

        m = cls()
        sd = {k.removeprefix("bert."): v for k, v in load_file(str(base_dir() / "model.safetensors")).items()}
        missing, _ = m.bert.load_state_dict(sd, strict=False)
        assert not [k for k in missing if "pooler" not in k], missing
        sd = load_file(str(Path(model_dir) / FILE))
        m.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
        return m.eval()


def bert_model(cfg: dict):
    from transformers import BertConfig, BertModel

    return BertModel(BertConfig(**cfg), add_pooling_layer=False).eval()


def padded_batch(vocab: int, lengths: list[int]):
    """Random ids, a 0/1 mask padding each row after its length, types 1 in the second half."""
    L = max(lengths)
    ids = torch.randint(1, vocab, (len(lengths), L))
    mask = (torch.arange(L)[None] < torch.tensor(lengths)[:, None]).long()
    types = (torch.arange(L)[None] >= torch.tensor(lengths)[:, None] // 2).long() * mask
    return ids * mask, mask, types


def test_the_config_is_the_packages():
    c = MiniBertConfig.from_json(base_dir() / "config.json")
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size) == (384, 6, 12, 1536)
    assert c.hidden_dropout_prob == c.attention_probs_dropout_prob == 0.1


def test_random_weights_give_bertmodels_hidden_states():
    torch.manual_seed(1)
    ref = bert_model(SMALL)
    with torch.no_grad():  # LayerNorms and biases off their 1/0 init: every parameter counts
        for p in ref.parameters():
            p.add_(0.1 * torch.randn_like(p))
    ours = MiniBert(MiniBertConfig(**SMALL)).eval()
    ours.load_state_dict(ref.state_dict(), strict=True)  # same names, no buffer either side
    ids, mask, types = padded_batch(SMALL["vocab_size"], [7, 23, 12, 1])
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        got = ours(ids, mask, types)
    assert (got - want).abs().max() < 1e-5
    with torch.no_grad():  # padding changes no unpadded position: padded keys are masked
        alone = ours(ids[:1, :7], mask[:1, :7], types[:1, :7])
    assert (alone - got[:1, :7]).abs().max() < 1e-5


def test_dropout_is_where_bertmodels_is():
    """In train mode, the same seed draws the same dropout masks in both: the same places, probabilities."""
    cfg = dict(SMALL, hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3)
    ref = bert_model(cfg).train()
    ours = MiniBert(MiniBertConfig(**cfg)).train()
    ours.load_state_dict(ref.state_dict())
    ids, mask, types = padded_batch(cfg["vocab_size"], [9, 16, 5])
    torch.manual_seed(2)
    want = ref(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
    torch.manual_seed(2)
    got = ours(ids, mask, types)
    assert (got - want).abs().max() < 1e-5
    assert (got - ours.eval()(ids, mask, types)).abs().max() > 1e-2  # dropout did act


def test_the_packages_weights_give_bertmodels_hidden_states():
    from transformers import BertModel

    ref = BertModel.from_pretrained(str(base_dir()), add_pooling_layer=False, attn_implementation="eager").eval()
    ours = CrossEncoder.pretrained_base().bert.eval()
    ids, mask, types, _ = encode_pairs(load_tokenizer(), QUESTION, PASSAGES)
    assert len(set(mask.sum(1).tolist())) == 3  # rows of different lengths: padding
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        got = ours(ids, mask, types)
    assert (got - want).abs().max() < 1e-5


def test_the_shipped_cross_encoder_reads_as_the_bertmodel_one():
    ids, mask, types, _ = encode_pairs(load_tokenizer(), QUESTION, PASSAGES)
    with torch.no_grad():
        got = CrossEncoder.load(SHIPPED)(ids, mask, types)
        want = BertCrossEncoder.load(SHIPPED)(ids, mask, types)
    m = mask.bool()
    for g, w in zip(got, want):  # relevance; start and end logits (unpadded tokens)
        g, w = (g[m], w[m]) if g.dim() == 2 else (g, w)
        assert (g - w).abs().max() < 1e-4


def test_loading_and_reading_import_no_transformers():
    code = ("import sys, torch\n"
            "from qa.cross_encoder import CrossEncoder, encode_pairs, load_tokenizer\n"
            "m = CrossEncoder.load('checkpoints/drt-tiny')\n"
            "ids, mask, types, _ = encode_pairs(load_tokenizer(), 'Who?', ['Someone.', 'No one at all.'])\n"
            "with torch.no_grad():\n"
            "    m(ids, mask, types)\n"
            "assert 'transformers' not in sys.modules, sorted(k for k in sys.modules if 'transformers' in k)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("bad", [{"hidden_act": "gelu_new"}, {"position_embedding_type": "relative_key"}])
def test_a_config_minibert_does_not_implement_is_refused(bad, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(dict(SMALL, **bad)))
    with pytest.raises(ValueError):
        MiniBertConfig.from_json(tmp_path / "config.json")


def test_the_sentence_embedder_gives_transformers_embeddings_without_it():
    """drt_core.fixed_retriever.embed_texts (the summaries' "about" signal, the MiniLM baseline, the
    fixed retriever) runs MiniBert on the package's tokenizer: the embeddings of transformers'
    AutoTokenizer + AutoModel, mean-pooled and normalised, truncation and padding included; a new
    process that embeds imports no transformers."""
    import torch.nn.functional as F
    from transformers import AutoModel, AutoTokenizer

    from drt_core.fixed_retriever import MAX_PIECES, embed_texts

    texts = [QUESTION, *PASSAGES, "", "café naïve — “quoted” text", "A " * 400]
    tok = AutoTokenizer.from_pretrained(str(base_dir()), local_files_only=True)
    ref = AutoModel.from_pretrained(str(base_dir()), local_files_only=True).eval()
    enc = tok(texts, padding=True, truncation=True, max_length=MAX_PIECES, return_tensors="pt")
    with torch.no_grad():
        h = ref(**enc).last_hidden_state
    m = enc["attention_mask"].unsqueeze(-1).float()
    want = F.normalize((h * m).sum(1) / m.sum(1).clamp_min(1e-9), dim=-1)
    torch.testing.assert_close(embed_texts(texts, batch_size=3), want, rtol=0, atol=1e-5)
    code = ("import sys; from drt_core.fixed_retriever import embed_texts; e = embed_texts(['a sentence']); "
            "print(tuple(e.shape), 'transformers' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(1, 384) False"
