//! The fast path: the compiled-component cache, the fewest commits and fsyncs the
//! contract allows, the call outside the guard, and the pooled sandbox's caps.
//! (Its timings are in `host/benches/guarded_calls.rs`; nothing here measures time.)

use std::path::Path;
use std::sync::Arc;

use justonce::{__private::CacheStats, Limits, Runtime};
use justonce::{
    CallRequest, EffectRequest, Error, Host, Outcome, Provider, ProviderClass, ProviderError,
};
use justonce::{Durability, JournalStats};
use serde_json::{Value, json};

use crate::support::{RUNTIME, receipt_args, success};

fn echo_bytes() -> Vec<u8> {
    std::fs::read(justonce_tests::guests::ECHO_COMPONENT).expect("echo component")
}

/// A runtime that caches compiled components in `dir` and has loaded echo.
fn runtime_with_cache(dir: &Path) -> Runtime {
    let mut runtime = Runtime::new(Limits::default()).expect("runtime");
    runtime.set_compile_cache(dir);
    runtime
        .load(Path::new("echo.wasm"), &echo_bytes())
        .expect("echo loads");
    runtime
}

fn stats(runtime: &Runtime) -> CacheStats {
    runtime.compile_cache().expect("a cache was set").stats()
}

fn echo_through(runtime: &Runtime) -> Value {
    let text = runtime
        .call_unguarded("echo", r#"{"message":"hi"}"#)
        .expect("echo runs");
    serde_json::from_str(&text).expect("echo returns JSON")
}

#[test]
fn a_compiled_component_is_cached_reused_and_rebuilt_when_its_entry_is_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");

    let first = runtime_with_cache(&cache);
    assert_eq!(
        stats(&first),
        CacheStats {
            misses: 1,
            ..Default::default()
        }
    );
    let entry = first.compile_cache().unwrap().entry_path(&echo_bytes());
    assert!(
        entry.is_file(),
        "the compiled form was written to {}",
        entry.display()
    );

    let warm = runtime_with_cache(&cache);
    assert_eq!(
        stats(&warm),
        CacheStats {
            hits: 1,
            ..Default::default()
        }
    );
    assert_eq!(
        echo_through(&warm),
        json!({"echo": "hi"}),
        "the cached component runs"
    );

    // One flipped bit in the compiled code: used as is, it would run other code.
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&entry, &bytes).unwrap();
    let after_flip = runtime_with_cache(&cache);
    assert_eq!(
        stats(&after_flip),
        CacheStats {
            rebuilt: 1,
            ..Default::default()
        }
    );
    assert_eq!(echo_through(&after_flip), json!({"echo": "hi"}));

    // The rebuilt entry was written back whole: the next process uses it.
    let healed = runtime_with_cache(&cache);
    assert_eq!(
        stats(&healed),
        CacheStats {
            hits: 1,
            ..Default::default()
        }
    );

    // A torn write (the file cut short) is refused the same way.
    let len = std::fs::metadata(&entry).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&entry)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let after_tear = runtime_with_cache(&cache);
    assert_eq!(
        stats(&after_tear),
        CacheStats {
            rebuilt: 1,
            ..Default::default()
        }
    );
}

#[test]
fn an_unwritable_cache_never_fails_a_load() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the cache directory should be: nothing can be written under it.
    let blocked = dir.path().join("cache");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let runtime = runtime_with_cache(&blocked);
    assert_eq!(
        stats(&runtime),
        CacheStats {
            misses: 1,
            write_failures: 1,
            ..Default::default()
        }
    );
    assert_eq!(echo_through(&runtime), json!({"echo": "hi"}));
}

#[test]
fn every_host_with_a_database_shares_the_per_user_cache_unless_told_otherwise() {
    // `.cargo/config.toml` points the per-user cache of the tests under target/.
    let per_user = std::path::PathBuf::from(
        std::env::var_os("JUSTONCE_CACHE_DIR").expect("cargo sets JUSTONCE_CACHE_DIR"),
    );
    let dir = tempfile::tempdir().unwrap();
    let hosts: Vec<Host> = ["a.db", "b.db"]
        .iter()
        .map(|name| {
            Host::builder()
                .database(dir.path().join(name))
                .component(justonce_tests::guests::ECHO_COMPONENT)
                .build()
                .unwrap()
        })
        .collect();
    for host in &hosts {
        let cache = host.runtime().compile_cache().expect("the per-user cache");
        assert_eq!(cache.dir(), per_user, "one cache for every journal");
        assert!(cache.entry_path(&echo_bytes()).is_file());
    }
    // The second journal compiled nothing: the first one's entry served it.
    let second = hosts[1].runtime().compile_cache().unwrap().stats();
    assert_eq!(second.hits, 1, "{second:?}");
    // Nothing is created beside the databases.
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| {
            let journal = name.starts_with("a.db") || name.starts_with("b.db");
            !journal || name.ends_with(".compiled")
        })
        .collect();
    assert!(beside.is_empty(), "{beside:?}");

    let uncached = Host::builder()
        .database(dir.path().join("a.db"))
        .no_compile_cache()
        .component(justonce_tests::guests::ECHO_COMPONENT)
        .build()
        .unwrap();
    assert!(uncached.runtime().compile_cache().is_none());
}

