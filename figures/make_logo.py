"""Draw the book's logo and favicon: a small causal attention map (viridis)."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from attention_core import scaled_dot_product_attention

OUT = Path(__file__).parent / "_generated"


def draw(path: Path, size: float, dpi: int) -> None:
    torch.manual_seed(3)
    x = torch.randn(6, 4)
    _, weights = scaled_dot_product_attention(x, x, x, is_causal=True, scale=1.0)
    fig = plt.figure(figsize=(size, size), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.imshow(weights.numpy() ** 0.5, cmap="viridis", vmin=0, vmax=1)
    ax.axis("off")
    fig.savefig(path, transparent=True)
    plt.close(fig)


if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    draw(OUT / "logo.png", 2.0, 100)
    draw(OUT / "favicon.png", 0.32, 100)
