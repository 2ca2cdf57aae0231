"""HTTP through the host's `http` provider, and webhooks through its `outbox`.

The same request and response shapes as the Rust SDK's `justonce_guest::http`. The
host adds the idempotency key (an `Idempotency-Key` header by default) to every
request that changes something, and allows only the origins configured for this
tool. `GET`, `HEAD` and `OPTIONS` are reads: not journaled (a retried call reads
again) unless `record=True`.

    from justonce import http

    response = http.post(service="tickets", path="/v1/tickets", json={"subject": "…"})
    if response.ok:
        ticket = response.json()
"""

import json as _json
from dataclasses import dataclass, field
from typing import Any, Optional

from .effects import BadResponse, perform


@dataclass
class Response:
    """What the downstream answered. Any status is an answer: check `ok`."""

    #: The status code.
    status: int
    #: The headers, names in lower case.
    headers: dict = field(default_factory=dict)
    #: The body as text, cut at the host's limit.
    body: str = ""
    #: Whether the body was cut.
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body parsed as JSON; `BadResponse` if it is not JSON."""
        try:
            return _json.loads(self.body)
        except ValueError as e:
            raise BadResponse(
                f"the {self.status} response body is not the JSON expected: {e}"
            ) from None


@dataclass
class Queued:
    """A webhook queued in the outbox."""

    #: The message's id in the outbox.
    message_id: int
    #: `pending` until it is delivered.
    state: str


def payload(
    method: str,
    url: Optional[str] = None,
    *,
    service: Optional[str] = None,
    path: Optional[str] = None,
    headers: Optional[dict] = None,
    json: Any = None,
    body: Optional[str] = None,
    record: bool = False,
) -> dict:
    """The provider payload of a request: either `url`, or `service` and `path` (a
    base URL the host's config names). `json` and `body` are exclusive."""
    if (url is None) == (service is None):
        raise ValueError("give either `url` or `service` (with `path`)")
    if json is not None and body is not None:
        raise ValueError("give either `json` or `body`, not both")
    request: dict = {"method": method}
    for key, value in (("url", url), ("service", service), ("path", path)):
        if value is not None:
            request[key] = value
    if headers:
        request["headers"] = dict(headers)
    if body is not None:
        request["body"] = body
    if json is not None:
        request["json"] = json
    if record:
        request["record"] = True
    return request


def request(method: str, url: Optional[str] = None, **options: Any) -> Response:
    """Sends a request through the `http` provider; see `payload` for the options.
    The idempotency key header is the host's: setting it is refused."""
    answer = perform("http", "request", payload(method, url, **options))
    # Only the fields this SDK knows: a newer host may answer more.
    return Response(
        status=answer["status"],
        headers=answer.get("headers", {}),
        body=answer.get("body", ""),
        truncated=answer.get("truncated", False),
    )


def get(url: Optional[str] = None, **options: Any) -> Response:
    """`GET`: a read, journaled only with `record=True`."""
    return request("GET", url, **options)


def post(url: Optional[str] = None, **options: Any) -> Response:
    """`POST`, sent with the effect's idempotency key."""
    return request("POST", url, **options)


def put(url: Optional[str] = None, **options: Any) -> Response:
    """`PUT`, sent with the effect's idempotency key."""
    return request("PUT", url, **options)


def delete(url: Optional[str] = None, **options: Any) -> Response:
    """`DELETE`, sent with the effect's idempotency key."""
    return request("DELETE", url, **options)


def enqueue(method: str, url: Optional[str] = None, **options: Any) -> Queued:
    """Queues the request as a webhook in the `outbox`, in the same transaction as
    its journal record: it is sent later, once, with the effect key as its
    idempotency key."""
    answer = perform("outbox", "enqueue", payload(method, url, **options))
    return Queued(message_id=answer["message_id"], state=answer["state"])
