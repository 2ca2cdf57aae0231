//! `[tools.NAME] allow` in `justonce.toml`: what one tool may reach, written beside its
//! other policy, merged into the HTTP config's per-tool allowlist.

use super::config::{HttpConfig, Origin, parse_url};

impl HttpConfig {
    /// Lets `tool` reach each of `entries` too: an origin (`https://host[:port]`), or
    /// the name of a service (its URL's origin). The error names the entry.
    pub fn allow_for_tool(&mut self, tool: &str, entries: &[String]) -> Result<(), String> {
        for entry in entries {
            let origin = if entry.contains("://") {
                entry
                    .parse::<Origin>()
                    .map_err(|e| format!("tools.{tool}.allow: {e}"))?
            } else {
                let service = self.services.get(entry).ok_or_else(|| {
                    format!(
                        "tools.{tool}.allow: `{entry}` is neither an origin (https://host) nor a service of the HTTP config (services: {})",
                        if self.services.is_empty() {
                            "none".to_owned()
                        } else {
                            self.services.keys().cloned().collect::<Vec<_>>().join(", ")
                        }
                    )
                })?;
                parse_url(&service.url).map_err(|e| format!("tools.{tool}.allow: {e}"))?
            };
            let list = self.allow.entry(tool.to_owned()).or_default();
            let shown = origin.to_string();
            if !list.contains(&shown) {
                list.push(shown);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_or_a_service_is_allowed_and_anything_else_is_named() {
        let mut config: HttpConfig = serde_json::from_str(
            r#"{"services": {"payments": "https://api.payments.example/v1"}}"#,
        )
        .unwrap();
        config
            .allow_for_tool(
                "refund",
                &["payments".into(), "http://127.0.0.1:9000".into()],
            )
            .unwrap();
        assert_eq!(
            config.allow["refund"],
            ["https://api.payments.example:443", "http://127.0.0.1:9000"]
        );
        let payments: Origin = "https://api.payments.example".parse().unwrap();
        assert!(config.check_allowed("refund", &payments).is_ok());
        assert!(config.check_allowed("send_receipt", &payments).is_err());
        let why = config
            .allow_for_tool("refund", &["ledger".into()])
            .unwrap_err();
        assert!(
            why.contains("`ledger` is neither") && why.contains("payments"),
            "{why}"
        );
        let why = config
            .allow_for_tool("refund", &["ftp://x".into()])
            .unwrap_err();
        assert!(why.contains("tools.refund.allow"), "{why}");
    }
}
