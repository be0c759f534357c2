"""`python -m bench.gpu_report OUT`: bench/gpu.sh's figures as markdown for docs/RESULTS.md, with
issue 32's GPU targets checked (GCA forward + backward >= 5x the reference and >= 50% of SDPA's
throughput at equal FLOPs; decode >= 3x the reference; paper-preset training MFU >= 30%)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _load(path: Path):
    try:
        return json.loads(path.read_text().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


def _times(gca: dict) -> dict:
    """{(impl, dtype): {pass: ms}} from bench.gca's results."""
    out: dict = {}
    for r in gca.get("results", []):
        out.setdefault((r["impl"], r["dtype"]), {})[r["pass"]] = r["ms"]
    return out


def _ratio(a, b):
    return None if a is None or b is None or not b else a / b


def _ok(v, target) -> str:
    return "not measured" if v is None else f"{v:.2f} ({'met' if v >= target else 'NOT met'}, target {target})"


def gca_section(gca: dict) -> list[str]:
    lines = [f"GCA ({gca.get('machine')}; shapes {gca.get('shapes')}; `python -m bench.gca`)", "",
             "| impl | dtype | fwd ms | bwd ms | fwd+bwd ms | decode ms |", "|---|---|---|---|---|---|"]
    t = _times(gca)
    for (impl, dt), p in sorted(t.items()):
        fb = p["fwd"] + p["bwd"] if "fwd" in p and "bwd" in p else None
        dec = next((v for k, v in p.items() if k.startswith("decode")), None)
        cells = [p.get("fwd"), p.get("bwd"), fb, dec]
        lines.append(f"| {impl} | {dt} | " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    lines.append("")
    for dt in sorted({d for _, d in t}):
        tri, ref, sdpa = (t.get((i, dt), {}) for i in ("triton", "reference", "sdpa"))

        def fb(p):
            return p["fwd"] + p["bwd"] if "fwd" in p and "bwd" in p else None

        def dec(p):
            return next((v for k, v in p.items() if k.startswith("decode")), None)

        lines += [f"- {dt}: fwd+bwd speed-up over the reference: {_ok(_ratio(fb(ref), fb(tri)), 5)}",
                  f"- {dt}: fwd+bwd throughput as a fraction of SDPA's at equal FLOPs: "
                  f"{_ok(_ratio(fb(sdpa), fb(tri)), 0.5)}",
                  f"- {dt}: decode speed-up over the reference: {_ok(_ratio(dec(ref), dec(tri)), 3)}"]
    return lines


def main(argv: list[str] | None = None) -> int:
    out = Path((argv or sys.argv[1:])[0])
    lines = ["## GPU figures (bench/gpu.sh)", "", "```"]
    for name in ("env.txt", "steps.txt"):
        p = out / name
        lines += p.read_text().strip().splitlines() if p.exists() else [f"{name}: missing"]
    lines += ["```", ""]
    p = out / "pytest.txt"
    tail = p.read_text().strip().splitlines()[-1:] if p.exists() else ["not run"]
    lines += [f"CUDA tests (`pytest -m gpu`): {tail[0] if tail else 'no output'}", ""]
    gca = _load(out / "gca.json")
    lines += gca_section(gca) if gca else ["GCA: no figures (bench.gca failed or was not run)"]
    lines.append("")
    tr = _load(out / "train.json")
    if tr and tr.get("train"):
        t, a = tr["train"], tr["args"]
        lines += [f"Training, preset {a['preset']}, {a['seq_len']} tokens x batch {a['batch']}, bf16 {tr['bf16']}, "
                  f"{t['steps']} steps: {t['tok_per_s']:,.0f} tok/s, {t['tflops']:.1f} model TFLOP/s, "
                  f"MFU {_ok(t['mfu'], 0.30)}"]
    else:
        lines.append("Training: no figures (bench.train failed or was not run)")
    lines.append("")
    pf = _load(out / "prefill.json")
    rows = [r for r in (pf or {}).get("rows", []) if r.get("status") == "ok"]
    for r in rows:
        lines.append(f"Prefill, {r['arch']} preset {r['preset']} on {r.get('device')} ({r.get('gca_backend')} GCA), "
                     f"{r['length']:,} tokens: {r['tokens_per_s']:,.0f} tok/s (last 16 blocks "
                     f"{r['tokens_per_s_tail']:,.0f}), peak RSS {r['peak_rss_mb']:,.0f} MB, "
                     f"chunk-memory transfers {r.get('transfers')}")
    if not rows:
        lines.append("Prefill: no figures (bench.prefill failed or was not run)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
