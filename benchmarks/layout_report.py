"""How the package is laid out, measured the way a reviewer reads it: the import graph between modules
(floors, cycles, arrows from a lower pipeline stage to a higher one) and the longest functions.

    python3 benchmarks/layout_report.py [PACKAGE_DIR]      (default: gdrcheck/ beside this folder)

Imports inside functions count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# pipeline stages, lowest first: an import may only point to its own stage or a lower one; pcie ranks
# below collectors when it imports nothing of the package but the vocabulary (it is domain knowledge the
# collectors and the rules share, not a step after collecting)
STAGES = ("vocabulary", "io", "collectors", "pcie", "rules", "documents", "render", "fleet", "probe", "cli")


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root.parent).with_suffix("")
        name = ".".join(rel.parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        out[name] = p
    return out


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text())
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    got: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rsplit(".", 1)[0] if "." in t else ""
            if t and t != name:
                got.add(t)
    return got


def floors(graph: dict[str, set[str]]) -> tuple[dict[str, int], list[list[str]]]:
    """Longest import chain below each module (0: imports nothing of the package), and the cycles."""
    level: dict[str, int] = {}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> int:
        if state.get(m) == 2:
            return level[m]
        if state.get(m) == 1:
            cycles.append(stack[stack.index(m):] + [m])
            return 0
        state[m] = 1
        lv = 0
        for d in graph[m]:
            lv = max(lv, visit(d, stack + [m]) + 1)
        state[m] = 2
        level[m] = lv
        return lv

    for m in graph:
        visit(m, [])
    return level, cycles


def stage_of(name: str) -> str:
    if name.endswith(".__main__"):  # ``python -m gdrcheck``: the command line's door
        return "cli"
    parts = name.split(".")
    sub = parts[1] if len(parts) > 1 else ""
    return {"io": "io", "collectors": "collectors", "pcie": "pcie", "rules": "rules", "documents": "documents",
            "render": "render", "fleet": "fleet", "probe": "probe", "cli": "cli"}.get(sub, "vocabulary")


def longest_functions(files: dict[str, Path], n: int = 12) -> list[tuple[int, str]]:
    out = []
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((node.end_lineno - node.lineno + 1, f"{name}.{node.name}"))
    return sorted(out, reverse=True)[:n]


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / "gdrcheck"
    files = modules(root)
    known = set(files)
    graph = {m: imports(p, m, known) for m, p in files.items()}
    level, cycles = floors(graph)
    top = [m for m in files if m.count(".") == 1 and files[m].name != "__init__.py"]
    pkgs = sorted({m.split(".")[1] for m in files if m.count(".") >= 1 and files[m].name == "__init__.py"})
    print(f"{len(files)} modules; {len(top)} loose at the top of {root.name}/, packages: {', '.join(pkgs)}")
    print(f"import floors: {max(level.values()) + 1 if level else 0}; cycles: {len(cycles)}")
    for c in cycles[:10]:
        print("  cycle: " + " -> ".join(c))
    stages = list(STAGES)
    pcie_out = {d for m, ds in graph.items() if stage_of(m) == "pcie" for d in ds if stage_of(d) != "pcie"}
    if all(stage_of(d) == "vocabulary" for d in pcie_out):
        stages.remove("pcie")
        stages.insert(stages.index("collectors"), "pcie")
        print(f"pcie imports only {', '.join(sorted(pcie_out)) or 'nothing'} outside itself: ranked below collectors")
    print("stages, lowest first: " + " < ".join(stages))
    rank = {s: i for i, s in enumerate(stages)}
    upward = sorted((m, d) for m, ds in graph.items() for d in ds if rank[stage_of(d)] > rank[stage_of(m)])
    print(f"arrows from a lower stage to a higher one: {len(upward)}")
    for m, d in upward:
        print(f"  {m} ({stage_of(m)}) -> {d} ({stage_of(d)})")
    print("longest modules:")
    for lines, m in sorted(((len(p.read_text().splitlines()), m) for m, p in files.items()), reverse=True)[:12]:
        print(f"  {lines:4d}  {m}")
    print("longest functions:")
    for lines, fn in longest_functions(files):
        print(f"  {lines:4d}  {fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
