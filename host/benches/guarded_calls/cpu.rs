//! CPU seconds spent by processes (and by the calling thread), read from `/proc`
//! (Linux): what figures (6), (9) and (10) divide by their calls to say where a call's
//! CPU goes, and so what this machine's cores allow.

use std::path::Path;

/// User plus system CPU seconds of process `pid`; with `reaped`, also those of its
/// children it has waited for (a server's exited backends). `None` when the process
/// is gone or `/proc` is not there.
pub fn of(pid: u32, reaped: bool) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = after_name(&stat);
    let ticks: u64 = (11..if reaped { 15 } else { 13 })
        .map(|i| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum();
    Some(ticks as f64 / TICKS_PER_SECOND)
}

/// The CPU time the threads of process `pid` have run so far, to the nanosecond
/// (`/proc/<pid>/task/*/schedstat`): fine enough for a few hundred calls of a few
/// µs, which `of`'s clock ticks (10 ms) are not. Threads that exited are not
/// counted. `None` when the process is gone.
pub fn of_threads(pid: u32) -> Option<std::time::Duration> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    Some(
        tasks
            .filter_map(|task| schedstat(&task.ok()?.path().join("schedstat")))
            .sum(),
    )
}

/// This process's user plus system CPU seconds (every thread).
pub fn own() -> f64 {
    of(std::process::id(), false).unwrap_or(0.0)
}

/// The CPU time the calling thread has run (`/proc/thread-self/schedstat`, in ns);
/// `None` where it cannot be read.
pub fn this_thread() -> Option<std::time::Duration> {
    schedstat(Path::new("/proc/thread-self/schedstat"))
}

/// The time on CPU a thread's `schedstat` file gives (its first field, in ns).
fn schedstat(path: &Path) -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string(path).ok()?;
    let nanos = stat.split_whitespace().next()?.parse().ok()?;
    Some(std::time::Duration::from_nanos(nanos))
}

/// The CPU seconds of a server `leader` (PostgreSQL's postmaster) and all its
/// processes: its own, its reaped children's, and its live children's. The
/// difference of two readings is what the server spent between them, backends that
/// exited meanwhile included.
pub fn of_server(leader: u32) -> f64 {
    let mut total = of(leader, true).unwrap_or(0.0);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return total;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if parent(pid) == Some(leader) {
            total += of(pid, false).unwrap_or(0.0);
        }
    }
    total
}

/// The whole machine's busy CPU seconds so far, every core together (user, nice,
/// system, irq and softirq of `/proc/stat`'s `cpu` line; idle, iowait and steal are
/// not busy). The difference of two readings counts every process that ran between
/// them, including a server's backends that exited meanwhile, which per-process
/// readings miss while they are zombies.
pub fn machine() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal …
    let busy: u64 = [0, 1, 2, 5, 6]
        .iter()
        .map(|&i| fields.get(i).copied().unwrap_or(0))
        .sum();
    Some(busy as f64 / TICKS_PER_SECOND)
}

/// The postmaster's pid of the PostgreSQL server whose data directory is `data`
/// (the first line of its `postmaster.pid`).
pub fn postmaster(data: &Path) -> Option<u32> {
    std::fs::read_to_string(data.join("postmaster.pid"))
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    after_name(&stat).get(1)?.parse().ok()
}

/// The fields of a `/proc/<pid>/stat` line after the command's name (which may hold
/// spaces and parentheses): index 0 is the state, 1 the parent, 11 and 12 user and
/// system time, 13 and 14 those of reaped children, in clock ticks.
fn after_name(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect())
}

/// `USER_HZ`, the unit of `/proc`'s times: 100 on every Linux architecture this runs
/// on (reading it with `sysconf` would take `unsafe`, which the workspace denies).
const TICKS_PER_SECOND: f64 = 100.0;
