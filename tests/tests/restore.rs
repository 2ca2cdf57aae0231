//! Backup and restore of a SQLite journal, as docs/operators.md says to make them
//! (`VACUUM INTO` while serving): `serve` refuses a journal restored behind calls it
//! saw, naming the problem, until `--accept-restored-journal` says the operator
//! knows; a journal that was not restored is served as before.

use std::path::Path;
use std::process::{Output, Stdio};

use crate::support::cli::justonce_command;

/// A receipt for order `order` (an example tool), in conversation "c".
fn call(db: &Path, order: u64) {
    let out = justonce_command(Some(db))
        .args(["run", "send_receipt", "--conversation", "c", "--args"])
        .arg(format!(
            r#"{{"orders":[{{"order_id":{order},"email":"ada@example.com","amount_cents":1299}}]}}"#
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// `serve` on stdio with no client (its input closed at once): it checks the
/// journal, then ends.
fn serve(db: &Path, args: &[&str]) -> Output {
    justonce_command(Some(db))
        .args(["serve", "--deliver-every-ms", "0"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The backup docs/operators.md shows: `VACUUM INTO`, a consistent copy while hosts
/// write.
fn backup(db: &Path, to: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute("VACUUM INTO ?1", [to.to_str().unwrap()])
        .unwrap();
}

/// Puts the copy back in place of the journal (hosts stopped): its WAL and shared
/// memory files go too, or SQLite would replay the newer WAL over the copy.
fn restore(copy: &Path, db: &Path) {
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    std::fs::copy(copy, db).unwrap();
}

#[test]
fn serve_refuses_a_journal_restored_behind_calls_it_saw_until_told_it_is_known() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let copy = dir.path().join("backup.db");
    call(&db, 1);
    backup(&db, &copy);
    call(&db, 2);
    let served = serve(&db, &[]);
    assert!(served.status.success(), "{served:?}");
    assert!(
        dir.path().join("journal-marks.json").is_file(),
        "the host remembers the journal beside its state"
    );
    let again = serve(&db, &[]);
    assert!(again.status.success(), "the same journal again: {again:?}");

    restore(&copy, &db);
    let refused = serve(&db, &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    for named in [
        "is behind what this host saw of it",
        "restored from an older backup",
        "--accept-restored-journal",
        "journal-marks.json",
    ] {
        assert!(stderr.contains(named), "{named:?} in: {stderr}");
    }

    let accepted = serve(&db, &["--accept-restored-journal"]);
    let stderr = String::from_utf8_lossy(&accepted.stderr);
    assert!(accepted.status.success(), "{stderr}");
    assert!(
        stderr.contains("--accept-restored-journal says"),
        "{stderr}"
    );
    let after = serve(&db, &[]);
    assert!(
        after.status.success(),
        "remembered as it is now: {}",
        String::from_utf8_lossy(&after.stderr)
    );
}
