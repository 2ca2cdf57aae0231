//! Who is calling: a bearer token of the tokens file ([`tokens`]), each naming a
//! principal and its role, or an OAuth 2.1 access token of a configured issuer
//! ([`oauth`]).

pub mod oauth;
pub mod tokens;
