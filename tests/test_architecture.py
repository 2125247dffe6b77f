"""The import graph of Lens's rooms: no cycles, and only the arrows docs/architecture.md allows."""

from __future__ import annotations

import ast
import pathlib
import re
import sys
from collections import deque

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ROOMS = ("lens_core", "otel_bridge", "lens_report", "lens_ci", "lens_cli")
DOC = ROOT / "docs" / "architecture.md"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    # `if TYPE_CHECKING:` and `if typing.TYPE_CHECKING:`: imports a type checker follows, the
    # interpreter never runs
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    """Every import a module can run: at module level, inside functions, in try/except."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        # (target, line, at module level, named in the statement: False for `from pkg import sub`'s sub)
        self.found: list[tuple[str, int, bool, bool]] = []
        self._depth = 0

    def _add(self, target: str, node: ast.AST, stated: bool = True) -> None:
        self.found.append((target, node.lineno, self._depth == 0, stated))

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _visit_function(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            if node.level > 1:
                base = base[: len(base) - node.level + 1]
            prefix = ".".join(base)
            target = f"{prefix}.{node.module}" if node.module else prefix
        else:
            target = node.module or ""
        self._add(target, node)
        # `from pkg import sub` imports the submodule pkg.sub when there is one
        for alias in node.names:
            self._add(f"{target}.{alias.name}", node, stated=False)

    def visit_Call(self, node: ast.Call) -> None:
        # importlib.import_module("x.y") with a literal name is an import too
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("import_module", "__import__") and node.args and isinstance(
                node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            self._add(node.args[0].value, node)
        self.generic_visit(node)


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _resolve(target: str) -> str | None:
    """The module of ours that importing ``target`` loads last (a name in a module -> the module)."""
    while target:
        if target in MODULES:
            return target
        target = target.rpartition(".")[0]
    return None


def raw_imports(module: str) -> list[tuple[str, int, bool, bool]]:
    """Every import ``module`` can run: (target as written, line, at module level, stated)."""
    path = MODULES[module]
    visitor = _Imports(module, path.name == "__init__.py")
    visitor.visit(ast.parse(path.read_text(), str(path)))
    return visitor.found


def import_graph() -> dict[str, dict[str, tuple[int, bool]]]:
    """module -> {imported module (ours, or third party as written): (line, module level)}.

    Importing ``a.b.c`` runs ``a`` and ``a.b`` first, so those get arrows too; a module's own
    packages are not arrows (they have run before it loads)."""
    graph: dict[str, dict[str, tuple[int, bool]]] = {}
    for module in MODULES:
        edges: dict[str, tuple[int, bool]] = {}
        for target, line, top, _ in raw_imports(module):
            ours = _resolve(target)
            if ours is None:
                if target.partition(".")[0] in ROOMS:
                    continue  # `from pkg import name` where name is not a module
                key = target
            elif ours == module:
                continue
            else:
                key = ours
            # importing a.b.c runs a/__init__ and a/b/__init__ first: arrows to the parents too
            keys = [key]
            if ours is not None:
                parts = key.split(".")
                keys += [".".join(parts[:i]) for i in range(1, len(parts))]
            for k in keys:
                if k == module or (k in MODULES and module.startswith(k + ".")):
                    continue  # a package's own __init__ has run before its submodule loads
                old = edges.get(k)
                if old is None or (top and not old[1]):
                    edges[k] = (line, top)
        graph[module] = edges
    return graph


def find_cycles(graph) -> list[list[str]]:
    """Strongly connected components of our modules with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in MODULES:
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10000))
    try:
        for v in sorted(graph):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(old)
    return out


def one_cycle(graph, comp) -> str:
    """A shortest closed path through a strongly connected component, with the lines."""
    members = set(comp)
    start = comp[0]
    prev = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph[v]):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                path.reverse()
                return " -> ".join(
                    f"{a} (line {graph[a][b][0]}{'' if graph[a][b][1] else ', in a function'})"
                    for a, b in zip(path, path[1:] + [start])) + f" -> {start}"
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return " <-> ".join(comp)



# ---- what docs/architecture.md declares ---------------------------------------------------


