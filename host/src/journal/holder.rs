//! Who holds a call: each host process has an identity (a name, its pid, when it
//! started), and the lease owner it journals with a run names that host, so that
//! `journal`, the console and the log can say "running on H, lease until T" or
//! "stopped: H's lease ended at T" instead of a bare state.
//!
//! The identity travels inside the lease owner string the journals already store and
//! compare (`{name}@{pid}-{nonce}/{run}`), not in a column of its own: fencing
//! compares owners for equality only, so a longer owner fences exactly as before, no
//! schema changes on either journal, and a record written by an older host (an owner
//! of the form `{pid}-{nonce}/{run}`) still reads, as a host whose name is unknown.

use serde::Serialize;

use crate::clock::rfc3339;

/// The longest host name kept in an owner (a lease owner is written with every run).
const MAX_NAME: usize = 64;

/// What a run's lease owner ends with once its host handed the call over (a drain
/// that could not finish it): the owner changes, so every later write of the run is
/// fenced as after a takeover, and whoever takes the call over reads who handed it
/// over, and that it did (a host name cannot hold `!`).
pub(crate) const HANDED_OVER: &str = "!handed-over";

/// The lease owner a run of `owner` leaves once its host hands its call over.
pub(crate) fn handed_over(owner: &str) -> String {
    format!("{owner}{HANDED_OVER}")
}

/// One host process, as leases name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostIdentity {
    /// The host's name: `--host-name` (or `JUSTONCE_HOST_NAME`, the configuration's
    /// `host_name`), else the machine's hostname.
    pub name: String,
    /// The process id.
    pub pid: u32,
    /// When the process started (ms since the epoch, its own clock).
    pub started_ms: i64,
}

/// A host name that cannot name a lease's holder.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "a host name must be 1 to {MAX_NAME} characters of letters, digits, `.`, `-`, `_` or `:`, not `{0}`"
)]
pub struct BadHostName(pub String);

impl HostIdentity {
    /// This process, named `name` (checked), or after the machine's hostname when
    /// `None`.
    pub fn current(name: Option<&str>, started_ms: i64) -> Result<Self, BadHostName> {
        let name = match name {
            Some(name) => checked(name)?,
            None => machine_name(),
        };
        Ok(Self {
            name,
            pid: std::process::id(),
            started_ms,
        })
    }

    /// The lease owner prefix of this process: `{name}@{pid}-{nanos:x}`, unique to it
    /// (the nanoseconds of its start tell apart two processes that reused a pid); each
    /// run appends `/{counter}`.
    pub fn owner_prefix(&self) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!("{}@{}-{:x}", self.name, self.pid, nanos)
    }

    /// This process named `name` (checked), started now: what `--host-name` makes.
    pub fn named(name: &str) -> Result<Self, BadHostName> {
        let started_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Self::current(Some(name), started_ms)
    }

    /// `name (pid P)`, as the log and the console say it.
    pub fn label(&self) -> String {
        format!("{} (pid {})", self.name, self.pid)
    }
}

/// A name given on the command line or in the configuration, checked: it is read back
/// out of lease owners, so it may not hold the separators (`@`, `/`) or spaces.
fn checked(name: &str) -> Result<String, BadHostName> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
    if ok {
        Ok(name.to_owned())
    } else {
        Err(BadHostName(name.to_owned()))
    }
}

/// The machine's hostname, cut to what an owner may hold; `unknown-host` when the
/// system will not say. Read from the kernel's file (Linux), else `/etc/hostname`,
/// else `$HOSTNAME`: no `unsafe` call for a label.
fn machine_name() -> String {
    let raw = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let name: String = raw
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
        .take(MAX_NAME)
        .collect();
    if name.is_empty() {
        "unknown-host".into()
    } else {
        name
    }
}

/// The host a lease owner names, read back out of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// The host's name; `None` for an owner written before owners named their host.
    pub host: Option<String>,
    /// The process id, when the owner says it.
    pub pid: Option<u32>,
    /// Whether the host handed the call over (it drained and could not finish it)
    /// rather than stopping or stalling with the lease.
    pub handed_over: bool,
    /// The owner as journaled.
    pub owner: String,
}

impl Holder {
    /// Reads `owner` (`{name}@{pid}-{nonce}/{run}`, or the older `{pid}-{nonce}/{run}`,
    /// either ending [`HANDED_OVER`] once handed over).
    pub fn of(owner: &str) -> Self {
        let (run, handed_over) = match owner.strip_suffix(HANDED_OVER) {
            Some(run) => (run, true),
            None => (owner, false),
        };
        let (host, rest) = match run.rsplit_once('@') {
            Some((host, rest)) => (Some(host.to_owned()), rest),
            None => (None, run),
        };
        let pid = rest.split(['-', '/']).next().and_then(|p| p.parse().ok());
        Self {
            host,
            pid,
            handed_over,
            owner: owner.to_owned(),
        }
    }

    /// `H (pid P)`, `pid P on an unnamed host`, or the owner itself.
    pub fn label(&self) -> String {
        match (&self.host, self.pid) {
            (Some(host), Some(pid)) => format!("{host} (pid {pid})"),
            (Some(host), None) => host.clone(),
            (None, Some(pid)) => format!("pid {pid} on an unnamed host"),
            (None, None) => self.owner.clone(),
        }
    }
}

