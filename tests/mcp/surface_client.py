"""Reads what an MCP server offers besides tools, with the official MCP Python SDK
(PyPI `mcp`), so that the same reads of a server talked to directly and through
`justonce serve` can be compared (tests/tests/gateway_surface.rs).

Usage: surface_client.py MODE SIDE COMMAND [ARG...]

MODE is the SDK's connect mode (`auto`: the stateless 2026-07-28 revision where the
server offers it; `legacy`: the `initialize` handshake). SIDE is `direct`, or
`gateway:UPSTREAM:PREFIX` for a gateway that offers the server as the upstream
UPSTREAM with PREFIX: its resources are then read as `justonce://UPSTREAM/URI`, its
prompts and tools called `PREFIX` + name. COMMAND starts the server over stdio.
The script prints one JSON object: everything it read, timestamps blanked.
"""

import asyncio
import base64
import json
import os
import re
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from mcp.types import PromptReference, ResourceTemplateReference

TIME = re.compile(r"\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?")


def plain(model):
    """A result as JSON, without what only one side adds (`_meta`, caching hints),
    timestamps blanked (in text, and in a blob that is text)."""
    data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    for key in ("_meta", "resultType", "ttlMs", "cacheScope", "nextCursor"):
        data.pop(key, None)
    return blanked(data)


