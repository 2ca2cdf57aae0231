//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on the
//! journal, for the stateless revision 2026-07-28 over HTTP.
//!
//! A task *is* an invocation: its id is the call's invocation key, so a retry of the
//! same call (same tool, arguments and scope) is the same task, and `tasks/get`
//! reads the invocation's record from the journal: on any host of a shared
//! PostgreSQL journal, and after a restart, for as long as the record is kept
//! (`ttlMs` is the tool's retention window, the shorter of its two).
//!
//! - `tools/call` from a client that declares the extension (in the request's
//!   `_meta` client capabilities) runs the call as always, on a thread of its own;
//!   if it has not finished within [`TaskSettings::after`] (`[mcp] task_after_ms`)
//!   the answer is a `CreateTaskResult` (`resultType: "task"`), and the call runs
//!   on to its outcome. A tool named in
//!   [`TaskSettings::required`] (`[mcp] task_required`) is always answered with a
//!   task, and a client that does not declare the extension gets `-32021` for it.
//! - A call journals its record with its first effect or its outcome: until then
//!   (a call computing, before any effect) only the host running it knows the task
//!   (from its memory); from then on every host of the journal answers it.
//! - `tasks/get` answers `working` while the call runs (or waits on an unknown
//!   outcome), `completed` with the result inlined (a tool error too, with
//!   `isError`), `failed` with an error for a trap, `cancelled` after a cancel.
//! - `tasks/cancel` never stops an effect in flight: the call performs no new
//!   effect (`Host::cancel_task`): the next one is refused before it starts, and
//!   the tool's answer to that is the call's outcome, saved, and what a retry of
//!   the same call gets; an effect the journal already holds replays as usual (a
//!   retry after an unknown outcome resumes), and a call past its last effect runs
//!   to its outcome. The cancel belongs to the generation of the call its record
//!   holds when it is taken (issue 54): the task reads `cancelled` from then on
//!   while its record is that generation's. Once
//!   the record is gone (forgotten or expired, on any host, whoever completed the
//!   call) the same call made again is a new generation, not cancelled. The cancel
//!   is journaled against that generation (`Journal::cancel`): a run on another
//!   host is refused its next new effect, and every host's `tasks/get` reads
//!   `cancelled`. A cancel taken before the call journaled anything is journaled
//!   for the key's first record, whichever host makes it (and kept in the memory
//!   of the host that took it, for its first run there).
//! - A task is visible only to the principal that made it: another principal's
//!   `tasks/get`, `tasks/cancel` or `tasks/update` is answered as for an unknown
//!   task (`-32602`), which says nothing of whether it exists.
//! - A tool that asks the user (`crate::ask`) before its call becomes a task is
//!   answered on the call (`input_required`, `mcp::mrtr`); a task that asks reads
//!   `input_required` with its questions, answered by `tasks/update`
//!   (`mcp::task_input` says how). `tasks/update` of a task not waiting for input
//!   here is `-32602`. `tasks/result` and `tasks/list`, gone from the extension's
//!   second version, are `-32601`.
//! - Every run of a task is a call of its principal in flight: the first holds the
//!   place its `tools/call` took, and a run resumed by the `tasks/update` that
//!   completed its answers takes one of its own, against the same per-principal cap
//!   ([`Admission`]) and in the same sandbox pool as any call. Past the cap that
//!   update is answered as a call past it is (`-32029`, over HTTP `429` with
//!   `Retry-After`): nothing runs, the answers are kept, and the next `tasks/update`
//!   (even with no answers) resumes the task.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use rmcp::model::{ErrorCode, ErrorData};
use serde_json::{Map, Value, json};

use super::elicit::elicit_result;
use super::mrtr;
use super::mrtr::INPUT_RESPONSES_PARAM;
use super::protocol::type_name;
use super::protocol::{CLIENT_CAPABILITIES_META_KEY, Params, TOO_MANY};
use super::server::Server;
use super::session::stateless_result;
use super::task_input::{Answering, AwaitingTask, Phase, SharedPhase, TaskAsker};
use super::tools;
use crate::ask;
use crate::call::{CallRequest, CallResponse};
use crate::host::RunningTask;
use crate::journal::JournalEntry;
use crate::keys::InvocationKey;
use crate::outcome::Outcome;
use crate::serving::admission::{Admission, Permit};

