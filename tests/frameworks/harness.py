"""What every recipe of tests/frameworks/ runs in: a payments API, justonce servers in
front of it, the scenarios, and a scripted model's memory of what it was told.

recipes.py (pydantic-ai, the OpenAI Agents SDK, langchain-mcp-adapters) and
recipes_llama_index.py (LlamaIndex, in a venv of its own: it needs mcp 2, langchain-mcp-
adapters mcp 1) import it; each calls `run(FRAMEWORKS, __doc__)`.
"""

import asyncio
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# ---------------------------------------------------------------------------------
# The world around the agent: a payments API, and justonce servers in front of it.


class Payments:
    """A payments API on 127.0.0.1: `POST /v1/refunds` refunds once per Idempotency-Key."""

    def __init__(self):
        self.requests = []  # (Idempotency-Key, order_id) of every request, in order
        self.refunds = {}  # Idempotency-Key -> the refund made under it
        lock = threading.Lock()
        payments = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("Idempotency-Key")
                with lock:
                    payments.requests.append((key, body["order_id"]))
                    if key is None or key not in payments.refunds:
                        refund = {"refund_id": f"re_{len(payments.refunds) + 1:04}", "status": "succeeded"}
                        payments.refunds[key] = refund | {"order_id": body["order_id"]}
                    answer = json.dumps({k: v for k, v in payments.refunds[key].items() if k != "order_id"})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer.encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def seen(self, orders):
        """What the API saw for `orders`: requests, distinct keys, refunds made."""
        requests = [(key, order) for key, order in self.requests if order in orders]
        refunds = [r for r in self.refunds.values() if r["order_id"] in orders]
        return {
            "requests": len(requests),
            "keys": len({key for key, _ in requests}),
            "refunds": [r["refund_id"] for r in refunds],
        }


class Justonce:
    """`justonce serve` in front of the payments API, refusing unscoped calls: on stdio
    the command a framework starts; on HTTP a running server and a token."""

    def __init__(self, binary, workdir, transport, payments):
        self.binary, self.workdir, self.transport = binary, Path(workdir), transport
        self.config = self.workdir / "http.json"
        self.config.write_text(
            json.dumps({"services": {"payments": payments.url}, "allow": {"refund": [payments.url]}})
        )
        self.processes = []
        self.http = {}

    def args(self, name, *extra):
        """The arguments of `justonce` for the server `name` (its own database and tokens)."""
        (self.workdir / name).mkdir(exist_ok=True)
        db = str(self.workdir / name / "state.db")
        return ["--db", db, "serve", "--http-config", str(self.config), "--unscoped", "refuse", *extra]

    def url(self, name, *extra):
        """(URL, token) of the HTTP server `name`, started on first use."""
        if name not in self.http:
            args = self.args(name, *extra)
            token = subprocess.run(
                [self.binary, "--db", args[1], "token", "add", "agent"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            process = subprocess.Popen(
                [self.binary, *args, "--http", "127.0.0.1:0"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
            )
            self.processes.append(process)
            self.http[name] = (process.stdout.readline().strip(), token)
        return self.http[name]

    def close(self):
        for process in self.processes:
            process.terminate()
            process.wait()


# Servers: "lost" loses every refund's response (its first 3 attempts, all the host's
# own retries), "plain" does not.
LOST = ("lost", "--fault", "lose-response:refund")
PLAIN = ("plain",)


def refund(order):
    return {"order_id": order, "amount_cents": 500}


# Each scenario: the server, its conversation, the model's turns (each a list of
# (tool-call id, arguments)), the orders the payments API is asked about.
SCENARIOS = {
    "lost": (LOST, "ticket-4417", [[("call_1", refund(4417))], [("call_2", refund(4417))]], [4417]),
    "opposite": (PLAIN, "ticket-5001", [[("call_1", refund(5001))], [("call_2", refund(5002))]], [5001, 5002]),
    "parallel": (PLAIN, "ticket-6001", [[("call_1", refund(6001)), ("call_2", refund(6001))]], [6001]),
    "replan": (PLAIN, "ticket-7001", [[("call_1", refund(7001))], [("call_2", refund(7001))]], [7001]),
    "unglued": (PLAIN, None, [[("call_1", refund(9001))]], [9001]),
}


class Script:
    """A model that answers with `turns` of tool calls, then "done", and keeps what it
    was told: per turn after the first, each tool result as (id, text, is_error)."""

    def __init__(self, turns):
        self.turns, self.told = turns, []

    def next(self, results):
        if self.told or results:
            self.told.append([{"id": i, "text": t, "error": e} for i, t, e in results])
        n = len(self.told)
        return self.turns[n] if n < len(self.turns) else None


async def refusal_raised(run):
    """What the helper raised to the developer for `run`, which the host refuses."""
    from justonce_client import refusal_in

    try:
        await run
    except BaseException as e:  # justonce_client.Refused, maybe in a framework's group
        refused = refusal_in(e)
        if refused is None:
            raise
        return {"kind": refused.kind, "message": str(refused), "raised_as": type(e).__name__}
    return None


async def main(frameworks, framework, transport, binary, workdir):
    payments = Payments()
    justonce = Justonce(binary, workdir, transport, payments)
    try:
        told = await frameworks[framework](justonce)
    finally:
        justonce.close()
    report = {
        name: {"told": told.pop(name), "payments": payments.seen(orders)}
        for name, (_, _, _, orders) in SCENARIOS.items()
    }
    if "helper_refusal" in told:
        report["helper_refusal"] = {"raised": told.pop("helper_refusal"), "payments": payments.seen([9101])}
    report.update(told)  # a framework's own scenarios, as it reports them
    print(json.dumps(report))


def run(frameworks, usage):
    """`SCRIPT FRAMEWORK TRANSPORT JUSTONCE WORKDIR`: runs the scenarios of FRAMEWORK
    (one of `frameworks`) and prints the report."""
    if len(sys.argv) != 5 or sys.argv[1] not in frameworks or sys.argv[2] not in ("stdio", "http"):
        sys.exit(usage)
    asyncio.run(main(frameworks, *sys.argv[1:]))
