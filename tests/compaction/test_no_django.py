import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_engine_imports_without_django_or_celery():
    code = (
        "import pkgutil, importlib, sys, compaction\n"
        "names = [m.name for m in pkgutil.walk_packages(compaction.__path__, 'compaction.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "banned = ('django', 'celery', 'rest_framework', 'sessions_app')\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in banned)\n"
        "print(','.join(bad))\n"
        "print(len(names))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded, modules = out.stdout.split("\n")[:2]
    assert loaded == ""
    assert int(modules) >= 8  # every engine module was imported


def _engine_modules() -> dict[str, Path]:
    modules = {}
    for path in sorted((ROOT / "compaction").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The engine modules ``name`` imports anywhere in its code, function bodies included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            submodules = {f"{target}.{alias.name}" for alias in node.names} & modules.keys()
            # `from pkg import module` needs the module; `from module import name` needs the module itself.
            found |= submodules or {target}
    return found & modules.keys()


def test_engine_imports_run_one_way():
    """No import cycle among engine modules (function-level imports count), no lazy module ``__getattr__``."""
    modules = _engine_modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    cycles = []
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                cycles.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []
    lazy = [
        name
        for name, path in modules.items()
        if any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in ast.parse(path.read_text()).body)
    ]
    assert lazy == []
    assert graph["compaction.transcripts.formats"] >= {
        "compaction.transcripts.claude_code",
        "compaction.transcripts.openai",
        "compaction.transcripts.anthropic",
    }
