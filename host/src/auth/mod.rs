//! Who is calling, when the caller proves it with something other than a token of
//! the tokens file: today an OAuth 2.1 access token ([`oauth`]).

pub mod oauth;
