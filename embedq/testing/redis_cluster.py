"""A Redis Cluster of local redis-server processes on loopback, for tests and benchmarks.

Three masters share the 16,384 slots, and one replica
follows the first master, so a failover can be made on purpose (`failover`). Each node
runs in its own process group with its files in a folder of its own, keeps nothing on
disk, and is stopped by `stop`.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from embedq.testing.processes import free_ports
from embedq.testing.processes import stop as stop_process

NODE_TIMEOUT_MS = 2000
SLOTS = 16384


class LocalRedisCluster:
    def __init__(self, root: Path, masters: int = 3, replicas: int = 1) -> None:
        """`replicas` follow the first master. Raises FileNotFoundError without
        redis-server and redis-cli (Debian's redis-server package has both)."""
        for tool in ("redis-server", "redis-cli"):
            if shutil.which(tool) is None:
                raise FileNotFoundError(f"{tool} is not installed (apt-get install "
                                        "redis-server)")
        self.root = root
        nodes = masters + replicas
        ports = free_ports(2 * nodes)  # distinct: a node and a bus port each
        self.master_ports = ports[:masters]
        self.replica_ports = ports[masters:nodes]
        self.bus_ports = dict(zip(ports[:nodes], ports[nodes:], strict=True))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """The `redis+cluster://` URL of the masters (EMBEDQ_REDIS_URL)."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.master_ports)

    def cli(self, port: int, *args: str, timeout_s: float = 30) -> str:
        done = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
                              capture_output=True, text=True, timeout=timeout_s, check=True)
        return done.stdout

    def start(self) -> LocalRedisCluster:
        """Slots assigned by hand and nodes introduced with CLUSTER MEET: what
        `redis-cli --cluster create` does, without its pauses of a second a step."""
        nodes = self.master_ports + self.replica_ports
        try:
            for port in nodes:
                self._spawn(port)
            for port in nodes:
                self._wait(lambda p=port: self._answers(p), f"node {port} answering")
            share = SLOTS // len(self.master_ports)
            for i, port in enumerate(self.master_ports):
                last = SLOTS - 1 if i == len(self.master_ports) - 1 else (i + 1) * share - 1
                self.cli(port, "CLUSTER", "ADDSLOTSRANGE", str(i * share), str(last))
            for port in nodes[1:]:
                self.cli(nodes[0], "CLUSTER", "MEET", "127.0.0.1", str(port),
                         str(self.bus_ports[port]))
            first = self.node_id(self.master_ports[0])
            for port in self.replica_ports:
                self._wait(lambda p=port: first in self.cli(p, "CLUSTER", "NODES"),
                           f"replica {port} meeting the first master")
                self.cli(port, "CLUSTER", "REPLICATE", first)
            self._settled("starting")
        except BaseException:
            self.stop()
            raise
        return self

    def _settled(self, when: str) -> None:
        nodes = self.master_ports + self.replica_ports
        for port in nodes:
            self._wait(lambda p=port: self._sees_all(p, len(nodes)),
                       f"node {port} seeing the whole cluster ok ({when})")
        for port in self.replica_ports:
            self._wait(lambda p=port: "master_link_status:up" in self.cli(
                p, "INFO", "replication"), f"replica {port} in sync ({when})")

    def _sees_all(self, port: int, count: int) -> bool:
        known = self.cli(port, "CLUSTER", "NODES").splitlines()
        return ("cluster_state:ok" in self.cli(port, "CLUSTER", "INFO") and len(known) == count
                and not any("fail" in line.split()[2] or "handshake" in line.split()[2]
                            for line in known))

    def flush(self) -> None:
        """Drop every key of every master (and so of the replica)."""
        for port in self.master_ports:
            self.cli(port, "FLUSHALL")

    def node_id(self, port: int) -> str:
        return self.cli(port, "CLUSTER", "MYID").strip()

    def failover(self, replica_port: int | None = None) -> int:
        """Promote a replica (`CLUSTER FAILOVER`: its master hands over its slots without
        losing a write); returns the port of the master it replaced."""
        port = replica_port or self.replica_ports[0]
        info = self.cli(port, "INFO", "replication")
        old = int(info.split("master_port:", 1)[1].split()[0])
        self.cli(port, "CLUSTER", "FAILOVER")
        self._wait(lambda: "role:master" in self.cli(port, "INFO", "replication"),
                   f"replica {port} becoming master")
        self.master_ports[self.master_ports.index(old)] = port
        self.replica_ports[self.replica_ports.index(port)] = old
        self._settled("after the failover")
        return old

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_process(proc)
        self.procs.clear()

    def _spawn(self, port: int) -> None:
        folder = self.root / str(port)
        folder.mkdir(parents=True, exist_ok=True)
        log = open(folder / "redis.log", "ab")  # noqa: SIM115 - the child owns it
        self.procs[port] = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
             # Its own bus port: the default (port + 10000) may be taken or past 65535.
             "--cluster-enabled", "yes", "--cluster-port", str(self.bus_ports[port]),
             "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--save", "",
             "--appendonly", "no", "--repl-diskless-sync-delay", "0", "--dir", str(folder)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _answers(self, port: int) -> bool:
        try:
            return "PONG" in self.cli(port, "PING", timeout_s=2)
        except (subprocess.SubprocessError, OSError):
            return False

    @staticmethod
    def _wait(predicate: Callable[..., bool], what: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError(f"Redis Cluster: {what} did not happen in {timeout_s} s")
            time.sleep(0.05)
