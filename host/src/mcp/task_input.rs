//! Tasks that ask (issue 43): the Tasks extension (`mcp::tasks`) meets tools that
//! ask the user (`crate::ask`).
//!
//! A call of a client that declares the extension becomes a task when it outlives
//! the server's bound (`[mcp] task_after_ms`; a `task_required` tool also when it
//! ends sooner). A question its tool asks *before* that is the call's own: it is
//! answered on the call (`resultType: "input_required"`, `mcp::mrtr`), and the
//! call made again with the answers goes on (and becomes a task then, if it must).
//! A question asked *by the task* parks it: `tasks/get` reads `input_required` with
//! the questions (`inputRequests`, by question name), the client answers them with
//! `tasks/update` (`inputResponses`, one question at a time if it likes), and once
//! every question is answered the task resumes in the background: its journaled
//! effects replay, the question (journaled, pending) is asked again of
//! [`TaskAsker`], which now has the answers, and they are saved like an effect's
//! answer.
//!
//! What a parked task asks, and the answers given so far, are kept in the memory of
//! the server that ran it ([`TaskInputs`], at most [`MAX_TASKS_PER_PRINCIPAL`] of
//! one principal: past it the oldest is forgotten there); the journal holds the
//! question (a pending `user` effect) and its answer once given. Another host of the journal,
//! or this one after a restart, reads such a task as `working`, its call stopped at
//! a question; the same call made again there asks it again.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};

use crate::ask::{self, AskContext, Asked, Asker, Forwarded, Question};
use crate::call::CallRequest;

/// A task that stopped at a question on this server: what its client is asked
/// (`tasks/get`'s `inputRequests`), the answers given so far, and the request that
/// resumes its call once every question is answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AwaitingTask {
    /// The call, as its client made it.
    pub request: CallRequest,
    /// The asking effect's position in the call.
    pub seq: u32,
    /// The questions asked there.
    pub questions: Vec<Question>,
    /// The answers given so far (`ElicitResult`s), by question name.
    pub answers: Map<String, Value>,
    /// The size of `answers` as JSON text, kept with them.
    pub answers_bytes: usize,
    /// When the task was created (ms since the epoch).
    pub created_at: i64,
}

impl AwaitingTask {
    /// The questions not answered yet.
    pub(crate) fn pending(&self) -> Vec<Question> {
        self.questions
            .iter()
            .filter(|q| !self.answers.contains_key(&q.name))
            .cloned()
            .collect()
    }

    /// The answers in the order asked, once every question has one.
    fn all_answers(&self) -> Option<Vec<Value>> {
        self.questions
            .iter()
            .map(|q| self.answers.get(&q.name).cloned())
            .collect()
    }
}

/// A task whose tool asked once the call was a task, of a client its request said
/// cannot be asked (it did not declare elicitation): its run stopped there, nothing
/// saved as its outcome; the same call made again by a client that can be asked
/// resumes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UnaskableTask {
    /// The call, as its client made it.
    pub request: CallRequest,
    /// Why its client cannot be asked.
    pub why: String,
    /// When the task was created (ms since the epoch).
    pub created_at: i64,
}

/// What became of answers given to a task ([`TaskInputs::answer`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answering {
    /// The task waits for no answer here.
    NotAwaiting,
    /// Kept; these questions are still unanswered.
    Pending(Vec<String>),
    /// Every question is answered: the task waits no more; here is what resumes it.
    Complete(AwaitingTask),
    /// Refused, nothing kept: the answers would take more than the task, or its
    /// principal's tasks here, may keep (why, in words).
    TooLarge(String),
}

/// The most the answers kept for all the tasks of one principal waiting here may
/// take, as JSON text (each task's alone at most [`ask::MAX_ANSWERS_BYTES`]): a
/// person's answers to forms are small, and what a client sends ahead is kept in
/// memory until the task resumes.
pub(crate) const MAX_PRINCIPAL_ANSWERS_BYTES: usize = 4 * ask::MAX_ANSWERS_BYTES;

/// The size of `answers` as JSON text.
fn json_bytes(answers: &Map<String, Value>) -> usize {
    serde_json::to_string(answers).map_or(usize::MAX, |text| text.len())
}

