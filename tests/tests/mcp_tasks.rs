//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`) on the journal
//! (`mcp::tasks`): a call that outlives the server's bound becomes a task whose id
//! is its invocation key, a retry of it is the same task and sends nothing again,
//! `tasks/get` is answered from the journal (after a restart too) and only to the
//! principal that made it, a cancelled task's call still runs to its outcome, and a
//! task expires with its call's record.
//!
//! The tool is the `slow_mail` guest: one email, then a sleep of `seconds`, longer
//! than the bound (1 s by default), so each first call is answered with a task. With
//! `confirm` it asks first whether to send (after `before` seconds, so the question
//! is the task's): the task waits in `input_required` until `tasks/update` answers.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use justonce::__private::{HttpOptions, MailProvider};
use justonce::ManualClock;
use serde_json::{Value, json};

use crate::support::gate::Gate;
use crate::support::mcp_http::{HttpClient, HttpFixture, HttpProcess, MODERN, Reply, add_token};
use crate::support::test_host_with_mail;

const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// A bound on a hang, not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);

/// A stateless request's JSON-RPC message, its client declaring the extension or
/// not, with the routing headers (`name`: the tool or the task id).
fn send(client: &mut HttpClient, method: &str, params: Value, tasks: bool) -> Value {
    let capabilities = if tasks {
        json!({ "extensions": { EXTENSION: {} }, "elicitation": {} })
    } else {
        json!({})
    };
    send_declaring(client, method, params, capabilities)
}

/// A stateless request's JSON-RPC message, its client declaring `capabilities`.
fn send_declaring(
    client: &mut HttpClient,
    method: &str,
    params: Value,
    capabilities: Value,
) -> Value {
    post_declaring(client, method, params, capabilities).message()
}

/// A stateless request's HTTP response, its client declaring `capabilities`.
fn post_declaring(
    client: &mut HttpClient,
    method: &str,
    mut params: Value,
    capabilities: Value,
) -> Reply {
    let name = params["name"]
        .as_str()
        .or(params["taskId"].as_str())
        .unwrap_or("")
        .to_owned();
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(MODERN);
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
    let message = client.message(method, params);
    let headers = [
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", method),
        ("Mcp-Name", name.as_str()),
    ];
    client.post(&message, &headers)
}

/// `slow_mail` to `to`, sleeping `seconds` after the email.
fn call(client: &mut HttpClient, to: &str, seconds: u32, tasks: bool) -> Value {
    let params = json!({ "name": "slow_mail", "arguments": { "to": to, "seconds": seconds } });
    send(client, "tools/call", params, tasks)
}

fn task_request(client: &mut HttpClient, method: &str, task: &str) -> Value {
    send(client, method, json!({ "taskId": task }), true)
}

/// The id of the task `reply` created.
fn created(reply: &Value) -> String {
    let result = &reply["result"];
    assert_eq!(result["resultType"], "task", "{reply}");
    assert_eq!(result["status"], "working", "{reply}");
    result["taskId"].as_str().expect("a taskId").to_owned()
}

