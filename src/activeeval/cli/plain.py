"""The CLI's output and error helpers without Typer: what the light path of later session commands runs on.

``activeeval session next/record/status`` run once per item in a user's loop; importing Typer (and the
pydantic validation Typer 0.29 does for every option) costs more than the command's own work. These helpers
are the ones the commands' bodies need, importable without Typer; :mod:`activeeval.cli.common` re-exports
them for every other command, so both paths print the same text.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from activeeval.exceptions import ActiveEvalError, MissingScoresWarning

F = TypeVar("F", bound=Callable[..., Any])

# Click's (Typer's echo's) ANSI style codes, removed when the stream is not a terminal.
_ANSI_RE = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


class CommandExit(Exception):
    """Leave the command with this exit code (raised by a command body; Typer's path turns it into typer.Exit)."""

    def __init__(self, code: int = 0) -> None:
        super().__init__(code)
        self.code = code


def echo(message: object = "", err: bool = False) -> None:
    """One line on stdout (stderr with ``err``), as ``typer.echo`` prints it (which is used when Typer is loaded):
    ANSI codes removed when the stream is not a terminal, flushed."""
    typer = sys.modules.get("typer")
    if typer is not None:
        typer.echo(message, err=err)
        return
    stream = sys.stderr if err else sys.stdout
    text = f"{message}\n"
    try:
        tty = stream.isatty()
    except Exception:
        tty = False
    if not tty:
        text = _ANSI_RE.sub("", text)
    stream.write(text)
    stream.flush()


def one_line(message: object) -> str:
    return " ".join(str(message).split())


def fail(message: object) -> CommandExit:
    """Print ``error: message`` as one line on stderr; return CommandExit(2) for the caller to raise."""
    echo(f"error: {one_line(message)}", err=True)
    return CommandExit(2)


# Phrases of library messages that are Python idioms rather than options (:func:`activeeval.exceptions.option`
# marks those, and :data:`activeeval.cli.flags.FLAGS` gives their flags), and what a command-line user does
# instead. One pass, longest phrase first, so a replacement is never replaced again (tests check that each
# phrase is still in the library's messages, and that commands print the flags).
CLI_FIXES = {
    "score_range=(low, high) (None for unbounded scores)": "--score-range LOW HIGH",
    "score_range=(low, high)": "--score-range LOW HIGH",
    "a wider score_range": "a wider --score-range LOW HIGH",
    "kind='continuous'": "--kind continuous",
    "kind='binary'": "--kind binary",
    "duplicate_models='drop_identical'": "--duplicate-models drop-identical",
    "use dropna(axis='items')": "pass --missing items",
    "use dropna(axis='models')": "pass --missing models",
    "call .dropna() to drop incomplete models or items": "pass --missing models or --missing items to drop them",
    "item_column=NAME": "--item-column NAME",
    "score_column=NAME": "--score-column NAME",
    "overwrite=True": "--force",
    "data_dir=": "--data-dir ",
    " (see .model_ids)": " (`activeeval datasets --models NAME` lists a dataset's models)",
    " (see .item_ids)": "",
    "(or skip the plots)": "(or pass --no-plots)",
    "run it with activeeval.experiments.multi_target.run_multi_target_backtest(..., correlation='low' or 'high')":
        "add --multi-target --correlation low|high",
    "activeeval.data.adapters.lm_eval.reference_from_lm_eval(...)": "`activeeval reference build --from lm-eval ...`",
    "activeeval.data.adapters.inspect_eval.reference_from_inspect(LOGS)":
        "`activeeval reference build --from inspect LOGS`",
}
# Python idioms whose wording varies (a class name, a value): pattern -> what the command line prints instead.
CLI_PATTERNS = [
    # how to give a session its reference again, and how to create one
    (re.compile(r"\w+\.open\(path, reference=\.\.\.\)"), "--reference FILE"),
    (re.compile(r"open it with \w+\.open\(path, reference=<that matrix>\)"),
     "give its data as a score file with --reference FILE"),
    (re.compile(r"\w+\.create\(\.\.\.\) or (`activeeval session new`)"), r"\1"),
    # CAT's calibration: a CLI user chooses one of the two by name
    (re.compile(r"'paper' or an irt\.Calibration for the reference's \d+ items"), "'paper'"),
    (re.compile(r"; fit it with methods\.cat\.fit_calibration\(reference\.scores\) on the same \(complete\) matrix"),
     ""),
]
_FIX_RE = re.compile("|".join(re.escape(k) for k in sorted(CLI_FIXES, key=len, reverse=True)))


def cli_message(exc: BaseException) -> str:
    """A library error's message for the command line: its options as flags (:data:`activeeval.cli.flags.FLAGS`),
    and its Python idioms as what a command-line user does (:data:`CLI_FIXES`, :data:`CLI_PATTERNS`)."""
    from activeeval.cli.flags import FLAGS
    from activeeval.exceptions import render_options, template_of

    # the idioms are looked for in the Python text between the options, never inside what an option renders
    return render_options(template_of(exc), FLAGS, between=_idioms)


def _idioms(text: str) -> str:
    text = _FIX_RE.sub(lambda m: CLI_FIXES[m.group()], text)
    for pattern, replacement in CLI_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def reported(func: F) -> F:
    """Turn library errors into a one-line message and exit code 2 (:class:`CommandExit`).

    Warnings are printed on stderr once each, after the command: missing-score
    drops as ``note:`` lines, anything else as ``warning:`` lines.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", MissingScoresWarning)
                try:
                    return func(*args, **kwargs)
                except ActiveEvalError as exc:
                    raise fail(cli_message(exc)) from None
        finally:
            # Re-emit outside the recording context: showing a warning inside
            # it would append to `caught` while we iterate over it.
            # Each distinct warning once (a backtest repeats the same ones per run).
            shown: set[str] = set()
            for w in caught:
                if issubclass(w.category, MissingScoresWarning):
                    text = f"note: {one_line(w.message)}"
                else:
                    text = f"warning: {w.category.__name__}: {one_line(w.message)}"
                if text not in shown:
                    shown.add(text)
                    echo(text, err=True)

    return wrapper  # type: ignore[return-value]


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    return value


def json_text(obj: Any) -> str:
    """``obj`` as indented JSON text (NaN/inf become null, numpy scalars become numbers), with a final newline."""
    return json.dumps(_jsonable(obj), indent=2) + "\n"


def print_json(obj: Any) -> None:
    """One JSON object on stdout (as :func:`json_text`)."""
    sys.stdout.write(json_text(obj))
