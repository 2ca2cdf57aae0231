//! The HTTP agent every connection to an upstream uses, for its MCP requests and
//! its OAuth token endpoint alike: every status is an answer, redirects are not
//! followed, justonce names itself. A leaf, so `http_client` and `oauth` share it
//! without depending on each other both ways.

use ureq::Agent;

/// The HTTP agent of a connection to an upstream (and its token endpoint).
pub(super) fn agent() -> Agent {
    let config = Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .user_agent(concat!("justonce/", env!("CARGO_PKG_VERSION")))
        .build();
    Agent::new_with_config(config)
}