/// `tasks/get` of `task` until `done` holds of its status (or the wait ends).
fn wait_for(client: &mut HttpClient, task: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let got = task_request(client, "tasks/get", task);
        if done(&got["result"]) || start.elapsed() > WAIT {
            return got["result"].clone();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn terminal(task: &Value) -> bool {
    task["status"] != "working"
}

/// A host with the `slow_mail` guest served over HTTP to `principals`, with its
/// clock and mailbox.
fn serve_slow_mail(principals: &[&str]) -> (HttpFixture, ManualClock, Arc<MailProvider>) {
    let test = test_host_with_mail(0, |b| {
        b.component(justonce_tests::guests::SLOW_MAIL_COMPONENT)
    });
    let (clock, mail) = (test.clock.clone(), Arc::clone(&test.mail));
    let http = HttpFixture::start(Arc::new(test.host), HttpOptions::default(), principals);
    (http, clock, mail)
}

#[test]
fn a_call_past_the_bound_is_a_task_its_retry_the_same_task_and_it_expires_with_its_record() {
    let (http, clock, mail) = serve_slow_mail(&["alice", "bob"]);
    let mut alice = http.client("alice");
    let mut bob = http.client("bob");

    let first = created(&call(&mut alice, "ada@example.com", 3, true));
    // The retry while it runs: the same task, nothing sent again.
    let again = created(&call(&mut alice, "ada@example.com", 3, true));
    assert_eq!(again, first, "a retry of the call is the same task");
    // Another call is another task.
    let other = created(&call(&mut alice, "bea@example.com", 3, true));
    assert_ne!(other, first);

    // Bob cannot see, nor cancel, alice's task: as for a task that does not exist.
    for method in ["tasks/get", "tasks/cancel"] {
        let refused = task_request(&mut bob, method, &first);
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
        let unknown = task_request(&mut bob, method, "no-such-task");
        assert_eq!(unknown["error"]["code"], -32602, "{method}: {unknown}");
    }

    let done = wait_for(&mut alice, &first, terminal);
    assert_eq!(
        done["status"], "completed",
        "bob's cancel did nothing: {done}"
    );
    let result = &done["result"];
    assert_eq!(result["isError"], false, "{done}");
    assert_eq!(
        result["_meta"]["dev.justonce/key"], first,
        "the task id is the invocation key"
    );
    let message_id = result["structuredContent"]["message_id"].clone();
    assert!(message_id.is_string(), "{done}");
    assert_eq!(
        wait_for(&mut alice, &other, terminal)["status"],
        "completed"
    );

    // One email per call: the retry sent none, the two calls one each, every
    // attempt of an email under one key.
    let sent = mail.sent().unwrap();
    assert_eq!(sent.len(), 2, "{sent:?}");
    let attempts = mail.attempts();
    assert_eq!(attempts.len(), 2, "{attempts:?}");

    // A client without the extension is told the same outcome, replayed.
    let plain = call(&mut alice, "ada@example.com", 3, false);
    let plain = &plain["result"];
    assert_ne!(plain["resultType"], "task");
    assert_eq!(plain["_meta"]["dev.justonce/replayed"], true, "{plain}");
    assert_eq!(plain["structuredContent"]["message_id"], message_id);
    assert_eq!(mail.sent().unwrap().len(), 2);

    // Kept for its ttlMs (the call's retention), gone after it.
    let ttl = done["ttlMs"].as_u64().expect("ttlMs");
    clock.advance(Duration::from_millis(ttl) - Duration::from_secs(1));
    assert_eq!(
        task_request(&mut alice, "tasks/get", &first)["result"]["status"],
        "completed"
    );
    clock.advance(Duration::from_secs(60));
    let expired = task_request(&mut alice, "tasks/get", &first);
    assert_eq!(expired["error"]["code"], -32602, "{expired}");
}

#[test]
fn a_cancelled_task_reads_cancelled_and_its_call_runs_to_its_outcome_once() {
    let (http, _, mail) = serve_slow_mail(&["alice"]);
    let mut alice = http.client("alice");

    let task = created(&call(&mut alice, "cy@example.com", 3, true));
    let ack = task_request(&mut alice, "tasks/cancel", &task);
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(ack["result"].get("taskId").is_none(), "{ack}");
    let got = task_request(&mut alice, "tasks/get", &task);
    assert_eq!(got["result"]["status"], "cancelled", "{got}");

    // The call was not stopped (its email was sent before the cancel): a retry of
    // it gets its outcome once it is saved, and the email went out once.
    let start = Instant::now();
    let outcome = loop {
        let reply = call(&mut alice, "cy@example.com", 3, false);
        let result = reply["result"].clone();
        let running = result["structuredContent"]["error"]["kind"] == "in_progress";
        if !running || start.elapsed() > WAIT {
            break result;
        }
    };
    assert_eq!(outcome["isError"], false, "{outcome}");
    assert_eq!(outcome["_meta"]["dev.justonce/replayed"], true, "{outcome}");
    assert_eq!(outcome["_meta"]["dev.justonce/key"], task);
    assert_eq!(mail.sent().unwrap().len(), 1);
    // Still cancelled for its client.
    let got = task_request(&mut alice, "tasks/get", &task);
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
}

#[test]
fn a_cancel_before_the_calls_email_refuses_it_and_that_outcome_is_saved() {
    let (http, _, mail) = serve_slow_mail(&["alice"]);
    let mut alice = http.client("alice");
    let arguments = json!({ "to": "eve@example.com", "seconds": 0, "before": 3 });
    let params = json!({ "name": "slow_mail", "arguments": arguments });

    // Cancelled while it sleeps, before its email.
    let task = created(&send(&mut alice, "tools/call", params.clone(), true));
    task_request(&mut alice, "tasks/cancel", &task);
    let got = task_request(&mut alice, "tasks/get", &task);
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    // A retry gets the saved outcome: the tool's error for the refused email.
    let start = Instant::now();
    let outcome = loop {
        let reply = send(&mut alice, "tools/call", params.clone(), false);
        let result = reply["result"].clone();
        if result["structuredContent"]["error"]["kind"] != "in_progress" || start.elapsed() > WAIT {
            break result;
        }
    };
    assert_eq!(outcome["isError"], true, "{outcome}");
    assert!(
        outcome.to_string().contains("cancelled by its client"),
        "the tool was told why its email was refused: {outcome}"
    );
    assert_eq!(outcome["_meta"]["dev.justonce/key"], task);
    assert!(mail.sent().unwrap().is_empty(), "no email was sent");
    assert!(mail.attempts().is_empty(), "none was attempted");

    // The opposite case: the same call not cancelled sends its email.
    let other = json!({ "name": "slow_mail", "arguments": { "to": "fay@example.com", "seconds": 0, "before": 3 } });
    let task = created(&send(&mut alice, "tools/call", other, true));
    assert_eq!(wait_for(&mut alice, &task, terminal)["status"], "completed");
    assert_eq!(mail.sent().unwrap().len(), 1);
}

#[test]
fn a_task_outlives_its_host_and_a_retry_on_the_next_one_finishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let token = add_token(&db, "alice");
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    let guest = Path::new(justonce_tests::guests::SLOW_MAIL_COMPONENT);
    std::fs::copy(guest, tools.join(guest.file_name().unwrap())).unwrap();
    let args = ["--tools", tools.to_str().unwrap()];
    let lease = [("JUSTONCE_LEASE_MS", "1000")];

    let first = HttpProcess::spawn_logged(&db, &args, &lease);
    let mut alice = HttpClient::new(first.addr, Some(token.clone()));
    let task = created(&call(&mut alice, "dee@example.com", 3, true));
    // Its email is journaled before the host dies.
    let start = Instant::now();
    while !crate::support::db::journal(&db)
        .iter()
        .any(|e| e["key"] == task && e["effects"].as_array().is_some_and(|e| !e.is_empty()))
    {
        assert!(start.elapsed() < WAIT, "the call never journaled its email");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(first.stop_for_log());

    let second = HttpProcess::spawn_logged(&db, &args, &lease);
    let mut alice = HttpClient::new(second.addr, Some(token));
    // The next host knows the task from the journal: working, its host stopped.
    let stopped = wait_for(&mut alice, &task, |t| {
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("stopped"))
    });
    assert_eq!(stopped["status"], "working", "{stopped}");
    // The retry resumes it: the same task, the email not sent again.
    let again = created(&call(&mut alice, "dee@example.com", 3, true));
    assert_eq!(again, task);
    let done = wait_for(&mut alice, &task, terminal);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["_meta"]["dev.justonce/key"], task);
    assert_eq!(crate::support::db::mailbox_count(&db), 1);
}