pub use super::protocol::TASKS_EXTENSION as EXTENSION;

/// How long a call from a client that supports tasks may take before it is
/// answered with a task, unless configured (`[mcp] task_after_ms`).
pub const DEFAULT_TASK_AFTER: Duration = Duration::from_secs(1);

/// How often a client should poll a task (`pollIntervalMs`).
const POLL_INTERVAL_MS: u64 = 500;

/// What `tasks/get` says of a task stopped at its tool's question that this host
/// did not ask.
const ASKED_ELSEWHERE: &str = "stopped at a question of its tool, asked by another host (or before a restart): tasks/update there, or make the same call again to be asked here";

/// What `tasks/get` says of a task answered in full whose run did not use the
/// answers (the server was stopping, or the call ran elsewhere).
const ANSWERED_NOT_RESUMED: &str = "answered, but its run stopped before it used the answers (the server was stopping, or the call runs elsewhere): they are kept; a tasks/update (even with no answers) resumes it";

/// The code of a request that needs a capability the client did not declare.
const MISSING_CAPABILITY: ErrorCode = ErrorCode(-32021);

/// When `serve` answers a call with a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSettings {
    /// A call still running after this long is answered with a task.
    pub after: Duration,
    /// Tools always answered with a task (a client without the extension gets
    /// `-32021` for them).
    pub required: BTreeSet<String>,
}

impl Default for TaskSettings {
    fn default() -> Self {
        Self {
            after: DEFAULT_TASK_AFTER,
            required: BTreeSet::new(),
        }
    }
}

/// Whether the request's client capabilities declare the extension.
pub(crate) fn declared(params: &Params) -> bool {
    params
        .get("_meta")
        .and_then(|meta| meta.get(CLIENT_CAPABILITIES_META_KEY))
        .and_then(|caps| caps.get("extensions"))
        .and_then(|extensions| extensions.get(EXTENSION))
        .is_some()
}

/// The answer to a `tasks/*` request of `principal` (one carrying a valid
/// 2026-07-28 envelope). A task it resumes runs as a call of `principal` admitted
/// by `admission`.
pub(crate) fn request(
    server: &Server,
    method: &str,
    params: &Params,
    principal: &str,
    admission: &Admission,
) -> Result<Value, ErrorData> {
    if matches!(method, "tasks/result" | "tasks/list") {
        return Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("{method} is not part of the tasks extension: tasks/get inlines the result"),
            None,
        ));
    }
    if !declared(params) {
        return Err(missing_capability(method));
    }
    let entry = find(server, params, principal, method)?;
    let reply = match method {
        "tasks/get" => detailed(server, &entry),
        "tasks/cancel" => {
            if entry.state != "completed" {
                let key = InvocationKey::parse(&entry.key)
                    .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
                server.host().cancel_task(&key).map_err(|e| {
                    tracing::warn!(task = %entry.key, "tasks/cancel: the call's record could not be read: {e}");
                    ErrorData::internal_error(
                        "tasks/cancel: the call's record could not be read; nothing was cancelled: the same cancel is safe to retry",
                        None,
                    )
                })?;
                server.task_inputs().stop(&entry.key);
                tracing::info!(task = %entry.key, "task cancelled by its client; its call performs no further effect");
            }
            json!({})
        }
        "tasks/update"
            if server
                .host()
                .task_cancelled(&entry.key, entry.generation, entry.cancelled) =>
        {
            return Err(ErrorData::invalid_params(
                format!(
                    "tasks/update: task {} was cancelled: it takes no input",
                    entry.key
                ),
                None,
            ));
        }
        "tasks/update" if entry.state == "completed" => {
            // Its call ended by another path (the same call made again with the
            // answers): nothing here can change its saved outcome.
            server.task_inputs().stop(&entry.key);
            return Err(ErrorData::invalid_params(
                format!(
                    "tasks/update: task {} is completed (its call ended with an outcome, saved for good); nothing was kept: tasks/get has its result",
                    entry.key
                ),
                None,
            ));
        }
        "tasks/update" => update(server, &entry.key, params, (principal, admission))?,
        other => {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: {other}"),
                None,
            ));
        }
    };
    Ok(stateless_result(reply))
}

