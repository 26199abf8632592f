"""The light path of ``activeeval session next / record / status``: their command lines parsed without Typer.

These commands run once per item in a user's loop, and Typer 0.29 (with the pydantic validation it runs for
every option) costs more than the command's own work. Each of their options is declared once, here or beside
the command's body, as an :class:`Opt`: the Typer command is built from the declarations
(:func:`activeeval.cli.common.command_from`), and :func:`parse` reads a command line with the same ones.

:func:`parse` is strict: it accepts only the ordinary forms (``--flag``, ``--option VALUE``,
``--option=VALUE``, ``-k N``, ``-kN``, positional arguments, ``--``) with values that convert without doubt,
and says None for anything else: ``--help``, ``--version``, a completion request, an unknown or repeated
option, a missing or extra argument, a value that starts with ``-``, is empty, or needs Typer's conversion
(an integer written other than in plain digits), a file argument that is a folder or unreadable, a terminal
that is not UTF-8, Windows. The full Typer app then runs the command line (and prints its usage errors), so
the light path never answers what Typer would answer differently (``tests/session/test_light_cli.py`` compares the
two on a table of command lines).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

__all__ = ["GLOBAL_OPTIONS", "Opt", "global_options", "parse", "run"]

_INT_RE = re.compile(r"0|[1-9][0-9]{0,8}")


@dataclass(frozen=True)
class Opt:
    """One parameter of a command: an option (``flags`` given) or a positional argument (no flags).

    ``type`` is str, int, Path or bool (a flag); ``default`` ``...`` for a required one, None for an optional one
    (whose type is then Optional); ``typer_extra`` more keywords of typer.Option/Argument (e.g. dir_okay).
    """

    dest: str
    flags: tuple[str, ...]
    type: type
    default: Any
    help: str
    metavar: str | None = None
    typer_extra: tuple[tuple[str, Any], ...] = field(default=())

    @property
    def annotation(self) -> Any:
        """The type Typer reads from the command's signature."""
        return Optional[self.type] if self.default is None else self.type  # noqa: UP045 - built at run time for Typer

    def typer(self) -> Any:
        """The typer.Option / typer.Argument of this parameter (the default of the command's signature)."""
        import typer

        kwargs: dict[str, Any] = {"help": self.help, **dict(self.typer_extra)}
        if self.metavar is not None:
            kwargs["metavar"] = self.metavar
        if not self.flags:
            return typer.Argument(self.default, **kwargs)
        return typer.Option(self.default, *self.flags, **kwargs)

    def convert(self, value: str, dash: bool = False) -> Any:
        """The value as the command receives it, or raise _Doubt (Typer decides). A value starting with ``-`` only
        with ``dash`` (a positional argument after ``--``)."""
        if not value or (value.startswith("-") and not dash):
            raise _Doubt
        if self.type is str:
            return value
        if self.type is int:
            if not _INT_RE.fullmatch(value):
                raise _Doubt
            return int(value)
        if self.type is Path:
            extra = dict(self.typer_extra)
            try:
                st = os.stat(value)
            except (OSError, ValueError):
                return Path(value)
            import stat

            if (stat.S_ISDIR(st.st_mode) and extra.get("dir_okay", True) is False) or not os.access(value, os.R_OK):
                raise _Doubt  # click.Path's checks: Typer says what is wrong
            return Path(value)
        raise _Doubt


class _Doubt(Exception):
    """The light parser declines: Typer reads this command line."""


# The top-level options (activeeval.cli.common's callback), before the command's name; --version and --help
# are Typer's.
DATA_DIR = Opt("data_dir", ("--data-dir",), str, None, metavar="DIR",
               help="Shared data folder (with catalog.json) for datasets not bundled, e.g. WMT21; as "
                    "ACTIVEEVAL_SHARED_DATA. [default: beside the installed package, if any]")
NO_CACHE = Opt("no_cache", ("--no-cache",), bool, False,
               help="Use no user cache for this command: parse reference files and rebuild session states anew "
                    "(as ACTIVEEVAL_CACHE=off). [default: the cache in ACTIVEEVAL_CACHE, else ~/.cache/activeeval]")
THREADS = Opt("threads", ("--threads",), int, None, metavar="N",
              help="BLAS threads of activeeval's own numeric work (per backtest worker), and threads of the parts "
                   "that split themselves (the reference fit, the prior's kernel sums); your scorer, lm-eval and "
                   "Inspect keep their own; as ACTIVEEVAL_THREADS. [default: 1 BLAS thread; those parts on the "
                   "cores, up to 4]")
GLOBAL_OPTIONS = (DATA_DIR, NO_CACHE, THREADS)


