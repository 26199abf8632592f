"""Snapshots of a session's rebuilt state, kept in the user cache as plain data, so reopening a large session is fast.

A session's state is a deterministic function of its settings and its
recorded scores (DESIGN.md), so it can always be rebuilt by replaying the
journal; at scale that costs seconds per command (building the method on a
20 000-item reference alone can take longer than the target of one command).
A snapshot is that state written down as data: the objects' attributes as
JSON and their arrays as raw numbers (:func:`encode_state`), stored in the
user cache (:mod:`activeeval.user_cache`), never in the session file. A
session file therefore holds nothing but data a user can read: its settings
and its journal. Files written by earlier versions kept a pickled snapshot in
their table ``snapshots``; it is never read.

What the codec writes, and reads back without running any code of the
entry's choosing:

* ``None``, booleans, integers, floats, strings; lists, tuples, dicts, sets;
* numpy arrays and scalars of numbers or booleans (no object arrays), with
  their read-only flag (a long list of 1-D arrays of one dtype, such as
  BayesAME's bucket members, as one array and the lengths: one array of the
  entry, not one each, so a 20 000-bucket state reads in milliseconds);
  numpy ``Generator``s by their bit generator's state;
* instances of activeeval's own method and maths classes (modules listed in
  :data:`ALLOWED_MODULES`), created without calling ``__init__``,
  ``__new__`` overrides or ``__setstate__``, their attributes set directly;
  bound methods of such instances, when the name is a plain function of the
  class;
* objects the session already holds (its reference matrix), by name.

A state holding anything else (a method registered from another package, a
lambda) gets no snapshot: the session replays its journal, which is always
correct. Shared objects stay shared and cycles are kept.

An entry is used only when its ``key`` matches the one recomputed from the
journal: a SHA-256 of everything the state depends on (the session kind, the
method spec and keyword arguments, the targets, the reference fingerprint, a
digest of every recorded score up to ``upto``, in order, the activeeval source
code, the Python and NumPy versions); otherwise the session falls back to the
replay, which gives the same state (tested for every registered method). So
a snapshot can never change a result, only the time it takes to get it.
Each session file has one slot, replaced as the session goes on; a snapshot
is written only once rebuilding took longer than
:data:`SNAPSHOT_AFTER_SECONDS` and loading it should cost at most half of
that.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import re
import sys
import types
from collections.abc import Mapping
from typing import Any

import numpy as np

from activeeval.user_cache import code_fingerprint

__all__ = [
    "ALLOWED_MODULES",
    "SNAPSHOT_AFTER_SECONDS",
    "TellDigest",
    "code_fingerprint",
    "decode_state",
    "encode_state",
    "snapshot_key",
    "worth_storing",
]

SNAPSHOT_FORMAT = 2  # 1 was a pickle in the session file
# Write a snapshot once rebuilding (building the method and replaying scores) took longer than this.
SNAPSHOT_AFTER_SECONDS = 0.25
# Reading a cache entry (mapping it, checking its CRC-32) runs faster than 300 MB/s here, loaded or not
# (benchmarks/bench_session.py);
# a snapshot is kept only if loading it should take at most half the rebuild it saves (a method that caches a
# large matrix may be cheaper to rebuild than to load).
LOAD_BYTES_PER_SECOND = 300e6
# Modules whose classes a snapshot may hold (and their submodules): the methods, their maths, the ranker.
ALLOWED_MODULES = (
    "activeeval.methods", "activeeval.gaussian", "activeeval.gp", "activeeval.kernels", "activeeval.lmc",
    "activeeval.logit", "activeeval.batch", "activeeval.design", "activeeval.irt", "activeeval.data.matrix",
    "activeeval.ranking", "activeeval.stopping", "activeeval.session.ranking",
)
_ARRAY_KINDS = frozenset("biufc")
# A list of at least this many 1-D arrays of one dtype is stored packed: one array and their lengths.
PACK_MIN = 16
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class TellDigest:
    """A running digest of recorded scores, in journal order."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def add(self, seq: int, target: str, item_id: str, score: float) -> None:
        self._h.update(f"{seq}\x1f{target}\x1f{item_id}\x1f{float(score)!r}\n".encode("utf-8", "surrogatepass"))

    def hexdigest(self) -> str:
        return self._h.copy().hexdigest()


