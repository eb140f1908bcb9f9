"""The host CLI installer says what it installs and how far along, one package per npm call
(real npm, offline: local package tarballs made here)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.e2e import install_clis

pytestmark = pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")


def _tarball(root, name: str, version: str):
    src = root / f"src-{name}"
    src.mkdir()
    (src / "package.json").write_text(json.dumps({"name": name, "version": version, "bin": {name: "cli.js"}}))
    (src / "cli.js").write_text("#!/usr/bin/env node\nconsole.log('" + name + "');\n")
    (src / "payload.bin").write_bytes(b"x" * 300_000)
    out = subprocess.run(["npm", "pack", "--silent", "--pack-destination", str(root), str(src)],
                         capture_output=True, text=True, timeout=120, check=True)
    return root / out.stdout.strip().splitlines()[-1]


def test_one_npm_call_per_package_with_progress(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("npm_config_offline", "true")  # no registry: the tarballs are local
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    prefix = tmp_path / "cache"
    steps = [install_clis.Step(name, "1.2.3", prefix, spec=str(_tarball(tmp_path, name, "1.2.3")))
             for name in ("leanctx-probe-a", "leanctx-probe-b")]
    lines: list = []
    assert install_clis.install(steps, lines.append, measure=prefix) is None
    assert all(step.done() for step in steps)
    assert lines[0].startswith("leanctx e2e: installing 2 pinned host CLI packages with npm into")
    assert lines[1].startswith("  [1/2] leanctx-probe-a 1.2.3 ... (elapsed ")
    assert lines[2].startswith("  [1/2] leanctx-probe-a 1.2.3 installed; elapsed ")
    assert lines[3].startswith("  [2/2] leanctx-probe-b 1.2.3 ... (elapsed ")
    assert lines[4].startswith("  [2/2] leanctx-probe-b 1.2.3 installed; elapsed ")
    size = lines[4].rsplit(" now ", 1)[1]
    assert size.endswith(" kB") and float(size.split()[0]) > 600  # both payloads are on disk
    assert lines[5].startswith("leanctx e2e: 2 packages installed in ")
    deps = json.loads((prefix / "package.json").read_text())["dependencies"]
    assert set(deps) == {"leanctx-probe-a", "leanctx-probe-b"}  # the second call kept the first


def test_a_failed_package_stops_the_install_and_says_which(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("npm_config_offline", "true")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    prefix = tmp_path / "cache"
    good = install_clis.Step("leanctx-probe-c", "1.0.0", prefix, spec=str(_tarball(tmp_path, "leanctx-probe-c", "1.0.0")))
    bad = install_clis.Step("leanctx-probe-missing", "9.9.9", prefix, spec=str(tmp_path / "nothing-here.tgz"))
    lines: list = []
    problem = install_clis.install([bad, good], lines.append, measure=prefix)
    assert problem and problem.startswith("npm install ") and "nothing-here.tgz failed" in problem
    assert lines[-1].startswith("  [1/2] leanctx-probe-missing 9.9.9 FAILED: npm install")
    assert not good.done()  # nothing after the failed package ran
