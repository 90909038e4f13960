#!/usr/bin/env python3
"""Draws bench/ttft_real_engine.sh's output as an SVG: for each context, the
median time to first token of the direct and the toktier path as stacked
bars (the engine's tokenization, its prefill, the rest of the engine's time,
and the time outside the engine).

    tools/plot_ttft.py TTFT.jsonl OUT.svg

Standard library only (no plotting package is installed on these machines).
"""
import json
import sys

PARTS = [("engine_tokenize_ms_p50", "engine tokenization", "#d62728"),
         ("engine_prefill_ms_p50", "engine prefill (new tokens + first sample)", "#1f77b4"),
         ("engine_other_ms_p50", "engine: reading and parsing the body", "#9467bd"),
         ("outside_engine_ms_p50", "outside the engine (toktier, loopback)", "#2ca02c")]


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    summ = [r for r in rows if r.get("summary")]
    contexts = sorted({r["context_chars"] for r in summ})
    by = {(r["context_chars"], r["path"]): r for r in summ}
    w, h, left, top, bottom = 760, 380, 70, 40, 110
    bar, gap = 46, 90
    top_v = max(sum(r[k] for k, _, _ in PARTS) for r in summ) * 1.1
    vmax = -(-top_v // 100) * 100 if top_v > 100 else -(-top_v // 10) * 10  # a round axis maximum
    plot_h = h - top - bottom
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">Time to first token, long-context '
           'continuations (median of the steps), llama.cpp tiny Llama 3.1</text>']
    for i in range(6):
        v = vmax * i / 5
        y = top + plot_h - plot_h * v / vmax
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - 20}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.0f} ms</text>')
    x = left + 30
    for c in contexts:
        for path in ("direct", "toktier"):
            r = by.get((c, path))
            if not r:
                continue
            y = top + plot_h
            for k, _, colour in PARTS:
                hh = plot_h * r[k] / vmax
                y -= hh
                out.append(f'<rect x="{x}" y="{y:.1f}" width="{bar}" height="{hh:.1f}" fill="{colour}"/>')
            total = sum(r[k] for k, _, _ in PARTS)
            out.append(f'<text x="{x + bar / 2}" y="{y - 4:.1f}" text-anchor="middle">{total:.0f}</text>')
            out.append(f'<text x="{x + bar / 2}" y="{top + plot_h + 14}" text-anchor="middle">{path}</text>')
            x += bar + 8
        out.append(f'<text x="{x - bar - 4}" y="{top + plot_h + 30}" text-anchor="middle">'
                   f'{c // 1000}K chars ({by[(c, "direct")]["prompt_tokens"] // 1000}K tokens)</text>')
        x += gap - 8
    ly = h - 55
    for i, (_, label, colour) in enumerate(PARTS):
        lx = left + (i % 2) * 340
        yy = ly + (i // 2) * 18
        out.append(f'<rect x="{lx}" y="{yy - 10}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{lx + 18}" y="{yy}">{label}</text>')
    out.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
