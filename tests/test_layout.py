"""The package's shape: imports run one way, the client side is light, each name has one home.

Read from the source with :mod:`ast`, so a new import against the direction fails here
before anyone has to notice it in review.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dpledger"

RANK = {
    "cli": 8,
    "flower": 7,
    "service": 7,
    "sim": 6,
    "ledger": 5,
    "planning": 5,
    "approval": 4,
    "accounting": 3,
    "mechanisms": 2,
    "_closed_form": 1.9,
    "_bars": 1.75,
    "_sensitivity": 1.5,
    "_invoke": 1.25,
    "_opendp": 1,
    "policy": 1,
    "metrics": 0.75,
    "_search": 0.25,
    "_files": 0.25,
    "_npy": 0.25,
    "_pg_schema": 0.25,
    "_path_text": 0.22,
    "_sqlite_files": 0.2,
    "_sqlite_removed": 0.21,
    "_creating": 0.15,
    "types": 0.5,
    "_shown": 0.1,
    "_printed": 0.1,
    "errors": 0,
}
"""Layer of each top-level module or package: imports go to a lower layer (or stay inside
their own package). cli → service / flower → sim → ledger / planning → approval →
accounting → mechanisms → _closed_form → _bars → _sensitivity → _invoke → _opendp →
policy → _files → _path_text → _sqlite_files → _creating → errors / types / _shown (how a
bad value is printed in a message); metrics imports only errors, types, _shown and numpy.
The command line is the outermost caller: it starts the service."""


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _top(module: str) -> str:
    """``dpledger.ledger.core`` → ``ledger``; ``dpledger`` → ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _type_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports inside ``if TYPE_CHECKING:`` (annotations, not arrows)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            lines |= {n.lineno for b in node.body for n in ast.walk(b) if hasattr(n, "lineno")}
    return lines


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every run-time dpledger import (type-checking ones are skipped)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_only(tree)
    out = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("dpledger")]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.startswith("dpledger")
        ):
            if node.module == "dpledger":  # from dpledger import x: x is a module
                out += [(node.lineno, f"dpledger.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, node.module))
    return out


def test_every_module_has_a_layer() -> None:
    tops = {_top(_name(p)) for p in _modules()} - {""}
    assert tops <= set(RANK), f"give these a layer in RANK: {sorted(tops - set(RANK))}"


def test_imports_run_one_way() -> None:
    wrong = []
    for path in _modules():
        here = _name(path)
        mine = _top(here)
        if mine == "":
            continue  # dpledger/__init__: the lazy facade over everything
        for line, target in _imports(path):
            theirs = _top(target)
            if theirs in ("", mine):
                continue
            if RANK[theirs] >= RANK[mine]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {here} → {target}")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_client_side_imports_no_opendp_policy_or_ledger() -> None:
    code = (
        "import sys, dpledger.metrics, dpledger.metrics.declarations;"
        "heavy = ('opendp', 'psycopg', 'pydantic', 'dpledger.policy', 'dpledger.ledger',"
        " 'dpledger.mechanisms', 'dpledger.approval', 'dpledger.accounting', 'dpledger._opendp');"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                elts = target.elts if isinstance(target, ast.Tuple) else [target]
                names |= {t.id for t in elts if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _exported(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    return []


def _borrowed(tree: ast.Module) -> set[str]:
    """Names imported from another public dpledger module (a private ``_intervals`` may be
    shown by its facade; an outside library's names are not dpledger's)."""
    out: set[str] = set()
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("dpledger")
            and not node.module.rsplit(".", 1)[-1].startswith("_")
        ):
            out |= {a.asname or a.name for a in node.names}
    return out


@pytest.mark.parametrize(
    "path", [p for p in _modules() if p.name != "__init__.py"], ids=lambda p: _name(p)
)
def test_no_module_exports_a_neighbours_name(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    borrowed = (set(_exported(tree)) - _defined(tree)) & _borrowed(tree)
    assert not borrowed, f"{_name(path)} exports names defined elsewhere: {sorted(borrowed)}"


def test_each_literal_type_is_defined_once() -> None:
    homes: dict[str, list[str]] = {}
    for path in _modules():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            value = getattr(node, "value", None)
            if (
                isinstance(node, ast.Assign)
                and isinstance(value, ast.Subscript)
                and isinstance(value.value, ast.Name)
                and value.value.id == "Literal"
            ):
                key = ast.unparse(value)
                homes.setdefault(key, []).append(_name(path))
    twice = {k: v for k, v in homes.items() if len(v) > 1}
    assert not twice, f"Literal types defined in several modules: {twice}"
