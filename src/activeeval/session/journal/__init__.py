"""A session's journal: the SQLite file (:mod:`.storage`) and the snapshots of its rebuilt state (:mod:`.snapshot`).

The bottom floor of :mod:`activeeval.session`: it knows events, settings changes and plain data, never a
session kind or a method.
"""