/// Whether a `tools/call` is answered by [`call`]: its client declares the
/// extension, or its tool needs it.
pub(crate) fn applies(server: &Server, request: &CallRequest, params: &Params) -> bool {
    declared(params) || server.config().tasks.required.contains(&request.tool)
}

/// The answer to `request` (a `tools/call` on the stateless wire, its principal
/// set, for which [`applies`] holds): `-32021` for a tool that needs tasks from a
/// client that does not declare them, a `CreateTaskResult` for a call that outlived
/// the bound (it runs on), the call's own answer for one that did not. `done` runs
/// when the call has finished (the caller's hold on the server's capacity).
pub(crate) fn call(
    server: &Server,
    request: &CallRequest,
    params: &Params,
    done: impl FnOnce() + Send + 'static,
) -> Result<Value, ErrorData> {
    let settings = &server.config().tasks;
    let required = settings.required.contains(&request.tool);
    if !declared(params) {
        done();
        return Err(missing_capability(&format!(
            "tools/call of {}",
            request.tool
        )));
    }
    // Read, and its request state checked (a journal read: this runs as blocking
    // work), before anything: a task found here, or the run started below.
    let input = match mrtr::Input::read(params)
        .and_then(|input| input.check_state(server.host(), request).map(|()| input))
    {
        Ok(input) => input,
        Err(refused) => {
            done();
            return Err(refused);
        }
    };
    let Ok(key) = server.host().key_for(request) else {
        // The call reports what is wrong with it.
        let reply = mrtr::run_checked(input, &request.tool, || {
            server.run_call(request, true, true)
        });
        done();
        return reply;
    };
    // A retry of a task waiting for its client's input here, or of a call still
    // running (under a live lease): the same task. One whose host stopped, or
    // suspended on an unknown outcome or a question asked elsewhere, runs: the
    // guard resumes it.
    if let Some(waiting) = server.task_inputs().awaiting(key.as_str()) {
        done();
        let task = running_of(&waiting.request, waiting.created_at);
        let view = view_of_running(key.as_str(), &task);
        return Ok(created_as(server, &view, "input_required"));
    }
    let running = server.host().running_task(key.as_str());
    if let Some(running) = running {
        done();
        return Ok(created(server, &view_of_running(key.as_str(), &running)));
    }
    let now = server.host().clock().now_ms();
    if let Some(entry) = record(server, &key)
        && entry.state == "running"
        && !entry.lease_ended(now)
        && !entry.awaits_input()
    {
        done();
        return Ok(created(server, &View::of(&entry)));
    }
    let running = running_of(request, server.host().clock().now_ms());
    // Run again: no longer stopped at a question its client could not be asked.
    server.task_inputs().stop(key.as_str());
    let run = server.host().task_started(key.as_str(), running.clone());
    // Room for the one reply the run sends: its send never waits, even when no one
    // reads it any more (the call became a task).
    let (sender, answer) = mpsc::sync_channel(1);
    let runner = server.clone();
    let call = request.clone();
    let ran = key.to_string();
    let phase = SharedPhase::call();
    let asking = Arc::clone(&phase);
    let created_at = running.created_at;
    std::thread::spawn(move || {
        // Asked as its request says until it is a task; as a task after.
        let reply = mrtr::run_checked(input, &call.tool, || {
            let asker = TaskAsker::first(
                runner.task_inputs(),
                &ran,
                &call,
                created_at,
                asking,
                ask::current(),
            );
            ask::with_asker(Rc::new(asker), || runner.run_call(&call, true, true))
        });
        runner.host().task_stopped(&ran, run);
        done();
        let _ = sender.send(reply);
    });
    let reply = match answer.recv_timeout(settings.after) {
        Ok(reply) => Some(reply),
        // Its tool asked first: the call's answer is that question, and it comes
        // as soon as the run has stopped.
        Err(_) if phase.become_task() == Phase::Asked => Some(answer.recv().unwrap_or_else(|_| {
            Err(ErrorData::internal_error(
                "the call's run ended without an answer",
                None,
            ))
        })),
        Err(_) => None,
    };
    match reply {
        // A question (or a refusal of the answers it brought) before it is a task.
        Some(reply) if phase.now() == Phase::Asked => reply,
        Some(reply) if !required => reply,
        // A task_required tool's call is a task however soon it ends.
        Some(Err(refused)) => Err(refused),
        _ => Ok(created(server, &view_of_running(key.as_str(), &running))),
    }
}

