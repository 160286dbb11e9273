"""The Python package's shape: `import heddle` stays light (no torch._dynamo, no backend, no tuning
layer), the layers import one way, and the module names of the flat layout still import."""
import ast
import os
import subprocess
import sys

import heddle

PKG = os.path.dirname(heddle.__file__)


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_import_heddle_loads_neither_dynamo_nor_the_backend_nor_tuning():
    out = _run("import sys, heddle\n"
               "print(sorted(m for m in ('torch._dynamo', 'heddle.pytorch.dynamo', 'heddle.pytorch.dynamo_fuse',"
               " 'heddle.tuning.autotune', 'heddle.tuning.bench') if m in sys.modules))")
    assert out.strip() == "[]"


def test_old_module_names_give_the_moved_modules():
    out = _run("import heddle\n"
               "import heddle.dynamo, heddle.api, heddle.interpret\n"
               "from heddle import autotune\n"
               "from heddle.dynamo_fuse import fuse\n"
               "import heddle.pytorch.dynamo as d, heddle.pytorch.matmul as m, heddle.tuning.autotune as t\n"
               "print(heddle.dynamo is d, heddle.api is m, autotune is t, d.__spec__.name, t.__spec__.name,\n"
               "      callable(heddle.interpret))")
    assert out.split() == ["True", "True", "True", "heddle.pytorch.dynamo", "heddle.tuning.autotune", "True"]


def _imports(path: str, package: str):
    """heddle modules named by the imports of one file (relative ones resolved against `package`)."""
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("heddle"):
                yield from ([f"{mod}.{a.name}" for a in node.names] if not node.module else [mod])
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("heddle"))


def test_layers_import_one_way():
    """core imports nothing above it; tuning imports core only; pytorch imports core and tuning."""
    allowed = {"core": ("heddle.core", "heddle._C"), "tuning": ("heddle.core", "heddle.tuning", "heddle._C"),
               "pytorch": ("heddle.core", "heddle.tuning", "heddle.pytorch", "heddle._C")}
    seen = 0
    for layer, ok in allowed.items():
        for name in sorted(os.listdir(os.path.join(PKG, layer))):
            if not name.endswith(".py"):
                continue
            for mod in _imports(os.path.join(PKG, layer, name), f"heddle.{layer}"):
                seen += 1
                assert mod.startswith(ok), f"heddle/{layer}/{name} imports {mod}: not below the {layer} layer"
    assert seen > 20  # the walk did read the imports


def _module_graph():
    """heddle module -> the heddle modules its file imports (function-local imports too: a lazy import is
    still a dependency), for every module file of the three layers and the package root."""
    files = {"heddle": os.path.join(PKG, "__init__.py")}
    for layer in ("core", "tuning", "pytorch"):
        for name in os.listdir(os.path.join(PKG, layer)):
            if name.endswith(".py"):
                mod = f"heddle.{layer}" + ("" if name == "__init__.py" else "." + name[:-3])
                files[mod] = os.path.join(PKG, layer, name)
    graph = {}
    for mod, path in files.items():
        package = mod if path.endswith("__init__.py") else mod.rsplit(".", 1)[0]
        deps = set()
        for name in _imports(path, package):  # "pkg.mod.Name" -> the longest prefix that is a module file
            while name and name not in files:
                name = name.rsplit(".", 1)[0] if "." in name else ""
            if name and name != mod:
                deps.add(name)
        graph[mod] = deps
    return graph


def test_no_module_imports_itself_through_others():
    """No import circle among heddle's modules (docs/architecture.md: one-way imports inside a layer too)."""
    graph = _module_graph()
    # a package's __init__ may import its own modules (it is their face); circles through it do not count
    inits = {"heddle", "heddle.core", "heddle.tuning", "heddle.pytorch"}
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(graph[m] - inits):
            if state.get(d) == "open":
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(d):] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state and m not in inits:
            visit(m)
    assert len(graph) > 30 and sum(len(d) for d in graph.values()) > 40  # the walk did read the imports