@contextlib.contextmanager
def global_options(threads: int | None, no_cache: bool, data_dir: str | None) -> Iterator[None]:
    """The top-level options in force for the command inside (raises CommandExit(2) for a bad value)."""
    from activeeval._threads import limit_threads
    from activeeval.cli.plain import cli_message, echo, fail
    from activeeval.exceptions import ActiveEvalError

    if threads is not None and threads < 1:
        echo(f"error: --threads must be a positive integer (BLAS threads), got {threads}; e.g. --threads 1", err=True)
        from activeeval.cli.plain import CommandExit

        raise CommandExit(2)
    limit = limit_threads(threads, defer=True)  # numeric work runs under the limit, applied once it starts
    try:
        limit.__enter__()
    except ActiveEvalError as exc:  # a bad ACTIVEEVAL_THREADS
        raise fail(exc) from None
    try:
        if no_cache:
            from activeeval.user_cache import CACHE_ENV, OFF

            os.environ[CACHE_ENV] = OFF  # what every reader and session of this command consults
        if data_dir is not None:
            from activeeval.data.datasets import SHARED_DATA_ENV, shared_data_dir

            try:
                shared_data_dir(data_dir)
            except ActiveEvalError as exc:
                raise fail(cli_message(exc)) from exc
            os.environ[SHARED_DATA_ENV] = data_dir  # what every command's dataset lookup reads
        yield
    finally:
        limit.__exit__(None, None, None)


def _parse_params(args: Sequence[str], params: Sequence[Opt]) -> dict[str, Any]:
    """``args`` read against ``params`` as Click reads them (raise _Doubt where unsure)."""
    options = {flag: p for p in params for flag in p.flags}
    positional = [p for p in params if not p.flags]
    values: dict[str, Any] = {}
    given: list[tuple[str, bool]] = []  # (value, after --)
    i = 0
    only_args = False
    while i < len(args):
        arg = args[i]
        i += 1
        if only_args or not arg.startswith("-"):
            given.append((arg, only_args))
            continue
        if arg == "--":
            only_args = True
            continue
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            p = options.get(name)
            if p is None:
                raise _Doubt
            if p.type is bool:
                if eq:
                    raise _Doubt
            elif not eq:
                if i >= len(args):
                    raise _Doubt
                value = args[i]
                i += 1
        else:  # a short option: -k N or -kN
            p = options.get(arg[:2])
            if p is None or p.type is bool or len(arg) == 1:
                raise _Doubt
            value = arg[2:]
            if not value:
                if i >= len(args):
                    raise _Doubt
                value = args[i]
                i += 1
        if p.dest in values:
            raise _Doubt  # given twice
        values[p.dest] = True if p.type is bool else p.convert(value)
    if len(given) > len(positional):
        raise _Doubt
    for p, (value, dash) in zip(positional, given, strict=False):
        values[p.dest] = p.convert(value, dash)
    for p in params:
        if p.dest not in values:
            if p.default is ...:
                raise _Doubt  # a missing argument: Typer's usage error
            values[p.dest] = p.default
    return values


def _commands() -> Mapping[str, tuple[Sequence[Opt], Callable[..., Any]]]:
    from activeeval.cli import session_core as core

    return {"next": (core.NEXT, core.next_items), "record": (core.RECORD, core.record),
            "status": (core.STATUS, core.status)}


def parse(argv: Sequence[str]) -> tuple[Callable[..., Any], dict[str, Any], dict[str, Any]] | None:
    """(the command's body, its arguments, the top-level options) for a light command line, else None."""
    if os.name == "nt" or any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        return None  # Windows consoles and shell completion: Typer's
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "ascii").lower().replace("-", "").replace("_", "")
        if encoding not in ("utf8", "utf8sig"):
            return None  # Click re-wraps streams it finds misconfigured
    try:
        for arg in argv:
            arg.encode("utf-8")  # (undecodable bytes from the shell: Typer's)
        at = argv.index("session")
        head, rest = list(argv[:at]), list(argv[at + 1:])
        if not rest:
            return None
        found = _commands().get(rest[0])
        if found is None:
            return None
        params, body = found
        top = _parse_params(head, GLOBAL_OPTIONS)
        return body, _parse_params(rest[1:], params), top
    except (_Doubt, ValueError, UnicodeError):
        return None


def run(argv: Sequence[str]) -> int | None:
    """Run a light command line; its exit code, or None when it is not one (the caller runs Typer's app)."""
    parsed = parse(argv)
    if parsed is None:
        return None
    body, kwargs, top = parsed
    from activeeval.cli.plain import CommandExit, reported

    try:
        try:
            with global_options(**top):
                reported(body)(**kwargs)
        except KeyboardInterrupt:
            return 130  # as Typer: Ctrl-C ends the command with 130, silently
        except OSError as exc:
            import errno

            if exc.errno != errno.EPIPE:
                raise
            _pacify()
            return 1
    except CommandExit as exc:
        return exc.code
    return 0


def _pacify() -> None:
    """A closed pipe (``activeeval session next f | head -0``): exit 1 quietly, as Click does."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.dup2(devnull, sys.stderr.fileno())
