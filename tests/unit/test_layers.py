"""The layers of docs/architecture.md, read from the imports: each imports only layers below it,
nothing in halo_cluster below the tools imports roles, no role imports another role; and what
halo_cluster holds for the roles is shared knowledge, not one role's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# each layer of halo_cluster and the layers it may import (itself included)
ALLOWED = {
    "config": {"config"},
    "decide": {"config", "decide"},
    "node": {"config", "decide", "node"},
    "tools": {"config", "decide", "node", "tools"},
}
# the command-line tools sit above the roles, as deploy.py and inventory.py do: they load a
# config, so they assemble the schema from the roles' sections (`roles.schema()`), and import
# nothing else of a role
ROLES = "halo_cluster.roles"  # the folder roles/ (setup.py)
ABOVE_ROLES = {"tools": {ROLES, f"{ROLES}.schema"}}


def imported(path: Path) -> set[str]:
    """Every module `path` imports, by its dotted name."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


def role_of(name: str) -> str | None:
    """The role a module name is of ("" for the roles package itself), None when none."""
    if name != ROLES and not name.startswith(f"{ROLES}."):
        return None
    return name.removeprefix(ROLES).removeprefix(".").partition(".")[0]


def test_nothing_imports_the_roles_by_their_folder_name() -> None:
    """`roles` is a folder of the checkout, installed as halo_cluster.roles: an `import roles`
    would work only in the checkout, and load every role a second time beside the other."""
    folders = ("halo_cluster", "roles", "tests", "lab", "bench")
    sources = [ROOT / "deploy.py", ROOT / "inventory.py"]
    for path in sources + sorted(p for f in folders for p in (ROOT / f).rglob("*.py")):
        found = {n for n in imported(path) if n.split(".")[0] == "roles"}
        assert not found, f"{path.relative_to(ROOT)} imports {sorted(found)}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_layers_below_it(layer: str) -> None:
    for path in sorted((ROOT / "halo_cluster" / layer).rglob("*.py")):
        for name in imported(path):
            parts = name.split(".")
            if role_of(name) is not None:
                assert name in ABOVE_ROLES.get(layer, ()), f"{layer}/{path.name} imports {name}"
            elif parts[0] == "halo_cluster" and len(parts) > 1:
                assert parts[1] in ALLOWED[layer], f"{layer}/{path.name} imports {name}"


def test_no_role_imports_another_role() -> None:
    for folder in sorted(p for p in (ROOT / "roles").iterdir() if (p / "__init__.py").exists()):
        for path in sorted(folder.rglob("*.py")):
            for name in imported(path):
                role = role_of(name)
                if role is not None:
                    assert role in ("", folder.name), f"{folder.name}/{path.name} imports {name}"


def test_no_role_imports_the_tools() -> None:
    for path in sorted((ROOT / "roles").rglob("*.py")):
        for name in imported(path):
            assert not name.startswith("halo_cluster.tools"), f"{path} imports {name}"


# Where a role's own piece would live in its folder instead: any module holding one is shared
# knowledge only when every public function and class in it has users in two of these places.
SHARED = (
    "halo_cluster/node/operations.py",
    "halo_cluster/node/facts.py",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "halo_cluster" / "decide").glob("*.py")),
)
# Shared knowledge with one user that is no role, so no role's folder could hold it.
ONE_USER = {
    # the deploy's own (deploy.py, node/deployreads.py): the safety check, and the data port it
    # reads before any role runs
    "Hardware",
    "DataPortHardware",
    "DataPort",
    "hardware_command",
    "hardware_process",
    "Verdict",
    "check_node",
    "cluster_user_problem",
    # the data port's RDMA device as NodeContext resolves it (its name after rdma-core's rename)
    # and RCCL's pin of it, which node/environment.py renders for the launcher and the serve role
    "PciFunction",
    "parse_pci",
    "persistent_name",
    "hca_pin",
    # make verify's parsers of tools the deploy never runs (tests/infra)
    "Transport",
    "parse",
    "port_state",
    "roce_v2_gid_index",
    "parse_latency",
    "parse_bandwidth_gbps",
    "ibv_devices",
    "grub_cmdline",
    # the kernel role's edits of the boot files: they keep to the files' grammar (cmdline.py's
    # token and line patterns), which the reboot role and tests/infra read by
    "edit_args",
    "edit_grub_defaults",
    "edit_bls_entry",
    "edit_kernel_cmdline",
    "default_entry",
    # a long transfer's progress (decide/transfer.py), which node/progress.py alone measures, for
    # the container role's pull, the serve role's download and the upgrade's pull alike
    "Meter",
    "rate",
    "on_disk",
    "layers_to_fetch",
    # vLLM's KV-cache arithmetic (decide/kvcache.py), which decide/fitestimate.py alone composes
    # into the one estimate `halo-cluster fit` and the serve role's preflight both run (`judge`)
    "attention",
    "per_token",
}


