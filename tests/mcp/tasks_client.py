"""The official MCP Python SDK (PyPI `mcp`) as a client of the Tasks extension
(`io.modelcontextprotocol/tasks`) against `justonce serve --http`.

Usage: tasks_client.py start URL TOKEN TO SECONDS
       tasks_client.py fetch URL TOKEN TASK_ID

`start` connects on the stateless revision (2026-07-28) with the SDK's Streamable
HTTP client and the bearer TOKEN, declaring the extension through the SDK's
extension interface (a `ResultClaim` for `resultType: "task"`), calls `slow_mail`
(one email to TO, then a sleep of SECONDS), and prints the task it was answered
with, then leaves: the call outlives its connection. `fetch` connects (to another
host, say) and polls `tasks/get` for TASK_ID through the same extension until the
task is no longer `working`, and prints it. Each prints one JSON object, which the
Rust test (tests/tests/mcp_tasks_python.rs) asserts on.
"""

import asyncio
import contextlib
import json
import sys
from typing import Any, Literal

import httpx2
from mcp import Client
from mcp.client.extension import ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Request, RequestParams, Result

EXTENSION = "io.modelcontextprotocol/tasks"


class CreateTaskResult(Result):
    """What `tools/call` answers when the call became a task."""

    result_type: Literal["task"]
    task_id: str
    status: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskParams(RequestParams):
    task_id: str


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class DetailedTask(Result):
    """What `tasks/get` answers: the task, with its result or error once it ended."""

    result_type: str | None = None
    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


async def get_task(session, task_id):
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), DetailedTask)


async def keep(result, ctx):
    """Not resolved here: `start` only wants the handle (see `allow_claimed`)."""
    raise RuntimeError("start reads the task itself")


class Tasks(ClientExtension):
    identifier = EXTENSION

    def claims(self):
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=keep)]


def connection(url, token, stack):
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30.0, read=120.0),
    )
    stack.push_async_callback(http.aclose)
    return streamable_http_client(url, http_client=http)


async def start(client, to, seconds):
    result = await client.session.call_tool(
        "slow_mail", {"to": to, "seconds": seconds}, allow_claimed=True
    )
    if isinstance(result, CallToolResult):
        return {"finished": True, "structured": result.structured_content}
    return {"task_id": result.task_id, "status": result.status, "ttl_ms": result.ttl_ms}


async def fetch(client, task_id):
    for _ in range(1200):
        task = await get_task(client.session, task_id)
        if task.status != "working":
            break
        await asyncio.sleep(0.05)
    return task.model_dump(by_alias=True, exclude_none=True)


async def main(action, url, token, *rest):
    async with contextlib.AsyncExitStack() as stack:
        server = connection(url, token, stack)
        async with Client(server, mode="2026-07-28", extensions=[Tasks()]) as client:
            if action == "start":
                report = await start(client, rest[0], int(rest[1]))
            else:
                report = await fetch(client, rest[0])
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
