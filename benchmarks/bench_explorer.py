"""One live explorer update: compute, update the artists, draw the canvas, encode PNG."""

from __future__ import annotations

from _timing import machine, median_seconds
from attention_core.explorers import basics_explorer
from attention_core.toy_tasks import tokenize


def run() -> dict:
    explorer = basics_explorer(tokenize("the cat sat on the mat because it was tired"))
    temperatures = iter([0.5, 2.0] * 100)
    seconds = median_seconds(lambda: explorer.set(temperature=next(temperatures)), repeats=21)
    html_bytes = len(explorer.to_html().encode())
    return {"update_s": seconds, "target_s": 0.1, "static_html_bytes": html_bytes,
            "machine": machine()}


if __name__ == "__main__":
    r = run()
    print(f"explorer update (chapter 1, default sizes): {r['update_s'] * 1e3:.1f} ms median "
          f"(target < {r['target_s'] * 1e3:.0f} ms); static view {r['static_html_bytes'] / 1e6:.2f} MB")
