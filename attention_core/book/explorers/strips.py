"""Every chapter, on paper: which frames of a chapter's explorer the PDF edition prints (a
strip of :data:`MAX_FRAMES` or fewer, each captioned with its control values).

One table, :data:`STRIPS`, and one rule to read it (:func:`strip_keys`, :func:`strip_frames`),
used twice: an explorer's static view (:mod:`~attention_core.book.explorers.static`) renders
the print copy (:data:`~attention_core.book.render.PRINT_SCALE`) of these frames only, and the
PDF builder (``_ext/pdf_edition.py``) prints them. A setting that no longer matches its
explorer (a control or a value renamed) raises a :class:`StripError` naming the chapter, at
either place, so the build fails.

A setting is a dict from a control's name (the explorer's argument, a Python identifier, so
a label reworded on the page changes no strip) to its value (as shown); controls left out keep
the value the website starts with. The arguments describe an explorer as its static view's
data does: ``names`` (the controls' names, its ``"controls"``), ``labels`` (each
control's shown values: a list, or for a control whose values depend on the ones before it, a
dict from those controls' indices ``"i,j"`` to a list), ``start`` (the indices the website
starts at) and ``index`` (indices ``"i,j,.."`` -> distinct frame).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["MAX_FRAMES", "STRIPS", "StripError", "labels_at", "default_settings", "strip_keys",
           "strip_frames"]

STRIPS: dict[str, list[dict[str, str]]] = {
    "01_attention_basics": [{"temperature": v} for v in ("0.25", "1.0", "4.0")],
    "02_scaling": [{"d_k": d, "scaling": s}
                   for s, d in (("on", "1"), ("on", "64"), ("on", "1024"), ("off", "64"), ("off", "1024"))],
    "03_self_attention": [{"d_model": v} for v in ("4", "16", "64")],
    "04_multi_head": [{"num_heads": v} for v in ("1", "2", "4")],
    "05_masking": [{"padding": p, "causal": c}
                   for p, c in (("0", "off"), ("2", "off"), ("2", "on"))],
    "06_transformer_block": [{"norm": n, "depth": b}
                             for n in ("pre-norm", "post-norm") for b in ("2", "32")],
    "07_bahdanau_luong": [{"sentence": "a b c d e f g h i j k l", "model": m}
                          for m in ("Bahdanau (additive)", "Luong (dot)", "Luong (general)")],
    "08_sparse_linear": [{"pattern": p} for p in ("sliding window", "dilated window (dilation 2)",
                                                  "strided (causal)", "fixed (causal)")]
                        + [{"pattern": "sliding window", "num_global": "2", "num_random": "2"}],
    "09_mqa_gqa": [{"num_kv_heads": h, "context": "32768"} for h in ("32", "8", "1")],
    "10_positional_encoding": [{"base": b} for b in ("100.0", "1000.0", "10000.0")] + [{"d_model": "16"}],
    "11_flash_attention": [{"seq_len": "16", "block": "4", "key_blocks_done": k}
                           for k in ("1", "2", "3", "4")],
    "12_modern_llms": [{"variant": v} for v in ("MHA", "GQA-8", "MLA", "GQA-8 + window + sinks")],
    "13_pretrained_model": [{"sentence": "The cat, which was black, sat on the mat", "layer": v}
                            for v in ("1", "3", "6")],
    "14_real_llm": [{"layer": v} for v in ("1", "10", "19", "30")],
    "15_circuits": [{"prompt": "The capital of France is Paris. The capital of Italy is", "layer": v}
                    for v in ("0", "20", "29", "30")],
}
"""Chapter (its notebook's name) -> the settings of its explorer that the PDF prints, chosen
for what the chapter's prose asks the reader to notice. A chapter not listed gets
:func:`default_settings`.

:meta hide-value:
"""

MAX_FRAMES = 6
"""The most frames a strip prints."""

Labels = Sequence[str] | Mapping[str, Sequence[str]]


class StripError(ValueError):
    """A strip that does not match its explorer; the message starts with the chapter."""


def _check_chapter(chapter) -> None:
    if chapter is not None and not isinstance(chapter, str):
        raise TypeError(f"chapter must be a chapter id such as 'ch01', or None, got {type(chapter).__name__}")


def _check_controls(labels, start) -> None:
    """Raise unless ``labels`` is a list (one entry per control) and ``start`` a list of ints."""
    if not isinstance(labels, (list, tuple)):
        raise TypeError(f"labels must be a list of each control's labels, got {type(labels).__name__}")
    if not isinstance(start, (list, tuple)) or not all(isinstance(i, int) for i in start):
        raise TypeError(f"start must be a list of indices, one per control, got {start!r}")


def labels_at(labels: Labels, indices: Sequence[int]) -> list[str]:
    """A control's shown values, given the indices of the controls before it."""
    if not isinstance(indices, (list, tuple)):
        raise TypeError(f"indices must be a list of ints, got {type(indices).__name__}")
    if not isinstance(labels, (Mapping, list, tuple, str)):
        raise TypeError(f"labels must be a list of shown values or a dict of them, "
                        f"got {type(labels).__name__}")
    if isinstance(labels, Mapping):
        return list(labels.get(",".join(map(str, indices)), []))
    return list(labels)


def default_settings(names: Sequence[str], labels: Sequence[Labels],
                     start: Sequence[int]) -> list[dict[str, str]]:
    """Each control moved to its ends (and its middle, for an explorer of one control), the
    others as the website starts: the strip of a chapter :data:`STRIPS` does not list."""
    _check_controls(labels, start)
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"names must be a list of control names, got {names!r}")
    settings: list[dict[str, str]] = [{}]
    for n, name in enumerate(names):
        values = labels_at(labels[n], start[:n])
        for i in sorted({0, len(values) // 2 if len(names) == 1 else 0, len(values) - 1}):
            if i != start[n]:
                settings.append({name: values[i]})
    return settings[:MAX_FRAMES]


def _indices(chapter: str, names, labels, start, setting: Mapping[str, str]) -> list[int]:
    """The control indices of ``setting`` (the controls it leaves out as at ``start``)."""
    unknown = [name for name in setting if name not in names]
    if unknown:
        raise StripError(f"{chapter}: STRIPS names the control(s) {unknown}; the explorer's "
                         f"controls are {list(names)} (renamed?)")
    idx: list[int] = []
    for n, name in enumerate(names):
        values = labels_at(labels[n], idx)
        if name in setting:
            if setting[name] not in values:
                shown = {k: labels[names.index(k)] for k in setting}
                raise StripError(f"{chapter}: STRIPS setting {dict(setting)} is not one of the "
                                 f"explorer's values (it has {shown})")
            idx.append(values.index(setting[name]))
        else:
            idx.append(min(start[n], len(values) - 1))
    return idx


def strip_keys(chapter: str | None, names: Sequence[str], labels: Sequence[Labels],
               start: Sequence[int]) -> list[tuple[str, dict[str, str]]]:
    """The frames ``chapter``'s strip prints: ``(indices "i,j,..", setting)`` in order
    (``chapter`` ``None``: an explorer outside the book, the default strip). Raises
    :class:`StripError` naming the chapter for more than :data:`MAX_FRAMES` settings, or one
    whose control or value the explorer does not have."""
    _check_controls(labels, start)
    _check_chapter(chapter)
    where = chapter or "an explorer of no chapter"
    settings = STRIPS.get(chapter or "") or default_settings(names, labels, start)
    if len(settings) > MAX_FRAMES:
        raise StripError(f"{where}: STRIPS gives {len(settings)} settings, at most {MAX_FRAMES}")
    return [(",".join(map(str, _indices(where, names, labels, start, setting))), dict(setting))
            for setting in settings]


def strip_frames(chapter: str | None, names: Sequence[str], labels: Sequence[Labels], start: Sequence[int],
                 index: Mapping[str, int]) -> list[tuple[int, list[str]]]:
    """The strip of ``chapter``'s explorer: ``(frame, shown values)`` in order, each distinct
    frame once. Raises :class:`StripError` naming the chapter as :func:`strip_keys` does, and
    when a setting of :data:`STRIPS` shows the same frame as another (the default strip just
    leaves it out)."""
    _check_controls(labels, start)
    if not isinstance(index, Mapping):
        raise TypeError(f"index must map indices to frames, got {type(index).__name__}")
    _check_chapter(chapter)
    where = chapter or "an explorer of no chapter"
    listed = (chapter or "") in STRIPS
    frames, seen = [], set()
    for key, setting in strip_keys(chapter, names, labels, start):
        frame = index.get(key)
        if frame is None:
            raise StripError(f"{where}: the explorer has no frame for the setting {setting}")
        if frame in seen:
            if listed:
                raise StripError(f"{where}: STRIPS setting {setting} shows the same frame as another one")
            continue
        seen.add(frame)
        idx = [int(i) for i in key.split(",")]
        frames.append((frame, [labels_at(labels[n], idx[:n])[i] for n, i in enumerate(idx)]))
    return frames
