"""Who is at the other end of a connection: the Unix socket's peer credentials (Linux for
real, macOS through the getsockopt seam with the layouts of <sys/un.h>), and the loopback
TCP peer of the dashboard found through /proc."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys

import pytest

from pokeralphd.proc import UNKNOWN_SCOPE, AgentScope
from pokeralphd.server.listener import (
    LOCAL_PEERCRED,
    LOCAL_PEERPID,
    SOL_LOCAL,
    XUCRED,
    peer_credentials,
)
from pokeralphd.web.transport import _proc_address, loopback_peer

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@linux
def test_a_unix_peer_on_linux() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert peer_credentials(left) == (os.getpid(), os.getuid())


def darwin_getsockopt(pid: int, uid: int, version: int = 0) -> object:
    """getsockopt as macOS answers it: an xucred for LOCAL_PEERCRED, a pid_t for
    LOCAL_PEERPID, at level SOL_LOCAL only."""
    asked = []

    def getsockopt(level: int, option: int, size: int) -> bytes:
        asked.append((level, option))
        assert level == SOL_LOCAL == 0
        if option == LOCAL_PEERCRED == 0x001:
            assert size == struct.calcsize(XUCRED) == 76
            return struct.pack(XUCRED, version, uid, 1, 20, *[0] * 15)
        if option == LOCAL_PEERPID == 0x002:
            assert size == 4
            return struct.pack("i", pid)
        raise OSError(42, "no such option")

    getsockopt.asked = asked  # type: ignore[attr-defined]
    return getsockopt


def test_a_unix_peer_on_macos() -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        get = darwin_getsockopt(4321, 501)
        assert peer_credentials(sock, "darwin", get) == (4321, 501)  # type: ignore[arg-type]
        assert get.asked == [(0, 0x001), (0, 0x002)]  # type: ignore[attr-defined]
        # No pid (0), or an xucred of a layout we do not know: nobody is known.
        no_pid = darwin_getsockopt(0, 501)
        assert peer_credentials(sock, "darwin", no_pid) == (None, 501)  # type: ignore[arg-type]
        other = darwin_getsockopt(4321, 501, version=7)
        assert peer_credentials(sock, "darwin", other) == (None, None)  # type: ignore[arg-type]


def test_a_linux_pid_of_zero_is_unknown() -> None:
    """SO_PEERCRED's pid is 0 for a peer in a pid namespace we cannot see."""
    with socket.socket(socket.AF_UNIX) as sock:

        def get(level: int, option: int, size: int) -> bytes:
            return struct.pack("3i", 0, 1000, 1000)

        assert peer_credentials(sock, "linux", get) == (None, 1000)


def test_addresses_as_proc_net_writes_them() -> None:
    little = sys.byteorder == "little"
    assert _proc_address(("127.0.0.1", 8080)) == ("0100007F" if little else "7F000001") + ":1F90"
    mapped = _proc_address(("::ffff:127.0.0.1", 80))
    assert mapped is not None and mapped.endswith(":0050") and len(mapped) == 32 + 5
    assert _proc_address(("not an address", 1)) is None


@linux
def test_the_loopback_peer_is_found_and_looked_up() -> None:
    """A TCP client on loopback: its process is found by the socket's inode and handed
    to identify; a client that is gone is no person."""
    seen: list[int | None] = []
    scope = AgentScope("battle", "r", "001-x")

    def identify(pid: int | None) -> AgentScope | None:
        seen.append(pid)
        return scope if pid != os.getpid() else None

    with socket.create_server(("127.0.0.1", 0)) as server:
        address = server.getsockname()
        client = [
            sys.executable,
            "-c",
            "import socket, sys\n"
            "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
            "print(s.getsockname()[1], flush=True)\n"
            "sys.stdin.read()\n",
            str(address[1]),
        ]
        with subprocess.Popen(client, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as child:
            assert child.stdout is not None
            port = int(child.stdout.readline())
            conn, peer = server.accept()
            with conn:
                assert peer == ("127.0.0.1", port)
                assert loopback_peer(peer, address, identify) == (child.pid, scope)
                assert child.pid in seen
            child.communicate(b"")
        # The client is gone: no such socket any more.
        assert loopback_peer(peer, address, identify) == (None, UNKNOWN_SCOPE)
        # In this very process (a test's client, the daemon's own): identify decides.
        with socket.create_connection(address) as mine:
            conn, peer = server.accept()
            with conn:
                assert loopback_peer(peer, address, identify) == (os.getpid(), None)
            del mine
