"""Daemon-wide settings (limits), from ``pokeralphd``'s command-line flags (one flag per
setting: ``--max-reply 8388608``); separate from the per-repository config.

Every resource a client can make the daemon hold is bounded here, and going past a bound
costs only that client a clear error; other clients do not notice:

========================  ==========  =====================================================
setting (JSON name)       default     past it
========================  ==========  =====================================================
maxMessage                1 MiB       -32011 MESSAGE_TOO_LARGE, the connection is closed
maxBatch                  1000        -32600 Invalid Request for the whole batch
maxReply                  16 MiB      -32021 REPLY_TOO_LARGE instead of that reply
maxPending                64          -32022 TOO_MANY_PENDING for that request
maxConnections            1024        -32023 TOO_MANY_CONNECTIONS, then closed
fdReserve                 64          (lowers the connection cap under RLIMIT_NOFILE)
maxSubscriberBacklog      8 MiB       ``events.overflow`` notice, subscriber disconnected
eventHistory              10000       oldest events dropped; ``since`` reports ``lost``
eventHistoryBytes         32 MiB      oldest events dropped; ``since`` reports ``lost``
sendStallTimeout          30 s        the connection is closed (logged)
========================  ==========  =====================================================

Not limits: ``runNice`` (how far below the daemon's priority battles' processes run),
``startingRuns`` (how many runs may be loading, and battles landing, at once:
:mod:`pokeralphd.startgate`),
``sandbox`` (battles confined as ``sandbox.mode`` says, unless ``--no-sandbox``),
``web`` (the dashboard on 127.0.0.1, on unless ``--no-web``) and ``webPort`` (its port;
0 picks a free one, written to ``pokeralphd.web.json`` beside the socket). Its
WebSocket connections are bounded as the socket's are (the limits above, per connection,
and at most ``maxConnections`` of them).

Fixed limits of the protocol itself (not settings): arrays and objects nest at most
128 deep (deeper is -32700 Parse error), an LSP header block is at most 8 KiB and its
``Content-Length`` at most 12 ASCII digits (else -32700 and the connection is closed).
"""

from __future__ import annotations

from pydantic import Field

from pokeralphd.domain.models import Model
from pokeralphd.startgate import default_slots


