"""Inside the sandbox: the run's loopback port to the egress proxy's Unix socket, then
the run's command itself.

``python -I …/bridge.py PORT SOCKET -- COMMAND…`` (by path: no package import) listens on
``127.0.0.1:PORT`` (the run's own network namespace: nothing else is there), forks a
child that carries every connection to ``SOCKET`` byte for byte, and ``exec``s COMMAND
in its own place (same pid, same stdio, signals straight to it). When the command ends,
bubblewrap's init ends, and with it the pid namespace and the bridge.

Standard library only, and little of it (it runs before every confined command); at most
:data:`MAX_CONNECTIONS` connections at once, each in a thread of its own.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading

MAX_CONNECTIONS = 64
CHUNK = 1 << 16


def _pipe(client: socket.socket, path: str, slots: threading.BoundedSemaphore) -> None:
    try:
        with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
            upstream.connect(path)
            ends = {client: upstream, upstream: client}
            open_ends = [client, upstream]
            while open_ends:
                ready, _, _ = select.select(open_ends, [], [])
                for end in ready:
                    data = end.recv(CHUNK)
                    if data:
                        ends[end].sendall(data)
                        continue
                    open_ends.remove(end)
                    try:
                        ends[end].shutdown(socket.SHUT_WR)
                    except OSError:
                        open_ends.clear()
    except OSError:
        pass
    finally:
        slots.release()


def serve(listener: socket.socket, path: str) -> None:
    """Carry connections from ``listener`` to the Unix socket ``path`` (forever)."""
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    while True:
        client, _ = listener.accept()
        slots.acquire()
        threading.Thread(target=_pipe, args=(client, path, slots), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: bridge PORT SOCKET -- COMMAND...\n")
        return 2
    port, path, command = int(argv[0]), argv[1], argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
