"""The package's layout: the checkout's top-level folders install inside `halo_cluster`.

`roles/` is `halo_cluster.roles`, `templates/` `halo_cluster.templates` (package data, one folder
per role) and `tests/infra/` `halo_cluster.verification`; deploy.py and inventory.py, which pyinfra
runs as files, are copied to `halo_cluster/entry/`, with cluster.example.yml (`halo-cluster init`
starts from it), and the user's pages of docs/ to `halo_cluster/docs/`, the pages the tool's
messages name (halo_cluster/config/docs.py; the checkout's own pages stay in the checkout). The
subpackages are found, not listed, so a new role
(`roles/NAME/`, `templates/NAME/`) changes nothing here; the editable install (`pip install -e .`,
as `make venv` does) maps the same names onto the checkout's folders (docs/architecture.md).
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup
from setuptools.command.build_py import build_py

FOLDERS = {
    "halo_cluster.roles": "roles",
    "halo_cluster.templates": "templates",
    "halo_cluster.verification": "tests/infra",
}
ENTRY_POINTS = ("deploy.py", "inventory.py")  # pyinfra's files, run in halo_cluster/entry/
# beside them: the example `halo-cluster init` starts from (tools/commands/init.py)
SHIPPED = (*ENTRY_POINTS, "cluster.example.yml")
DOCS = "docs"  # the user's pages, as halo_cluster/docs/ (the project has no web address)
# the checkout's own pages: developing the tool, its lab, its tests and measures, which name its
# make targets; a wheel has neither (tests/unit/test_docs.py: no shipped page names a target)
CHECKOUT_ONLY = ("architecture.md", "lab.md", "testing.md", "performance.md", "design/")


def shipped_pages() -> list[Path]:
    """The pages the wheel ships: every page of docs/ but the checkout's own."""
    pages = sorted(Path(DOCS).rglob("*.md"))
    return [p for p in pages if not p.relative_to(DOCS).as_posix().startswith(CHECKOUT_ONLY)]


def packages() -> list[str]:
    """halo_cluster's own packages, then each folder's, under the name it installs as."""
    folders = {"halo_cluster": "halo_cluster", **FOLDERS}
    return [
        name
        for package, folder in folders.items()
        for name in (package, *(f"{package}.{sub}" for sub in subfolders(folder)))
    ]


def subfolders(folder: str) -> list[str]:
    """Every folder below, as Python sees them (a template folder is a namespace package)."""
    return find_namespace_packages(folder, exclude=["__pycache__", "*.__pycache__"])


class BuildWithEntryPoints(build_py):
    """The wheel's build also copies deploy.py, inventory.py, cluster.example.yml and the docs
    into the package; an editable install needs no copy: the tools find them in the checkout."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            entry = Path(self.build_lib, "halo_cluster", "entry")
            self.mkpath(str(entry))
            for name in SHIPPED:
                self.copy_file(name, str(entry / name))
            for page in shipped_pages():
                target = Path(self.build_lib, "halo_cluster", page)
                self.mkpath(str(target.parent))
                self.copy_file(str(page), str(target))


setup(
    packages=packages(),
    package_dir=FOLDERS,
    # a role's data beside its code (the os role's known-versions list, the serve role's model
    # recipes), and the templates (the metrics role's Grafana dashboards are JSON written as
    # they are)
    package_data={
        "halo_cluster.roles": ["*/*.yml", "*/recipes/*.yml"],
        "halo_cluster.templates": ["**/*.j2", "**/*.json"],
    },
    cmdclass={"build_py": BuildWithEntryPoints},
)