/// The task of `request`, started at `created_at`, as this host knows it.
fn running_of(request: &CallRequest, created_at: i64) -> RunningTask {
    RunningTask {
        principal: request.principal.clone().unwrap_or_default(),
        tool: request.tool.clone(),
        created_at,
    }
}

fn missing_capability(what: &str) -> ErrorData {
    ErrorData::new(
        MISSING_CAPABILITY,
        format!(
            "{what} needs the tasks extension: declare {EXTENSION} in _meta[{CLIENT_CAPABILITIES_META_KEY:?}].extensions"
        ),
        Some(json!({ "requiredCapabilities": { "extensions": { EXTENSION: {} } } })),
    )
}

/// The record of `key`, if there is one.
fn record(server: &Server, key: &InvocationKey) -> Option<JournalEntry> {
    server.host().story(key).ok()?.entry
}

/// A task as it stands: from its call's record, or from the call running here.
#[derive(Debug, Clone)]
struct View {
    key: String,
    tool: String,
    /// The record's state (`running`, `incomplete`, `completed`).
    state: String,
    created_at: i64,
    completed_at: Option<i64>,
    outcome: Option<Value>,
    /// Where the call stands with its lease, in words.
    holding: String,
    /// Whether its call stopped at a question of its tool (journaled, unanswered).
    asking: bool,
    /// The generation of its call's record (`None`: no record, or one without a
    /// seed); a cancel is of one generation.
    generation: Option<u64>,
    /// Its record says that generation was cancelled (by any host).
    cancelled: bool,
}

impl View {
    fn of(entry: &JournalEntry) -> Self {
        Self {
            key: entry.key.clone(),
            tool: entry.tool.clone(),
            state: entry.state.clone(),
            created_at: entry.created_at,
            completed_at: entry.completed_at,
            outcome: entry.outcome.clone(),
            holding: entry.holding.clone(),
            asking: entry.awaits_input(),
            generation: entry.generation,
            cancelled: entry.cancelled,
        }
    }
}

fn view_of_running(key: &str, running: &RunningTask) -> View {
    View {
        key: key.to_owned(),
        tool: running.tool.clone(),
        state: "running".into(),
        created_at: running.created_at,
        completed_at: None,
        outcome: None,
        holding: String::new(),
        asking: false,
        generation: None,
        cancelled: false,
    }
}

