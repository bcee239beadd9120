"""The stable error codes every error carries: JSON-RPC's reserved ones and pokeralph's
application codes (-32000..-32099, never changing meaning once published).

Here because the core's errors (:mod:`.errors`) carry them; the daemon's protocol
describes them (:mod:`pokeralphd.protocol.codes`), and ``pokeralphctl/codes.py`` has them
as plain ints, generated from this enum by ``python -m pokeralphd.contract``.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    # JSON-RPC 2.0 reserved codes
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    # pokeralph application codes
    REPO_NOT_FOUND = -32001
    TASK_NOT_FOUND = -32002
    VERSION_CONFLICT = -32003
    ILLEGAL_TRANSITION = -32004
    CORRUPT_FILE = -32005
    NOT_A_GIT_REPO = -32006
    REPO_LOCKED = -32007
    BATTLE_ACTIVE = -32008
    NO_BATTLE = -32009
    STORAGE_ERROR = -32010
    MESSAGE_TOO_LARGE = -32011
    SUBSCRIBER_OVERFLOW = -32012
    AGENT_ERROR = -32014
    NOT_FOUND = -32015
    INVALID_STATE = -32016
    SHUTTING_DOWN = -32017
    DELIVERY_NOT_FOUND = -32019
    INVALID_ANSWER = -32020
    REPLY_TOO_LARGE = -32021
    TOO_MANY_PENDING = -32022
    TOO_MANY_CONNECTIONS = -32023
    AGENT_SCOPE = -32024
