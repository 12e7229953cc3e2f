"""The bench's ratio table as a bar chart (docs/performance.svg), written without a plotting
library: one bar per row, on a log scale centred on 1× and oriented so that a bar to the
right means Samsa did better (the ratio itself for "higher is better" rows, its inverse for
"lower is better" rows), and labelled with the ratio as the table prints it."""

from __future__ import annotations

import math
from html import escape

ROW_H, LABEL_W, BAR_W, PAD = 18, 520, 420, 10
LIMIT = 8.0  # bars are clipped at 8× either way (the label still tells the ratio)


def ratio_svg(rows: list[tuple[str, float, bool]], title: str) -> str:
    """rows: (label, Samsa/Kafka ratio, higher is better)."""
    height = PAD * 2 + 40 + ROW_H * len(rows) + 20
    width = LABEL_W + BAR_W + 120
    centre = LABEL_W + BAR_W / 2
    scale = (BAR_W / 2) / math.log2(LIMIT)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{PAD}" y="{PAD + 12}" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<text x="{centre}" y="{PAD + 30}" text-anchor="middle" fill="#555">'
        "← Kafka better · Samsa better →</text>",
    ]
    top = PAD + 40
    for fold in (1 / 4, 1 / 2, 1.0, 2.0, 4.0):
        x = centre + math.log2(fold) * scale
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - 24}" '
                   f'stroke="{"#333" if fold == 1 else "#ddd"}"/>')
        out.append(f'<text x="{x:.1f}" y="{height - 10}" text-anchor="middle" fill="#555">'
                   f'{fold:g}×</text>')
    for i, (label, ratio, higher) in enumerate(rows):
        y = top + i * ROW_H
        advantage = ratio if higher else 1 / ratio
        length = max(-LIMIT, min(LIMIT, math.log2(advantage) if advantage > 0 else -LIMIT))
        w = abs(length) * scale
        x = centre if length >= 0 else centre - w
        colour = "#3a8f3a" if advantage >= 1 else "#c0392b"
        out.append(f'<text x="{LABEL_W - 6}" y="{y + 13}" text-anchor="end">'
                   f"{escape(label)}</text>")
        out.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{max(w, 1):.1f}" height="{ROW_H - 6}" '
                   f'fill="{colour}"/>')
        out.append(f'<text x="{LABEL_W + BAR_W + 8}" y="{y + 13}">{ratio:.2f}× '
                   f'({"higher" if higher else "lower"} is better)</text>')
    out.append("</svg>")
    return "\n".join(out)
