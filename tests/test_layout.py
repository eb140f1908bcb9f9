"""The package's layout rules, read from the source (the imports every module really makes).

- Everything the wheel ships is reachable from an entry point: test and bench support (the
  cache's oracle and replay engine, a throw-away redis-server) lives in bench/support/.
- No module imports another module's private name (`_x`): what is shared gets a public name.
- fastjson is a leaf, and state/ and agents/ never import the hooks package above them.
- Host descriptions (agents/) hold no installer or doctor logic: they import neither (only the
  leaves fastjson and templating, which fills their plugin template).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import setuptools
import tomlkit

REPO = Path(__file__).resolve().parent.parent
# the console scripts, and the library API bot authors import (leanctx.bot.claude_sdk, extra [sdk])
ENTRY_POINTS = ("leanctx.cli", "leanctx.hooks", "leanctx.__main__", "leanctx.bot", "leanctx.bot.claude_sdk")


def _shipped_modules() -> dict[str, Path]:
    """Module name -> file, for every module of the packages pyproject.toml puts in the wheel."""
    config = tomlkit.parse((REPO / "pyproject.toml").read_text()).unwrap()
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    modules = {}
    for package in setuptools.find_packages(where=str(REPO), include=include):
        folder = REPO / package.replace(".", "/")
        for path in folder.glob("*.py"):
            modules[package if path.name == "__init__.py" else f"{package}.{path.stem}"] = path
    return modules


MODULES = _shipped_modules()


def _imports(name: str, path: Path) -> list[tuple[str, str | None, bool]]:
    """(module, imported name or None, inside a function) for every leanctx import in a file,
    plus module names written as strings (the agent registry imports its hosts by name)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, str | None, bool]] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((a.name, None, local) for a in child.names if a.name.startswith("leanctx"))
            elif isinstance(child, ast.ImportFrom):
                module = child.module or ""
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    module = ".".join(base + ([module] if module else []))
                if module.startswith("leanctx"):
                    found.extend((module, a.name, local) for a in child.names)
            elif isinstance(child, ast.Constant) and isinstance(child.value, str) and re.fullmatch(r"leanctx(\.\w+)+", child.value):
                found.append((child.value, None, local))
            visit(child, inner)

    visit(tree, False)
    return found


def _targets(module: str, imported: str | None) -> set[str]:
    """The shipped modules an import loads (its module, its parents, a submodule it names)."""
    names = {module} | ({f"{module}.{imported}"} if imported else set())
    out = set()
    for n in names:
        while n:
            if n in MODULES:
                out.add(n)
            n = n.rpartition(".")[0]
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_every_shipped_module_is_reachable_from_an_entry_point() -> None:
    seen: set[str] = set()
    todo = list(ENTRY_POINTS)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(t for module, imported, _ in GRAPH[name] for t in _targets(module, imported))
    assert sorted(set(MODULES) - seen) == [], "shipped but only tests/bench use it: move it to bench/support/"


def test_no_module_imports_a_private_name_of_another() -> None:
    private = [f"{name} imports {module}.{imported}" for name, imports in GRAPH.items()
               for module, imported, _ in imports
               if imported and imported.startswith("_") and not imported.startswith("__") and module != name]
    assert private == []


def test_fastjson_is_a_leaf_imported_plainly_from_below_the_hooks() -> None:
    assert GRAPH["leanctx.fastjson"] == [] and all(not m.startswith("leanctx") for m, _, _ in GRAPH["leanctx.templating"])
    assert all(not m.startswith("leanctx") for m, _, _ in GRAPH["leanctx.readers"])
    upward = [f"{name} imports {module}" for name, imports in GRAPH.items()
              if name.startswith(("leanctx.state", "leanctx.agents", "leanctx.fastjson"))
              for module, _, _ in imports if module.startswith("leanctx.hooks")]
    assert upward == []
    hidden = [name for name, imports in GRAPH.items() for module, imported, local in imports
              if local and "leanctx.fastjson" in _targets(module, imported)]
    assert hidden == [], "fastjson costs nothing to import: import it at the top"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("leanctx.agents")))
def test_host_descriptions_hold_no_installer_or_doctor_logic(name: str) -> None:
    reached = {t for module, imported, _ in GRAPH[name] for t in _targets(module, imported)}
    # leaves every host shares: JSON, templates, and what a reader or shell command reads (readers)
    leaves = ("leanctx.agents", "leanctx.fastjson", "leanctx.templating", "leanctx.readers")
    outside = sorted(t for t in reached if not t.startswith(leaves) and t != "leanctx")
    assert outside == [], f"{name} reaches into {outside}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("leanctx.agents.") and n != "leanctx.agents.base"))
def test_no_host_module_defines_installer_or_doctor_checks(name: str) -> None:
    """Nothing calls a host module's `load_problems`/`doctor_checks` any more: such a method
    would be dead code and its check silently lost. They go in installer/<host>_checks.py,
    listed in installer/hostload.HOST_CHECKS."""
    tree = ast.parse(MODULES[name].read_text())
    defined = sorted(f.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body
                     if isinstance(f, ast.FunctionDef) and f.name in ("load_problems", "doctor_checks"))
    assert defined == [], f"{name} defines {defined}: move them to leanctx/installer/<host>_checks.py (HOST_CHECKS)"


def _function_bodies(path: Path) -> list[tuple[str, str, int]]:
    """(dumped body without its docstring, qualified name, statements) for every function in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            module = ast.Module(body=body, type_ignores=[])
            statements = sum(isinstance(n, ast.stmt) for n in ast.walk(module))
            found.append((ast.dump(module), f"{path.name}:{node.lineno} {node.name}", statements))
    return found


def test_no_host_module_copies_logic_from_another() -> None:
    """Family layout: a host's differences from its family are data; logic two hosts share lives
    once (in base.py or the family module), never as a copy in each host module."""
    seen: dict[str, list[str]] = {}
    for path in sorted((REPO / "leanctx" / "agents").glob("*.py")):
        for body, name, statements in _function_bodies(path):
            if statements >= 3:
                seen.setdefault(body, []).append(name)
    copies = [names for names in seen.values() if len(names) > 1]
    assert copies == [], f"the same function body in several host modules: {copies}"
