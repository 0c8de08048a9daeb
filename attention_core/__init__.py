"""attention_core: the attention mechanisms of the book, small, tested, and readable.

Three layers, one folder each, imported one way: :mod:`attention_core.nn` is the maths
(PyTorch only); :mod:`attention_core.models` builds models, tasks, training and the chapters'
experiments on it; :mod:`attention_core.book` draws figures, runs explorers and checks
exercises. Importing this package loads torch and numpy only, and changes nothing: no
environment variable, no global setting.

The public API, one rule: every module of :mod:`attention_core.nn` whose name has no leading
underscore declares its public names in ``__all__``, and ``ac.__all__`` is the union of them
all, each re-exported here (``ac.MultiHeadAttention``), except
:mod:`~attention_core.nn.triton_flash`, which imports Triton (an optional dependency) and is
imported on first use. A name outside its module's ``__all__`` is internal: underscored, or a
helper shared between modules that its module's docstring names as internal; it may change
without notice. Chapters import the maths from here, ``import attention_core as ac`` or
``from attention_core import name``, and a whole module (``from attention_core.nn import
sparse``) only to show its source or a name that is not re-exported. ``tests/test_imports.py``
checks the rule.
"""

import importlib

from .nn.attention_functions import *  # noqa: F403
from .nn.backends import *  # noqa: F403
from .nn.block import *  # noqa: F403
from .nn.delta_rule import *  # noqa: F403
from .nn.feedforward import *  # noqa: F403
from .nn.flash import *  # noqa: F403
from .nn.functional import *  # noqa: F403
from .nn.heads import *  # noqa: F403
from .nn.kv_cache import *  # noqa: F403
from .nn.kv_memory import *  # noqa: F403
from .nn.latent_attention import *  # noqa: F403
from .nn.linear_attention import *  # noqa: F403
from .nn.masks import *  # noqa: F403
from .nn.metrics import *  # noqa: F403
from .nn.multihead import *  # noqa: F403
from .nn.norms import *  # noqa: F403
from .nn.paged import *  # noqa: F403
from .nn.positional import *  # noqa: F403
from .nn.scoring import *  # noqa: F403
from .nn.sparse import *  # noqa: F403

__version__ = "0.1.0"

_NN_MODULES = ("attention_functions", "backends", "block", "delta_rule", "feedforward", "flash",
              "functional", "heads", "kv_cache", "kv_memory", "latent_attention", "linear_attention",
              "masks", "metrics", "multihead", "norms", "paged", "positional", "scoring", "sparse")
"""The modules of :mod:`attention_core.nn` whose ``__all__`` is re-exported here: all but the
private ``_checks`` and the optional ``triton_flash``."""

__all__ = sorted(name for module in _NN_MODULES
                 for name in importlib.import_module(f".nn.{module}", __name__).__all__)