/// Where a call stands with its lease, as people are told: the holder and how long
/// its lease lasts, or whose lease ended and what resumes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "lease", rename_all = "snake_case")]
pub enum LeaseStatus {
    /// A host runs it now.
    Live {
        /// Who.
        holder: Holder,
        /// Until when (ms since the epoch), unless it renews.
        #[serde(serialize_with = "crate::clock::serialize_rfc3339")]
        until: i64,
    },
    /// The host that ran it stopped (died, was killed, or stalled), or handed it over
    /// as it drained ([`Holder::handed_over`]), and its lease ran out: the next retry
    /// of the same call resumes it, on any host.
    Ended {
        /// Who held it.
        holder: Option<Holder>,
        /// When the lease ended (ms since the epoch), if the journal says.
        #[serde(serialize_with = "crate::clock::serialize_rfc3339_opt")]
        at: Option<i64>,
    },
    /// No host holds it: it stopped on its own (an unknown outcome, a divergence) or
    /// completed.
    Released,
}

impl LeaseStatus {
    /// Judges a record in `state` with lease `owner` until `expires_at` at `now` (ms).
    pub fn of(state: &str, owner: Option<&str>, expires_at: Option<i64>, now: i64) -> Self {
        if state != "running" {
            return Self::Released;
        }
        let holder = owner.map(Holder::of);
        match (holder, expires_at) {
            (Some(holder), Some(until)) if until > now => Self::Live { holder, until },
            (holder, at) => Self::Ended { holder, at },
        }
    }

    /// One sentence: `running on H (pid P), lease until T`, or `stopped: H (pid P)'s
    /// lease ended at T; the next retry resumes it`; empty when released.
    pub fn sentence(&self) -> String {
        match self {
            Self::Live { holder, until } => {
                format!(
                    "running on {}, lease until {}",
                    holder.label(),
                    rfc3339(*until)
                )
            }
            Self::Ended { holder, at } => {
                let who = holder
                    .as_ref()
                    .map(Holder::label)
                    .unwrap_or_else(|| "its host".into());
                let when = at
                    .map(|at| format!(" at {}", rfc3339(at)))
                    .unwrap_or_default();
                if holder.as_ref().is_some_and(|h| h.handed_over) {
                    return format!(
                        "handed over: {who} drained and released it{when}; the next retry of the same call resumes it"
                    );
                }
                format!(
                    "stopped: {who}'s lease ended{when}; the next retry of the same call resumes it"
                )
            }
            Self::Released => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_names_its_host_and_an_older_owner_still_reads() {
        let me = HostIdentity::current(Some("web-1"), 0).unwrap();
        let owner = format!("{}/3", me.owner_prefix());
        let holder = Holder::of(&owner);
        assert_eq!(holder.host.as_deref(), Some("web-1"));
        assert_eq!(holder.pid, Some(std::process::id()));
        assert_eq!(
            holder.label(),
            format!("web-1 (pid {})", std::process::id())
        );
        let old = Holder::of("4242-17f3a/0");
        assert_eq!((old.host, old.pid), (None, Some(4242)));
    }

    #[test]
    fn a_host_name_that_could_not_be_read_back_is_refused() {
        for bad in ["", "a b", "web@1", "a/b", &"x".repeat(65)] {
            assert!(HostIdentity::current(Some(bad), 0).is_err(), "{bad:?}");
        }
        assert!(!HostIdentity::current(None, 0).unwrap().name.is_empty());
    }

    #[test]
    fn a_lease_is_live_until_it_ends_and_then_says_what_resumes_it() {
        let owner = "web-1@77-ab/0";
        let live = LeaseStatus::of("running", Some(owner), Some(2_000), 1_999);
        assert_eq!(
            live.sentence(),
            "running on web-1 (pid 77), lease until 1970-01-01T00:00:02.000Z"
        );
        let ended = LeaseStatus::of("running", Some(owner), Some(2_000), 2_000);
        assert_eq!(
            ended.sentence(),
            "stopped: web-1 (pid 77)'s lease ended at 1970-01-01T00:00:02.000Z; the next retry of the same call resumes it"
        );
        assert_eq!(
            LeaseStatus::of("incomplete", None, None, 0),
            LeaseStatus::Released
        );
        let handed = LeaseStatus::of("running", Some(&handed_over(owner)), Some(1_500), 1_500);
        assert_eq!(
            handed.sentence(),
            "handed over: web-1 (pid 77) drained and released it at 1970-01-01T00:00:01.500Z; the next retry of the same call resumes it"
        );
    }

    #[test]
    fn a_handed_over_owner_still_names_its_host() {
        let holder = Holder::of(&handed_over("web-1@77-ab/0"));
        assert_eq!(holder.host.as_deref(), Some("web-1"));
        assert_eq!(holder.pid, Some(77));
        assert!(holder.handed_over);
        assert!(!Holder::of("web-1@77-ab/0").handed_over);
    }
}
