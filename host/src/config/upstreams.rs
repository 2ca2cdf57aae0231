//! `[upstreams.NAME]` of `justonce.toml`: MCP servers whose tools the host offers
//! under the guard.
//!
//! ```toml
//! [upstreams.memory]
//! command = ["npx", "-y", "@modelcontextprotocol/server-memory@2026.8.31"]
//! env = { MEMORY_FILE_PATH = "memory.jsonl", API_TOKEN = "${MEMORY_TOKEN}" }
//! secrets_file = "memory.env"     # MEMORY_TOKEN=… (else the host's environment)
//! tools = ["create_entities", "read_graph"]   # only these (default: all)
//! exclude = ["delete_entities"]   # not these
//! prefix = "mem_"                 # offered as mem_create_entities, …
//! idempotent = ["create_entities"] # safe to send again under the same key
//! dedupes_by_key = false          # true: the server deduplicates by _meta's key
//! trust_read_only_hint = true     # readOnlyHint tools run every time, unsaved
//! timeout_ms = 30000              # how long a call waits for the server
//! max_read_bytes = 16777216       # the largest result of a read-only tool
//!
//! [upstreams.issues]              # a server that runs elsewhere (Streamable HTTP)
//! url = "https://mcp.example.com/mcp"
//! headers = { Authorization = "Bearer ${ISSUES_TOKEN}" }
//! secrets_file = "issues.env"
//!
//! [upstreams.tickets]             # an HTTP server behind OAuth
//! url = "https://tickets.example.com/mcp"
//! secrets_file = "tickets.env"    # TICKETS_CLIENT_SECRET=…
//! [upstreams.tickets.oauth]       # client credentials (RFC 6749 §4.4) …
//! token_url = "https://auth.example.com/oauth/token"
//! client_id = "justonce-gateway"
//! client_secret = "${TICKETS_CLIENT_SECRET}"
//! scope = "tickets:write"         # optional
//! audience = "https://tickets.example.com"  # optional
//! # … or: token_file = "tickets.token" (kept fresh by a helper of your own)
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::probe::{self, ProbeAnswer};
use crate::upstream::{
    ClientCredentials, MAX_RESULT_BYTES, UpstreamConfig, UpstreamOAuth, UpstreamProbe,
    valid_tool_name,
};

/// `[upstreams.NAME]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    command: Option<Vec<String>>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    oauth: Option<RawOAuth>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    secrets_file: Option<PathBuf>,
    tools: Option<Vec<String>>,
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    dedupes_by_key: bool,
    #[serde(default)]
    idempotent: Vec<String>,
    trust_read_only_hint: Option<bool>,
    timeout_ms: Option<u64>,
    #[serde(default)]
    probes: BTreeMap<String, RawProbe>,
    #[serde(default)]
    ask_person: BTreeMap<String, String>,
    max_read_bytes: Option<usize>,
}

/// `[upstreams.NAME.oauth]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuth {
    token_url: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    scope: Option<String>,
    audience: Option<String>,
    client_auth: Option<String>,
    token_file: Option<PathBuf>,
}