/// The most tasks of one principal kept waiting for input on one server (and as
/// many stopped at a question they could not be asked): past it the oldest is
/// forgotten here. Its question stays journaled: the same call made again asks it
/// again.
pub(crate) const MAX_TASKS_PER_PRINCIPAL: usize = 64;

/// Tasks by id, each with when it was noted, at most [`MAX_TASKS_PER_PRINCIPAL`]
/// of one principal.
#[derive(Debug)]
struct Noted<T> {
    tasks: HashMap<String, (u64, T)>,
    /// The last task noted.
    last: u64,
}

impl<T> Default for Noted<T> {
    fn default() -> Self {
        Self {
            tasks: HashMap::new(),
            last: 0,
        }
    }
}

/// The principal whose task this is (`None`: a call made by none).
trait OfPrincipal {
    fn principal(&self) -> Option<&str>;
}

impl OfPrincipal for AwaitingTask {
    fn principal(&self) -> Option<&str> {
        self.request.principal.as_deref()
    }
}

impl OfPrincipal for UnaskableTask {
    fn principal(&self) -> Option<&str> {
        self.request.principal.as_deref()
    }
}

impl<T: OfPrincipal> Noted<T> {
    /// Notes `task` as the newest; its principal's oldest goes past the cap.
    fn insert(&mut self, key: String, task: T) {
        self.last += 1;
        let principal = task.principal().map(str::to_owned);
        self.tasks.insert(key, (self.last, task));
        let theirs = self
            .tasks
            .iter()
            .filter(|(_, (_, task))| task.principal() == principal.as_deref());
        if theirs.clone().count() > MAX_TASKS_PER_PRINCIPAL
            && let Some(oldest) = theirs.min_by_key(|(_, (noted, _))| *noted)
        {
            let oldest = oldest.0.clone();
            tracing::info!(task = %oldest, "too many tasks of one principal wait for input here: the oldest is forgotten (the same call made again asks again)");
            self.tasks.remove(&oldest);
        }
    }

    fn get(&self, key: &str) -> Option<&T> {
        self.tasks.get(key).map(|(_, task)| task)
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut T> {
        self.tasks.get_mut(key).map(|(_, task)| task)
    }

    fn remove(&mut self, key: &str) -> Option<T> {
        self.tasks.remove(key).map(|(_, task)| task)
    }
}

/// The tasks of one server that wait for their client's answers, by task id
/// (invocation key).
#[derive(Debug, Default)]
pub(crate) struct TaskInputs {
    awaiting: Mutex<Noted<AwaitingTask>>,
    unaskable: Mutex<Noted<UnaskableTask>>,
}

impl TaskInputs {
    fn locked(&self) -> MutexGuard<'_, Noted<AwaitingTask>> {
        self.awaiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that `task` stopped at its questions. The answers already given to the
    /// same question are kept (a run that asked it again); another question's are
    /// dropped.
    pub(crate) fn await_input(&self, key: &str, mut task: AwaitingTask) {
        let mut awaiting = self.locked();
        if let Some(before) = awaiting.remove(key)
            && before.seq == task.seq
            && before.questions == task.questions
        {
            task.answers = before.answers;
            task.answers_bytes = before.answers_bytes;
        }
        awaiting.insert(key.to_owned(), task);
    }

    /// Puts back the answers of a resumed run of `key` that did not use them (the
    /// server stopping, or the call run elsewhere): the task waits here again, its
    /// answers kept, unless a later run of it already waits for another question.
    /// They were within the bounds when given, and are not measured again: for as
    /// long as the principal's other tasks took answers meanwhile, its total may
    /// pass [`MAX_PRINCIPAL_ANSWERS_BYTES`] by what these take (at most one ask's).
    pub(crate) fn restore(&self, key: &str, task: AwaitingTask) {
        let mut awaiting = self.locked();
        if awaiting.get(key).is_none() {
            awaiting.insert(key.to_owned(), task);
        }
    }

    /// The task `key`, if it waits for answers here.
    pub(crate) fn awaiting(&self, key: &str) -> Option<AwaitingTask> {
        self.locked().get(key).cloned()
    }