/// `slow_mail` to `to` that asks before sending, after the bound (`before`: 2 s).
fn asking(to: &str) -> Value {
    json!({ "name": "slow_mail", "arguments": { "to": to, "seconds": 0, "before": 2, "confirm": true } })
}

fn update(client: &mut HttpClient, task: &str, responses: Value) -> Value {
    update_reply(client, task, responses).message()
}

/// [`update`]'s HTTP response.
fn update_reply(client: &mut HttpClient, task: &str, responses: Value) -> Reply {
    let params = json!({ "taskId": task, "inputResponses": responses });
    let capabilities = json!({ "extensions": { EXTENSION: {} }, "elicitation": {} });
    post_declaring(client, "tasks/update", params, capabilities)
}

/// Whether `reply` refuses a request as one past its principal's cap on calls in
/// flight (what a `tools/call` past it gets).
fn over_the_cap(reply: &Reply) -> bool {
    reply.status == 429
        && reply.header("retry-after") == Some("1")
        && reply.message()["error"]["code"] == justonce::__private::TOO_MANY_CALLS
}

/// A task of `client` asking before it emails `to`, waiting for its answer (its
/// first run over: no call of its in flight). A `tools/call` past the principal's
/// cap (an earlier task's run not yet gone) is made again.
fn waiting_task(client: &mut HttpClient, to: &str) -> String {
    let start = Instant::now();
    let capabilities = json!({ "extensions": { EXTENSION: {} }, "elicitation": {} });
    let task = loop {
        let reply = post_declaring(client, "tools/call", asking(to), capabilities.clone());
        if !over_the_cap(&reply) || start.elapsed() > WAIT {
            break created(&reply.message());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let waiting = wait_for(client, &task, terminal);
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    task
}

/// Issue 54: a task resumed by the tasks/update that completed its answers is a
/// call of its principal in flight. Alice (a cap of 2) answers four waiting tasks
/// at once: at most 2 resume, each held at the mailer, and the other updates are
/// refused as a call past the cap is (429, Retry-After, -32029), nothing run and
/// the answers kept; never more than 2 of her emails are in flight. The opposite
/// case: bob's task resumes meanwhile. Once the mailer answers, the refused
/// updates made again (with no answers) resume their tasks, and every email goes
/// out once.
#[test]
fn tasks_resumed_by_tasks_update_count_against_their_principals_cap_and_not_anothers() {
    const CAP: usize = 2;
    const TASKS: usize = 4;
    let gate = Arc::new(Gate::default());
    let test = test_host_with_mail(0, |b| {
        b.component(justonce_tests::guests::SLOW_MAIL_COMPONENT)
            .provider("mail", gate.clone())
    });
    let options = HttpOptions {
        max_calls_per_principal: CAP,
        ..HttpOptions::default()
    };
    let http = HttpFixture::start(Arc::new(test.host), options, &["alice", "bob"]);
    let mut alice = http.client("alice");
    let mut bob = http.client("bob");
    let tasks: Vec<String> = (0..TASKS)
        .map(|n| waiting_task(&mut alice, &format!("n{n}@alice.test")))
        .collect();
    let bobs = waiting_task(&mut bob, "bea@bob.test");

    let yes = json!({ "send": { "action": "accept", "content": { "send": true } } });
    let (mut resumed, mut refused) = (Vec::new(), Vec::new());
    for task in &tasks {
        let reply = update_reply(&mut alice, task, yes.clone());
        if over_the_cap(&reply) {
            let message = reply.message()["error"]["message"].clone();
            assert!(
                message
                    .as_str()
                    .is_some_and(|m| m.contains("its answers are kept")),
                "the agent was told: {message}"
            );
            refused.push(task.clone());
        } else {
            assert_eq!(reply.message()["result"]["resultType"], "complete");
            resumed.push(task.clone());
        }
    }
    assert!(
        (1..=CAP).contains(&resumed.len()),
        "{} of alice's tasks resumed at once, past her cap of {CAP}",
        resumed.len()
    );
    assert_eq!(resumed.len() + refused.len(), TASKS);
    gate.wait_entered(resumed.len());
    // A refused task waits, answered, for the next update; nothing of it ran.
    let kept = task_request(&mut alice, "tasks/get", &refused[0]);
    assert_eq!(kept["result"]["status"], "input_required", "{kept}");
    // The opposite case: bob's own room.
    let ack = update(&mut bob, &bobs, yes.clone());
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    gate.wait_entered(resumed.len() + 1);

    gate.open();
    for task in &refused {
        let start = Instant::now();
        loop {
            let reply = update_reply(&mut alice, task, json!({}));
            if !over_the_cap(&reply) || start.elapsed() > WAIT {
                assert_eq!(reply.message()["result"]["resultType"], "complete");
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for task in tasks.iter().chain([&bobs]) {
        let done = wait_for(&mut alice_or_bob(&http, task, &bobs), task, ended);
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["result"]["isError"], false, "{done}");
    }
    assert!(
        gate.most_at_once("alice.test") <= CAP,
        "{} of alice's emails were in flight at once",
        gate.most_at_once("alice.test")
    );
    // Each email went out once, under one key.
    let attempts = gate.attempts();
    assert_eq!(attempts.len(), TASKS + 1, "{attempts:?}");
    assert_eq!(gate.applied(), TASKS + 1);
}

/// The client of the task `task`'s principal: bob's for `bobs`, else alice's.
fn alice_or_bob(http: &HttpFixture, task: &str, bobs: &str) -> HttpClient {
    http.client(if task == bobs { "bob" } else { "alice" })
}

/// Neither running nor waiting for input.
fn ended(task: &Value) -> bool {
    !matches!(task["status"].as_str(), Some("working" | "input_required"))
}

#[test]
fn a_task_that_asks_waits_for_tasks_update_then_sends_its_email_once_and_another_asks_for_itself() {
    let (http, _, mail) = serve_slow_mail(&["alice", "bob"]);
    let mut alice = http.client("alice");
    let mut bob = http.client("bob");

    let task = created(&send(
        &mut alice,
        "tools/call",
        asking("gus@example.com"),
        true,
    ));
    let waiting = wait_for(&mut alice, &task, terminal);
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let question = &waiting["inputRequests"]["send"];
    assert_eq!(question["method"], "elicitation/create", "{waiting}");
    assert!(
        question["params"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("gus@example.com")),
        "{waiting}"
    );
    assert!(mail.attempts().is_empty(), "nothing sent before the answer");
    // A retry of the call is the same task, still waiting.
    let again = send(&mut alice, "tools/call", asking("gus@example.com"), true);
    assert_eq!(again["result"]["taskId"], task, "{again}");
    assert_eq!(again["result"]["status"], "input_required", "{again}");
    // The same call with a request state this server did not give: refused before
    // anything, not answered with the task.
    let mut forged = asking("gus@example.com");
    forged["requestState"] = json!(format!("{task}.0.{}", "0".repeat(32)));
    let refused = send(&mut alice, "tools/call", forged, true);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    // Bob cannot answer alice's task: as for a task that does not exist.
    let yes = json!({ "send": { "action": "accept", "content": { "send": true } } });
    let refused = update(&mut bob, &task, yes.clone());
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // An answer that is not an ElicitResult is refused, and nothing of it kept.
    let malformed = update(&mut alice, &task, json!({ "send": { "yes": 1 } }));
    assert_eq!(malformed["error"]["code"], -32602, "{malformed}");
    // So is one whose content does not fit the question's schema.
    let misfit = json!({ "send": { "action": "accept", "content": { "send": "yes" } } });
    let misfit = update(&mut alice, &task, misfit);
    assert_eq!(misfit["error"]["code"], -32602, "{misfit}");
    assert!(
        misfit["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("does not fit its requestedSchema")),
        "{misfit}"
    );
    // So are answers larger than an ask takes: kept in memory until the task
    // resumes, they are bounded when given, not when used.
    let note = "x".repeat(1 << 20);
    let huge = json!({ "send": { "action": "accept", "content": { "send": true, "note": note } } });
    let too_large = update(&mut alice, &task, huge);
    assert_eq!(too_large["error"]["code"], -32602, "{too_large}");
    assert!(
        too_large["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("more than the 1048576 an ask takes")),
        "{too_large}"
    );
    let still = task_request(&mut alice, "tasks/get", &task);
    assert_eq!(still["result"]["status"], "input_required", "{still}");
    assert!(mail.attempts().is_empty());

    // Alice answers: acknowledged, and the task resumes to its outcome.
    let ack = update(&mut alice, &task, yes);
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(ack["result"].get("taskId").is_none(), "{ack}");
    assert!(ack["result"].get("status").is_none(), "{ack}");
    let done = wait_for(&mut alice, &task, ended);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(done["result"]["_meta"]["dev.justonce/key"], task);
    let message_id = done["result"]["structuredContent"]["message_id"].clone();
    assert!(message_id.is_string(), "{done}");
    // The email went out once, under one key.
    let sent = mail.sent().unwrap();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].to, "gus@example.com");
    let attempts = mail.attempts();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0], sent[0].key);

    // Asked again, the task says the same; the same call replays its outcome,
    // asking nothing and sending nothing.
    let again = task_request(&mut alice, "tasks/get", &task);
    assert_eq!(again["result"]["status"], "completed", "{again}");
    assert_eq!(
        again["result"]["result"]["structuredContent"]["message_id"],
        message_id
    );
    let replayed = send(&mut alice, "tools/call", asking("gus@example.com"), false);
    let replayed = &replayed["result"];
    assert_eq!(
        replayed["_meta"]["dev.justonce/replayed"], true,
        "{replayed}"
    );
    assert_eq!(replayed["structuredContent"]["message_id"], message_id);
    // Its task takes no more input.
    let late = update(
        &mut alice,
        &task,
        json!({ "send": { "action": "accept", "content": { "send": true } } }),
    );
    assert_eq!(late["error"]["code"], -32602, "{late}");
    assert!(
        late["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("is completed")),
        "{late}"
    );

    // The opposite case: another call asks for itself (the first answer is not
    // its answer), and declined, it sends nothing.
    let other = created(&send(
        &mut alice,
        "tools/call",
        asking("hal@example.com"),
        true,
    ));
    assert_ne!(other, task);
    let waiting = wait_for(&mut alice, &other, terminal);
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let no = json!({ "send": { "action": "decline" } });
    assert_eq!(
        update(&mut alice, &other, no)["result"]["resultType"],
        "complete"
    );
    let declined = wait_for(&mut alice, &other, ended);
    assert_eq!(declined["status"], "completed", "{declined}");
    assert_eq!(declined["result"]["isError"], true, "{declined}");
    assert_eq!(mail.sent().unwrap().len(), 1, "no second email");
    assert_eq!(mail.attempts().len(), 1);
}

#[test]
fn a_task_that_asks_a_client_that_cannot_be_asked_fails_saying_why_and_the_same_call_resumes_it() {
    let (http, _, mail) = serve_slow_mail(&["alice"]);
    let mut alice = http.client("alice");

    // Tasks, but not elicitation: the question comes once the call is a task.
    let unable = json!({ "extensions": { EXTENSION: {} } });
    let reply = send_declaring(&mut alice, "tools/call", asking("ike@example.com"), unable);
    let task = created(&reply);
    let failed = wait_for(&mut alice, &task, terminal);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], -32021, "{failed}");
    let message = failed["statusMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("input unavailable") && message.contains("elicitation"),
        "{failed}"
    );
    assert!(mail.attempts().is_empty(), "nothing sent");

    // The same call from a client that can be asked: the same task, which asks.
    let again = send(&mut alice, "tools/call", asking("ike@example.com"), true);
    assert_eq!(again["result"]["taskId"], task, "{again}");
    let waiting = wait_for(&mut alice, &task, |t| t["status"] != "working");
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let yes = json!({ "send": { "action": "accept", "content": { "send": true } } });
    assert_eq!(
        update(&mut alice, &task, yes)["result"]["resultType"],
        "complete"
    );
    let done = wait_for(&mut alice, &task, ended);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(mail.sent().unwrap().len(), 1);
    assert_eq!(mail.attempts().len(), 1);
}