impl RawOAuth {
    /// The checked source of the upstream's tokens; `key` names the section,
    /// `headers` are the upstream's, `dir` is where relative paths start.
    fn checked(
        self,
        key: &str,
        headers: &BTreeMap<String, String>,
        dir: &Path,
    ) -> Result<UpstreamOAuth, String> {
        if headers
            .keys()
            .any(|h| h.eq_ignore_ascii_case("authorization"))
        {
            return Err(format!(
                "`{key}` sends its token as `Authorization`; remove `Authorization` from the upstream's `headers`"
            ));
        }
        let grant = [
            ("token_url", self.token_url.is_some()),
            ("client_id", self.client_id.is_some()),
            ("client_secret", self.client_secret.is_some()),
            ("scope", self.scope.is_some()),
            ("audience", self.audience.is_some()),
            ("client_auth", self.client_auth.is_some()),
        ];
        let given: Vec<&str> = grant.iter().filter(|(_, g)| *g).map(|(k, _)| *k).collect();
        if let Some(path) = self.token_file {
            if !given.is_empty() {
                return Err(format!(
                    "`{key}` names both `token_file` and the client credentials grant (`{}`); name one: a token file kept fresh by a helper, or `token_url`, `client_id` and `client_secret`",
                    given.join("`, `")
                ));
            }
            if path.as_os_str().is_empty() {
                return Err(format!("`{key}.token_file` must name a file"));
            }
            return Ok(UpstreamOAuth::TokenFile(dir.join(path)));
        }
        if given.is_empty() {
            return Err(format!(
                "`{key}` needs `token_url`, `client_id` and `client_secret` (the client credentials grant) or `token_file`"
            ));
        }
        let missing: Vec<&str> = grant[..3]
            .iter()
            .filter(|(_, g)| !*g)
            .map(|(k, _)| *k)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "`{key}` uses the client credentials grant and lacks `{}`",
                missing.join("`, `")
            ));
        }
        let token_url = self.token_url.unwrap_or_default().trim().to_owned();
        if !(token_url.starts_with("http://") || token_url.starts_with("https://")) {
            return Err(format!(
                "`{key}.token_url` must be an http:// or https:// URL (the token endpoint), not {token_url:?}"
            ));
        }
        let auth = match self.client_auth.as_deref() {
            None => crate::upstream::ClientAuth::default(),
            Some(name) => crate::upstream::ClientAuth::parse(name).ok_or_else(|| {
                format!(
                    "`{key}.client_auth` is {name:?}; it is `client_secret_basic` (HTTP Basic, the default) or `client_secret_post` (the id and secret in the form)"
                )
            })?,
        };
        let client_id = self.client_id.unwrap_or_default();
        let client_secret = self.client_secret.unwrap_or_default();
        for (name, value) in [("client_id", &client_id), ("client_secret", &client_secret)] {
            if value.is_empty() {
                return Err(format!("`{key}.{name}` must not be empty"));
            }
        }
        Ok(UpstreamOAuth::ClientCredentials(ClientCredentials {
            token_url,
            client_id,
            client_secret,
            scope: self.scope.filter(|s| !s.is_empty()),
            audience: self.audience.filter(|a| !a.is_empty()),
            auth,
        }))
    }
}

/// `[upstreams.NAME.probes.TOOL]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProbe {
    tool: String,
    #[serde(default = "empty_object")]
    arguments: serde_json::Value,
    #[serde(default)]
    pointer: String,
    answer: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

impl RawProbe {
    /// The checked probe of the write tool `write` of the upstream configured so
    /// far as `upstream`; `key` names its section in errors.
    fn checked(
        self,
        write: &str,
        upstream: &UpstreamConfig,
        key: &str,
    ) -> Result<UpstreamProbe, String> {
        if !valid_tool_name(write) {
            return Err(format!("`{key}`: `{write}` is not a tool name"));
        }
        if upstream.dedupes_by_key || upstream.idempotent.iter().any(|t| t == write) {
            return Err(format!(
                "`{key}`: `{write}` is sent again under its key when its answer is lost (`idempotent` or `dedupes_by_key`), which is cheaper than a probe; a probe is for a tool not safe to send again"
            ));
        }
        if !valid_tool_name(&self.tool) || self.tool == write {
            return Err(format!(
                "`{key}.tool` must name another tool of the upstream, a read-only one, not {:?}",
                self.tool
            ));
        }
        if !self.arguments.is_object() {
            return Err(format!(
                "`{key}.arguments` must be a table of the read tool's arguments"
            ));
        }
        for name in
            probe::placeholders(&self.arguments).map_err(|e| format!("`{key}.arguments`: {e}"))?
        {
            if !UpstreamProbe::may_name(&name) {
                return Err(format!(
                    "`{key}.arguments`: `{{{name}}}` is not the effect's: name `{{key}}` or `{{arguments.NAME}}`"
                ));
            }
        }
        if !(self.pointer.is_empty() || self.pointer.starts_with('/')) {
            return Err(format!(
                "`{key}.pointer` must be a JSON pointer (`/result/0/n`, or \"\" for the whole answer), not {:?}",
                self.pointer
            ));
        }
        Ok(UpstreamProbe {
            tool: self.tool,
            arguments: self.arguments,
            pointer: self.pointer,
            answer: probe_answer(self.answer).map_err(|e| format!("`{key}.answer` {e}"))?,
        })
    }
}

