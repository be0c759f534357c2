#!/usr/bin/env bash
# The device checks of a session that is lent a GPU (issue 32), in one run of at most 8 minutes:
#   1. the CUDA tests: the Triton kernels and the engine on CUDA   (pytest -m gpu)
#   2. GCA forward / backward / decode: Triton against the reference and SDPA at equal FLOPs
#   3. the paper preset's training tokens/s and MFU, for 100 s of steps (2.5 minutes capped, compile included),
#      8 x 4032 tokens a step or fewer where the memory estimate does not fit them (GPU_SH_BATCH: a fixed batch)
#   4. prefill tokens/s at 1M tokens, the engine on CUDA (Triton kernels, chunk memory on disk)
# Each step has its own time cap (100 + 90 + 150 + 120 s: under 8 minutes in all), so one that hangs cannot eat the others' time. Figures go to
# $OUT: gpu.md (markdown for docs/RESULTS.md), env.txt, pytest.txt and one JSON per benchmark.
#
#   run:  bash bench/gpu.sh                  (on the device machine: python3 holds torch and triton)
#   CPU smoke test of the script itself:  GPU_SH_QUICK=1 OUT=/tmp/gpu PY=.venv/bin/python bash bench/gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/drt-gpu}
PY=${PY:-python3}
QUICK=${GPU_SH_QUICK:-0}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
T0=$(date +%s)

step() {  # step NAME CAP_SECONDS CMD... : stdout to $OUT/NAME, stderr to $OUT/NAME.err (kept only on failure)
  local name=$1 cap=$2; shift 2
  local t=$(date +%s)
  timeout --kill-after=10 "$cap" "$@" >"$OUT/$name" 2>"$OUT/$name.err"
  local rc=$?
  echo "$name: rc $rc in $(( $(date +%s) - t )) s (cap $cap s)" | tee -a "$OUT/steps.txt"
  if [ $rc -eq 0 ]; then rm -f "$OUT/$name.err"; else tail -n 40 "$OUT/$name.err" >&2; fi
}

{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -3
  "$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())"
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [ "$QUICK" = 1 ]; then  # the script's own smoke test on a CPU: tiny shapes, seconds each
  DEV=cpu; PRESET=tiny; SEQ=252; BATCH=auto; SECS=3; LEN=16k; PRESET_PF=tiny; MAXB=2; BF16=on  # bf16 autocast on any CPU: slower without native units, the same path
  FIT=(--memory-gib 1)  # no CUDA device to size for: a 1 GiB budget takes the same path
else
  DEV=cuda; PRESET=paper; SEQ=4032; BATCH=${GPU_SH_BATCH:-auto}; SECS=100; LEN=1m; PRESET_PF=${GPU_SH_PREFILL_PRESET:-paper}
  MAXB=8; FIT=(); BF16=auto
fi
if [ "$BATCH" = auto ]; then  # 8 samples, or as many as the memory estimate fits on this GPU (issue 53)
  BATCH=$("$PY" -m bench.train --fit-batch --preset "$PRESET" --seq-len "$SEQ" --bf16 "$BF16" --max-batch "$MAXB" \
    ${FIT[@]+"${FIT[@]}"} 2>>"$OUT/steps.txt") || BATCH=1
  echo "training batch $BATCH x $SEQ (bench.train --fit-batch)" | tee -a "$OUT/steps.txt"
fi

# 1. CUDA tests (the kernels' own, then the engine's)
step pytest.txt 100 "$PY" -m pytest -m gpu -p no:cacheprovider tests/kernels tests/drt_core/test_engine_device.py
# 2. GCA against the reference and SDPA
step gca.json 90 "$PY" -m bench.gca --json
# 3. paper-preset training throughput and MFU (bf16 autocast)
step train.json $((SECS + 50)) "$PY" -m bench.train --preset "$PRESET" --seq-len "$SEQ" --batch "$BATCH" \
  --seconds "$SECS" --train-steps 2 --skip-forward --skip-memory --bf16 "$BF16" --device "$DEV" --json
# 4. prefill at 1M: token ids of the repository's own text (data/ is not on the device machine; the
#    speed does not depend on the text), the engine on $DEV
TOK=data/books/val.bin
if [ ! -f "$TOK" ]; then
  TOK="$OUT/.tokens.bin"
  "$PY" - "$TOK" <<'PYEOF'
import sys, numpy as np
from pathlib import Path
from drt_core.tokenizer import load_tokenizer
tok = load_tokenizer()
text = "\n".join(p.read_text(errors="replace") for p in sorted(Path("tests/assets").glob("*.t*")) if p.suffix in (".txt", ".tex"))
np.asarray(tok.backend_tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.uint16).tofile(sys.argv[1])
PYEOF
fi
step prefill.json 120 "$PY" -m bench.prefill --lengths "$LEN" --archs drt --preset "$PRESET_PF" \
  --device "$DEV" --tokens "$TOK" --tmp-dir "${TMPDIR:-/tmp}" --json
rm -f "$OUT/.tokens.bin"

"$PY" -m bench.gpu_report "$OUT" >"$OUT/gpu.md" 2>>"$OUT/steps.txt"
cat "$OUT/gpu.md"
echo "bench/gpu.sh: $(( $(date +%s) - T0 )) s in all" | tee -a "$OUT/steps.txt"