def blanked(value):
    if isinstance(value, dict):
        return {k: blob_blanked(v) if k == "blob" else blanked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [blanked(v) for v in value]
    if isinstance(value, str):
        return TIME.sub("<time>", value)
    return value


def blob_blanked(blob):
    if not isinstance(blob, str):
        return blanked(blob)
    try:
        text = base64.b64decode(blob).decode()
    except ValueError:
        return blob
    return base64.b64encode(TIME.sub("<time>", text).encode()).decode()


async def all_pages(fetch, field):
    items, cursor = [], None
    while True:
        page = await fetch(cursor=cursor)
        items.extend(plain(page)[field])
        cursor = page.next_cursor
        if not cursor:
            return items


async def attempt(action):
    try:
        return {"ok": plain(await action)}
    except MCPError as e:
        return {"error": {"code": e.error.code, "message": e.error.message}}


async def main(mode, side, command):
    if side == "direct":
        uri_of = prompt_of = tool_of = lambda name: name
    else:
        _, upstream, prefix = side.split(":", 2)
        uri_of = lambda uri: f"justonce://{upstream}/{uri}"  # noqa: E731
        prompt_of = tool_of = lambda name: prefix + name  # noqa: E731
    updates = []

    async def on_message(message):
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            updates.append(root.params.uri)

    server = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(server, mode=mode, message_handler=on_message, cache=None) as client:
        if side != "direct":
            await upstreams_ready(client)
        caps = client.server_capabilities
        report = {
            "protocol_version": client.protocol_version,
            "capabilities": {
                "resources": caps.resources is not None,
                "prompts": caps.prompts is not None,
                "completions": caps.completions is not None,
                "subscribe": bool(caps.resources and caps.resources.subscribe),
            },
        }
        if caps.resources is not None:
            resources = await all_pages(client.list_resources, "resources")
            report["resources"] = resources
            report["templates"] = await all_pages(
                client.list_resource_templates, "resourceTemplates"
            )
            report["reads"] = [
                await attempt(client.read_resource(resource["uri"])) for resource in resources[:12]
            ]
        if side != "direct" and mode != "legacy":
            # Declared before the upstreams answered (they may offer all): asked
            # again now that they did.
            found = (await client.session.send_discover(client.protocol_version))["capabilities"]
            report["capabilities_when_ready"] = {
                name: name in found for name in ("resources", "prompts", "completions")
            }
        report.update(await prompts(client, caps, prompt_of, uri_of))
        report.update(await everything(client, mode, caps, report, (uri_of, tool_of), updates))
        report.update(await filesystem(client, tool_of))
    print(json.dumps(report))


async def upstreams_ready(client):
    """Waits until every upstream of the gateway is ready (`tools/list` says)."""
    with anyio.fail_after(60):
        while True:
            listed = await client.list_tools()
            states = (listed.meta or {}).get("dev.justonce/upstreams", {})
            if states and all(s.get("state") == "ready" for s in states.values()):
                return
            await anyio.sleep(0.1)


async def prompts(client, caps, prompt_of, uri_of):
    """Every prompt, each got with the arguments it needs (its own names: `a1`…)."""
    if caps.prompts is None:
        return {}
    listed = (await client.list_prompts()).prompts
    got = []
    for prompt in listed:
        arguments = known_arguments(prompt.name)
        if arguments is None:
            arguments = {arg.name: "x" for arg in prompt.arguments or []}
        got.append(await attempt(client.get_prompt(prompt.name, arguments)))
    return {"prompts": [plain(p) for p in listed], "gets": got}


def known_arguments(name):
    """Arguments that make server-everything's prompts answer (by their names here)."""
    for own, arguments in {
        "args-prompt": {"city": "Paris", "state": "IDF"},
        "resource-prompt": {"resourceType": "Text", "resourceId": "3"},
        "completable-prompt": {"department": "Sales", "name": "Eve"},
    }.items():
        if name.endswith(own):
            return arguments
    return None


async def everything(client, mode, caps, report, mapped, updates):
    """server-everything's templates, completions, errors and subscriptions."""
    names = [p["name"] for p in (await client.list_prompts()).model_dump()["prompts"]] if caps.prompts else []
    if not any(n.endswith("completable-prompt") for n in names):
        return {}
    uri_of, tool_of = mapped
    completable = next(n for n in names if n.endswith("completable-prompt"))
    template = uri_of("demo://resource/dynamic/text/{resourceId}")
    found = {
        "template_reads": [
            await attempt(client.read_resource(uri_of("demo://resource/dynamic/text/7"))),
            await attempt(client.read_resource(uri_of("demo://resource/dynamic/blob/2"))),
        ],
        "completions": [
            await attempt(client.complete(PromptReference(type="ref/prompt", name=completable), {"name": "department", "value": "S"})),
            await attempt(
                client.complete(
                    PromptReference(type="ref/prompt", name=completable),
                    {"name": "name", "value": "E"},
                    context_arguments={"department": "Sales"},
                )
            ),
            await attempt(client.complete(ResourceTemplateReference(type="ref/resource", uri=template), {"name": "resourceId", "value": "12"})),
        ],
        "bad_prompt": await attempt(client.get_prompt(completable, {"department": "Sales"})),
    }
    if caps.resources and caps.resources.subscribe:
        watched = report["resources"][0]["uri"]
        toggle = tool_of("toggle-subscriber-updates")
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # The stateless revision has no resources/subscribe: a listen stream
            # names what it hears.
            async with client.listen(resource_subscriptions=[watched]) as stream:
                await client.call_tool(toggle, {})
                with anyio.fail_after(30):
                    async for event in stream:
                        if isinstance(event, ResourceUpdated):
                            updates.append(event.uri)
                        if watched in updates:
                            break
        else:
            await client.subscribe_resource(watched)
            await client.call_tool(toggle, {})
            with anyio.fail_after(30):
                while watched not in updates:
                    await anyio.sleep(0.05)
            await client.unsubscribe_resource(watched)
        await client.call_tool(toggle, {})
        found["updated"] = sorted(set(updates))
    return found


async def filesystem(client, tool_of):
    """server-filesystem's tools (it offers no resources: its files are read with
    tools) by their own names, its read-only tools called on the files of the
    directory it was started with (`$SURFACE_FILES`), and its `resources/list`
    asked whatever it declared."""
    prefix = tool_of("")
    listed = (await client.list_tools()).tools
    own = sorted(t.name[len(prefix):] for t in listed if t.name.startswith(prefix))
    if "list_allowed_directories" not in own:
        return {}
    root = os.environ["SURFACE_FILES"]
    calls = [
        ("list_allowed_directories", {}),
        ("list_directory", {"path": root}),
        ("read_text_file", {"path": os.path.join(root, "notes.txt"), "head": 1}),
        ("read_media_file", {"path": os.path.join(root, "data.bin")}),
        ("get_file_info", {"path": os.path.join(root, "missing.txt")}),
    ]
    return {
        "tools": own,
        "tool_calls": [
            {name: await attempt(client.call_tool(tool_of(name), arguments))} for name, arguments in calls
        ],
        "unadvertised_resources": await attempt(client.list_resources()),
    }


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
