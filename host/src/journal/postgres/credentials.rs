//! Where a PostgreSQL password comes from when the URL has none: `PGPASSWORD`, the
//! password file the configuration names (`password_file`), or libpq's password
//! file (`passfile`, `PGPASSFILE`, else `~/.pgpass`: `libpq.rs` finds it), which the
//! `postgres` crate does not read itself. A password is never part of an error or a log line; a file that cannot
//! be read is named, never quoted.

use std::path::Path;

use crate::error::{Error, Result};

/// What a password is looked up for: the first host, port, database and user of
/// the connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Login<'a> {
    pub host: &'a str,
    pub port: u16,
    pub database: &'a str,
    pub user: &'a str,
}

/// The password in `path`: its first line, without the line ending (the form of a
/// Docker or Kubernetes secret). An empty file is refused.
pub(crate) fn read_password_file(path: &Path) -> Result<String> {
    let fail = |reason: String| {
        Error::Host(anyhow::anyhow!(
            "cannot read the database password from the password file {}: {reason}",
            path.display()
        ))
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let password = text.lines().next().unwrap_or_default();
    if password.is_empty() {
        return Err(fail(
            "its first line is empty (write the password alone on the first line)".into(),
        ));
    }
    Ok(password.to_string())
}

/// The password for `login` in the libpq password file at `path`, if it holds a
/// line for it. As libpq does, a file that group or others may read is ignored
/// (with a warning that names it), and so is a file that does not exist.
pub(crate) fn from_pgpass(path: &Path, login: &Login<'_>) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                "the password file {} is ignored: group or others may read it (chmod 0600 it)",
                path.display()
            );
            return None;
        }
    }
    if !meta.is_file() {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    pgpass_lookup(&text, login)
}

/// The password of the first line of a `.pgpass` text that matches `login`
/// (`hostname:port:database:username:password`; `*` in the first four fields
/// matches anything; `\:` and `\\` stand for `:` and `\`; `#` starts a comment
/// line). `localhost` matches a Unix socket, as in libpq.
pub(crate) fn pgpass_lookup(text: &str, login: &Login<'_>) -> Option<String> {
    let port = login.port.to_string();
    let host = if login.host.starts_with('/') {
        "localhost"
    } else {
        login.host
    };
    let wanted = [host, port.as_str(), login.database, login.user];
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(split_fields)
        .find(|fields| {
            wanted
                .iter()
                .zip(fields)
                .all(|(want, field)| field == "*" || field == want)
        })
        .map(|mut fields| fields.swap_remove(4))
}

/// The five fields of a `.pgpass` line, unescaped; `None` for a line with fewer.
/// The password is the rest of the line after the fourth unescaped `:`.
fn split_fields(line: &str) -> Option<Vec<String>> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut()?.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut()?.push(c),
        }
    }
    (fields.len() == 5).then_some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOGIN: Login<'static> = Login {
        host: "db.internal",
        port: 5432,
        database: "journal",
        user: "ada",
    };

    #[test]
    fn the_first_matching_line_wins_with_wildcards_and_escapes() {
        let text = "\
# comments and lines of other logins are skipped
db.internal:5432:journal:grace:not-ada
other.host:*:*:ada:not-this-host
db.internal:5433:*:ada:not-this-port
db.internal:*:journal:ada:pa\\:ss\\\\word:with:colons
*:*:*:*:too-late
";
        assert_eq!(
            pgpass_lookup(text, &LOGIN).as_deref(),
            Some("pa:ss\\word:with:colons")
        );
        // The opposite: a login no line names gets the catch-all, then nothing.
        let grace = Login {
            user: "grace",
            database: "other",
            ..LOGIN
        };
        assert_eq!(pgpass_lookup(text, &grace).as_deref(), Some("too-late"));
        assert_eq!(
            pgpass_lookup("db.internal:5432:journal:ada\n", &LOGIN),
            None
        );
        assert_eq!(pgpass_lookup("", &LOGIN), None);
    }

    #[test]
    fn localhost_in_pgpass_matches_a_unix_socket() {
        let socket = Login {
            host: "/var/run/postgresql",
            ..LOGIN
        };
        let text = "localhost:5432:journal:ada:by-socket\r\n";
        assert_eq!(pgpass_lookup(text, &socket).as_deref(), Some("by-socket"));
        assert_eq!(pgpass_lookup(text, &LOGIN), None);
    }

    #[test]
    fn a_password_file_gives_its_first_line_and_an_unreadable_one_is_named_not_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret-pw\nignored\n").unwrap();
        assert_eq!(read_password_file(&file).unwrap(), "s3cret-pw");

        std::fs::write(&file, "\ns3cret-pw\n").unwrap();
        let err = read_password_file(&file).unwrap_err().to_string();
        assert!(
            err.contains("first line is empty") && !err.contains("s3cret"),
            "{err}"
        );
        let missing = dir.path().join("missing");
        let err = read_password_file(&missing).unwrap_err().to_string();
        assert!(err.contains(&missing.display().to_string()), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_pgpass_others_may_read_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".pgpass");
        std::fs::write(&file, "*:*:*:ada:from-file\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(from_pgpass(&file, &LOGIN).as_deref(), Some("from-file"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(from_pgpass(&file, &LOGIN), None);
    }
}
