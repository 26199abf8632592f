"""Methods by name, for the CLI, sessions and the backtest engine.

Each name maps to ``"module:attribute"`` (imported on first use, so a session
with BayesAME does not import every baseline's dependencies) or to a factory
``f(reference, **kwargs) -> BaseMethod`` registered at run time. A method's
fast backtest replay, if it has one, is part of its class
(:func:`resolve_replay`), and so are its :class:`Capabilities` (:func:`capabilities`:
what the engines ask instead of its name): adding a method is its module plus
one line here.

A *method spec* is a name with optional constructor options in brackets,
``"bayesame-paper[noise=learned,refit_every=25]"``: what the backtest CLI accepts
in ``--methods``, so that settings of one method can be compared side by side
(:func:`parse_method_spec`, :func:`split_method_list`).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
from collections import ChainMap
from collections.abc import Callable, Mapping, MutableMapping
from types import MappingProxyType
from typing import Any, cast

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.methods.base import BaseMethod
from activeeval.methods.capabilities import Capabilities
from activeeval.settings import flat_options, flatten

__all__ = [
    "METHODS",
    "Capabilities",
    "capabilities",
    "check_method_spec",
    "flatten_options",
    "is_multi_target",
    "make_method",
    "method_names",
    "method_parameters",
    "method_spec",
    "parse_method_spec",
    "register",
    "resolve_factory",
    "resolve_replay",
    "sharing_factory",
    "split_method_list",
    "unregister",
]

MethodFactory = Callable[..., BaseMethod]

_BUILTIN: Mapping[str, str | MethodFactory] = MappingProxyType({
    "bayesame": "activeeval.methods.bayesame:BayesAME",
    "bayesame-rs": "activeeval.methods.bayesame:BayesAMERS",
    "bayesame-paper": "activeeval.methods.bayesame_paper:BayesAMEPaper",
    "bayesame-paper-rs": "activeeval.methods.bayesame_paper:BayesAMEPaperRS",
    "rs-mean": "activeeval.methods.baselines.rs_mean:RSMean",
    "seq-apw": "activeeval.methods.baselines.seq_apw:SeqAPW",
    "bayes-aipw": "activeeval.methods.baselines.bayes_aipw:BayesAIPW",
    "bayes-rs-learn": "activeeval.methods.baselines.bayes_rs_learn:BayesRSLearn",
    "aipw-ridge": "activeeval.methods.baselines.peers:AIPWRidge",
    "rs-learn": "activeeval.methods.baselines.peers:RSLearn",
    "proeval": "activeeval.methods.baselines.proeval:ProEval",
    "irt": "activeeval.methods.baselines.irt:IRTBaseline",
    "cat": "activeeval.methods.cat:ContinuousCAT",
    "bayesame-multi": "activeeval.methods.bayesame_multi:BayesAMEMulti",
    "bayesame-multi-paper": "activeeval.methods.bayesame_multi:BayesAMEMultiPaper",
})
_REGISTERED: dict[str, MethodFactory] = {}
#: The capabilities given to :func:`register` (over the factory's own ``capabilities`` attribute).
_REGISTERED_CAPABILITIES: dict[str, Capabilities] = {}
#: Every method by name: the built-ins (``"module:Class"``, imported on first use) and those added with
#: :func:`register`. Read-only: nothing can replace a built-in behind the back of code that relies on it.
# (ChainMap's stub asks for mutable maps; the proxy on top is what keeps METHODS read-only)
METHODS: Mapping[str, str | MethodFactory] = MappingProxyType(ChainMap(  # built-ins listed first
    cast("MutableMapping[str, str | MethodFactory]", _REGISTERED),
    cast("MutableMapping[str, str | MethodFactory]", _BUILTIN)))


def resolve_replay(name: str) -> Callable[..., tuple[Any, Any]] | None:
    """The fast backtest replay of method ``name``, or None if it has none (the runner then plays it step by step).

    A method's replay is its class's own ``replay`` static method,
    ``Cls.replay(reference, truths (T, N), seed, **options) -> (means, vars)``,
    each (T, N), equal to playing the class with that seed on each target to
    n = N (see :func:`activeeval.methods.baselines._common.fast_replay`). It
    is looked up on the class itself, not inherited: a subclass plays
    differently until it declares its own. A method registered at run time
    (:func:`register`) has none.
    """
    if not isinstance(_BUILTIN.get(name), str):
        return None
    cls = resolve_factory(name)
    if not inspect.isclass(cls) or "replay" not in vars(cls):
        return None
    return cast(Any, cls).replay


_NONE = Capabilities()


def capabilities(name: str) -> Capabilities:
    """What the method ``name`` declares it can do (:class:`Capabilities`): the engines ask this, never its name.

    The capabilities given to :func:`register`, else the class's (or
    factory's) ``capabilities`` attribute, else the defaults (a plain
    single-target method). Raises :class:`ConfigurationError` for an
    unknown name.
    """
    given = _REGISTERED_CAPABILITIES.get(name)
    if given is not None and name in _REGISTERED:
        return given
    declared = getattr(resolve_factory(name), "capabilities", None)
    return declared if isinstance(declared, Capabilities) else _NONE


def is_multi_target(name: str) -> bool:
    """Whether the method ``name`` evaluates several targets jointly (built as ``cls(reference, targets, ...)``).

    Its capabilities say so (:attr:`Capabilities.multi_target`); False for a name no method has.
    """
    return name in METHODS and capabilities(name).multi_target


def register(name: str, factory: MethodFactory, capabilities: Capabilities | None = None) -> None:
    """Make ``factory(reference, **kwargs) -> BaseMethod`` available as ``name`` (in this process).

    ``capabilities`` (:class:`Capabilities`) say what the engines may do
    with it; without, the factory's own ``capabilities`` attribute (a method
    class declares them) or the defaults. A built-in name cannot be taken
    (its class's fast replay and the backtest's shortcuts rely on it being
    that class); registering a name again replaces what :func:`register`
    put there.
    """
    if not isinstance(name, str) or not _SPEC.match(name) or "[" in name:
        raise ConfigurationError(f"a method name is letters, digits and . _ -, got {name!r}")
    if name in _BUILTIN:
        raise ConfigurationError(f"{name!r} is a built-in method; register yours under another name")
    if not callable(factory):
        raise ConfigurationError(f"the factory for {name!r} must be callable (reference, **options) -> method")
    declared = getattr(factory, "capabilities", None)
    for what, caps in (("capabilities", capabilities), (f"{name!r}'s factory's capabilities attribute", declared)):
        if caps is not None and not isinstance(caps, Capabilities):
            raise ConfigurationError(
                f"{what} must be an activeeval.methods.registry.Capabilities, got {type(caps).__name__}")
    _REGISTERED[name] = factory
    if capabilities is None:
        _REGISTERED_CAPABILITIES.pop(name, None)
    else:
        _REGISTERED_CAPABILITIES[name] = capabilities


def unregister(name: str) -> None:
    """Remove a method added with :func:`register` (built-ins stay)."""
    if name in _BUILTIN:
        raise ConfigurationError(f"{name!r} is a built-in method and cannot be removed")
    _REGISTERED.pop(name, None)
    _REGISTERED_CAPABILITIES.pop(name, None)


def method_names() -> list[str]:
    return list(METHODS)


def resolve_factory(name: str) -> MethodFactory:
    """The class or factory registered as ``name``.

    Raises :class:`ConfigurationError` for an unknown name, suggesting the
    closest known one.
    """
    try:
        spec = METHODS[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), METHODS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigurationError(
            f"unknown method {name!r}{hint}; choose one of: {', '.join(METHODS)}"
        ) from None
    if isinstance(spec, str):
        module, _, attr = spec.partition(":")
        return getattr(importlib.import_module(module), attr)
    return spec


def make_method(name: str, reference: ScoreMatrix, **kwargs: Any) -> BaseMethod:
    """Build the method called ``name`` on ``reference``."""
    return resolve_factory(name)(reference, **kwargs)


def sharing_factory(name: str, reference: ScoreMatrix, **kwargs: Any) -> Callable[..., BaseMethod]:
    """``make(**overrides)``: :func:`make_method` for several targets on one reference, deriving once.

    What a method derives from the reference alone (its ``frozen_options()``:
    CAT's error model, BayesAME's fit and calibration) is the same for every
    target, so the first method's frozen options rebuild the others (the
    result is the same, bit for bit). ``overrides`` (e.g. a per-target seed)
    win over ``kwargs``, which win over the frozen options.
    """
    shared: dict[str, Any] = {}

    def make(**overrides: Any) -> BaseMethod:
        method = make_method(name, reference, **{**shared, **kwargs, **overrides})
        if not shared:
            shared.update(method.frozen_options())
        return method

    return make


# ------------------------------------------------------------------ method specs
_SPEC = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*(?:\[(.*)\])?\s*$", re.DOTALL)
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def split_method_list(text: str) -> list[str]:
    """Split ``"a,b[x=1,y=2],c"`` on the commas outside brackets; empty entries are dropped.

    Raises :class:`ConfigurationError` on unbalanced brackets.
    """
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ConfigurationError(f"unbalanced ']' in the method list {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise ConfigurationError(f"unclosed '[' in the method list {text!r}; e.g. bayesame-paper[noise=learned]")
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _parse_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def parse_method_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"bayesame-paper[noise=learned,refit_every=25]"`` →
    ``("bayesame-paper", {"noise": "learned", "refit_every": 25})``.

    Values are read as bool (true/false), None (none), int, float, or else kept as strings.
    The name and keys are not checked against the registry here
    (:func:`check_method_spec` does that).
    """
    match = _SPEC.match(spec)
    if match is None:
        raise ConfigurationError(
            f"cannot read the method {spec!r}; write a name with optional options, e.g. bayesame or "
            "bayesame-paper[noise=learned,refit_every=25]"
        )
    name, body = match.group(1), match.group(2)
    options: dict[str, Any] = {}
    if body is not None and body.strip():
        for item in body.split(","):
            key, eq, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not eq or not _KEY.match(key) or not value:
                raise ConfigurationError(
                    f"method {spec!r}: cannot read the option {item.strip()!r}; write key=value, e.g. "
                    f"{name}[noise=learned]"
                )
            if key in options:
                raise ConfigurationError(f"method {spec!r}: option {key!r} is given twice")
            options[key] = _parse_value(value)
    return name, options


