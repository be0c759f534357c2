"""drt_core: the DRT model (HF-compatible), its baselines, tokenizer, data, training, engine, evaluation.

The package itself imports nothing heavy: `DRTConfig`, `PRESETS`, `DRTForCausalLM` and `DRTOutput`
are loaded on first use (PEP 562 `__getattr__`), so that a light module (`drt_core.train.cli`,
`drt_core.errors`) does not pull in torch and transformers (`drt-reader --help` stays fast).
Importing `drt_core.config` registers the config with transformers' AutoConfig (and turns its
weight-loading progress bars off); importing `drt_core.modeling` registers the model with
AutoModelForCausalLM.
"""

from __future__ import annotations

import importlib

# name -> the submodule that defines it, imported when the name is first asked for
_LAZY = {
    "DRTConfig": ".hf_config",
    "PRESETS": ".config",
    "DRTForCausalLM": ".modeling",
    "DRTOutput": ".modeling",
}

__all__ = ["DRTConfig", "DRTForCausalLM", "DRTOutput", "PRESETS"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # once: the next lookup does not come here
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
