"""DRTConfig: the configuration as transformers' `PretrainedConfig` (the fixed contract,
docs/design.md: `save_pretrained`, `from_pretrained`, AutoConfig knows "drt").

What a configuration holds, its defaults, checks and derived sizes are drt_core/config.py's
(`ConfigFields`); this adds transformers' base class and refuses keys that are neither ours nor
PretrainedConfig's. The engine serves with config.RunConfig and does not import this module (nor
transformers).
"""

from __future__ import annotations

from transformers import AutoConfig, PretrainedConfig
from transformers.utils import logging as _hf_logging

from .config import VALID_KEYS, ConfigFields, settle

# what PretrainedConfig itself writes into a config.json or takes as a keyword
_HF_KEYS = frozenset(PretrainedConfig().to_dict()) | {"transformers_version", "architectures", "model_type",
                                                      "name_or_path", "_name_or_path", "torch_dtype", "dtype"}


class DRTConfig(ConfigFields, PretrainedConfig):
    """The keyword arguments are the keys of drt_core.config.FIELDS and PretrainedConfig's own; any
    other is refused with the list of valid keys (a typo `copy_heads=true` must not train a model
    without the extension it meant). `extensions_on()` lists the extensions a config switches on."""

    model_type = "drt"

    def __init__(self, tie_word_embeddings: bool = True, **kwargs):
        v = settle(kwargs)
        unknown = sorted(k for k in kwargs if k not in _HF_KEYS)
        if unknown:
            raise ValueError(f"unknown config key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                             f"valid keys: {', '.join(VALID_KEYS)}")
        pad, eos = v.pop("pad_token_id"), v.pop("eos_token_id")
        for k, x in v.items():
            setattr(self, k, x)
        super().__init__(pad_token_id=pad, eos_token_id=eos, tie_word_embeddings=tie_word_embeddings, **kwargs)


# every model load through transformers imports this module: no "Loading weights" bars on the
# command line, and AutoConfig knows "drt"
_hf_logging.disable_progress_bar()
AutoConfig.register("drt", DRTConfig, exist_ok=True)
