"""A webhook channel: one POST per message, in its service's format (:mod:`.formats`).

Sent with httpx's transport directly, not its client: the client logs each request's
URL, and a webhook's URL is a secret (it is the credential of a Slack or Discord
webhook, the name of a private ntfy topic). Redirects are not followed (the body would
go where the answer says), proxies from the environment are not used, one attempt is
bounded by :data:`~pokeralphd.notify.channel.SEND_TIMEOUT`. A failure's reason names the
status or the kind of error, never the URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from pokeralphd.notify.channel import SEND_TIMEOUT, SendFailed
from pokeralphd.notify.formats import request_for

if TYPE_CHECKING:
    from pokeralphd.notify.compose import Message


class WebhookChannel:
    def __init__(self, name: str, format_: str, url: str, timeout: float = SEND_TIMEOUT) -> None:
        self.name = name
        self.kind = format_
        self._url = url
        self.timeout = timeout

    def __repr__(self) -> str:  # never the URL
        return f"WebhookChannel({self.name!r}, {self.kind!r})"

    async def send(self, message: Message) -> None:
        import httpx  # on first use: the daemon starts without it (test_architecture)

        target, headers, body = request_for(self.kind, self._url, message)
        try:
            request = httpx.Request("POST", target, headers=headers, content=body)
        except (httpx.InvalidURL, ValueError) as exc:
            raise SendFailed("the webhook's URL is not valid", retry=False) from exc
        timeout = {
            "connect": self.timeout,
            "read": self.timeout,
            "write": self.timeout,
            "pool": self.timeout,
        }
        request.extensions["timeout"] = timeout
        try:
            with anyio.fail_after(self.timeout):
                async with httpx.AsyncHTTPTransport(retries=0) as transport:
                    response = await transport.handle_async_request(request)
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
        except TimeoutError as exc:
            raise SendFailed(f"no answer within {self.timeout:g}s") from exc
        except httpx.TimeoutException as exc:
            raise SendFailed(f"no answer within {self.timeout:g}s") from exc
        except httpx.HTTPError as exc:
            raise SendFailed(f"could not reach the webhook ({type(exc).__name__})") from exc
        except OSError as exc:
            raise SendFailed(
                f"could not reach the webhook ({exc.strerror or type(exc).__name__})"
            ) from exc
        status = response.status_code
        if status >= 400:
            # 4xx but 408/429: the request itself is refused; trying again cannot help
            retry = status >= 500 or status in (408, 429)
            raise SendFailed(f"the webhook answered HTTP {status}", retry=retry)
