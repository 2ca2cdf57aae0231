"""The official MCP Python SDK's OAuth client against `justonce serve --http` as an
OAuth 2.1 resource server.

Usage: client.py URL ISSUER

URL is the server's MCP endpoint; ISSUER the test's authorization server
(authorization_server.py). The script first asks without a token, with a token minted
for another audience and with one lacking the required scope, and records what the
server answered; then the SDK's
`OAuthClientProvider` does the whole flow by itself: the 401's `resource_metadata`,
the Protected Resource Metadata, the authorization server's metadata, dynamic client
registration, the authorization-code grant with PKCE (the redirect handler follows
the authorization URL itself; the server approves at once), the token, and the
retried request. It lists the tools and calls `send_receipt` twice with the same
arguments, and prints one JSON object of what it saw; the Rust test
(tests/tests/mcp_oauth.rs) asserts on it.
"""

import asyncio
import json
import sys
from urllib.parse import parse_qs, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "oauth-probe", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Memory:
    """Where the SDK keeps its registration and tokens: in memory."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def answered(response):
    return {
        "status": response.status_code,
        "www_authenticate": response.headers.get("www-authenticate"),
    }


async def refusals(url, issuer):
    """What the server answers without a token, and with another audience's."""
    async with httpx2.AsyncClient(timeout=30.0) as http:
        anonymous = await http.post(url, json=INITIALIZE, headers=HEADERS)
        minted = await http.post(f"{issuer}/test/mint", json={"aud": "https://other.example/mcp"})
        other = minted.json()["access_token"]
        elsewhere = await http.post(url, json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {other}"})
        unscoped = (await http.post(f"{issuer}/test/mint", json={"aud": url, "scope": "openid"})).json()
        narrow = await http.post(
            url, json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {unscoped['access_token']}"}
        )
        metadata_url = anonymous.headers.get("www-authenticate", "").split('resource_metadata="')[-1].split('"')[0]
        metadata = await http.get(metadata_url) if metadata_url.startswith("http") else None
        # Another user's token for this very resource, for the test's own calls.
        bob = await http.post(f"{issuer}/test/mint", json={"aud": url, "sub": "bob"})
    return {
        "bob_token": bob.json()["access_token"],
        "anonymous": answered(anonymous),
        "other_audience": {**answered(elsewhere), "body": elsewhere.json()},
        "without_the_scope": answered(narrow),
        "metadata": metadata.json() if metadata is not None and metadata.status_code == 200 else None,
    }


async def with_oauth(url):
    """The SDK's OAuth client does the flow, then lists and calls."""
    authorized = {}
    followed = []

    async def redirect_handler(authorization_url):
        # A person would open this in a browser; the test's server approves at once,
        # so following it gives the redirect that carries the code.
        followed.append(authorization_url)
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30.0) as http:
            response = await http.get(authorization_url)
        if response.status_code != 302:
            raise RuntimeError(f"the authorization server answered {response.status_code}: {response.text}")
        query = parse_qs(urlparse(response.headers["location"]).query)
        authorized.update({k: v[0] for k, v in query.items()})

    async def callback_handler():
        return AuthorizationCodeResult(code=authorized["code"], state=authorized.get("state"), iss=authorized.get("iss"))

    storage = Memory()
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="justonce oauth test",
            redirect_uris=["http://127.0.0.1:1/callback"],
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="client_secret_post",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    meta = {"dev.justonce/conversation": "conv-oauth"}
    order = {"orders": [{"order_id": 5150, "email": "ada@example.com", "amount_cents": 700}]}
    async with httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            calls = [await client.call_tool("send_receipt", order, meta=meta) for _ in range(2)]
    authorization = parse_qs(urlparse(followed[0]).query) if followed else {}
    return {
        "authorization_requests": len(followed),
        "resource_asked": authorization.get("resource", [None])[0],
        "scope_asked": authorization.get("scope", [None])[0],
        "registered": storage.client_info is not None,
        "tools": [tool.name for tool in tools.tools],
        "calls": [
            {"is_error": call.is_error, "structured": call.structured_content, "meta": call.meta or {}} for call in calls
        ],
    }


async def main(url, issuer):
    report = await refusals(url, issuer)
    report["oauth"] = await with_oauth(url)
    print(json.dumps(report))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    asyncio.run(main(*sys.argv[1:]))
