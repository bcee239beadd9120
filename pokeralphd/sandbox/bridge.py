"""Inside the sandbox: the run's loopback port to the egress proxy's Unix socket, then
the run's command itself.

``python -I -S …/bridge.py PORT SOCKET [HOST:PORT…] -- COMMAND…`` (by path, without
``site``: no package import) listens on ``127.0.0.1:PORT`` (the run's own network
namespace: nothing else is there), forks a child that carries every connection to
``SOCKET`` byte for byte, and ``exec``s COMMAND in its own place (same pid, same stdio,
signals straight to it). When the command ends, bubblewrap's init ends, and with it the
pid namespace and the bridge.

Each ``HOST:PORT`` (an allowed address on the host's loopback, such as a local model
server: :attr:`~.policy.SandboxPolicy.forwards`) is listened on at its own address too,
and each connection to it is a ``CONNECT HOST:PORT`` through the proxy: a client that
ignores ``HTTP_PROXY`` (the local agent's model client, a database driver) reaches it as
it would outside, and the proxy still decides. One that cannot be listened on (a port
below 1024, taken twice) is left out.

It runs before every confined command under ``allowlist``, so it imports only what the
interpreter has built in (``_socket``, ``select``, ``posix``; not ``socket`` or
``threading``, which cost as much again as the interpreter's start): one forked process
per connection, at most :data:`MAX_CONNECTIONS` at once.
"""

import _socket
import os
import select
import sys

MAX_CONNECTIONS = 64
CHUNK = 1 << 16
MAX_HEAD = 16 * 1024  # the proxy's answer to CONNECT


def pipe(client: _socket.socket, path: str, target: str | None = None) -> None:
    """Carry bytes both ways between ``client`` and the Unix socket ``path`` until either
    side closes; with ``target``, once the proxy has answered ``CONNECT target`` 200 (any
    other answer closes ``client``)."""
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    upstream.connect(path)
    if target is not None:
        upstream.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            data = upstream.recv(CHUNK)
            if not data or len(head) > MAX_HEAD:
                return
            head += data
        head, _, rest = head.partition(b"\r\n\r\n")
        if head.split(b" ", 2)[1:2] != [b"200"]:
            return
        if rest:
            client.sendall(rest)
    ends = {client.fileno(): (client, upstream), upstream.fileno(): (upstream, client)}
    while True:
        ready, _, _ = select.select(list(ends), [], [])
        for fd in ready:
            source, sink = ends[fd]
            data = source.recv(CHUNK)
            if not data:
                return
            sink.sendall(data)


def serve(listeners: dict[int, tuple[_socket.socket, str | None]], path: str) -> None:
    """Accept forever on every listener (fd: the socket and its CONNECT target, None for
    the proxy's port); each connection in a child of its own (reaped as they end)."""
    children = 0
    while True:
        while children:  # reap the ended ones; wait for one when at the bound
            pid, _ = os.waitpid(-1, 0 if children >= MAX_CONNECTIONS else os.WNOHANG)
            if not pid:
                break
            children -= 1
        ready, _, _ = select.select(list(listeners), [], [])
        for ready_fd in ready:
            listener, target = listeners[ready_fd]
            fd, _ = listener._accept()  # type: ignore[attr-defined]  # _socket's own accept
            if os.fork() == 0:
                for other, _ in listeners.values():
                    other.close()
                try:  # noqa: SIM105 (contextlib would cost a third of the start)
                    pipe(_socket.socket(fileno=fd), path, target)
                except OSError:
                    pass
                os._exit(0)
            os.close(fd)
            children += 1


def listen(host: str, port: int) -> _socket.socket | None:
    """A listening socket on ``host:port`` (an IP literal), or None where it cannot be."""
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    listener = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(MAX_CONNECTIONS)
    except OSError:
        listener.close()
        return None
    return listener


def forward_addresses(target: str) -> tuple[list[str], int]:
    """Where to listen for ``HOST:PORT`` (``[v6]:PORT``): its address, and for
    ``localhost`` both loopbacks."""
    host, _, port = target.rpartition(":")
    host = host[1:-1] if host.startswith("[") else host
    return (["127.0.0.1", "::1"] if host == "localhost" else [host]), int(port)


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") < 2 or argv.index("--") == len(argv) - 1:
        sys.stderr.write("usage: bridge PORT SOCKET [HOST:PORT...] -- COMMAND...\n")
        return 2
    split = argv.index("--")
    port, path, forwards, command = int(argv[0]), argv[1], argv[2:split], argv[split + 1 :]
    listener = listen("127.0.0.1", port)
    if listener is None:
        sys.stderr.write(f"pokeralph sandbox: cannot listen on 127.0.0.1:{port}\n")
        return 127
    listeners: dict[int, tuple[_socket.socket, str | None]] = {listener.fileno(): (listener, None)}
    for target in forwards:
        hosts, target_port = forward_addresses(target)
        for host in hosts:
            extra = listen(host, target_port)
            if extra is not None:
                listeners[extra.fileno()] = (extra, target)
    if os.fork() == 0:  # the bridge: no stdio of the run's, so its pipes end with the run
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            serve(listeners, path)
        finally:
            os._exit(0)
    for each, _ in listeners.values():
        each.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"pokeralph sandbox: cannot run {command[0]}: {exc}\n")
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