/// `answer = "non_empty"` or `answer = { performed = V, not_performed = W }`.
pub(crate) fn probe_answer(answer: serde_json::Value) -> Result<ProbeAnswer, String> {
    const SHAPE: &str = "must be \"non_empty\" or a table `{ performed = VALUE, not_performed = VALUE }` (`not_performed` optional)";
    match answer {
        serde_json::Value::String(s) if s == "non_empty" => Ok(ProbeAnswer::NonEmpty),
        serde_json::Value::Object(mut table) => {
            let performed = table.remove("performed").ok_or_else(|| SHAPE.to_string())?;
            let not_performed = table.remove("not_performed");
            if let Some(other) = table.keys().next() {
                return Err(format!("has an unknown key `{other}`: it {SHAPE}"));
            }
            if not_performed.as_ref() == Some(&performed) {
                return Err("says the same value means performed and not performed".into());
            }
            Ok(ProbeAnswer::Equals {
                performed,
                not_performed,
            })
        }
        other => Err(format!("{SHAPE}, not {other}")),
    }
}

/// `[upstreams.*]` in the order the file names them: where two upstreams offer one
/// tool name, the first one's is offered (docs/gateway.md), so the order is the
/// file's, not the names' (`toml`'s `preserve_order` keeps it).
pub(super) fn in_file_order<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<(String, RawUpstream)>, D::Error> {
    struct InOrder;
    impl<'de> serde::de::Visitor<'de> for InOrder {
        type Value = Vec<(String, RawUpstream)>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a table of `[upstreams.NAME]` sections")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut upstreams = Vec::new();
            while let Some(entry) = map.next_entry()? {
                upstreams.push(entry);
            }
            Ok(upstreams)
        }
    }
    deserializer.deserialize_map(InOrder)
}