def snapshot_key(settings: Mapping[str, Any], tells: str) -> str:
    """The key a snapshot must carry to stand for the state after the tells digested in ``tells``."""
    payload = {
        "snapshot_format": SNAPSHOT_FORMAT,
        "kind": settings.get("kind", "single"),
        "method": settings.get("method"),
        "method_kwargs": settings.get("method_kwargs"),
        "targets": settings.get("targets"),
        "missing": settings.get("missing"),
        "reference": (settings.get("reference") or {}).get("fingerprint"),
        "code": code_fingerprint(),
        "python": sys.version,
        "numpy": np.__version__,
        "tells": tells,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def worth_storing(arrays: list[np.ndarray], rebuild_seconds: float) -> bool:
    """Whether loading a snapshot of these arrays should take at most half the ``rebuild_seconds`` it saves."""
    return sum(a.nbytes for a in arrays) / LOAD_BYTES_PER_SECOND <= rebuild_seconds / 2


# ------------------------------------------------------------------ encoding
class Unencodable(Exception):
    """The state holds something the codec does not write (the session then replays instead)."""


def encode_state(state: Any, externals: Mapping[str, Any]) -> tuple[Any, list[np.ndarray]]:
    """``state`` as (a JSON-able graph, its arrays); raises :class:`Unencodable`.

    ``externals`` are objects the decoder is given again (by name), written as
    references only (the session's reference matrix).
    """
    return _Encoder(externals).run(state)


def _allowed_class(cls: type) -> bool:
    module = getattr(cls, "__module__", "") or ""
    return any(module == m or module.startswith(m + ".") for m in ALLOWED_MODULES) and "<" not in cls.__qualname__


def _slots(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else [s for s in slots if s not in ("__dict__", "__weakref__")]
    return names


class _Encoder:
    def __init__(self, externals: Mapping[str, Any]) -> None:
        self.externals = {id(obj): name for name, obj in externals.items()}
        self.memo: dict[int, int] = {}
        self.alive: list[Any] = []  # every memoised object, so no id is reused while encoding
        self.arrays: list[np.ndarray] = []

    def run(self, state: Any) -> tuple[Any, list[np.ndarray]]:
        try:
            return self.node(state), self.arrays
        except RecursionError as exc:
            raise Unencodable("the state is nested too deeply") from exc

    def _remember(self, obj: Any) -> int:
        self.memo[id(obj)] = n = len(self.memo)
        self.alive.append(obj)
        return n

    def node(self, o: Any) -> Any:
        t = type(o)
        if o is None or t in (bool, int, str):
            return o
        if t is float:
            return o if o == o and o not in (float("inf"), float("-inf")) else {"$": "float", "v": repr(o)}
        if id(o) in self.externals:
            return {"$": "ext", "name": self.externals[id(o)]}
        if id(o) in self.memo:
            return {"$": "ref", "id": self.memo[id(o)]}
        if t is tuple:
            return {"$": "tuple", "v": [self.node(v) for v in o]}
        if t in (set, frozenset):
            return {"$": t.__name__, "v": [self.node(v) for v in o]}
        if t is list:
            packed = self._packed(o)
            if packed is not None:
                return packed
            n = self._remember(o)
            return {"$": "list", "id": n, "v": [self.node(v) for v in o]}
        if t is dict:
            n = self._remember(o)
            return {"$": "dict", "id": n, "v": [[self.node(k), self.node(v)] for k, v in o.items()]}
        if t is np.ndarray or isinstance(o, np.generic):
            if o.dtype.kind not in _ARRAY_KINDS:
                raise Unencodable(f"a numpy array of dtype {o.dtype}")
            if isinstance(o, np.generic):
                self.arrays.append(np.asarray(o))
                return {"$": "scalar", "a": len(self.arrays) - 1}
            n = self._remember(o)
            self.arrays.append(o)
            out = {"$": "array", "id": n, "a": len(self.arrays) - 1, "write": bool(o.flags.writeable)}
            if o.ndim > 1 and o.flags.f_contiguous and not o.flags.c_contiguous:
                # the store writes C order; BLAS rounds a product of a Fortran-ordered array differently, so the
                # state read back would drift from the replayed one in the last bits: restore the order
                out["fortran"] = True
            return out
        if t is np.random.Generator:
            bits = o.bit_generator
            if type(bits).__name__ not in _BIT_GENERATORS or type(bits) is not getattr(np.random, type(bits).__name__):
                raise Unencodable(f"a Generator on {type(bits).__name__}")
            n = self._remember(o)
            return {"$": "rng", "id": n, "bits": type(bits).__name__, "state": self.node(bits.state)}
        if t is types.MethodType:
            owner, name = o.__self__, o.__func__.__name__
            if inspect.getattr_static(type(owner), name, None) is not o.__func__ or not _allowed_class(type(owner)):
                raise Unencodable(f"the bound method {o!r}")
            return {"$": "method", "self": self.node(owner), "name": name}
        if isinstance(t, type) and _allowed_class(t):
            return self._object(o, t)
        raise Unencodable(f"an object of type {t.__module__}.{t.__qualname__}")

    def _packed(self, o: list[Any]) -> dict[str, Any] | None:
        """A long list of distinct 1-D arrays of one dtype and read-only flag, none seen before, as one array and the
        lengths (each array keeps its own object id, so later references to it still resolve); else None."""
        if len(o) < PACK_MIN or type(o[0]) is not np.ndarray:
            return None
        dtype, write = o[0].dtype, o[0].flags.writeable
        if dtype.kind not in _ARRAY_KINDS or any(
                type(a) is not np.ndarray or a.ndim != 1 or a.dtype != dtype or a.flags.writeable != write
                or id(a) in self.memo or id(a) in self.externals for a in o) or len({id(a) for a in o}) < len(o):
            return None
        n = self._remember(o)
        for a in o:
            self._remember(a)
        self.arrays.append(np.concatenate(o))
        self.arrays.append(np.array([a.size for a in o], dtype=np.int64))
        return {"$": "packed", "id": n, "a": len(self.arrays) - 2, "lengths": len(self.arrays) - 1, "write": write}

    def _object(self, o: Any, t: type) -> Any:
        base = dict if isinstance(o, dict) else object
        if t.__new__ is not base.__new__ or isinstance(o, (list, tuple, set, np.ndarray)):
            raise Unencodable(f"an object of type {t.__qualname__} (made by its own __new__)")
        n = self._remember(o)
        out: dict[str, Any] = {"$": "object", "id": n, "class": f"{t.__module__}:{t.__qualname__}"}
        attrs = getattr(o, "__dict__", None)
        if attrs is not None:
            out["dict"] = [[k, self.node(v)] for k, v in attrs.items() if type(k) is str]
            if len(out["dict"]) != len(attrs):
                raise Unencodable(f"an attribute of {t.__qualname__} that is not named by a string")
        slots = [[s, self.node(getattr(o, s))] for s in _slots(t) if hasattr(o, s)]
        if slots:
            out["slots"] = slots
        if base is dict:
            out["items"] = [[self.node(k), self.node(v)] for k, v in dict.items(o)]
        return out


# ------------------------------------------------------------------ decoding
def decode_state(graph: Any, arrays: tuple[np.ndarray, ...], externals: Mapping[str, Any]) -> Any:
    """The state written by :func:`encode_state` (raises on anything it did not write: callers replay instead)."""
    return _Decoder(arrays, externals).node(graph)


class _Decoder:
    def __init__(self, arrays: tuple[np.ndarray, ...], externals: Mapping[str, Any]) -> None:
        self.arrays = arrays
        self.externals = dict(externals)
        self.memo: dict[int, Any] = {}

    def _remember(self, n: Any, obj: Any) -> Any:
        if type(n) is not int or n in self.memo:
            raise ValueError(f"bad object id {n!r}")
        self.memo[n] = obj
        return obj

    def node(self, x: Any) -> Any:
        if x is None or type(x) in (bool, int, float, str):
            return x
        if type(x) is not dict:
            raise ValueError(f"unexpected {type(x).__name__} in a snapshot")
        tag = x["$"]
        if tag == "float":
            return float(x["v"]) if x["v"] in ("nan", "inf", "-inf") else _bad(x)
        if tag == "ext":
            return self.externals[x["name"]]
        if tag == "ref":
            return self.memo[x["id"]]
        if tag == "tuple":
            if all(type(v) is str for v in x["v"]):  # (item ids: 20 000 strings, no node to decode)
                return tuple(x["v"])
            return tuple(self.node(v) for v in x["v"])
        if tag in ("set", "frozenset"):
            return (set if tag == "set" else frozenset)(self.node(v) for v in x["v"])
        if tag == "list":
            out: list[Any] = self._remember(x["id"], [])
            out.extend(self.node(v) for v in x["v"])
            return out
        if tag == "dict":
            d: dict[Any, Any] = self._remember(x["id"], {})
            for k, v in x["v"]:
                d[self.node(k)] = self.node(v)
            return d
        if tag == "packed":
            return self._packed(x)
        if tag == "scalar":
            a = self.arrays[x["a"]]
            return a.reshape(())[()] if a.size == 1 else _bad(x)
        if tag == "array":
            a = self.arrays[x["a"]]
            if x.get("fortran") is True:
                a = np.asfortranarray(a)
            if not x["write"]:
                a.setflags(write=False)
            return self._remember(x["id"], a)
        if tag == "rng":
            name = x["bits"]
            if name not in _BIT_GENERATORS:
                return _bad(x)
            bits = getattr(np.random, name)()
            gen = self._remember(x["id"], np.random.Generator(bits))
            bits.state = self.node(x["state"])  # numpy checks the state's fields
            return gen
        if tag == "method":
            owner, name = self.node(x["self"]), x["name"]
            func = inspect.getattr_static(type(owner), name, None) if _NAME.match(name) else None
            if not (_allowed_class(type(owner)) and isinstance(func, types.FunctionType)):
                return _bad(x)
            return types.MethodType(func, owner)
        if tag == "object":
            return self._object(x)
        return _bad(x)

    def _packed(self, x: dict[str, Any]) -> list[np.ndarray]:
        values, lengths = self.arrays[x["a"]], self.arrays[x["lengths"]]
        if values.ndim != 1 or lengths.ndim != 1 or lengths.dtype.kind not in "iu" or (lengths < 0).any() or (
                int(lengths.sum()) != values.size):
            return _bad(x)
        out: list[np.ndarray] = self._remember(x["id"], [])
        if not x["write"]:
            values = values.view()
            values.setflags(write=False)  # (so is every slice of it)
        ends = np.cumsum(lengths).tolist()
        out.extend(values[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=True))
        ids = range(x["id"] + 1, x["id"] + 1 + len(out))  # each array's own id follows the list's
        if not self.memo.keys().isdisjoint(ids):
            raise ValueError(f"bad object ids in {x['id']!r}")
        self.memo.update(zip(ids, out, strict=True))
        return out

    def _object(self, x: dict[str, Any]) -> Any:
        cls = _find_class(x["class"])
        if issubclass(cls, dict) and cls.__new__ is dict.__new__:
            obj = self._remember(x["id"], dict.__new__(cls))
        elif cls.__new__ is object.__new__ and not issubclass(cls, (list, tuple, set, dict, np.ndarray)):
            obj = self._remember(x["id"], object.__new__(cls))
        else:
            return _bad(x)
        if "dict" in x:
            attrs = obj.__dict__  # set directly: no __setattr__, no descriptor runs
            for name, value in x["dict"]:
                if type(name) is not str:
                    return _bad(x)
                attrs[name] = self.node(value)
        slots = set(_slots(cls))
        for name, value in x.get("slots", ()):
            if name not in slots or type(inspect.getattr_static(cls, name, None)).__name__ != "member_descriptor":
                return _bad(x)
            object.__setattr__(obj, name, self.node(value))  # a slot's own descriptor stores the value
        for k, v in x.get("items", ()):
            dict.__setitem__(obj, self.node(k), self.node(v))
        return obj


def _find_class(name: Any) -> type:
    """The class ``"module:qualname"`` of an allowed activeeval module (imported if need be), nothing else."""
    module, _, qualname = str(name).partition(":")
    parts = module.split(".") + qualname.split(".")
    if not all(_NAME.match(p) for p in parts) or not any(
            module == m or module.startswith(m + ".") for m in ALLOWED_MODULES):
        raise ValueError(f"class {name!r} is not one a snapshot may hold")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type) or obj.__module__ != module or obj.__qualname__ != qualname:
        raise ValueError(f"{name!r} is not a class defined there")
    return obj


def _bad(x: Any) -> Any:
    raise ValueError(f"not a snapshot node: {str(x)[:80]}")