    /// Adds `answers` (by question name; a name not asked is ignored) to the task
    /// `key`, as one step: the one request that completes them takes the task.
    /// Answers that would make the task's more than [`ask::MAX_ANSWERS_BYTES`] of
    /// JSON, or its principal's here more than [`MAX_PRINCIPAL_ANSWERS_BYTES`], are
    /// refused, and nothing of them is kept.
    pub(crate) fn answer(&self, key: &str, answers: Map<String, Value>) -> Answering {
        let mut awaiting = self.locked();
        let Some(task) = awaiting.get(key) else {
            return Answering::NotAwaiting;
        };
        let mut merged = task.answers.clone();
        for (name, answer) in answers {
            if task.questions.iter().any(|q| q.name == name) {
                merged.insert(name, answer);
            }
        }
        let bytes = json_bytes(&merged);
        if bytes > ask::MAX_ANSWERS_BYTES {
            return Answering::TooLarge(format!(
                "the answers to task {key} would be {bytes} bytes of JSON, more than the {} an ask takes",
                ask::MAX_ANSWERS_BYTES
            ));
        }
        let principal = task.principal().map(str::to_owned);
        let others: usize = awaiting
            .tasks
            .iter()
            .filter(|(other, (_, t))| *other != key && t.principal() == principal.as_deref())
            .map(|(_, (_, t))| t.answers_bytes)
            .sum();
        if others.saturating_add(bytes) > MAX_PRINCIPAL_ANSWERS_BYTES {
            return Answering::TooLarge(format!(
                "the answers kept for your tasks waiting for input here would be {} bytes of JSON, more than the {MAX_PRINCIPAL_ANSWERS_BYTES} kept for one client; answer the tasks you sent answers to first, or cancel some",
                others.saturating_add(bytes)
            ));
        }
        let Some(task) = awaiting.get_mut(key) else {
            return Answering::NotAwaiting;
        };
        task.answers = merged;
        task.answers_bytes = bytes;
        let pending: Vec<String> = task.pending().into_iter().map(|q| q.name).collect();
        if !pending.is_empty() {
            return Answering::Pending(pending);
        }
        awaiting
            .remove(key)
            .map_or(Answering::NotAwaiting, Answering::Complete)
    }

    /// The task `key` waits for no answer here any more (cancelled, completed, run
    /// again), nor stands stopped for want of one.
    pub(crate) fn stop(&self, key: &str) {
        self.locked().remove(key);
        self.unaskable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// Notes that the task `key` stopped at a question its client cannot be asked.
    pub(crate) fn cannot_ask(&self, key: &str, task: UnaskableTask) {
        let mut unaskable = self
            .unaskable
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        unaskable.insert(key.to_owned(), task);
    }

    /// The task `key`, if it stopped here at a question its client cannot be asked.
    pub(crate) fn unaskable(&self, key: &str) -> Option<UnaskableTask> {
        let unaskable = self
            .unaskable
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        unaskable.get(key).cloned()
    }
}

/// Where a task's call stands with its client, for the questions its tool asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Not a task yet: a question is the call's own (asked through its result).
    Call,
    /// Not a task, and never to be one: its tool asked, and the call's answer is
    /// that question (or the refusal of the answers it brought).
    Asked,
    /// A task: a question parks it until `tasks/update` answers it.
    Task,
}

/// The phase of one call, shared by its run (which asks) and the request that
/// waits for it (which makes it a task): whichever comes first decides.
#[derive(Debug)]
pub(crate) struct SharedPhase(Mutex<Phase>);

impl SharedPhase {
    /// A call not yet a task.
    pub(crate) fn call() -> Arc<Self> {
        Arc::new(Self(Mutex::new(Phase::Call)))
    }

    fn locked(&self) -> MutexGuard<'_, Phase> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the call a task, unless its tool asked first: the phase it is in now.
    pub(crate) fn become_task(&self) -> Phase {
        let mut phase = self.locked();
        if *phase == Phase::Call {
            *phase = Phase::Task;
        }
        *phase
    }

