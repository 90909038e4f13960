#!/usr/bin/env python3
"""Draws a soak run (toktier_loadgen --soak ... --soak-csv FILE) as an SVG:
the proxy's RSS over time on top (with the memory it reports: the budgeted
parts, and those plus the store's memtables, caches and write queue), each
window's P50 and P99 below.

    tools/plot_soak.py SOAK.csv OUT.svg [--title TEXT]

Standard library only (no plotting package is installed on these machines).
"""
import argparse
import csv
import math


def nice_max(v):
    """A round axis maximum at or above v."""
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * exp >= v:
            return m * exp
    return 10 * exp


def panel(out, x0, y0, w, h, xs, series, xmax, ymax, ylabel, hline=None):
    """One chart: axes, grid, polylines; series = [(label, ys, colour, dash)]."""
    def px(x):
        return x0 + w * x / xmax

    def py(y):
        return y0 + h - h * min(y, ymax) / ymax

    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#444"/>')
    for i in range(6):
        y = ymax * i / 5
        out.append(f'<line x1="{x0}" y1="{py(y):.1f}" x2="{x0 + w}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for i in range(11):
        x = xmax * i / 10
        out.append(f'<line x1="{px(x):.1f}" y1="{y0}" x2="{px(x):.1f}" y2="{y0 + h}" stroke="#eee"/>')
        out.append(f'<text x="{px(x):.1f}" y="{y0 + h + 16}" text-anchor="middle">{x:g}</text>')
    out.append(f'<text transform="translate({x0 - 48},{y0 + h / 2}) rotate(-90)" text-anchor="middle">{ylabel}</text>')
    if hline is not None:
        value, label = hline
        out.append(f'<line x1="{x0}" y1="{py(value):.1f}" x2="{x0 + w}" y2="{py(value):.1f}" '
                   f'stroke="#c00" stroke-dasharray="6,4"/>')
        out.append(f'<text x="{x0 + w - 4}" y="{py(value) - 5:.1f}" text-anchor="end" fill="#c00">{label}</text>')
    for k, (label, ys, colour, dash) in enumerate(series):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.8"{extra}/>')
        lx = x0 + 10 + 130 * k
        out.append(f'<line x1="{lx}" y1="{y0 + 14}" x2="{lx + 24}" y2="{y0 + 14}" stroke="{colour}" '
                   f'stroke-width="2"{extra}/>')
        out.append(f'<text x="{lx + 30}" y="{y0 + 18}">{label}</text>')


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("svg")
    ap.add_argument("--title", default="toktier soak")
    args = ap.parse_args()
    rows = list(csv.DictReader(open(args.csv)))
    if not rows:
        raise SystemExit(f"{args.csv}: no rows")
    t = [float(r["t_s"]) / 60 for r in rows]
    rss = [float(r["rss_mib"]) for r in rows]
    p50 = [float(r["p50_ms"]) for r in rows]
    p99 = [float(r["p99_ms"]) for r in rows]
    errors = sum(int(r["errors"]) + int(r["dropped"]) for r in rows)
    requests = sum(int(r["requests"]) for r in rows)
    width, height = 860, 560
    left, top, pw, ph = 80, 50, 740, 190
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{args.title}</text>',
           f'<text x="{width / 2}" y="40" text-anchor="middle" fill="#555">{requests} requests at '
           f'{float(rows[0]["rate"]):g} req/s, {errors} errors or drops, '
           f'{len(rows)} windows</text>']
    xmax = nice_max(max(t))
    mem_series = [("RSS", rss, "#1f77b4", None)]
    if rows and "budgeted_mib" in rows[0]:
        # What the proxy reports at /metrics: the budgeted parts, and those
        # plus what the store holds outside the budget (memtables, caches).
        budgeted = [float(r["budgeted_mib"]) for r in rows]
        reported = [float(r["budgeted_mib"]) + float(r["memtables_mib"]) + float(r["block_cache_mib"]) +
                    float(r["table_readers_mib"]) + float(r["write_queue_mib"]) for r in rows]
        mem_series += [("budgeted", budgeted, "#9467bd", "4,3"), ("+ store overhead", reported, "#8c564b", "2,2")]
    panel(out, left, top + 10, pw, ph, t, mem_series, xmax, nice_max(max(rss) * 1.1), "proxy memory (MiB)")
    panel(out, left, top + ph + 70, pw, ph, t,
          [("P99", p99, "#d62728", None), ("P50", p50, "#2ca02c", "4,3")],
          xmax, nice_max(max(max(p99), 50) * 1.1), "latency per window (ms)", hline=(50, "P99 limit 50 ms"))
    out.append(f'<text x="{left + pw / 2}" y="{height - 8}" text-anchor="middle">minutes since the soak started'
               f'</text>')
    out.append("</svg>")
    with open(args.svg, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
