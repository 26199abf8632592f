"""The longest functions of the package: body lines without the signature and docstring, longest first.

Usage (repository root): python benchmarks/function_lengths.py [--top 12] [--over 60] [src]
"""

from __future__ import annotations

import argparse
import ast
import pathlib


def bodies(root: pathlib.Path) -> list[tuple[int, str]]:
    rows = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None),
                                                                          ast.Constant) \
                        and isinstance(body[0].value.value, str):
                    body = body[1:]
                if body:
                    rows.append((body[-1].end_lineno - body[0].lineno + 1, f"{path}:{node.lineno} {node.name}"))
    return sorted(rows, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="src")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--over", type=int, default=60)
    parser.add_argument("--smoke", action="store_true", help="as without it (it is fast; tests/test_benchmarks.py)")
    args = parser.parse_args()
    rows = bodies(pathlib.Path(args.root))
    print(f"functions whose body is over {args.over} lines: {sum(1 for n, _ in rows if n > args.over)} "
          f"of {len(rows)}")
    print(f"{'lines':>5}  function")
    for n, where in rows[: args.top]:
        print(f"{n:>5}  {where}")


if __name__ == "__main__":
    main()
