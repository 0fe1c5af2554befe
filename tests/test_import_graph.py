"""The plugin's import structure: no module of ``fairseq_ext`` imports another in a circle
(function-level imports included), the product never imports the reproduction machinery,
``fairseq_ext.masking`` imports nothing of fairseq (DESIGN: the mask layer is pure torch), and
no module reads or writes a private attribute of argparse (options go through fairseq's
``gen_parser_from_dataclass`` and argparse's public methods).
The graph is read from the source with ``ast``; cycles are found by Tarjan's algorithm and
cross-checked on a hand-made graph."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "fairseq_ext"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from pkg import mod`` imports the submodule when there is one
                targets = [
                    f"{node.module}.{a.name}"
                    if f"{node.module}.{a.name}" in modules
                    else node.module
                    for a in node.names
                ]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan 1972)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_on_a_known_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_plugin():
    graph = import_graph()
    assert "fairseq_ext.plugin" in graph and graph["fairseq_ext.tasks"], (
        "the graph reader found no imports"
    )
    assert cycles(graph) == []


def test_product_never_imports_the_reproduction_machinery():
    offenders = [
        str(p.relative_to(ROOT))
        for p in PACKAGE.rglob("*.py")
        if any(
            (
                isinstance(n, ast.ImportFrom)
                and (n.module or "").split(".")[0] in {"reproduction", "tests"}
            )
            or (
                isinstance(n, ast.Import)
                and any(a.name.split(".")[0] in {"reproduction", "tests"} for a in n.names)
            )
            for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        )
    ]
    assert offenders == []


def test_masking_layer_imports_no_fairseq():
    for path in (PACKAGE / "masking").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n == "fairseq" or n.startswith("fairseq.") for n in names), path


def private_argparse_names() -> set[str]:
    """The private attributes of an argparse parser and of its argument groups, and argparse's own."""
    parser = argparse.ArgumentParser()
    group = parser.add_argument_group("options")
    names = (
        set(dir(parser))
        | set(vars(parser))
        | set(dir(group))
        | set(vars(group))
        | set(dir(argparse))
    )
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_private_argparse_attribute_in_the_plugin():
    private = private_argparse_names()
    assert {"_actions", "_option_string_actions", "_group_actions", "_StoreAction"} <= private
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr in private
    ]
    assert offenders == []
