"""The plugin's import structure: no module of ``fairseq_ext`` imports another in a circle
(function-level imports included), its packages form layers with one import back up (the
checkpoint tools' use of ``fairseq_changes``), ``common`` imports no other package, only
``fairseq_changes`` changes Python's hooks, logging or warnings (and reads ``sys.argv`` only for
``--help``), the product never imports the reproduction machinery,
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


def package(module: str) -> str:
    """``fairseq_ext.tasks.base`` -> ``tasks``; a top-level module is its own package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


# the one import from a lower layer back up: the checkpoint tools (their command line, the save
# locks) use fairseq_changes (quiet, the excepthook, output_files), whose rows call their checks
BACK_UP = {("checkpoints", "fairseq_changes")}


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        graph.setdefault(package(module), set()).update(package(t) for t in targets)
    return {name: targets - {name} for name, targets in graph.items()}


def test_the_packages_form_layers_with_one_import_back_up():
    graph = package_graph()
    assert all(b in graph[a] for a, b in BACK_UP), "an allowed import back up is gone: drop it"
    assert cycles({a: {b for b in bs if (a, b) not in BACK_UP} for a, bs in graph.items()}) == []
    assert graph["common"] == set(), "common/ is the ground floor"


CHANGES_PYTHON = {"setLevel", "filterwarnings", "simplefilter", "excepthook", "meta_path"}


def test_only_fairseq_changes_changes_pythons_hooks_logging_or_warnings():
    """``excepthook`` and ``meta_path`` assigned or changed, a logger's level, a warnings filter;
    ``sys.argv`` read in ``fairseq_changes`` only by the ``--help`` row (``cli_help``)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        restored = {  # inside ``with warnings.catch_warnings():`` nothing outlasts the block
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.With) and "catch_warnings" in ast.unparse(node.items[0])
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in restored:
                continue
            if isinstance(node, ast.Attribute) and node.attr in CHANGES_PYTHON:
                if node.attr == "excepthook" and not isinstance(node.ctx, ast.Store):
                    continue
                found.add((path.relative_to(PACKAGE).parts[0], node.attr))
            if isinstance(node, ast.Attribute) and node.attr == "argv":
                found.add((str(path.relative_to(PACKAGE)), "argv"))
    changes = {where for where, what in found if what != "argv"}
    assert changes == {"fairseq_changes"}, sorted(found)
    assert {w for w, what in found if what == "argv" and w.startswith("fairseq_changes")} == {
        "fairseq_changes/cli_help.py"
    }


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
    """The private attributes of an argparse parser and of its argument groups, and argparse's
    own."""
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