    /// The phase now.
    pub(crate) fn now(&self) -> Phase {
        *self.locked()
    }
}

/// Asks the client of a task's call: before the call is a task, as its request
/// says (`mcp::mrtr`); once it is, with the answers of `tasks/update`, or later.
pub(crate) struct TaskAsker {
    inputs: Arc<TaskInputs>,
    /// The task's id (its call's invocation key).
    key: String,
    request: CallRequest,
    created_at: i64,
    phase: Arc<SharedPhase>,
    /// The asker of the call's own request (`mcp::mrtr`), if it has one.
    call: Option<Rc<dyn Asker>>,
    /// The answers that resume this run (`tasks/update`).
    given: Option<AwaitingTask>,
    /// Whether this run was handed `given`.
    used: Cell<bool>,
}

impl TaskAsker {
    /// The asker of the first run of `request` (task `key`), created at
    /// `created_at`, whose request's own asker is `call` (a task asks its client as
    /// its request said it can be asked).
    pub(crate) fn first(
        inputs: &Arc<TaskInputs>,
        key: &str,
        request: &CallRequest,
        created_at: i64,
        phase: Arc<SharedPhase>,
        call: Option<Rc<dyn Asker>>,
    ) -> Self {
        Self {
            inputs: Arc::clone(inputs),
            key: key.to_owned(),
            request: request.clone(),
            created_at,
            phase,
            call,
            given: None,
            used: Cell::new(false),
        }
    }

    /// The asker of the run of task `key` resumed with the answers of `task`.
    pub(crate) fn resumed(inputs: &Arc<TaskInputs>, key: &str, task: AwaitingTask) -> Self {
        let phase = SharedPhase::call();
        phase.become_task();
        Self {
            inputs: Arc::clone(inputs),
            key: key.to_owned(),
            request: task.request.clone(),
            created_at: task.created_at,
            phase,
            call: None,
            given: Some(task),
            used: Cell::new(false),
        }
    }

    /// The answers this resumed run was given and did not use (it stopped before
    /// their question).
    pub(crate) fn unused(&self) -> Option<AwaitingTask> {
        self.given.clone().filter(|_| !self.used.get())
    }

    fn ask_as_task(&self, at: &AskContext<'_>, questions: &[Question]) -> Asked {
        if let Some(given) = &self.given
            && given.seq == at.seq
            && given.questions == questions
            && let Some(answers) = given.all_answers()
        {
            self.used.set(true);
            return Asked::Answered(answers);
        }
        let task = AwaitingTask {
            request: self.request.clone(),
            seq: at.seq,
            questions: questions.to_vec(),
            answers: Map::new(),
            answers_bytes: 0,
            created_at: self.created_at,
        };
        self.inputs.await_input(at.key.as_str(), task);
        tracing::info!(task = %at.key, seq = at.seq, "task waits for its client's input (tasks/update)");
        Asked::Later
    }
}

impl Asker for TaskAsker {
    fn can_ask(&self) -> Result<(), String> {
        let can = match (&self.call, &self.given) {
            // Its client answered through tasks/update.
            (_, Some(_)) => Ok(()),
            (Some(call), None) => call.can_ask(),
            (None, None) => Err(ask::NO_ASKER.into()),
        };
        if let Err(why) = &can {
            // The run stops here: a task says so to tasks/get; a call that is not
            // one yet is answered so, and does not become a task.
            let mut phase = self.phase.locked();
            match *phase {
                Phase::Task => {
                    drop(phase);
                    let task = UnaskableTask {
                        request: self.request.clone(),
                        why: why.clone(),
                        created_at: self.created_at,
                    };
                    self.inputs.cannot_ask(&self.key, task);
                }
                Phase::Call => *phase = Phase::Asked,
                Phase::Asked => {}
            }
        }
        can
    }

    fn ask(&self, at: &AskContext<'_>, questions: &[Question]) -> Asked {
        let mut phase = self.phase.locked();
        if *phase == Phase::Task {
            drop(phase);
            return self.ask_as_task(at, questions);
        }
        let asked = match &self.call {
            Some(call) => call.ask(at, questions),
            None => Asked::Unavailable(ask::NO_ASKER.into()),
        };
        // The call's answer is the question now: it will not become a task.
        if !matches!(asked, Asked::Answered(_)) {
            *phase = Phase::Asked;
        }
        asked
    }

