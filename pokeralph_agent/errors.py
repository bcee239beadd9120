"""The local agent's exceptions, in one tree::

LocalAgentError
├── ChatError                  a model call failed
│   ├── ServerUnreachable      nothing answers at the base URL (after the retries)
│   ├── ApiStatusError         the server answered with an HTTP error (or an error line)
│   ├── WireError              the reply is not the API's wire format
│   ├── SettingError           a setting makes every call fail (not retried)
│   └── HttpFailure            the request failed below HTTP (.transport; .chat says it
│       │                      as one of the above)
│       ├── UnsendableRequest  the request's head is not what HTTP can carry
│       ├── ConnectFailed      no connection (refused, no route, unknown name, TLS)
│       │   ├── HostNotFound   the host's name does not resolve
│       │   └── CertificateUntrusted  the server's certificate fails the check
│       └── TimedOut           a send took longer than the timeout
│           └── ReadTimedOut   no bytes for the timeout
├── ToolError                  a tool call cannot be done (the model is told why)
│   └── PathEscape             a path leaves the working directory
└── SessionError               no session to continue, or a session file unusable

and how a model call that failed retryably (:class:`ServerUnreachable`, a
:attr:`ApiStatusError.retryable` status) is tried again: :data:`RETRIES` times more,
after :data:`BACKOFF` seconds doubled each time. They are here, not in :mod:`.chat`, so
the command line shows them in its help without loading the HTTP client.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

RETRIES = 2  # more tries of a model call that failed before it streamed anything
BACKOFF = 0.5  # seconds before the first retry, doubled before each next one


class LocalAgentError(Exception):
    """Base of every error the local agent raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ChatError(LocalAgentError):
    """Raised when a call of the model's chat API fails."""


class ServerUnreachable(ChatError):
    """Raised when nothing answers at the base URL (refused, no route, connect timeout)
    once the retries are spent."""

    def __init__(self, base_url: str, api: str, reason: str) -> None:
        hint = (
            "is Ollama running? Start it with `ollama serve`"
            if api == "ollama"
            else "is the model server (LM Studio, llama.cpp's llama-server, vLLM, "
            "`ollama serve`) running there?"
        )
        base_url = shown_url(base_url)
        super().__init__(f"nothing answers at {base_url} ({reason}): {hint}")
        self.base_url = base_url


def shown_url(url: str) -> str:
    """``url`` as a message may show it: a login's password left out
    (``http://user:pw@host`` is shown ``http://user@host``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    login, _, place = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{login.partition(':')[0]}@{place}"))


class ApiStatusError(ChatError):
    """Raised when the server answers with an HTTP error status, or streams an error."""

    def __init__(self, status: int | None, message: str) -> None:
        if status is not None:
            super().__init__(f"the model server answered HTTP {status}: {message}")
        else:
            super().__init__(f"the model server failed: {message}")
        self.status = status
        self.detail = message

    @property
    def retryable(self) -> bool:
        return self.status is not None and (self.status >= 500 or self.status == 429)


class WireError(ChatError):
    """Raised when a reply does not follow the API's wire format (or is past our bounds)."""


class SettingError(ChatError):
    """Raised when a setting makes every call fail (an ``apiKey`` with a line break, a
    base URL whose host does not resolve or whose certificate is not trusted): retrying
    cannot help, the setting must change."""


class HttpFailure(ChatError):
    """Raised by :mod:`.transport` when a request fails below HTTP: the connection
    broke, was cut short, or did not speak HTTP/1.1."""


class UnsendableRequest(HttpFailure):
    """Raised by :mod:`.transport` when the request's head holds what HTTP cannot carry
    (h11 refuses it); nothing was sent."""


class ConnectFailed(HttpFailure):
    """Raised by :mod:`.transport` when no connection can be made; the message is the
    reason underneath (e.g. "connection refused")."""


class TimedOut(HttpFailure):
    """Raised by :mod:`.transport` when the server takes no bytes for the timeout."""


class HostNotFound(ConnectFailed):
    """Raised by :mod:`.transport` when the URL's host name does not resolve."""


class CertificateUntrusted(ConnectFailed):
    """Raised by :mod:`.transport` when an ``https`` server's certificate fails the check
    (not signed by a trusted CA, or for another name)."""


class ReadTimedOut(TimedOut):
    """Raised by :mod:`.transport` when no bytes arrive for the timeout."""


class ToolError(LocalAgentError):
    """Raised by a tool that cannot do what it was asked; the message goes to the model."""


class PathEscape(ToolError):
    """Raised when a path resolves outside the working directory (``..``, an absolute
    path elsewhere, a symbolic link pointing out)."""


class SessionError(LocalAgentError):
    """Raised when there is no session to continue, or a session cannot be used."""
