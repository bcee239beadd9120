#!/usr/bin/env python3
"""A complete pokeralphd client in the Python standard library: find the socket, call a
method, subscribe to events and resume with `since` after a reconnect (or, when the
daemon restarted meanwhile, which its `epoch` tells, from the new daemon's start).

    python3 watch.py            # print every event, forever
    python3 watch.py --once     # print daemon.status and exit
"""

import json
import os
import socket
import stat
import sys
import time


def private_dir(path):
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def socket_path():
    """$POKERALPH_SOCKET, else pokeralph/pokeralphd.sock in the first private runtime dir."""
    if os.environ.get("POKERALPH_SOCKET", "").strip():
        return os.environ["POKERALPH_SOCKET"].strip()
    xdg = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if xdg and os.path.isabs(xdg) and private_dir(xdg):
        runtime = xdg
    elif sys.platform == "darwin":
        runtime = os.path.expanduser("~/Library/Caches/TemporaryItems")
    elif private_dir(f"/run/user/{os.getuid()}"):
        runtime = f"/run/user/{os.getuid()}"
    else:
        import tempfile

        runtime = os.path.join(tempfile.gettempdir(), f"pokeralph-runtime-{os.getuid()}")
    return os.path.join(runtime, "pokeralph", "pokeralphd.sock")


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 0

    def messages(self):
        while True:
            while b"\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)

    def call(self, method, params=None, on_event=None):
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            request["params"] = params
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        for message in self.messages():
            if "id" not in message:  # an event arriving before our reply
                if on_event:
                    on_event(message["params"])
                continue
            if message["id"] == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{message['error']['code']}: {message['error']['message']}")
                return message["result"]
        raise ConnectionError("the daemon closed the connection")


def show(event):
    print(
        f"{event['seq']:>6} {event['repo'] or '-':<14} {event.get('taskId') or '':<24} {event['type']}",
        flush=True,
    )


def main():
    path = socket_path()
    if "--once" in sys.argv:
        print(json.dumps(Client(path).call("daemon.status"), indent=2))
        return 0
    last_seq = None  # the last event seen
    epoch = None  # the daemon process last_seq belongs to

    def handle(event):
        nonlocal last_seq
        if last_seq is not None and event["seq"] <= last_seq:
            return  # seen already (a replay overlapping what we had)
        last_seq = event["seq"]
        show(event)

    while True:
        try:
            client = Client(path)
            params = {}
            if last_seq is not None:
                # Sequence numbers belong to one daemon process: ask which one answers.
                if client.call("daemon.status")["epoch"] != epoch:
                    print(
                        "the daemon restarted; events from before are not replayed",
                        file=sys.stderr,
                    )
                    last_seq = 0  # its whole history is new to us
                params["since"] = last_seq
            result = client.call("events.subscribe", params, on_event=handle)
            epoch = result["epoch"]
            if last_seq is None:
                last_seq = result["seq"]
            print(f"subscribed at seq {result['seq']}", file=sys.stderr, flush=True)
            if result.get("lost"):
                print(
                    f"warning: {result['lost']} events were lost while disconnected",
                    file=sys.stderr,
                )
            for message in client.messages():
                if message.get("method") == "event":
                    handle(message["params"])
        except (ConnectionError, FileNotFoundError, ConnectionRefusedError):
            pass
        print("disconnected; retrying", file=sys.stderr)
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
