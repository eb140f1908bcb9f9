"""The distribution as pip builds it: the wheel holds every module and template and nothing of
tests/ or bench/, its metadata matches pyproject.toml, and installed into a fresh venv both console
scripts run. Offline: the build uses the setuptools and wheel the test extra installed
(--no-build-isolation), the venv reaches the already-installed dependencies through a .pth file."""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import leanctx

REPO = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomlkit as tomllib
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _source_files() -> list:
    """The files a clone has: git's list when this is a checkout, else the tree less local state."""
    if (REPO / ".git").exists() and shutil.which("git"):
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True)
        return [f for f in out.stdout.decode().split("\0") if f and (REPO / f).is_file()]
    skip = {".git", ".ci", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis"}
    return [str(p.relative_to(REPO)) for p in REPO.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(REPO).parts) and ".egg-info" not in str(p)]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for rel in _source_files():  # built from a copy: the build writes build/ and egg-info beside its sources
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    out = tmp_path_factory.mktemp("wheelhouse")
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-w", str(out), str(src)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_ships_every_module_and_template_and_no_tests(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    package = REPO / "leanctx"
    shipped = {str(p.relative_to(REPO)) for p in package.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and (p.suffix == ".py" or "templates" in p.parts)}
    shipped.add("leanctx/state/schema.json")
    assert len(shipped) > 100 and "leanctx/templates/hook-wrapper.sh" in shipped
    assert shipped - names == set()
    assert not [n for n in names if n.startswith(("tests/", "bench/")) or "/tests/" in n or "__pycache__" in n]
    assert {n.split("/")[0] for n in names} == {"leanctx", wheel.name.split("-")[0] + "-" + leanctx.__version__ + ".dist-info"}


def test_the_wheels_metadata_is_pyprojects(wheel: Path) -> None:
    project = _pyproject()["project"]
    with zipfile.ZipFile(wheel) as z:
        info = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(z.read(info))
        entry_points = z.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert meta["Name"] == project["name"] == "leanctx-hooks"
    assert meta["Version"] == leanctx.__version__
    assert meta["Requires-Python"] == project["requires-python"]

    from packaging.requirements import Requirement  # pytest's own dependency

    def norm(s: str) -> str:
        return str(Requirement(s))  # one spelling: specifiers sorted, markers quoted alike

    requires = {norm(r) for r in meta.get_all("Requires-Dist")}
    wanted = {norm(r) for r in project["dependencies"]}
    for extra, reqs in project["optional-dependencies"].items():
        wanted |= {norm(f"{r}; extra == '{extra}'") for r in reqs}
    assert requires == wanted
    assert set(meta.get_all("Provides-Extra")) == set(project["optional-dependencies"]) == {"test", "sdk"}
    assert "leanctx = leanctx.__main__:main" in entry_points and "leanctx-hook = leanctx.hooks:run" in entry_points


def test_the_wheel_installed_in_a_fresh_venv_runs_both_scripts(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # the dependencies this interpreter already has, behind the venv's own site-packages (its .pth
    # files are not run, so an editable leanctx there stays out of the way)
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz-deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                           str(wheel)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    home = tmp_path / "home"
    home.mkdir()
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("LEANCTX_", "PYTHON", "VIRTUAL_ENV"))}
    run_env.update(HOME=str(home), LEANCTX_HOME=str(home / ".local" / "share" / "leanctx"),
                   PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")

    def run(*argv: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=run_env, cwd=tmp_path, timeout=120)

    where = run(str(py), "-c", "import leanctx; print(leanctx.__file__)")
    assert where.stdout.strip().startswith(str(site)), where  # the wheel's copy, not the clone's
    version = run(str(venv / "bin" / "leanctx"), "--version")
    assert version.returncode == 0 and leanctx.__version__ in version.stdout, version
    hosts = run(str(venv / "bin" / "leanctx"), "hosts")
    from leanctx import agents

    listed = {line.split()[0] for line in hosts.stdout.splitlines()[1:] if line.strip()}
    assert hosts.returncode == 0 and listed >= set(agents.names()) and len(listed) > 10, hosts
    hook = run(str(venv / "bin" / "leanctx-hook"))
    assert (hook.returncode, hook.stdout) == (0, ""), hook


def test_no_install_instruction_asks_a_package_index_for_leanctx() -> None:
    """leanctx-hooks is not on a package index: an instruction (docs or a message) that installs it
    by name fails as written; from a clone (`pip install -e .`, `'.[sdk]'`, `pipx install .`) works."""
    import re

    by_name = re.compile(r"\b(?:pipx|pip|uv tool|uv pip)\s+install\b[^\n`]*?(?<![\w/.-])['\"]?leanctx-hooks\b(?!\S*\s*@)")
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "leanctx").rglob("*.py"))]
    found = [f"{f.relative_to(REPO)}:{m.group(0)}" for f in files for m in by_name.finditer(f.read_text())]
    assert found == []
    assert by_name.search("run pipx install leanctx-hooks") and by_name.search("pip install 'leanctx-hooks[sdk]'")
    assert not by_name.search("python -m pip uninstall leanctx-hooks") and not by_name.search("pip install -e '.[sdk]'")
