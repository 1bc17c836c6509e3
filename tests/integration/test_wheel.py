"""A regular (non-editable) install carries its migrations: `embedq db upgrade` works from
an unpacked wheel, with no source tree anywhere on the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedq.models import migrate
from tests import support

pytestmark = pytest.mark.integration

SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                              ".*_cache", ".embedq", ".hypothesis", ".schemathesis", "*.db",
                              "tests")


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The repository built into a wheel (from a copy, so no build/ lands in the tree)
    and unpacked: what `pip install embedq` puts in site-packages."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(support.ROOT, src, symlinks=True, ignore=SKIP)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp / "dist"), str(src)],
        capture_output=True, text=True, timeout=180,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp / "dist").glob("embedq-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        shipped = {"env.py", "script.py.mako"} | {
            f"versions/{p.name}" for p in (support.ROOT / "migrations" / "versions").glob("*.py")
        }
        missing = {f"embedq/migrations/{n}" for n in shipped} - names
        assert not missing, f"the wheel lacks {sorted(missing)}"
        zf.extractall(tmp / "site")
    yield tmp / "site"


def from_wheel(site: Path, url: str, cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("EMBEDQ_") and k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(site), EMBEDQ_DATABASE_URL=url, HF_HUB_OFFLINE="1")
    # -P: the working directory is not on the path either.
    run = subprocess.run([sys.executable, "-P", *args], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout


def upgrade_from_wheel(site: Path, url: str, cwd: Path) -> None:
    out = from_wheel(site, url, cwd, "-m", "embedq.cli", "db", "upgrade")
    assert f"database at revision {migrate.heads()[0]}" in out
    where = from_wheel(site, url, cwd, "-c", "import embedq; print(embedq.__file__)")
    assert Path(where.strip()).is_relative_to(site)


def test_the_wheel_migrates_sqlite(unpacked: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'embedq.db'}"
    upgrade_from_wheel(unpacked, url, tmp_path)
    assert migrate.current(url) == migrate.heads()[0]


def test_the_wheel_migrates_postgres(unpacked: Path, tmp_path: Path) -> None:
    support.check_postgres()
    with support.temporary_database() as url:
        migrate.downgrade(url, "base")
        upgrade_from_wheel(unpacked, url, tmp_path)
        assert migrate.current(url) == migrate.heads()[0]
