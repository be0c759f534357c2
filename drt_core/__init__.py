"""drt_core: the DRT model (HF-compatible), its baselines, tokenizer, data, training, engine, evaluation.

`import drt_core` registers the model with transformers' AutoConfig / AutoModelForCausalLM.
"""

from transformers import AutoConfig, AutoModelForCausalLM
from transformers.utils import logging as _hf_logging

from .config import PRESETS, DRTConfig
from .modeling import DRTForCausalLM, DRTOutput

_hf_logging.disable_progress_bar()  # no "Loading weights" bars on the command line
AutoConfig.register("drt", DRTConfig, exist_ok=True)
AutoModelForCausalLM.register(DRTConfig, DRTForCausalLM, exist_ok=True)

__all__ = ["DRTConfig", "DRTForCausalLM", "DRTOutput", "PRESETS"]