/// The task `params.taskId` names, if it is `principal`'s; else `-32602`, the same
/// whether it does not exist or is another principal's.
fn find(
    server: &Server,
    params: &Params,
    principal: &str,
    method: &str,
) -> Result<View, ErrorData> {
    let id = match params.get("taskId") {
        Some(Value::String(id)) => id,
        _ => {
            return Err(ErrorData::invalid_params(
                format!("{method}: \"taskId\" (a string) is missing"),
                None,
            ));
        }
    };
    let unknown = || {
        ErrorData::invalid_params(
            format!(
                "{method}: no task {id:?} (it never existed, expired with its call's record, or is not yours)"
            ),
            None,
        )
    };
    let key = InvocationKey::parse(id).map_err(|_| unknown())?;
    if let Some(entry) = record(server, &key) {
        if owner(&entry.conversation).as_deref() != Some(principal) {
            return Err(unknown());
        }
        // Kept for its ttlMs after its outcome, as its record is (`gc` removes it).
        let now = server.host().clock().now_ms();
        let ttl = i64::try_from(ttl_ms(server, &entry.tool)).unwrap_or(i64::MAX);
        if entry
            .completed_at
            .is_some_and(|at| now >= at.saturating_add(ttl))
        {
            return Err(unknown());
        }
        return Ok(View::of(&entry.judged_at(now)));
    }
    // Running here, or stopped here at a question its client could not be asked.
    let running = server
        .host()
        .running_task(key.as_str())
        .or_else(|| {
            let stopped = server.task_inputs().unaskable(key.as_str())?;
            Some(running_of(&stopped.request, stopped.created_at))
        })
        .ok_or_else(unknown)?;
    if running.principal != principal {
        return Err(unknown());
    }
    Ok(view_of_running(key.as_str(), &running))
}

/// The principal of a record's scope (`["principal","conversation"]`), if a
/// principal made it.
fn owner(scope: &str) -> Option<String> {
    if !scope.starts_with('[') {
        return None;
    }
    let (principal, _): (String, String) = serde_json::from_str(scope).ok()?;
    Some(principal)
}

