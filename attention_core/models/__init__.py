"""Every chapter: models, tasks and experiments built on :mod:`attention_core.nn`: the tiny transformers
the chapters train, the one training loop, synthetic tasks, chapter 7's encoder-decoder,
chapter 13's pretrained encoder, reading a trained model's heads, measuring time and
memory, and each chapter's experiments.

Imports :mod:`attention_core.nn`, never :mod:`attention_core.book`; loads no drawing,
widget or notebook library.
"""