impl RawUpstream {
    /// The checked configuration of the upstream `name`; relative paths are
    /// relative to `dir`. The error names the key.
    pub(super) fn checked(self, name: &str, dir: &Path) -> Result<UpstreamConfig, String> {
        let key = |k: &str| format!("`upstreams.{name}.{k}`");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            return Err(format!(
                "`upstreams.{name}`: an upstream's name is ASCII letters, digits, `_` and `-`"
            ));
        }
        let mut config = match (self.command, self.url) {
            (Some(command), None) if !command.is_empty() && !command[0].is_empty() => {
                if !self.headers.is_empty() {
                    return Err(format!(
                        "{} are sent to a server reached at `url`; a `command` server takes `env`",
                        key("headers")
                    ));
                }
                if self.oauth.is_some() {
                    return Err(format!(
                        "{} is for a server reached at `url`; a `command` server takes its credentials in `env`",
                        key("oauth")
                    ));
                }
                UpstreamConfig::command(command)
            }
            (Some(_), None) => return Err(format!("{} must name a program", key("command"))),
            (None, Some(url)) => {
                let url = url.trim().to_owned();
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "{} must be an http:// or https:// URL (the server's MCP endpoint), not {url:?}",
                        key("url")
                    ));
                }
                if !self.env.is_empty() {
                    return Err(format!(
                        "{} is the environment of a server the host starts (`command`); a server at `url` takes `headers`",
                        key("env")
                    ));
                }
                let mut config = UpstreamConfig::url(url);
                if let Some(oauth) = self.oauth {
                    config.oauth = Some(oauth.checked(
                        &format!("upstreams.{name}.oauth"),
                        &self.headers,
                        dir,
                    )?);
                }
                config.headers = self.headers;
                config
            }
            (Some(_), Some(_)) => {
                return Err(format!(
                    "`upstreams.{name}` names both `command` and `url`; name one"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "`upstreams.{name}` needs `command = [\"program\", \"arg\", …]` (a stdio MCP server) or `url = \"https://…/mcp\"` (Streamable HTTP)"
                ));
            }
        };
        if !self.prefix.is_empty() && !valid_tool_name(&self.prefix) {
            return Err(format!(
                "{} must be letters, digits, `_`, `-` and `.` (MCP's tool name rules), not {:?}",
                key("prefix"),
                self.prefix
            ));
        }
        if self.timeout_ms == Some(0) {
            return Err(format!("{} must be at least 1", key("timeout_ms")));
        }
        if let Some(bytes) = self.max_read_bytes
            && !(1..=MAX_RESULT_BYTES).contains(&bytes)
        {
            return Err(format!(
                "{} must be from 1 to {MAX_RESULT_BYTES} (the most the host reads of one answer), not {bytes}",
                key("max_read_bytes")
            ));
        }
        config.env = self.env;
        config.secrets_file = self.secrets_file.map(|p| dir.join(p));
        config.tools = self.tools;
        config.exclude = self.exclude;
        config.prefix = self.prefix;
        config.dedupes_by_key = self.dedupes_by_key;
        config.idempotent = self.idempotent;
        config.trust_read_only_hint = self.trust_read_only_hint.unwrap_or(true);
        if let Some(ms) = self.timeout_ms {
            config.timeout = Duration::from_millis(ms);
        }
        for (write, raw) in self.probes {
            let probe =
                raw.checked(&write, &config, &format!("upstreams.{name}.probes.{write}"))?;
            config.probes.insert(write, probe);
        }
        for (write, question) in self.ask_person {
            let at = format!("upstreams.{name}.ask_person.{write}");
            if !valid_tool_name(&write) {
                return Err(format!("`{at}`: `{write}` is not a tool name"));
            }
            if config.dedupes_by_key || config.idempotent.contains(&write) {
                return Err(format!(
                    "`{at}`: `{write}` is sent again under its key when its answer is lost (`idempotent` or `dedupes_by_key`): no person needs to be asked"
                ));
            }
            crate::ask_person::check_template(&question, &at)?;
            config.ask_person.insert(write, question);
        }
        if let Some(bytes) = self.max_read_bytes {
            config.max_read_bytes = bytes;
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("/etc/justonce/justonce.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn an_upstream_is_read_with_its_defaults_and_paths_beside_the_file() {
        let config = parse(
            r#"
            [upstreams.memory]
            command = ["node", "index.js"]
            env = { MEMORY_FILE_PATH = "${MEM}" }
            secrets_file = "memory.env"
            exclude = ["delete_entities"]
            prefix = "mem_"
            idempotent = ["create_entities"]
            timeout_ms = 500
            max_read_bytes = 4194304
            "#,
        )
        .unwrap();
        let memory = config.upstream("memory").unwrap();
        assert_eq!(memory.command, ["node", "index.js"]);
        assert_eq!(memory.env["MEMORY_FILE_PATH"], "${MEM}");
        assert_eq!(
            memory.secrets_file.as_deref(),
            Some(Path::new("/etc/justonce/memory.env"))
        );
        assert_eq!(memory.tools, None);
        assert_eq!(memory.exclude, ["delete_entities"]);
        assert_eq!(memory.prefix, "mem_");
        assert_eq!(memory.idempotent, ["create_entities"]);
        assert!(!memory.dedupes_by_key);
        assert!(memory.trust_read_only_hint);
        assert_eq!(memory.timeout.as_millis(), 500);
        assert_eq!(memory.max_read_bytes, 4 << 20);
    }

    #[test]
    fn a_probe_is_read_with_its_template_pointer_and_answer() {
        let config = parse(
            r#"
            [upstreams.db]
            command = ["db"]
            [upstreams.db.probes.write_query]
            tool = "read_query"
            arguments = { query = "SELECT count(*) AS n FROM ledger WHERE key = '{key}'" }
            pointer = "/0/n"
            answer = { performed = 1, not_performed = 0 }
            [upstreams.db.probes.append]
            tool = "recorded"
            arguments = { key = "{key}", line = "{arguments.line}" }
            answer = "non_empty"
            "#,
        )
        .unwrap();
        let db = config.upstream("db").unwrap();
        let write = &db.probes["write_query"];
        assert_eq!(write.tool, "read_query");
        assert_eq!(write.pointer, "/0/n");
        assert_eq!(
            write.answer,
            crate::probe::ProbeAnswer::Equals {
                performed: serde_json::json!(1),
                not_performed: Some(serde_json::json!(0)),
            }
        );
        let append = &db.probes["append"];
        assert_eq!(append.pointer, "");
        assert_eq!(append.answer, crate::probe::ProbeAnswer::NonEmpty);
        assert_eq!(append.arguments["line"], "{arguments.line}");
    }

    #[test]
    fn upstreams_are_in_the_order_of_the_file_not_of_their_names() {
        let config = parse(
            r#"
            [upstreams.zeta]
            command = ["z"]

            [upstreams.alpha]
            command = ["a"]

            [upstreams.mid]
            url = "http://127.0.0.1:9/mcp"
            "#,
        )
        .unwrap();
        let names: Vec<&str> = config.upstreams.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha", "mid"]);
        assert_eq!(config.upstream("alpha").unwrap().command, ["a"]);
        assert!(config.upstream("beta").is_none());
    }

    #[test]
    fn a_bad_upstream_is_refused_naming_the_key() {
        for (text, named) in [
            ("[upstreams.m]\nprefix = \"x\"", "needs `command"),
            (
                "[upstreams.m]\ncommand = []",
                "`upstreams.m.command` must name a program",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\nprefix = \"mem \"",
                "`upstreams.m.prefix`",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\ntimeout_ms = 0",
                "`upstreams.m.timeout_ms` must be at least 1",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\nurl = \"http://x\"",
                "names both `command` and `url`",
            ),
            (
                "[upstreams.m]\nurl = \"ftp://x/mcp\"",
                "`upstreams.m.url` must be an http",
            ),
            (
                "[upstreams.m]\nurl = \"http://x/mcp\"\nenv = { A = \"b\" }",
                "`upstreams.m.env`",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\nheaders = { A = \"b\" }",
                "`upstreams.m.headers`",
            ),
            (
                "[upstreams.\"a b\"]\ncommand = [\"a\"]",
                "an upstream's name",
            ),
            ("[upstreams.m]\ncommand = [\"a\"]\ncolour = 1", "colour"),
            (
                "[upstreams.m]\ncommand = [\"a\"]\n[upstreams.m.probes.w]\ntool = \"r\"",
                "answer",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\nidempotent = [\"w\"]\n[upstreams.m.probes.w]\ntool = \"r\"\nanswer = \"non_empty\"",
                "`upstreams.m.probes.w`: `w` is sent again under its key",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\n[upstreams.m.probes.w]\ntool = \"w\"\nanswer = \"non_empty\"",
                "`upstreams.m.probes.w.tool` must name another tool",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\n[upstreams.m.probes.w]\ntool = \"r\"\nanswer = \"non_empty\"\narguments = { q = \"{payload.x}\" }",
                "`{payload.x}` is not the effect's",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\n[upstreams.m.probes.w]\ntool = \"r\"\nanswer = \"non_empty\"\narguments = { q = \"{key\" }",
                "without its `}`",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\n[upstreams.m.probes.w]\ntool = \"r\"\nanswer = \"non_empty\"\npointer = \"result\"",
                "`upstreams.m.probes.w.pointer` must be a JSON pointer",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\n[upstreams.m.probes.w]\ntool = \"r\"\nanswer = \"found\"",
                "`upstreams.m.probes.w.answer` must be \"non_empty\"",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\n[upstreams.m.probes.w]\ntool = \"r\"\nanswer = { performed = 1, not_performed = 1 }",
                "the same value",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\nidempotent = [\"w\"]\n[upstreams.m.ask_person]\nw = \"Did it?\"",
                "`upstreams.m.ask_person.w`: `w` is sent again under its key",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\n[upstreams.m.ask_person]\nw = \" \"",
                "`upstreams.m.ask_person.w` is the question the person is asked, and it is blank",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\n[upstreams.m.ask_person]\nw = \"Did {nope} happen?\"",
                "`upstreams.m.ask_person.w` names `{nope}`",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\n[upstreams.m.ask_person]\nw = 3",
                "ask_person",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\nmax_read_bytes = 0",
                "`upstreams.m.max_read_bytes` must be from 1 to 16777216",
            ),
            (
                "[upstreams.m]\ncommand = [\"a\"]\nmax_read_bytes = 16777217",
                "`upstreams.m.max_read_bytes` must be from 1",
            ),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(named), "{text}: {error}");
        }
    }

    #[test]
    fn oauth_is_read_as_a_grant_or_a_token_file() {
        use crate::upstream::{ClientCredentials, UpstreamOAuth};
        let config = parse(
            r#"
            [upstreams.tickets]
            url = "https://tickets.example.com/mcp"
            [upstreams.tickets.oauth]
            token_url = "https://auth.example.com/token"
            client_id = "gw"
            client_secret = "${SECRET}"
            scope = "tickets:write"
            client_auth = "client_secret_post"
            [upstreams.files]
            url = "https://files.example.com/mcp"
            oauth = { token_file = "files.token" }
            "#,
        )
        .unwrap();
        assert_eq!(
            config.upstream("tickets").unwrap().oauth,
            Some(UpstreamOAuth::ClientCredentials(ClientCredentials {
                token_url: "https://auth.example.com/token".into(),
                client_id: "gw".into(),
                client_secret: "${SECRET}".into(),
                scope: Some("tickets:write".into()),
                audience: None,
                auth: crate::upstream::ClientAuth::Post,
            }))
        );
        assert_eq!(
            config.upstream("files").unwrap().oauth,
            Some(UpstreamOAuth::TokenFile(
                Path::new("/etc/justonce/files.token").into()
            ))
        );
    }

    #[test]
    fn bad_oauth_is_refused_naming_what_is_wrong() {
        let url = "[upstreams.m]\nurl = \"http://x/mcp\"\n";
        for (oauth, named) in [
            (
                "token_file = \"t\"\ntoken_url = \"http://a/t\"\nclient_id = \"c\"\nclient_secret = \"s\"",
                "names both `token_file` and the client credentials grant (`token_url`, `client_id`, `client_secret`)",
            ),
            (
                "token_url = \"http://a/t\"",
                "`upstreams.m.oauth` uses the client credentials grant and lacks `client_id`, `client_secret`",
            ),
            (
                "client_id = \"c\"\nclient_secret = \"s\"",
                "lacks `token_url`",
            ),
            ("", "needs `token_url`, `client_id` and `client_secret`"),
            (
                "token_url = \"auth/token\"\nclient_id = \"c\"\nclient_secret = \"s\"",
                "`upstreams.m.oauth.token_url` must be an http",
            ),
            (
                "token_url = \"http://a/t\"\nclient_id = \"c\"\nclient_secret = \"\"",
                "`upstreams.m.oauth.client_secret` must not be empty",
            ),
            (
                "token_file = \"\"",
                "`upstreams.m.oauth.token_file` must name a file",
            ),
            (
                "token_url = \"http://a/t\"\nclient_id = \"c\"\nclient_secret = \"s\"\nclient_auth = \"private_key_jwt\"",
                "`upstreams.m.oauth.client_auth` is \"private_key_jwt\"; it is `client_secret_basic`",
            ),
            ("tokenfile = \"t\"", "unknown field `tokenfile`"),
        ] {
            let text = format!("{url}[upstreams.m.oauth]\n{oauth}\n");
            let error = parse(&text).expect_err(&text);
            assert!(error.contains(named), "{text}: {error}");
        }
        let headers = format!(
            "{url}headers = {{ authorization = \"Bearer x\" }}\noauth = {{ token_file = \"t\" }}\n"
        );
        let error = parse(&headers).unwrap_err();
        assert!(
            error.contains("remove `Authorization` from the upstream's `headers`"),
            "{error}"
        );
        let command = "[upstreams.m]\ncommand = [\"a\"]\noauth = { token_file = \"t\" }\n";
        let error = parse(command).unwrap_err();
        assert!(
            error.contains("`upstreams.m.oauth` is for a server reached at `url`"),
            "{error}"
        );
    }
}