/// How long a task of `tool` is kept after its call ended (`ttlMs`): the shorter
/// of the tool's two retention windows (a call in a conversation, one in none), so
/// it is never promised longer than its record is kept.
fn ttl_ms(server: &Server, tool: &str) -> u64 {
    let windows = server.host().retention().of_tool(tool);
    let ttl = windows.conversation.min(windows.unscoped);
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

/// What every task answer carries: id, status and times.
fn task(server: &Server, view: &View, status: &str) -> Map<String, Value> {
    let updated = view.completed_at.unwrap_or(view.created_at);
    let mut task = Map::new();
    task.insert("taskId".into(), json!(view.key));
    task.insert("status".into(), json!(status));
    task.insert(
        "createdAt".into(),
        json!(crate::clock::rfc3339(view.created_at)),
    );
    task.insert(
        "lastUpdatedAt".into(),
        json!(crate::clock::rfc3339(updated)),
    );
    task.insert("ttlMs".into(), json!(ttl_ms(server, &view.tool)));
    task.insert("pollIntervalMs".into(), json!(POLL_INTERVAL_MS));
    task
}

/// The `CreateTaskResult` of a call still running.
fn created(server: &Server, view: &View) -> Value {
    created_as(server, view, "working")
}

/// The `CreateTaskResult` of a task whose status is `status`.
fn created_as(server: &Server, view: &View, status: &str) -> Value {
    let mut task = task(server, view, status);
    task.insert("resultType".into(), json!("task"));
    stateless_result(Value::Object(task))
}

/// The `tasks/get` answer: the task, with its result or error once it ended.
fn detailed(server: &Server, view: &View) -> Value {
    let cancelled = server
        .host()
        .task_cancelled(&view.key, view.generation, view.cancelled);
    let outcome = (view.state == "completed")
        .then(|| view.outcome.clone())
        .flatten()
        .and_then(|outcome| serde_json::from_value::<Outcome>(outcome).ok());
    if view.state == "completed" {
        server.task_inputs().stop(&view.key);
    }
    let Some(outcome) = outcome.filter(|_| !cancelled) else {
        // Stopped at its tool's question, until tasks/update answers it.
        if let Some(waiting) = server
            .task_inputs()
            .awaiting(&view.key)
            .filter(|_| !cancelled)
        {
            let mut task = task(server, view, "input_required");
            let pending = waiting.pending();
            if pending.is_empty() {
                task.insert("statusMessage".into(), json!(ANSWERED_NOT_RESUMED));
            }
            task.insert("inputRequests".into(), mrtr::input_requests(&pending, &[]));
            return Value::Object(task);
        }
        // Stopped at a question its client cannot be asked: failed, until the same
        // call made again by a client that can be asked resumes it.
        if let Some(stopped) = server
            .task_inputs()
            .unaskable(&view.key)
            .filter(|_| !cancelled)
        {
            let why = format!(
                "input unavailable: the tool asked the user a question once the call was a task, and {}; nothing was saved as the call's outcome (what the tool did before it asked is kept and replayed): the same call made again by a client that declares {{\"elicitation\": {{}}}} resumes this task",
                stopped.why
            );
            let mut task = task(server, view, "failed");
            task.insert("statusMessage".into(), json!(why));
            task.insert(
                "error".into(),
                json!({
                    "code": MISSING_CAPABILITY.0,
                    "message": why,
                    "data": { "requiredCapabilities": { "elicitation": {} } },
                }),
            );
            return Value::Object(task);
        }
        let status = if cancelled { "cancelled" } else { "working" };
        let mut task = task(server, view, status);
        if !cancelled && view.asking {
            // Its questions are known to the host that ran it, not to the journal.
            task.insert("statusMessage".into(), json!(ASKED_ELSEWHERE));
        } else if !cancelled && !view.holding.is_empty() {
            task.insert("statusMessage".into(), json!(view.holding));
        }
        return Value::Object(task);
    };
    if let Outcome::Trap { reason, message } = &outcome {
        let mut task = task(server, view, "failed");
        task.insert(
            "error".into(),
            json!({
                "code": ErrorCode::INTERNAL_ERROR.0,
                "message": format!("the tool trapped ({reason}): {message}"),
                "data": outcome.to_agent_json(),
            }),
        );
        return Value::Object(task);
    }
    let Ok(key) = InvocationKey::parse(&view.key) else {
        return Value::Object(task(server, view, "working"));
    };
    let response = CallResponse {
        key,
        replayed: false,
        outcome,
    };
    let mut task = task(server, view, "completed");
    match tools::call_result(Ok(response), true, true) {
        Ok(result) => {
            task.insert("result".into(), result);
        }
        Err(error) => {
            task.insert("status".into(), json!("failed"));
            task.insert("error".into(), json!(error));
        }
    }
    Value::Object(task)
}

/// `tasks/update` of the task `key` (its client's, checked): keeps the answers
/// given (`inputResponses`, by question name; names not asked are ignored) and, once
/// every question is answered, resumes the task in the background as a call of
/// `principal` that `admission` admits; past its cap the update is refused as a
/// call would be (`-32029`), the answers kept. The answer is an empty
/// acknowledgement; `tasks/get` says where the task stands.
fn update(
    server: &Server,
    key: &str,
    params: &Params,
    (principal, admission): (&str, &Admission),
) -> Result<Value, ErrorData> {
    let responses = match params.get(INPUT_RESPONSES_PARAM) {
        Some(Value::Object(responses)) => responses,
        Some(other) => {
            return Err(ErrorData::invalid_params(
                format!(
                    "tasks/update: \"{INPUT_RESPONSES_PARAM}\" must be an object (each question's answer by name), not {}",
                    type_name(other)
                ),
                None,
            ));
        }
        None => {
            return Err(ErrorData::invalid_params(
                format!(
                    "tasks/update: \"{INPUT_RESPONSES_PARAM}\" (the answers, by question name) is missing"
                ),
                None,
            ));
        }
    };
    let Some(waiting) = server.task_inputs().awaiting(key) else {
        return Err(ErrorData::invalid_params(
            format!(
                "tasks/update: task {key} is not waiting for input here (tasks/get says where it stands)"
            ),
            None,
        ));
    };
    // The answers to its questions, each an ElicitResult; a malformed one refuses
    // the whole update, and nothing of it is kept.
    let mut answers = Map::new();
    for question in &waiting.questions {
        let Some(answer) = responses.get(&question.name) else {
            continue;
        };
        let answer = elicit_result(answer.clone()).map_err(|why| {
            ErrorData::invalid_params(
                format!(
                    "tasks/update: the answer to {:?} is not an ElicitResult ({why}); nothing was kept",
                    question.name
                ),
                None,
            )
        })?;
        ask::check_answer(question, &answer).map_err(|why| {
            ErrorData::invalid_params(format!("tasks/update: {why}; nothing was kept"), None)
        })?;
        answers.insert(question.name.clone(), answer);
    }
    match server.task_inputs().answer(key, answers) {
        Answering::Complete(task) => {
            let Some(permit) = admission.resume(principal) else {
                // Kept, as for a server stopping: the next update resumes it.
                server.task_inputs().restore(key, task);
                tracing::info!(task = %key, principal, "task answered in full, not resumed: its principal has every call it may have in flight");
                return Err(ErrorData::new(
                    TOO_MANY,
                    format!(
                        "tasks/update: {}; task {key} was not resumed (nothing ran): its answers are kept, and a tasks/update (even with no answers) resumes it",
                        admission.full(principal)
                    ),
                    None,
                ));
            };
            resume(server, key, task, permit);
        }
        Answering::Pending(pending) => {
            tracing::info!(task = %key, ?pending, "task answered in part; waits for the rest");
        }
        Answering::TooLarge(why) => {
            return Err(ErrorData::invalid_params(
                format!("tasks/update: {why}; nothing was kept"),
                None,
            ));
        }
        // Answered in full by another update meanwhile, cancelled, or forgotten here.
        Answering::NotAwaiting => {
            return Err(ErrorData::invalid_params(
                format!(
                    "tasks/update: task {key} stopped waiting for input here meanwhile (another update completed its answers, or it was cancelled); nothing of this one was kept: tasks/get says where it stands"
                ),
                None,
            ));
        }
    }
    Ok(json!({}))
}

/// Runs the task `key` again, in the background, with the answers of `task`, as
/// the call in flight `permit` admitted.
fn resume(server: &Server, key: &str, task: AwaitingTask, permit: Permit) {
    let shutdown = server.shutdown();
    if !shutdown.start() {
        // Stopping: the answers are kept (they were acknowledged); the question
        // stays journaled.
        tracing::warn!(task = %key, "the server is stopping: the answered task is not resumed");
        server.task_inputs().restore(key, task);
        return;
    }
    let running = RunningTask {
        principal: task.request.principal.clone().unwrap_or_default(),
        tool: task.request.tool.clone(),
        created_at: task.created_at,
    };
    let run = server.host().task_started(key, running);
    let runner = server.clone();
    let key = key.to_owned();
    std::thread::spawn(move || {
        let request = task.request.clone();
        let asker = Rc::new(TaskAsker::resumed(runner.task_inputs(), &key, task));
        let resuming: Rc<dyn ask::Asker> = asker.clone();
        let _ = ask::with_asker(resuming, || runner.run_call(&request, true, true));
        // Stopped before its question (the call runs elsewhere, its lease lost),
        // no outcome saved: its answers wait here for the next tasks/update.
        if let Some(unused) = asker.unused()
            && InvocationKey::parse(&key)
                .ok()
                .and_then(|key| record(&runner, &key))
                .is_none_or(|entry| entry.state != "completed")
        {
            runner.task_inputs().restore(&key, unused);
        }
        runner.host().task_stopped(&key, run);
        shutdown.finish();
        drop(permit);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_names_its_principal_and_a_local_one_none() {
        let scope = crate::call::principal_scope("alice", "c1");
        assert_eq!(owner(&scope).as_deref(), Some("alice"));
        assert_eq!(owner("c1"), None);
        assert_eq!(owner("[\"only one\"]"), None);
    }

    #[test]
    fn the_extension_is_declared_per_request() {
        let with: Params = serde_json::from_value(json!({
            "_meta": {CLIENT_CAPABILITIES_META_KEY: {"extensions": {EXTENSION: {}}}}
        }))
        .unwrap();
        let without: Params = serde_json::from_value(json!({
            "_meta": {CLIENT_CAPABILITIES_META_KEY: {"extensions": {}}}
        }))
        .unwrap();
        assert!(declared(&with));
        assert!(!declared(&without));
    }
}
