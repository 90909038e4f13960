#!/usr/bin/env python3
"""Draws bench/agent_turn.sh's output as an SVG: at one context size, the
median time toktier adds to a turn (path minus direct) for each chat_forward
mode and client API: stateless, stateful as of an earlier run, stateful now.

    tools/plot_agent_turn.py BEFORE.jsonl AFTER.jsonl CONTEXT_CHARS OUT.svg

Standard library only (no plotting package is installed on these machines).
"""
import json
import sys

SERIES = [("after", "stateless", "stateless (render + tokenize in full)", "#bbbbbb"),
          ("before", "stateful", "stateful, 2026-12-05", "#ff7f0e"),
          ("after", "stateful", "stateful, now", "#2ca02c")]


def load(path, chars):
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    return {(r["mode"], r["api"], r["path"]): r for r in rows if r.get("context_chars") == chars and "mode" in r}


def main():
    before, after, chars, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    data = {"before": load(before, chars), "after": load(after, chars)}
    groups = [(m, a) for m in ("completions", "sglang") for a in ("chat", "messages", "responses")]
    vals = [data[s][(m, a, p)]["added_ms_p50"] for m, a in groups for s, p, _, _ in SERIES
            if (m, a, p) in data[s]]
    vmax = -(-max(vals) * 1.1 // 10) * 10
    bar, gap = 30, 40
    left, top, bottom, h = 70, 40, 100, 380
    w = left + 20 + len(groups) * (len(SERIES) * (bar + 2) + gap) + 10
    plot_h = h - top - bottom
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">Time toktier adds to an agent turn at '
           f'{chars / 1e6:.1f}M characters (P50, ms; lower is better)</text>']
    for i in range(6):
        v = vmax * i / 5
        y = top + plot_h - plot_h * v / vmax
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - 20}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.0f} ms</text>')
    x = left + 20
    for m, a in groups:
        x0 = x
        for s, p, _, colour in SERIES:
            r = data[s].get((m, a, p))
            if r:
                v = r["added_ms_p50"]
                hh = plot_h * v / vmax
                y = top + plot_h - hh
                out.append(f'<rect x="{x}" y="{y:.1f}" width="{bar}" height="{hh:.1f}" fill="{colour}"/>')
                out.append(f'<text x="{x + bar / 2}" y="{y - 4:.1f}" text-anchor="middle" font-size="10">{v:.0f}</text>')
            x += bar + 2
        mid = (x0 + x - 2) / 2
        out.append(f'<text x="{mid}" y="{top + plot_h + 16}" text-anchor="middle">{a}</text>')
        out.append(f'<text x="{mid}" y="{top + plot_h + 30}" text-anchor="middle" fill="#555">{m}</text>')
        x += gap
    for i, (_, _, label, colour) in enumerate(SERIES):
        lx = left + i * 250
        ly = h - 30
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{lx + 18}" y="{ly}">{label}</text>')
    out.append("</svg>")
    open(out_path, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
