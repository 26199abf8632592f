"""How the source is kept (issue 29, item 6): function lengths, wide constructors, flag spellings in the library,
repeated code — for the working tree and for any earlier revision, side by side.

    python benchmarks/code_stats.py                       # the working tree
    python benchmarks/code_stats.py --rev ae15bac --rev HEAD   # revisions (git archive into a temporary folder)
    python benchmarks/code_stats.py --smoke               # the working tree, without the repeated-code count

Counted over ``src/activeeval`` (the package, not tests or benchmarks):

* functions: every ``def`` (methods included); its length is its lines from ``def`` to its last line, docstring
  included; the longest are listed;
* wide signatures: functions and constructors over 10 parameters (``self`` not counted), the widest listed;
* flag spellings: ``--flag`` in strings of library modules (outside ``cli/``) that are not docstrings — what
  ``tests/test_library_speaks_python.py`` keeps at zero;
* repeated code: the pairs of places sharing six or more lines, as the ``duplicates`` command counts them (from
  the tool library; skipped where it is not on PATH, and in ``--smoke``).
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAG_RE = re.compile(r"(?<![\w-])--[a-z][a-z0-9_-]*")
FOREIGN = {"--log_samples", "--log-dir", "--output_path"}  # other programs' flags a message may quote


def _docstring_ids(tree: ast.AST) -> set[int]:
    return {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}


def stats(package: Path) -> dict:
    lengths: list[tuple[int, str]] = []
    wide: list[tuple[int, str]] = []
    flags = 0
    lines = 0
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines += sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))
        tree = ast.parse(text)
        rel = path.relative_to(package)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{rel}:{node.name}"
                lengths.append(((node.end_lineno or node.lineno) - node.lineno + 1, name))
                a = node.args
                params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs) if p.arg not in ("self", "cls")]
                if len(params) > 10:
                    wide.append((len(params), name))
        if rel.parts[0] != "cli":
            docs = _docstring_ids(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                    flags += sum(1 for f in FLAG_RE.findall(node.value) if f not in FOREIGN)
    lengths.sort(reverse=True)
    wide.sort(reverse=True)
    return {"lines": lines, "functions": len(lengths), "over50": sum(1 for n, _ in lengths if n > 50),
            "over100": sum(1 for n, _ in lengths if n > 100), "longest": lengths[:5], "wide": wide,
            "flags": flags}


def duplicates(package: Path) -> str:
    tool = shutil.which("duplicates")
    if tool is None:
        return "n/a (no duplicates command)"
    out = subprocess.run([tool, "--repo", str(package), "--seconds", "120"], capture_output=True, text=True).stdout
    first = out.strip().splitlines()[0] if out.strip() else ""
    m = re.search(r"(\d+) pairs?", first)
    return m.group(1) if m else (first or "?")


def tree_of(rev: str | None, tmp: Path) -> Path:
    if rev is None:
        return ROOT / "src" / "activeeval"
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src/activeeval"], check=True,
                          capture_output=True).stdout
    dest = tmp / rev.replace("/", "_")
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "src" / "activeeval"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", action="append", help="a git revision to count (repeatable); default: the working tree")
    ap.add_argument("--smoke", action="store_true", help="the working tree only, no repeated-code count")
    args = ap.parse_args(argv)
    revs: list[str | None] = [None] if args.smoke or not args.rev else list(args.rev)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for rev in revs:
            package = tree_of(rev, Path(tmp))
            s = stats(package)
            s["dups"] = "skipped (--smoke)" if args.smoke else duplicates(package)
            rows.append((rev or "working tree", s))
    head = f"{'revision':<14} {'code lines':>10} {'functions':>9} {'>50 lines':>9} {'>100 lines':>10} " \
           f"{'>10 params':>10} {'flags in library':>16}  repeated-code pairs"
    print(head)
    print("-" * len(head))
    for name, s in rows:
        print(f"{name:<14} {s['lines']:>10} {s['functions']:>9} {s['over50']:>9} {s['over100']:>10} "
              f"{len(s['wide']):>10} {s['flags']:>16}  {s['dups']}")
    for name, s in rows:
        print(f"\n{name}: longest functions: " + "; ".join(f"{n} lines {f}" for n, f in s["longest"]))
        print(f"{name}: widest signatures: " + ("; ".join(f"{n} {f}" for n, f in s["wide"][:8]) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