def _table(marker: str) -> list[list[str]]:
    """The rows (cells stripped) of the markdown table between <!-- marker:begin/end -->."""
    text = DOC.read_text()
    match = re.search(rf"<!-- {marker}:begin -->(.*?)<!-- {marker}:end -->", text, re.S)
    assert match, f"docs/architecture.md has no <!-- {marker}:begin --> ... <!-- {marker}:end --> table"
    rows = [[c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            for line in match.group(1).strip().splitlines()]
    return [r for r in rows[2:]]  # header and separator off


def _names(cell: str) -> set[str]:
    return {n.strip() for n in cell.split(",") if n.strip() not in ("", "-")}


def declared_rules() -> dict[str, tuple[set[str], set[str], set[str]]]:
    """room -> (ours at import, ours lazily only, third party), as the note declares them."""
    return {row[0]: (_names(row[1]), _names(row[2]), _names(row[3])) for row in _table("rules")}


def _room(module: str) -> str:
    return module.split(".")[0]


def _stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names or name.split(".")[0] == "__future__"


def _allowed(name: str, names: set[str]) -> bool:
    return any(name == n or name.startswith(n + ".") for n in names)


GRAPH = import_graph()


# ---- the tests ----------------------------------------------------------------------------


def test_cycle_finder_names_a_cycle_it_is_given():
    """The cycle search is not vacuous: a made-up two-module loop is found and named."""
    fake = {"lens_core.state": {"lens_core.spans": (3, True)}, "lens_core.spans": {"lens_core.state": (9, False)}}
    assert find_cycles(fake) == [["lens_core.spans", "lens_core.state"]]
    assert "lens_core.spans (line 9, in a function) -> lens_core.state" in one_cycle(fake, ["lens_core.spans",
                                                                                            "lens_core.state"])


def test_the_import_graph_has_no_cycles():
    """No import cycle among the modules of lens_core, otel_bridge, lens_report, lens_ci, lens_cli
    (module-level and function-level imports alike): each package loads in one clear order."""
    cycles = [one_cycle(GRAPH, comp) for comp in find_cycles(GRAPH)]
    assert not cycles, "import cycles:\n  " + "\n  ".join(cycles)


def test_every_room_has_a_row_in_the_architecture_note():
    """docs/architecture.md declares the arrows of every room this test reads."""
    assert set(declared_rules()) == set(ROOMS)


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_only_what_the_architecture_note_allows(room):
    """Each room's arrows to other rooms and third-party packages are the ones its row in
    docs/architecture.md allows (a lazily-allowed room only from inside a function)."""
    at_import, lazily, third = declared_rules()[room]
    wrong = []
    for module in sorted(m for m in MODULES if _room(m) == room):
        for target, line, top, _ in raw_imports(module):
            top_name = _room(target)
            if top_name == room or _stdlib(target) or target == "":
                continue
            if top_name in ROOMS:
                ok = _allowed(target, at_import) or (not top and _allowed(target, lazily))
            else:
                ok = _allowed(target, third)
            if not ok:
                where = "at module level" if top else "in a function"
                wrong.append(f"{module} (line {line}) imports {target} {where}")
    assert not wrong, f"arrows docs/architecture.md does not allow for {room}:\n  " + "\n  ".join(wrong)


def test_other_rooms_enter_the_report_only_by_its_door():
    """lens_report has one door: its package's public names and lens_report.cli."""
    door = {"lens_report", "lens_report.cli"}
    wrong = [f"{m} (line {line}) imports {target}"
             for m in MODULES if _room(m) != "lens_report"
             for target, line, _, stated in raw_imports(m)
             if stated and _room(target) == "lens_report" and target not in door]
    assert not wrong, "lens_report entered other than by its door:\n  " + "\n  ".join(wrong)


def test_nothing_imports_the_command_and_only_its_main_imports_the_demo():
    """lens_cli is the `lens` entry point: no other room imports it, and lens_cli.demo is
    reached only from lens_cli.main (the command that offers it)."""
    wrong = []
    for module, edges in GRAPH.items():
        for target, (line, _) in edges.items():
            if _room(target) == "lens_cli" and _room(module) != "lens_cli":
                wrong.append(f"{module} (line {line}) imports {target}")
            if target.startswith("lens_cli.demo") and not module.startswith(("lens_cli.demo", "lens_cli.main")):
                wrong.append(f"{module} (line {line}) imports {target}")
    assert not wrong, "\n  ".join(["the command or its demo imported from elsewhere:"] + wrong)


def room_cycles(rules: dict[str, tuple[set[str], set[str], set[str]]]) -> list[list[str]]:
    """The loops among rooms that ``rules`` (room -> (at import, lazily, third party)) allow."""
    graph = {room: {_room(other): (0, True) for other in at_import | lazily if _room(other) in rules.keys() - {room}}
             for room, (at_import, lazily, _) in rules.items()}
    return find_cycles(graph)


def test_room_cycle_finder_names_two_rooms_that_import_each_other():
    """The room check is not vacuous: a bridge that may import the CI tools lazily while they
    import it (the layout before lens_cli) is a loop."""
    rules = {"otel_bridge": ({"lens_core"}, {"lens_ci"}, set()), "lens_ci": ({"lens_core"}, {"otel_bridge"}, set()),
             "lens_core": (set(), set(), set())}
    assert room_cycles(rules) == [["lens_ci", "otel_bridge"]]


def test_the_rooms_stand_on_floors():
    """Regression: the bridge held the `lens` command, which imported the CI tools, whose pytest
    fixture imports the bridge: two rooms importing each other (an arrow running back up).
    Read as arrows between rooms, the note's rows (at import or lazily) make no loop."""
    assert room_cycles(declared_rules()) == []


def test_the_sdk_is_imported_only_in_the_sdk_room_and_the_exporters():
    """opentelemetry.sdk appears only under otel_bridge/sdk/ and otel_bridge/exporters/
    (the exporters subclass the SDK's exporter interfaces: docs/architecture.md says why)."""
    wrong = [f"{m} (line {line}) imports {target}"
             for m in MODULES if not m.startswith(("otel_bridge.sdk", "otel_bridge.exporters"))
             for target, line, _, _ in raw_imports(m) if _allowed(target, {"opentelemetry.sdk"})]
    assert not wrong, "opentelemetry.sdk outside its room:\n  " + "\n  ".join(wrong)


def test_a_quiet_rank_reaches_no_opentelemetry_at_import():
    """No chain of module-level imports from otel_bridge (what `import otel_bridge` and
    setup_telemetry's module load) reaches opentelemetry: the SDK stays lazy."""
    seen, queue, via = {"otel_bridge"}, deque(["otel_bridge"]), {}
    while queue:
        module = queue.popleft()
        for target, (line, top) in GRAPH.get(module, {}).items():
            if not top or target in seen:
                continue
            seen.add(target)
            via[target] = module
            queue.append(target)
    reached = sorted(t for t in seen if _room(t) == "opentelemetry")
    chains = []
    for target in reached:
        chain = [target]
        while chain[-1] in via:
            chain.append(via[chain[-1]])
        chains.append(" <- ".join(chain))
    assert not reached, "opentelemetry is imported at module level from otel_bridge:\n  " + "\n  ".join(chains)


# Private upstream names, as they appear in source. Each belongs in otel_bridge/sdk/upstream.py.
_PRIVATE_UPSTREAM = re.compile(
    r"ray\._private|_internal_kv|cygrpc|_SPAN_KEY|_RUNTIME_CONTEXT|_current_context|_encode_resource"
    r"|_translate_data|_count_data|\._client\b|\._export\(|\._channel\b|_log_encoder|\._log_exporter"
    r"|opentelemetry\._logs|opentelemetry\.sdk\._logs|from opentelemetry import _logs|\._decision\b"
    r"|\._root\b|_remote_parent_|_local_parent_|proto\.common\._internal"
    r"|\b_Span\b|[.\"']_(?:attributes|events|dict|dq)\b")  # an SDK span's storage (upstream.sdk_span_reader)
# The one use outside the adapter: the logging bridge's handler overrides the hook the adapter
# vouches for (upstream.log_record_attributes_hook).
_ALLOWED_PRIVATE = {"otel_bridge.sdk.upstream"}


def test_private_upstream_names_appear_only_in_the_upstream_adapter():
    """Every reach into a private OpenTelemetry, gRPC or Ray name is in otel_bridge/sdk/upstream.py."""
    wrong = []
    for module, path in MODULES.items():
        if module in _ALLOWED_PRIVATE:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            match = _PRIVATE_UPSTREAM.search(code)
            if match:
                wrong.append(f"{module} line {number}: {match.group(0)}")
    assert not wrong, "private upstream names outside otel_bridge/sdk/upstream.py:\n  " + "\n  ".join(wrong)


_UPSTREAM = ("opentelemetry", "grpc", "ray", "google")


def private_upstream_reaches(source: str) -> list[tuple[int, str]]:
    """(line, what) for each private name ``source`` takes from an upstream package through
    its imports: a private module or name imported (``from opentelemetry.sdk import _logs``),
    or an underscored attribute of something imported from upstream
    (``sampling._get_from_env_or_default`` after ``from opentelemetry.sdk.trace import sampling``)."""
    tree = ast.parse(source)
    bound = set()  # names bound to upstream modules or objects by an import
    found = []

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in _UPSTREAM:
                    bound.add(alias.asname or alias.name.split(".")[0])
                    if any(private(part) for part in alias.name.split(".")):
                        found.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in _UPSTREAM:
            private_module = any(private(part) for part in node.module.split("."))
            for alias in node.names:
                bound.add(alias.asname or alias.name)
                if private_module or private(alias.name):
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append((node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
    return sorted(set(found))


def test_the_private_upstream_finder_sees_an_underscored_name_of_an_upstream_import():
    """The sampler read the SDK's sampler choice through ``sampling._get_from_env_or_default``
    and the name pattern above missed it; the import-following finder names it."""
    source = ("from opentelemetry.sdk.trace import sampling\n"
              "import grpc as g\n"
              "from opentelemetry.sdk._logs import LoggerProvider\n"
              "from opentelemetry.trace import _Span\n"
              "def f(exporter):\n"
              "    exporter._private()  # not an import: the name pattern's job\n"
              "    g.__version__\n"
              "    return sampling._get_from_env_or_default(), g._cython.cygrpc\n")
    assert private_upstream_reaches(source) == [
        (3, "opentelemetry.sdk._logs.LoggerProvider"), (4, "opentelemetry.trace._Span"),
        (8, "g._cython"), (8, "sampling._get_from_env_or_default")]


def test_private_upstream_names_reached_through_imports_are_only_in_the_adapter():
    """No module but otel_bridge/sdk/upstream.py takes a private name from an upstream import."""
    wrong = [f"{module} line {line}: {what}"
             for module, path in MODULES.items() if module not in _ALLOWED_PRIVATE
             for line, what in private_upstream_reaches(path.read_text())]
    assert not wrong, "private upstream names outside otel_bridge/sdk/upstream.py:\n  " + "\n  ".join(wrong)


_HOOKS = re.compile(r"register_at_fork\s*\(|atexit\.register\s*\(|Finalize\s*\(")
_LIFECYCLE = {"lens_core._lifecycle", "otel_bridge.lifecycle"}
# code it sends to a child interpreter it times (the clock read at the child's exit), never run here
_CHILD_CODE = {"lens_ci.importbudget"}


def test_fork_and_exit_hooks_register_only_with_the_lifecycle():
    """os.register_at_fork, atexit.register and multiprocessing's Finalize are called only by
    the lifecycle registry (every other participant registers with it, in a declared order)."""
    paths = dict(MODULES)
    paths.update({p.relative_to(ROOT).as_posix(): p for room in ROOMS for p in (ROOT / room).rglob("*.p[yx]i")})
    paths.update({p.relative_to(ROOT).as_posix(): p for room in ROOMS for p in (ROOT / room).rglob("*.pyx")})
    wrong = [f"{name} line {number}" for name, path in paths.items() if name not in _LIFECYCLE | _CHILD_CODE
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if _HOOKS.search(line.split("#", 1)[0])]
    assert not wrong, "fork/exit hooks registered outside the lifecycle:\n  " + "\n  ".join(wrong)


def test_the_lifecycle_order_in_the_note_is_the_declared_order():
    """docs/architecture.md lists the fork and exit participants in the order the registry runs them."""
    from lens_core import _lifecycle

    assert [row[1] for row in _table("fork-order")] == list(_lifecycle.FORK_ORDER)
    assert [row[1] for row in _table("exit-order")] == list(_lifecycle.EXIT_ORDER)


def _floors() -> dict[str, int]:
    text = DOC.read_text()
    section = text[text.index("`otel_bridge`:"):text.index("## Lifecycle")]
    floors = {}
    for line in section.splitlines():
        match = re.match(r"(\d+)\. (.*)", line.strip())
        if match:
            for name in re.findall(r"`([^`]+)`", re.sub(r"\([^)]*\)", "", match.group(2))):
                dotted = name.rstrip("/").replace("/", ".").removesuffix(".__init__")
                floors["otel_bridge." + dotted] = int(match.group(1))
    return floors


def _floor(module: str, floors: dict[str, int]):
    best = None
    for name, floor in floors.items():
        if module == name or module.startswith(name + "."):
            if best is None or len(name) > len(best[0]):
                best = (name, floor)
    return None if best is None else best[1]


def test_otel_bridge_modules_import_only_down_their_floors():
    """Every otel_bridge module is on a floor of the note, and imports (at any level) only
    modules on its own floor or lower ones."""
    floors = _floors()
    unplaced = sorted(m for m in MODULES if m.startswith("otel_bridge.") and _floor(m, floors) is None)
    assert not unplaced, f"otel_bridge modules on no floor of docs/architecture.md: {unplaced}"
    wrong = []
    for module, edges in GRAPH.items():
        own = _floor(module, floors)
        if own is None:
            continue
        for target, (line, _) in edges.items():
            theirs = _floor(target, floors)
            if theirs is not None and theirs > own:
                wrong.append(f"{module} (floor {own}, line {line}) imports {target} (floor {theirs})")
    assert not wrong, "imports up a floor:\n  " + "\n  ".join(sorted(wrong))