#[test]
fn a_forged_cache_entry_is_a_miss_and_is_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let first = runtime_with_cache(&cache);
    let entry = first.compile_cache().unwrap().entry_path(&echo_bytes());
    // What the old format's digest allowed: an entry rewritten with a digest of its
    // own that matches, here the artifact of another cache with its own key.
    let other = dir.path().join("other");
    let elsewhere = runtime_with_cache(&other);
    let theirs = elsewhere.compile_cache().unwrap().entry_path(&echo_bytes());
    std::fs::copy(&theirs, &entry).unwrap();
    let after_forgery = runtime_with_cache(&cache);
    assert_eq!(
        stats(&after_forgery),
        CacheStats {
            rebuilt: 1,
            ..Default::default()
        },
        "a forged entry is not used"
    );
    assert_eq!(echo_through(&after_forgery), json!({"echo": "hi"}));
    let key = cache.join("key");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600,
        "the key is the user's alone"
    );
}

fn file_host(dir: &Path, durability: Durability) -> Host {
    Host::builder()
        .runtime(RUNTIME.clone())
        .database(dir.join("state.db"))
        .durability(durability)
        .provider("mail", Arc::new(CountingMail::default()))
        .build()
        .expect("host")
}

/// What one call cost the journal: commits and fsyncs.
fn cost(host: &Host, request: &CallRequest) -> (JournalStats, bool) {
    let before = host.journal_stats();
    let response = host.call(request).expect("the call succeeds");
    assert!(response.outcome.is_success(), "{:?}", response.outcome);
    let after = host.journal_stats();
    (
        JournalStats {
            commits: after.commits - before.commits,
            syncs: after.syncs - before.syncs,
        },
        response.replayed,
    )
}