def used_names(path: Path) -> set[str]:
    """Every name `path` refers to in code: a name, an attribute, an imported name."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.name.rpartition(".")[2])
    return names


def places() -> dict[str, set[str]]:
    """{place: the names its code uses}: each role, deploy.py, inventory.py, the tools,
    tests/infra, and each other module of halo_cluster."""
    folders = {
        f"roles/{p.name}": sorted(p.rglob("*.py"))
        for p in (ROOT / "roles").iterdir()
        if (p / "__init__.py").exists()
    }
    folders |= {
        "deploy.py": [ROOT / "deploy.py"],
        "inventory.py": [ROOT / "inventory.py"],
        "tools": sorted((ROOT / "halo_cluster" / "tools").rglob("*.py")),
        "tests/infra": sorted((ROOT / "tests" / "infra").glob("*.py")),
    }
    for path in sorted((ROOT / "halo_cluster").glob("*/*.py")):
        if path.parent.name != "tools":
            folders[str(path.relative_to(ROOT))] = [path]
    return {place: set().union(*map(used_names, paths)) for place, paths in folders.items()}


def users(module: str, found: dict[str, set[str]]) -> dict[str, set[str]]:
    """{public function or class of `module`: the places that use it}; a name its module's own
    code uses is used wherever that code is (a helper serves its callers' users)."""
    tree = ast.parse((ROOT / module).read_text())
    defined = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    result = {
        d.name: {place for place, names in found.items() if place != module and d.name in names}
        for d in defined
    }
    calls = {
        d.name: {n.id for n in ast.walk(d) if isinstance(n, ast.Name)} - {d.name} for d in defined
    }
    grown = True
    while grown:
        grown = False
        for caller, called in calls.items():
            for name in called & result.keys():
                if not result[caller] <= result[name]:
                    result[name] |= result[caller]
                    grown = True
    return {name: where for name, where in result.items() if not name.startswith("_")}


def test_shared_modules_hold_only_shared_knowledge() -> None:
    """A function or class only one role uses belongs in that role's folder (issue 18)."""
    found = places()
    single = {
        f"{module}: {name}": sorted(where)
        for module in SHARED
        for name, where in users(module, found).items()
        if len(where) < 2 and name not in ONE_USER
    }
    assert single == {}


def test_every_exception_is_still_one_users() -> None:
    """An exception that gained a second user, or left, leaves the list."""
    found = places()
    defined = {name: where for module in SHARED for name, where in users(module, found).items()}
    assert {
        name: sorted(defined.get(name, ())) for name in ONE_USER if len(defined.get(name, ())) != 1
    } == {}


# ---- pyinfra's internals, in one module (halo_cluster/node/pyinfra_internals.py)

INTERNALS_MODULE = ROOT / "halo_cluster" / "node" / "pyinfra_internals.py"
# what ships: the package (the verification included) and the entry points
SHIPPED = ("halo_cluster", "roles", "tests/infra")
PRIVATE_MODULES = ("pyinfra.context", "pyinfra_cli")
DOCUMENTED_PRIVATE = {("os", "_exit")}  # the standard library's own, documented


def internals() -> list[str]:
    """The internals the module's docstring lists, one paragraph each: "`NAME` (where...)"."""
    doc = ast.get_docstring(ast.parse(INTERNALS_MODULE.read_text())) or ""
    return re.findall(r"^`(\w+)` \(", doc, flags=re.MULTILINE)


def internal_uses(path: Path) -> set[str]:
    """The pyinfra internals `path` uses: a private module imported or named, a listed
    internal by name, attribute or string, and in the deploy's code (where pyinfra's objects
    go: not the verification, which pytest runs) any other object's private attribute."""
    listed, found = set(internals()), set()
    deploy_code = not path.is_relative_to(ROOT / "tests")
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(alias.name for alias in node.names)]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
            if deploy_code and (private := private_attribute(node)):
                found.add(private)
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # a module's name, or a private name for getattr; not pyinfra's JSON output's keys
            names = [node.value] if node.value.startswith(("_", *PRIVATE_MODULES)) else []
        for name in names:
            if name in listed or name.startswith(PRIVATE_MODULES):
                found.add(name)
    return found