def method_spec(name: str, options: Mapping[str, Any] | None = None) -> str:
    """The spec string of ``name`` with ``options`` (the inverse of :func:`parse_method_spec`)."""
    if not options:
        return name
    return f"{name}[{','.join(f'{k}={v}' for k, v in options.items())}]"


def check_method_spec(spec: str, reserved: Mapping[str, str], extra: Mapping[str, Any] | None = None
                      ) -> tuple[str, dict[str, Any]]:
    """Read and check a method spec: (registry name, options); the one check the session and the backtest share.

    ``reserved`` maps the options the caller sets itself to the end of the
    sentence refusing them ("the session; use --seed (seed=) instead");
    ``extra`` are options given as keywords (each key once, in brackets or
    here). Raises :class:`ConfigurationError` for an unknown method (the
    closest name suggested), a reserved option, or an option the method does
    not have (its options listed). Option *values* are checked when the
    method is built.
    """
    name, options = parse_method_spec(spec)
    if name not in METHODS:
        close = difflib.get_close_matches(name, METHODS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigurationError(f"unknown method {name!r}{hint}; choose one of: {', '.join(METHODS)}")
    for key, value in flatten_options(name, extra or {}).items():
        if key in options and options[key] != value:
            raise ConfigurationError(
                f"method option {key!r} is given twice: {options[key]!r} in {spec!r} and {value!r}")
        options[key] = value
    if options:
        known = method_parameters(name)
        for key in options:
            if key in reserved:
                raise ConfigurationError(f"method {spec!r}: {key!r} is set by {reserved[key]}")
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                mine = [p for p in known if p not in reserved]
                raise ConfigurationError(f"method {spec!r}: {name} has no option {key!r}{hint}; its options are: "
                                         f"{', '.join(mine) or 'none'}")
    return name, options


def method_parameters(name: str) -> list[str]:
    """The keyword options the method's constructor declares (without ``reference``)."""
    factory = resolve_factory(name)
    params: list[str] = []
    for cls in inspect.getmro(factory) if inspect.isclass(factory) else (factory,):
        init = cls.__init__ if inspect.isclass(cls) else cls
        try:
            sig = inspect.signature(init)
        except (TypeError, ValueError):  # pragma: no cover - builtins
            continue
        groups = _settings_groups(init)
        named = [p.name for p in sig.parameters.values()
                 if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("self", "reference")]
        # a settings group (activeeval.settings) is written flat: its fields, in its place
        flat = [f for p in named for f in (groups[p] if p in groups else (p,))]
        params.extend(p for p in flat if p not in params)
        if not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
            break  # this constructor takes nothing more than it names
    return params


def _settings_groups(init: Any) -> dict[str, tuple[str, ...]]:
    """A constructor's settings groups (:func:`activeeval.settings.takes_settings`): group → its flat fields."""
    by_group: dict[str, list[str]] = {}
    for name, group in flat_options(init).items():
        by_group.setdefault(group, []).append(name)
    return {g: tuple(names) for g, names in by_group.items()}


def flatten_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` of the method ``name`` written flat: a settings object given for a group (``design=
    DesignSettings(warmup=10)``) becomes the fields it changes (``warmup=10``), as a spec string or a
    stored session writes them; other options as given."""
    factory = resolve_factory(name)
    for cls in inspect.getmro(factory) if inspect.isclass(factory) else (factory,):
        init = cls.__init__ if inspect.isclass(cls) else cls
        if flat_options(init):
            return flatten(init, options)
    return dict(options)
