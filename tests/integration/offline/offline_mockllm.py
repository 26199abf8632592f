"""Inspect's mock model offline: a stand-in for tiktoken's ``o200k_base`` encoding.

Inspect's ``mockllm`` provider fills in token usage with
``tiktoken.get_encoding("o200k_base")``, whose vocabulary tiktoken downloads
on first use; the tests run with no network. :func:`install` registers a
byte-level encoding under that name (tiktoken returns a registered encoding
without loading anything), which changes only the token counts the mock
model reports, never its answers or the scores.
"""

from __future__ import annotations


def stand_in():
    import tiktoken

    return tiktoken.Encoding(name="o200k_base", pat_str=r"\S+|\s+",
                             mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={})


def install() -> None:
    import tiktoken.registry

    tiktoken.registry.ENCODINGS.setdefault("o200k_base", stand_in())