def private_attribute(node: ast.Attribute) -> str | None:
    """`owner._name` of another object than self or cls (a documented one of the standard
    library's aside), else None."""
    owner = node.value.id if isinstance(node.value, ast.Name) else "?"
    if not node.attr.startswith("_") or node.attr.startswith("__"):
        return None
    if owner in ("self", "cls") or (owner, node.attr) in DOCUMENTED_PRIVATE:
        return None
    return f"{owner}.{node.attr}"


def sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def test_the_internals_module_lists_what_it_uses() -> None:
    listed = set(internals())
    assert listed >= {"ctx_state", "active_hosts", "failed_hosts", "_get_module", "pyinfra_cli"}
    for use in internal_uses(INTERNALS_MODULE):
        assert use.rpartition(".")[2] in listed or use.startswith(PRIVATE_MODULES), use


def test_pyinfra_internals_are_used_through_one_module() -> None:
    """What ships reaches pyinfra beyond its documented API only through
    halo_cluster/node/pyinfra_internals.py, whose docstring says where and why."""
    shipped = [ROOT / "deploy.py", ROOT / "inventory.py", *sources(*SHIPPED)]
    found = {
        str(path.relative_to(ROOT)): sorted(uses)
        for path in shipped
        if path != INTERNALS_MODULE and (uses := internal_uses(path))
    }
    assert found == {}, "use halo_cluster/node/pyinfra_internals.py (add the internal there)"


def test_the_architecture_lists_every_internal_and_who_uses_it() -> None:
    """docs/architecture.md's table of pyinfra beyond its API names each internal, each module
    using them, and each test reaching them itself."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page[page.index("Where the code meets pyinfra beyond") : page.index("## The lab")]
    users = [
        path
        for path in [ROOT / "deploy.py", *sources(*SHIPPED)]
        if "halo_cluster.node.pyinfra_internals" in imported(path)
    ]
    # a test's own private names (`reads._MISSING`) are ours: a test is listed for pyinfra's
    tests = [
        path
        for path in sources("tests", "lab", "bench")
        if not path.is_relative_to(ROOT / "tests" / "infra")
        and path != Path(__file__).resolve()
        and any(u in internals() or u.startswith(PRIVATE_MODULES) for u in internal_uses(path))
    ]
    missing = [f"`{name}`" for name in internals() if f"`{name}`" not in table]
    missing += [str(p.relative_to(ROOT)) for p in users + tests if p.name not in table]
    assert missing == []


# ---- test modules import helpers, never each other


def test_no_module_imports_a_test_module() -> None:
    """A test module's helpers shared with another live in a helper module (tests/unit/configs.py,
    tests/e2e/serving_lab.py, ...): importing a test module runs its collection-time code and
    ties one test's change to the other's."""
    found = []
    for path in sources("tests", "lab", "bench"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            else:
                continue
            tests = [n for n in names if n.rpartition(".")[2].startswith("test_")]
            found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for n in tests]
    assert found == []


# ---- the shape of halo_cluster: short modules, no import cycle

LINES = 380  # a module's bound (the style's ~350, with room for a docstring's growth)
# modules allowed over the bound while other work of issue 35 splits them (config/loader.py and
# config/model.py have left): remove each one as it comes under; the list only shrinks
LONG_ALLOWED: set[str] = set()


def test_no_module_is_over_the_bound() -> None:
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "halo_cluster").rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > LINES
    }
    assert {name: n for name, n in found.items() if name not in LONG_ALLOWED} == {}


def module_name(path: Path) -> str:
    """`path`'s dotted name as installed: roles/ is halo_cluster.roles (setup.py)."""
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[0] == "roles":
        parts = ["halo_cluster", *parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` that `path` imports anywhere in it (a function's own imports
    too: they cycle at run time as any other); `from P import M` is module P.M when it is one,
    else P; a relative import is resolved against the package of `path`."""
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return (found & modules) - {own}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for other in sorted(graph[name]):
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == name:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


@pytest.mark.parametrize("folders", [("halo_cluster", "roles"), ("lab",)])
def test_no_import_cycle(folders: tuple[str, ...]) -> None:
    """No module of halo_cluster (the roles included), nor of the lab, imports, at any depth,
    one that imports it back: each layer and each module reads as built on what it imports."""
    paths = [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]
    modules = {module_name(p) for p in paths}
    graph = {module_name(p): imports_of(p, modules) for p in paths}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_lab_stands_beside_the_tool_not_on_the_tests() -> None:
    """lab/ drives the tool's nodes: it may use halo_cluster's knowledge (its config, its roles'
    packages), never the tests or the benchmarks, which stand on the lab."""
    for path in sorted((ROOT / "lab").rglob("*.py")):
        for name in imported(path):
            assert name.split(".")[0] not in ("tests", "bench"), f"{path} imports {name}"