#[test]
fn a_guarded_call_makes_the_fewest_commits_and_fsyncs_the_contract_allows() {
    let dir = tempfile::tempdir().unwrap();
    let host = file_host(dir.path(), Durability::Full);

    // No effect: the record is written once, complete with its outcome, and synced
    // before the answer (every answer is durable before it is returned).
    let echo = CallRequest::new("echo", r#"{"message":"hi"}"#).conversation("c1");
    assert_eq!(
        cost(&host, &echo),
        (
            JournalStats {
                commits: 1,
                syncs: 1
            },
            false
        )
    );

    // One keyed effect: the invocation with its lease and the pending effect with its
    // first attempt in one commit (synced before the provider runs), then the
    // provider's answer with the outcome in one more (synced: the effect happened
    // outside the journal). The mail provider is keyed, so its answer need not be a
    // commit of its own: lost in a crash, it is asked for again under the same key.
    let send =
        CallRequest::new("send_receipt", receipt_args(4417, "ada@example.com")).conversation("c1");
    assert_eq!(
        cost(&host, &send),
        (
            JournalStats {
                commits: 2,
                syncs: 2
            },
            false
        )
    );

    // A replay that reaches the journal counts itself (`replays`): one commit, after
    // the durable point. The durable point is one fsync: what the read found may be
    // another process's commit that is not synced yet, and an answer is durable
    // before it is given, whoever committed it. This process remembers the outcome
    // then, and a replay from its memory writes and syncs nothing.
    let counted = JournalStats {
        commits: 1,
        syncs: 1,
    };
    assert_eq!(cost(&host, &send), (counted, true));
    assert_eq!(
        cost(&host, &send),
        (
            JournalStats {
                commits: 0,
                syncs: 0
            },
            true
        )
    );
    let retry_with_id = send.clone().tool_call_id("call-1");
    let (bind_alias, replayed) = cost(&host, &retry_with_id);
    assert!(replayed);
    assert_eq!(
        bind_alias.commits, 1,
        "the first retry under a new tool-call id binds it (and counts, in one commit)"
    );
    // A retry with a tool-call id always reaches the journal (its binding is checked).
    assert_eq!(cost(&host, &retry_with_id), (counted, true));

    // Only transactional effects (kv): the invocation, the effect and the provider's
    // write commit together, then the outcome, whose one sync covers them all.
    let put = CallRequest::new(
        "kv_put",
        r#"{"entries":[{"key":"a","value":1},{"key":"b","value":2}]}"#,
    )
    .conversation("c1");
    assert_eq!(
        cost(&host, &put),
        (
            JournalStats {
                commits: 3,
                syncs: 1
            },
            false
        )
    );

    // Its first replay counts itself, and syncs what it read (see above).
    assert_eq!(cost(&host, &put), (counted, true));

    // With `Normal` durability nothing is ever synced on the call path; the claim,
    // and the effect's answer with the outcome, are each committed before the call
    // goes on.
    let normal_dir = tempfile::tempdir().unwrap();
    let normal = file_host(normal_dir.path(), Durability::Normal);
    assert_eq!(
        cost(&normal, &send),
        (
            JournalStats {
                commits: 2,
                syncs: 0
            },
            false
        )
    );
}

#[test]
fn with_normal_durability_every_answer_is_committed_before_it_is_returned() {
    let dir = tempfile::tempdir().unwrap();
    let mail = Arc::new(CountingMail::default());
    let build = || {
        Host::builder()
            .runtime(RUNTIME.clone())
            .database(dir.path().join("state.db"))
            .durability(Durability::Normal)
            .provider("mail", Arc::clone(&mail) as Arc<dyn Provider>)
            .build()
            .expect("host")
    };
    let host = build();
    let send =
        CallRequest::new("send_receipt", receipt_args(4417, "ada@example.com")).conversation("c1");
    let echo = CallRequest::new("echo", r#"{"message":"hi"}"#).conversation("c1");

    // A retry at once is replayed: one email.
    let first = host.call(&send).unwrap();
    let retry = host.call(&send).unwrap();
    assert!(!first.replayed && retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(
        mail.keys().len(),
        1,
        "the retry sent nothing: {:?}",
        mail.keys()
    );
    let echoed = host.call(&echo).unwrap();
    assert!(host.call(&echo).unwrap().replayed);

    // Another host on the same file sees both at once.
    let other = build();
    assert!(other.call(&send).unwrap().replayed);
    assert_eq!(other.call(&echo).unwrap().outcome, echoed.outcome);

    // A host dropped right after answering still saved what it answered.
    let third =
        CallRequest::new("send_receipt", receipt_args(4418, "bob@example.com")).conversation("c1");
    let answered = host.call(&third).unwrap();
    drop(host);
    let reopened = build();
    let replayed = reopened.call(&third).unwrap();
    assert!(replayed.replayed, "saved before the host went away");
    assert_eq!(replayed.outcome, answered.outcome);
    assert_eq!(mail.keys().len(), 2, "two receipts, two emails");
    let journal = reopened.journal(None, 10).unwrap();
    let effects: Vec<&str> = journal
        .iter()
        .flat_map(|e| e.effects.iter().map(|f| f.state.as_str()))
        .collect();
    assert_eq!(effects, ["done", "done"], "each email's answer is saved");
    drop((other, reopened));
}

/// A keyed mail downstream that answers at once and records every attempt's key.
#[derive(Default)]
struct CountingMail(std::sync::Mutex<Vec<String>>);

impl CountingMail {
    fn keys(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl Provider for CountingMail {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }
    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        self.0
            .lock()
            .unwrap()
            .push(request.key.as_str().to_string());
        Ok(json!({ "message_id": request.key.as_str() }))
    }
}

#[test]
fn concurrent_guarded_calls_on_a_full_journal_each_happen_once() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(file_host(dir.path(), Durability::Full));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let host = Arc::clone(&host);
            std::thread::spawn(move || {
                for i in 0..5u64 {
                    let args = receipt_args(t * 100 + i, "ada@example.com");
                    let request = CallRequest::new("send_receipt", args).conversation("c");
                    let first = host.call(&request).unwrap();
                    let again = host.call(&request).unwrap();
                    assert!(!first.replayed && again.replayed);
                    assert_eq!(first.outcome, again.outcome);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let journal = host.journal(None, 1000).unwrap();
    assert_eq!(
        journal.len(),
        20,
        "twenty distinct calls, each journaled once"
    );
    for entry in &journal {
        assert_eq!((entry.runs, entry.effects.len()), (1, 1), "{entry:?}");
    }
}

#[test]
fn a_call_outside_the_guard_runs_the_tool_and_refuses_its_effects() {
    assert_eq!(echo_through(&RUNTIME), json!({"echo": "hi"}));
    let refused = RUNTIME
        .call_unguarded("send_receipt", &receipt_args(1, "ada@example.com"))
        .expect_err("an effect cannot run without the guard");
    assert!(refused.to_string().contains("denied"), "{refused}");
    let unknown = RUNTIME
        .call_unguarded("nope", "{}")
        .expect_err("no such tool");
    assert!(matches!(unknown, Error::UnknownTool { .. }), "{unknown:?}");
}

#[test]
fn the_pooled_sandbox_still_stops_a_guest_at_the_memory_cap() {
    let host = crate::support::test_host(|b| b);
    let response = host
        .host
        .call(&CallRequest::new("memory_bomb", "{}"))
        .expect("a trap is an outcome");
    match response.outcome {
        Outcome::Trap { reason, .. } => assert_eq!(reason, "memory_limit"),
        other => panic!("expected a memory trap, got {other:?}"),
    }
}

#[test]
fn a_tool_given_more_memory_than_a_supplied_runtime_pools_is_a_config_error_naming_it() {
    let slot = RUNTIME.pool_memory_bytes();
    let big = Limits {
        memory_bytes: slot * 2,
        ..Limits::default()
    };
    let refused = Host::builder()
        .runtime(RUNTIME.clone())
        .tool_limits("memory_bomb", big.clone())
        .build()
        .expect_err("the pool cannot hold that memory");
    assert!(matches!(refused, Error::Config { .. }), "{refused:?}");
    assert!(
        refused.to_string().contains("tool `memory_bomb`"),
        "{refused}"
    );

    // The same limit within the slot is accepted.
    let fits = Limits {
        memory_bytes: slot,
        ..Limits::default()
    };
    Host::builder()
        .runtime(RUNTIME.clone())
        .tool_limits("memory_bomb", fits)
        .build()
        .expect("a tool at the slot size fits");
}

#[test]
fn a_host_that_builds_its_runtime_sizes_the_pool_for_the_largest_tool() {
    let big = Limits {
        memory_bytes: Limits::default().memory_bytes * 2,
        ..Limits::default()
    };
    let host = Host::builder()
        .no_compile_cache()
        .component(justonce_tests::guests::ECHO_COMPONENT)
        .tool_limits("echo", big.clone())
        .build()
        .expect("the host sizes its own pool");
    assert_eq!(host.runtime().pool_memory_bytes(), big.memory_bytes);
    assert_eq!(
        host.runtime().limits(),
        &Limits::default(),
        "the defaults are unchanged"
    );
}

#[test]
fn a_forget_in_another_process_reaches_a_long_lived_host_within_a_second_of_its_clock() {
    let dir = tempfile::tempdir().unwrap();
    let mail = Arc::new(CountingMail::default());
    let clock = justonce::ManualClock::default();
    let build = || {
        Host::builder()
            .runtime(RUNTIME.clone())
            .database(dir.path().join("state.db"))
            .clock(Arc::new(clock.clone()))
            .provider("mail", Arc::clone(&mail) as Arc<dyn Provider>)
            .build()
            .expect("host")
    };
    // `serve` stands for a long-lived host; the operator's `forget` is another
    // process on the same file (a host of its own, with a memory of its own).
    let serve = build();
    let send =
        CallRequest::new("send_receipt", receipt_args(4417, "ada@example.com")).conversation("c1");
    let kept =
        CallRequest::new("send_receipt", receipt_args(4418, "bob@example.com")).conversation("c1");
    let first = serve.call(&send).unwrap();
    serve.call(&kept).unwrap();
    assert!(serve.call(&send).unwrap().replayed, "remembered");
    assert_eq!(mail.keys().len(), 2);

    let operator = build();
    operator.forget(&first.key, "grace", false).unwrap();
    clock.advance(std::time::Duration::from_millis(1_000));

    // The retry after the forget runs again, under a new effect key.
    let again = serve.call(&send).unwrap();
    assert!(!again.replayed, "the forgotten call ran again");
    assert_eq!(again.key, first.key, "the same call");
    let keys = mail.keys();
    assert_eq!(keys.len(), 3, "one more email: {keys:?}");
    assert_ne!(keys[2], keys[0], "a new downstream key after forget");
    assert!(success(&again.outcome).is_object());
    // The opposite: the call nobody forgot is still replayed, sending nothing.
    assert!(serve.call(&kept).unwrap().replayed);
    assert!(serve.call(&send).unwrap().replayed);
    assert_eq!(mail.keys().len(), 3);
}