class DaemonSettings(Model):
    max_message: int = Field(
        default=1 << 20,
        ge=1024,
        le=64 << 20,
        description="Largest request message in bytes (a line, or an LSP body). A longer "
        "one is answered with -32011 MESSAGE_TOO_LARGE and the connection is closed, since "
        "the stream cannot be resynchronised.",
    )
    max_batch: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="Most requests in one JSON-RPC batch. A longer batch is answered, as a "
        "whole, with one -32600 Invalid Request naming the limit; none of it runs.",
    )
    max_reply: int = Field(
        default=16 << 20,
        ge=1 << 20,
        le=1 << 30,
        description="Largest reply in bytes. A reply over it is replaced by a -32021 "
        "REPLY_TOO_LARGE error with the reply's size, the limit and a hint (ask for less: "
        "paging, limits, smaller batches). In a batch, the replies past the limit are "
        "replaced one by one, so every request still gets an answer.",
    )
    max_pending: int = Field(
        default=64,
        ge=1,
        le=100_000,
        description="Long waits (methods such as inbox.wait that run beside the reader) "
        "pending at once on one connection. One more is answered at once with -32022 "
        "TOO_MANY_PENDING; the connection goes on.",
    )
    max_connections: int = Field(
        default=1024,
        ge=1,
        le=1 << 20,
        description="Client connections served at once. The daemon also keeps fd_reserve "
        "descriptors free under its RLIMIT_NOFILE, so the cap in force is the smaller of "
        "the two. A connection past it gets -32023 TOO_MANY_CONNECTIONS and is closed.",
    )
    fd_reserve: int = Field(
        default=64,
        ge=0,
        le=1 << 20,
        description="File descriptors kept free for repository files, git and agents: the "
        "connection cap is at most RLIMIT_NOFILE minus this. Should descriptors run out "
        "anyway, the daemon logs it once, refuses new connections for a moment and serves "
        "the open ones.",
    )
    max_subscriber_backlog: int = Field(
        default=8 << 20,
        ge=64 << 10,
        le=256 << 20,
        description="Event bytes queued for a subscriber that reads slowly. Past it the "
        "subscriber gets an events.overflow notice (with the seq to resume from) and is "
        "disconnected.",
    )
    event_history: int = Field(
        default=10_000,
        ge=100,
        le=1_000_000,
        description="Events kept for resuming with since (count).",
    )
    event_history_bytes: int = Field(
        default=32 << 20,
        ge=64 << 10,
        le=4 << 30,
        description="Events kept for resuming with since (their encoded bytes). The oldest "
        "events go first when either bound is reached; events.subscribe with since then "
        "reports how many were lost.",
    )
    send_stall_timeout: float = Field(
        default=30.0,
        ge=0.1,
        le=3600.0,
        description="Seconds a client may take to read 64 KiB while a reply or events are "
        "being written to it (0.1 to 3600). A reply is never cut short because the client "
        "reads slowly; one that stops reading for this long is disconnected (and it is "
        "logged). A subscriber dropped for overflowing gets at most 1 s, or this if less, "
        "to take its overflow notice.",
    )
    # What bounds it: descriptors, threads and the loop's time, not a table. A running
    # battle holds about three descriptors (its agent's stdout and stderr pipes, its log;
    # a git child's pipes now and then: 40 battles held 119 more than none) and one
    # child-watcher thread; its output costs the event loop 8-15 µs a line (bench_stream).
    # 256 battles (~770 descriptors) fit a default 1024-descriptor limit beside a couple
    # of hundred connections (which share RLIMIT_NOFILE with them: see fdReserve); how
    # many lines a second they may print together is what the CPU allows.
    max_concurrent_battles: int = Field(
        default=4,
        ge=1,
        le=256,
        description="Battles running at once, in all repositories (1 to 256); the rest "
        "wait as queued.",
    )
    # 19 by default, not 10: each run is a session of its own, so on Linux an autogroup of
    # its own, and the scheduler shares the CPU between autogroups by their weight. At
    # nice 10 a run's group weighs 110 against the daemon's (and a desktop session's)
    # 1024, so ten busy runs outweighed the daemon; at 19 each weighs 15. With 100
    # battles starting at once (bench_stream) the lines late by over 100 ms went from
    # 578,000 to 256,000 and the streaming p99 from 83 to 55 ms.
    run_nice: int = Field(
        default=19,
        ge=0,
        le=19,
        description="How much lower than the daemon's the priority of every battle's "
        "processes is (agents, feedback loops, verifiers; 0 to 19, 0: the same): the daemon, "
        "its clients and the rest of the machine stay responsive while battles compute.",
    )
    starting_runs: int = Field(
        default_factory=default_slots,
        ge=1,
        le=256,
        description="Runs starting up at once, in all repositories (1 to 256; default twice "
        "the CPUs): a run (an agent, a feedback loop, a verifier) holds a slot from its start "
        "until it first prints, ends, or 2 s have passed; the rest wait their turn. A battle "
        "landing (merging back, removing its worktree) takes a slot too, for as long or 2 s. "
        "A hundred battles started together then load, and end, a few at a time instead of "
        "taking the machine from the daemon and its clients all at once.",
    )
    web: bool = Field(
        default=True,
        description="Serve the web dashboard on 127.0.0.1 (--no-web turns it off).",
    )
    web_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of the dashboard on 127.0.0.1 (0: a free one). The URL is written "
        "beside the socket, in pokeralphd.web.json, where pokeralphctl web finds it.",
    )
    sandbox: bool = Field(
        default=True,
        description="Confine battles as sandbox.mode says (--no-sandbox: as if no sandbox "
        "could run here: auto runs unconfined with a warning, required refuses).",
    )
    debug_methods: bool = False  # debug.emit, for the fan-out benchmark
