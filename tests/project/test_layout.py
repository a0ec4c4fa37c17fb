"""The package layout: no import cycles, and the flow's contracts in pyproject.toml hold."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others():
    graph = grimp.build_graph("crawler_tasks")
    assert _cycles(graph) == []


def test_import_contracts_hold():
    """``lint-imports`` (contracts in pyproject.toml): cli → service → stages → net → state →
    core, backends beside them knowing only core, core without Redis, HTTP or Celery."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


def test_the_package_listing_reads_as_the_flow():
    packages = sorted(p.name for p in (ROOT / "crawler_tasks").iterdir()
                      if p.is_dir() and (p / "__init__.py").exists())
    assert packages == ["backends", "broker", "cli", "core", "net", "service", "stages", "state"]


#: What a stage would write to reach into Redis itself rather than through a state component.
RAW_REDIS = re.compile(r"rt\.redis|rt\.keys|rt\.pipeline|\.redis\.")


def test_stages_tasks_and_commands_reach_redis_only_through_the_state_components():
    """Every Redis command of a stage, a task or a command goes through a component of
    crawler_tasks.state (built once in the runtime, the one module holding the client)."""
    paths = [path for package in ("stages", "service", "cli")
             for path in (ROOT / "crawler_tasks" / package).rglob("*.py")]
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted(paths) if path.name != "runtime.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if RAW_REDIS.search(line)]
    assert found == []


#: The most lines a module of the package holds, and parameters a stage or task function takes.
MAX_MODULE_LINES, MAX_PARAMETERS = 400, 6


def test_no_module_of_the_package_is_over_its_size():
    over = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "crawler_tasks").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters a caller passes (``self`` and ``cls`` left out; ``**options`` is one)."""
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
    return names + [f"*{v.arg}" for v in (a.vararg, a.kwarg) if v is not None]


def test_no_stage_or_task_function_takes_more_than_six_parameters():
    crowded = []
    for layer in ("stages", "service"):
        for path in sorted((ROOT / "crawler_tasks" / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if len(params := _parameters(node)) > MAX_PARAMETERS:
                        crowded.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}({', '.join(params)})")
    assert not crowded, crowded


def test_the_size_checks_catch_what_they_look_for():
    [fn] = ast.parse("def f(self, a, b, *, c, d, e, f, **g): pass").body
    assert isinstance(fn, ast.FunctionDef) and len(_parameters(fn)) == 7


def test_only_the_broker_package_reaches_into_kombus_transports():
    reaching = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "crawler_tasks").rglob("*.py"))
                if "broker" not in p.relative_to(ROOT / "crawler_tasks").parts
                and re.search(r"^\s*(from|import) kombu\.transport", p.read_text(), re.M)]
    assert not reaching
