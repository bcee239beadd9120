"""Inside the sandbox: the run's loopback port to the egress proxy's Unix socket, then
the run's command itself.

``python -I -S …/bridge.py PORT SOCKET -- COMMAND…`` (by path, without ``site``: no
package import) listens on ``127.0.0.1:PORT`` (the run's own network namespace: nothing
else is there), forks a child that carries every connection to ``SOCKET`` byte for byte,
and ``exec``s COMMAND in its own place (same pid, same stdio, signals straight to it).
When the command ends, bubblewrap's init ends, and with it the pid namespace and the
bridge.

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


def pipe(client: _socket.socket, path: str) -> None:
    """Carry bytes both ways between ``client`` and the Unix socket ``path`` until either
    side closes."""
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    upstream.connect(path)
    ends = {client.fileno(): (client, upstream), upstream.fileno(): (upstream, client)}
    while True:
        ready, _, _ = select.select(list(ends), [], [])
        for fd in ready:
            source, sink = ends[fd]
            data = source.recv(CHUNK)
            if not data:
                return
            sink.sendall(data)


def serve(listener: _socket.socket, path: str) -> None:
    """Accept forever; each connection in a child of its own (reaped as they end)."""
    children = 0
    while True:
        while children:  # reap the ended ones; wait for one when at the bound
            pid, _ = os.waitpid(-1, 0 if children >= MAX_CONNECTIONS else os.WNOHANG)
            if not pid:
                break
            children -= 1
        fd, _ = listener._accept()  # type: ignore[attr-defined]  # _socket's own accept
        if os.fork() == 0:
            listener.close()
            try:  # noqa: SIM105 (contextlib would cost a third of the start)
                pipe(_socket.socket(fileno=fd), path)
            except OSError:
                pass
            os._exit(0)
        os.close(fd)
        children += 1


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: bridge PORT SOCKET -- COMMAND...\n")
        return 2
    port, path, command = int(argv[0]), argv[1], argv[3:]
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(MAX_CONNECTIONS)
    if os.fork() == 0:  # the bridge: no stdio of the run's, so its pipes end with the run
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            serve(listener, path)
        finally:
            os._exit(0)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"pokeralph sandbox: cannot run {command[0]}: {exc}\n")
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
