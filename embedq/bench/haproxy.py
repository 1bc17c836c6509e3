"""HAProxy on loopback, run with the shipped deploy/haproxy.cfg, for `embedq bench balance`.

The file is run as shipped, with its addresses set through the environment variables it
reads (BALANCER_BIND, BALANCER_API_1..3, BALANCER_SOCKET; BALANCER_HOT_PERCENT passes
through from this process's environment when set); `variant` rewrites only the semantic
backend's balance lines and hot-namespace rules, for the modes it is compared with:

    bounded      as shipped: a hot namespace's requests to the replica with the fewest in
                 flight, every other one home on a consistent-hash ring, queued there
                 while its replica serves 1.25 x the mean in flight
    bounded-all  hash-balance-factor 125 on the ring for every request instead (no hot
                 rules, no queue): a full replica passes whatever request comes next,
                 cold or hot, to the next replica on the ring
    hash         the ring alone (a namespace always goes home, never waits)
    roundrobin   no hashing: each request to the next replica

`Balancer` reads what HAProxy itself counted: per replica of the semantic backend, the
requests it was sent and the most it had in flight at once (`show stat` on the stats
socket). Its request log (stdout) goes to a file beside the config, for reading only:
HAProxy drops log lines when the machine is loaded.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from embedq.errors import ConfigError, Unavailable
from embedq.testing import processes

MODES = ("bounded", "bounded-all", "hash", "roundrobin")
REPLICAS = 3  # the shipped file's server lines: api1, api2, api3
BACKEND = "semantic"
START_DEADLINE_S = 30.0
INSTALL = ("install Debian's haproxy (`apt-get install haproxy`, or `make haproxy`), or "
           "put an haproxy 2.x on PATH")
_SHIPPED = ("    balance uri path-only depth 3\n", "    hash-type consistent\n")
FACTOR = "    hash-balance-factor 125\n"
# The hot namespaces' rules, and the servers' limits (their queue).
_HOT_RULES = re.compile(r"^    use-server .*\n", re.M)
_LIMITS = re.compile(r" minconn \d+ maxconn \d+$", re.M)


def default_config() -> Path:
    """deploy/haproxy.cfg of the checkout this package runs from."""
    return Path(__file__).resolve().parents[2] / "deploy" / "haproxy.cfg"


def binary() -> str:
    found = shutil.which("haproxy") or next(
        (p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if Path(p).exists()), None)
    if found is None:
        raise ConfigError(f"no haproxy found: {INSTALL}")
    return found


def variant(text: str, mode: str) -> str:
    """The shipped file with the semantic backend balanced as `mode` says."""
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")
    if not all(line in text for line in _SHIPPED):
        raise ConfigError("the haproxy file lacks the semantic backend's lines "
                          f"{' / '.join(line.strip() for line in _SHIPPED)}: bench balance "
                          "compares modes by rewriting them; start from deploy/haproxy.cfg")
    if mode == "bounded":
        return text
    balance, hash_type = _SHIPPED
    text = _LIMITS.sub("", _HOT_RULES.sub("", text)).replace(FACTOR, "")
    if mode == "bounded-all":
        return text.replace(hash_type, hash_type + FACTOR)
    if mode == "roundrobin":
        return text.replace(balance, "    balance roundrobin\n").replace(hash_type, "")
    return text


@dataclass(frozen=True)
class Replica:
    """One server of the semantic backend, as HAProxy counted it."""

    name: str
    requests: int  # stot: requests sent to it
    peak_in_flight: int  # smax: the most it had in flight at once
    peak_queued: int  # qmax: the most requests waiting in HAProxy for it at once
    status: str


class Balancer:
    """`haproxy -db -f FILE` on a free loopback port in front of `replicas` (host:port)."""

    def __init__(self, config_text: str, replicas: list[str], tmp: Path, tag: str) -> None:
        if len(replicas) != REPLICAS:
            raise ConfigError(f"the haproxy file names {REPLICAS} replicas, not {len(replicas)}")
        self.port = processes.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.socket = tmp / f"haproxy-{tag}.sock"
        self.log = tmp / f"haproxy-{tag}.log"
        self.config = tmp / f"haproxy-{tag}.cfg"
        self.config.write_text(config_text)
        self.env = {"BALANCER_BIND": f"127.0.0.1:{self.port}",
                    "BALANCER_SOCKET": str(self.socket), "PATH": "/usr/sbin:/usr/bin:/bin",
                    **{f"BALANCER_API_{n}": r for n, r in enumerate(replicas, 1)},
                    **{k: os.environ[k] for k in ("BALANCER_HOT_PERCENT",) if k in os.environ}}
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Balancer:
        check = subprocess.run([binary(), "-c", "-q", "-f", str(self.config)], env=self.env,
                               capture_output=True, text=True, timeout=30)
        if check.returncode != 0:
            raise ConfigError(f"haproxy refused {self.config}:\n{check.stderr[-2000:]}")
        with open(self.log, "ab") as out:  # the child holds its own copy
            self.proc = subprocess.Popen([binary(), "-db", "-f", str(self.config)],
                                         env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        try:
            self._wait_up()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            processes.stop(self.proc)

    def _wait_up(self) -> None:
        """Until every replica of the semantic backend is UP by HAProxy's own checks."""
        assert self.proc is not None
        deadline = time.monotonic() + START_DEADLINE_S
        last = "no stats yet"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Unavailable(f"haproxy exited ({self.proc.returncode}):\n"
                                  f"{self.log.read_text(errors='replace')[-2000:]}")
            with contextlib.suppress(OSError):
                replicas = self.replicas()
                if len(replicas) == REPLICAS and all(r.status == "UP" for r in replicas):
                    return
                last = ", ".join(f"{r.name} {r.status}" for r in replicas)
            time.sleep(0.2)
        raise Unavailable(f"haproxy's replicas were not all up within {START_DEADLINE_S:.0f} s"
                          f" ({last})")

    def _show_stat(self) -> list[dict[str, str]]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(self.socket))
            sock.sendall(b"show stat\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        lines = data.decode().lstrip("# ").splitlines()
        return list(csv.DictReader(line for line in lines if line))

    def replicas(self) -> list[Replica]:
        """The semantic backend's servers, in the file's order."""
        return [Replica(row["svname"], int(row["stot"] or 0), int(row["smax"] or 0),
                        int(row["qmax"] or 0), row["status"])
                for row in self._show_stat()
                if row["pxname"] == BACKEND and row["svname"] not in ("FRONTEND", "BACKEND")]