    /// An upstream's request (sampling, roots): before the call is a task, the
    /// call's own, as its request says (`mcp::mrtr`: answered through its result,
    /// and then it does not become a task); once it is a task, not passed on (yet).
    fn forward(&self, at: Option<&AskContext<'_>>, method: &str, params: &Value) -> Forwarded {
        let mut phase = self.phase.locked();
        if *phase == Phase::Task {
            return Forwarded::Unavailable(format!(
                "justonce does not pass {method} to the client of a task yet (the call became a task before its upstream asked)"
            ));
        }
        let forwarded = match &self.call {
            Some(call) => call.forward(at, method, params),
            None => {
                Forwarded::Unavailable(format!("{}: {method} cannot be passed on", ask::NO_ASKER))
            }
        };
        // The call's answer is that request now: it will not become a task.
        if matches!(forwarded, Forwarded::Later(_)) {
            *phase = Phase::Asked;
        }
        forwarded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ask::UpstreamRequest;
    use serde_json::json;

    fn answers(names: &[&str]) -> Map<String, Value> {
        names
            .iter()
            .map(|n| {
                (
                    (*n).to_owned(),
                    json!({"action": "accept", "content": {"n": n}}),
                )
            })
            .collect()
    }

    fn task(seq: u32, names: &[&str]) -> AwaitingTask {
        AwaitingTask {
            request: CallRequest::new("multi", "{}"),
            seq,
            questions: names.iter().map(|n| Question::yes_or_no(n)).collect(),
            answers: Map::new(),
            answers_bytes: 0,
            created_at: 1,
        }
    }

    #[test]
    fn a_task_waits_until_every_question_is_answered_and_one_update_takes_it() {
        let inputs = TaskInputs::default();
        assert_eq!(inputs.answer("t", answers(&["a"])), Answering::NotAwaiting);
        inputs.await_input("t", task(2, &["a", "b"]));
        assert_eq!(
            inputs.answer("t", answers(&["a", "unknown"])),
            Answering::Pending(vec!["b".into()]),
            "a name not asked is ignored"
        );
        let waiting = inputs.awaiting("t").unwrap();
        assert_eq!(waiting.pending(), vec![Question::yes_or_no("b")]);
        assert_eq!(waiting.all_answers(), None);
        // Asked again at the same question (a run resumed elsewhere): kept.
        inputs.await_input("t", task(2, &["a", "b"]));
        let Answering::Complete(done) = inputs.answer("t", answers(&["b"])) else {
            panic!("both answered")
        };
        assert_eq!(
            done.all_answers().unwrap(),
            vec![answers(&["a"])["a"].clone(), answers(&["b"])["b"].clone()]
        );
        assert_eq!(inputs.awaiting("t"), None);
        assert_eq!(
            inputs.answer("t", answers(&["b"])),
            Answering::NotAwaiting,
            "taken once"
        );
    }

    /// An answer of about `bytes` bytes of JSON.
    fn sized(bytes: usize) -> Map<String, Value> {
        let answer = json!({"action": "accept", "content": {"note": "x".repeat(bytes)}});
        [("a".to_owned(), answer)].into_iter().collect()
    }

    fn of(principal: &str) -> AwaitingTask {
        let mut task = task(2, &["a", "b"]);
        task.request.principal = Some(principal.into());
        task
    }

    #[test]
    fn answers_past_a_tasks_or_a_principals_bound_are_refused_and_nothing_is_kept() {
        let inputs = TaskInputs::default();
        inputs.await_input("t", of("alice"));
        let refused = inputs.answer("t", sized(ask::MAX_ANSWERS_BYTES));
        let Answering::TooLarge(why) = refused else {
            panic!("{refused:?}")
        };
        assert!(why.contains("more than the 1048576 an ask takes"), "{why}");
        let kept = inputs.awaiting("t").unwrap();
        assert!(kept.answers.is_empty() && kept.answers_bytes == 0);

        // Within a task's bound, each task; past the principal's, refused.
        let per_task = ask::MAX_ANSWERS_BYTES - 100;
        let fits = MAX_PRINCIPAL_ANSWERS_BYTES / per_task;
        for n in 0..fits {
            inputs.await_input(&format!("t{n}"), of("alice"));
            assert!(
                matches!(
                    inputs.answer(&format!("t{n}"), sized(per_task)),
                    Answering::Pending(_)
                ),
                "task {n}"
            );
        }
        assert!(
            matches!(inputs.answer("t", sized(per_task)), Answering::TooLarge(_)),
            "alice's tasks here keep {fits} answers of {per_task} bytes already"
        );
        assert!(inputs.awaiting("t").unwrap().answers.is_empty());

        // The opposite: another principal's task takes the same answer.
        inputs.await_input("u", of("bob"));
        assert!(matches!(
            inputs.answer("u", sized(per_task)),
            Answering::Pending(_)
        ));
        // And alice's space comes back once a task of hers stops waiting here.
        inputs.stop("t0");
        assert!(matches!(
            inputs.answer("t", sized(per_task)),
            Answering::Pending(_)
        ));
    }

    #[test]
    fn another_question_starts_with_no_answers_and_a_stop_ends_the_wait() {
        let inputs = TaskInputs::default();
        inputs.await_input("t", task(2, &["a", "b"]));
        inputs.answer("t", answers(&["a"]));
        inputs.await_input("t", task(3, &["a", "b"]));
        assert!(inputs.awaiting("t").unwrap().answers.is_empty());
        inputs.stop("t");
        assert_eq!(inputs.awaiting("t"), None);
    }

    /// The asker of a call's own request: always answers `asked`.
    struct Request(Asked);

    impl Asker for Request {
        fn can_ask(&self) -> Result<(), String> {
            Err("the request's own".into())
        }
        fn ask(&self, _: &AskContext<'_>, _: &[Question]) -> Asked {
            self.0.clone()
        }
        fn forward(&self, _: Option<&AskContext<'_>>, method: &str, params: &Value) -> Forwarded {
            match self.0 {
                Asked::Later => Forwarded::Later(UpstreamRequest::new(method, params)),
                _ => Forwarded::Answered(json!({ "roots": [] })),
            }
        }
    }

    /// Before the call is a task, an upstream's request is the call's, answered
    /// through its request (and asked for later, the call does not become a task);
    /// once it is a task, it is not passed on, saying so.
    #[test]
    fn before_it_is_a_task_an_upstreams_request_is_the_calls_and_after_it_refused() {
        let inputs = Arc::new(TaskInputs::default());
        let request = CallRequest::new("roots", "{}");
        let with = |asked: Asked| {
            let phase = SharedPhase::call();
            let call: Rc<dyn Asker> = Rc::new(Request(asked));
            let asker = TaskAsker::first(&inputs, "t", &request, 1, Arc::clone(&phase), Some(call));
            (asker, phase)
        };
        let (later, phase) = with(Asked::Later);
        assert_eq!(
            later.forward(None, "roots/list", &Value::Null),
            Forwarded::Later(UpstreamRequest::new("roots/list", &Value::Null))
        );
        assert_eq!(phase.become_task(), Phase::Asked);
        let (answered, phase) = with(Asked::Answered(Vec::new()));
        assert_eq!(
            answered.forward(None, "roots/list", &Value::Null),
            Forwarded::Answered(json!({ "roots": [] }))
        );
        assert_eq!(phase.become_task(), Phase::Task);
        let Forwarded::Unavailable(why) = answered.forward(None, "roots/list", &Value::Null) else {
            panic!("a task's client is not asked")
        };
        assert!(why.contains("task"), "{why}");
        assert_eq!(inputs.awaiting("t"), None);
    }

    fn asking(asker: &TaskAsker, seq: u32, names: &[&str]) -> Asked {
        let key = crate::keys::InvocationKey::parse("task-1").unwrap();
        let effect = crate::keys::effect_key(&key, 1, seq);
        let at = AskContext {
            tool: "multi",
            key: &key,
            seq,
            effect_key: &effect,
            principal: Some("alice"),
            keys: &crate::ask::test_keys(),
        };
        let questions: Vec<Question> = names.iter().map(|n| Question::yes_or_no(n)).collect();
        asker.ask(&at, &questions)
    }

    #[test]
    fn before_it_is_a_task_a_question_is_the_calls_and_after_it_the_tasks() {
        let inputs = Arc::new(TaskInputs::default());
        let request = CallRequest::new("multi", "{}");
        // Not a task yet: the request's asker answers, and asking later keeps the
        // call from becoming a task.
        let phase = SharedPhase::call();
        let later: Rc<dyn Asker> = Rc::new(Request(Asked::Later));
        let call = TaskAsker::first(
            &inputs,
            "task-1",
            &request,
            1,
            Arc::clone(&phase),
            Some(later),
        );
        assert_eq!(call.can_ask(), Err("the request's own".into()));
        assert_eq!(asking(&call, 0, &["a"]), Asked::Later);
        assert_eq!(phase.become_task(), Phase::Asked);
        assert_eq!(inputs.awaiting("task-1"), None, "not a task's question");
        // Answered by its request, it may still become a task.
        let phase = SharedPhase::call();
        let answered: Rc<dyn Asker> = Rc::new(Request(Asked::Answered(vec![json!(1)])));
        let call = TaskAsker::first(
            &inputs,
            "task-1",
            &request,
            1,
            Arc::clone(&phase),
            Some(answered),
        );
        assert_eq!(asking(&call, 0, &["a"]), Asked::Answered(vec![json!(1)]));
        assert_eq!(phase.become_task(), Phase::Task);

        // A task: its question waits for tasks/update, whatever its request brought.
        assert_eq!(asking(&call, 1, &["a", "b"]), Asked::Later);
        let waiting = inputs.awaiting("task-1").unwrap();
        assert_eq!(
            (waiting.seq, &waiting.request, waiting.created_at),
            (1, &request, 1)
        );
        assert_eq!(
            waiting.pending(),
            vec![Question::yes_or_no("a"), Question::yes_or_no("b")]
        );

        // Resumed with every answer: answered in the order asked, not asked again;
        // another question of the run waits again.
        inputs.answer("task-1", answers(&["b"]));
        let Answering::Complete(done) = inputs.answer("task-1", answers(&["a"])) else {
            panic!("both answered")
        };
        let resumed = TaskAsker::resumed(&inputs, "task-1", done);
        assert_eq!(resumed.can_ask(), Ok(()));
        assert_eq!(
            asking(&resumed, 1, &["a", "b"]),
            Asked::Answered(vec![
                answers(&["a"])["a"].clone(),
                answers(&["b"])["b"].clone()
            ])
        );
        assert_eq!(inputs.awaiting("task-1"), None);
        assert_eq!(asking(&resumed, 2, &["c"]), Asked::Later);
        assert_eq!(inputs.awaiting("task-1").unwrap().seq, 2);
    }

    #[test]
    fn a_task_whose_client_cannot_be_asked_stops_there_and_says_so_until_run_again() {
        let inputs = Arc::new(TaskInputs::default());
        let request = CallRequest::new("multi", "{}");
        let unable: Rc<dyn Asker> = Rc::new(Request(Asked::Later));
        // A task: stopped at its question, for tasks/get to say why.
        let phase = SharedPhase::call();
        assert_eq!(phase.become_task(), Phase::Task);
        let task = TaskAsker::first(
            &inputs,
            "task-1",
            &request,
            7,
            phase,
            Some(Rc::clone(&unable)),
        );
        assert_eq!(task.can_ask(), Err("the request's own".into()));
        assert_eq!(
            inputs.unaskable("task-1"),
            Some(UnaskableTask {
                request: request.clone(),
                why: "the request's own".into(),
                created_at: 7,
            })
        );
        assert_eq!(inputs.awaiting("task-1"), None, "nothing to answer here");
        // Run again (or cancelled): it no longer stands stopped.
        inputs.stop("task-1");
        assert_eq!(inputs.unaskable("task-1"), None);

        // Not a task yet: the call's answer is the refusal; it never becomes one,
        // and no task is noted.
        let phase = SharedPhase::call();
        let call = TaskAsker::first(
            &inputs,
            "task-2",
            &request,
            7,
            Arc::clone(&phase),
            Some(unable),
        );
        assert!(call.can_ask().is_err());
        assert_eq!(phase.become_task(), Phase::Asked);
        assert_eq!(inputs.unaskable("task-2"), None);
        // One that can be asked notes nothing.
        let phase = SharedPhase::call();
        phase.become_task();
        let able: Rc<dyn Asker> = Rc::new(Able);
        let task = TaskAsker::first(&inputs, "task-3", &request, 7, phase, Some(able));
        assert_eq!(task.can_ask(), Ok(()));
        assert_eq!(inputs.unaskable("task-3"), None);
    }

    /// The asker of a request whose client can be asked.
    struct Able;

    impl Asker for Able {
        fn can_ask(&self) -> Result<(), String> {
            Ok(())
        }
        fn ask(&self, _: &AskContext<'_>, _: &[Question]) -> Asked {
            Asked::Later
        }
    }

    #[test]
    fn answers_a_resumed_run_did_not_use_are_put_back_and_resume_it_again() {
        let inputs = Arc::new(TaskInputs::default());
        inputs.await_input("t", task(2, &["a"]));
        let Answering::Complete(done) = inputs.answer("t", answers(&["a"])) else {
            panic!("answered")
        };
        // The run stopped before its question (the call ran elsewhere, the server
        // stopped): the answers are not used, and put back they wait here again.
        let resumed = TaskAsker::resumed(&inputs, "t", done.clone());
        assert_eq!(resumed.unused(), Some(done.clone()));
        inputs.restore("t", done.clone());
        assert_eq!(inputs.awaiting("t"), Some(done.clone()));
        assert_eq!(
            inputs.answer("t", Map::new()),
            Answering::Complete(done.clone()),
            "the next tasks/update resumes it with them"
        );
        // Used, they are not: and a run waiting for another question is kept.
        let resumed = TaskAsker::resumed(&inputs, "task-1", done.clone());
        assert!(matches!(asking(&resumed, 2, &["a"]), Asked::Answered(_)));
        assert_eq!(resumed.unused(), None);
        inputs.await_input("t", task(3, &["b"]));
        inputs.restore("t", done);
        assert_eq!(inputs.awaiting("t").unwrap().seq, 3);
    }

    #[test]
    fn past_the_cap_a_principals_oldest_waiting_task_is_forgotten_and_no_one_elses() {
        let inputs = TaskInputs::default();
        let of = |principal: &str, seq: u32| {
            let mut waiting = task(seq, &["a"]);
            waiting.request.principal = Some(principal.into());
            waiting
        };
        inputs.await_input("bob-0", of("bob", 0));
        for n in 0..MAX_TASKS_PER_PRINCIPAL {
            inputs.await_input(&format!("alice-{n}"), of("alice", 0));
        }
        // Asked again, the first is the newest.
        inputs.await_input("alice-0", of("alice", 0));
        assert!(inputs.awaiting("alice-1").is_some(), "at the cap: all kept");
        inputs.await_input("alice-new", of("alice", 0));
        assert_eq!(inputs.awaiting("alice-1"), None, "the oldest is forgotten");
        assert_eq!(
            inputs.answer("alice-1", answers(&["a"])),
            Answering::NotAwaiting
        );
        for key in ["alice-0", "alice-2", "alice-new", "bob-0"] {
            assert!(inputs.awaiting(key).is_some(), "{key} kept");
        }
        // Stopped at a question they could not be asked: the same cap.
        let unaskable = |principal: &str| UnaskableTask {
            request: of(principal, 0).request,
            why: "no".into(),
            created_at: 1,
        };
        for n in 0..=MAX_TASKS_PER_PRINCIPAL {
            inputs.cannot_ask(&format!("alice-{n}"), unaskable("alice"));
        }
        assert_eq!(inputs.unaskable("alice-0"), None);
        assert!(inputs.unaskable("alice-1").is_some());
    }

    #[test]
    fn whichever_comes_first_of_the_question_and_the_bound_decides() {
        let phase = SharedPhase::call();
        assert_eq!(phase.become_task(), Phase::Task);
        assert_eq!(phase.now(), Phase::Task);
        let asked = SharedPhase::call();
        *asked.locked() = Phase::Asked;
        assert_eq!(
            asked.become_task(),
            Phase::Asked,
            "asked first: never a task"
        );
    }
}
