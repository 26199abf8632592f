"""Real benchmark score matrices, ready to use.

>>> from activeeval import datasets
>>> [d.name for d in datasets.list()][:3]
['ifeval', 'musr', 'arc_challenge']
>>> ref = datasets.load("ifeval")      # ScoreMatrix, 429 models x 541 items
>>> ref = datasets.resolve("scores.csv")  # a name, or a path to a score file  # doctest: +SKIP

See ``activeeval/data/bundled/ATTRIBUTION.md`` for the origin and licence of
each matrix.
"""

from __future__ import annotations

from activeeval.data.datasets import DatasetInfo, info, list_datasets, load, resolve, shared_data_dir

list = list_datasets  # shadows the builtin on purpose: the public name is datasets.list()

__all__ = ["DatasetInfo", "info", "list", "list_datasets", "load", "resolve", "shared_data_dir"]
