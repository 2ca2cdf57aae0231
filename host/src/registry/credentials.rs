//! A registry's credentials: from the host's environment, else from a secrets file
//! (`NAME=value` lines, as for services), never from `justonce.toml` itself. They are
//! sent only to the registry (or the token service it names), and `Debug` never shows
//! them.

use std::fmt;
use std::path::Path;

/// The user name variable.
pub const USERNAME_VAR: &str = "JUSTONCE_REGISTRY_USERNAME";
/// The password (or access token) variable.
pub const PASSWORD_VAR: &str = "JUSTONCE_REGISTRY_PASSWORD";

/// A user name and password for HTTP Basic authentication, or for the registry's
/// token service; or none (anonymous).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    login: Option<(String, String)>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.login {
            Some((user, _)) => write!(f, "Credentials({user}, [redacted])"),
            None => f.write_str("Credentials(anonymous)"),
        }
    }
}

impl Credentials {
    /// No credentials.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// `user` and `password`.
    pub fn login(user: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            login: Some((user.into(), password.into())),
        }
    }

    /// [`USERNAME_VAR`] and [`PASSWORD_VAR`] from `env`, else from `secrets_file`
    /// (read only when the environment has neither); anonymous when neither names
    /// them. One without the other is an error that names the missing one.
    pub fn resolve(
        env: &dyn Fn(&str) -> Option<String>,
        secrets_file: Option<&Path>,
    ) -> Result<Self, String> {
        let mut user = env(USERNAME_VAR);
        let mut password = env(PASSWORD_VAR);
        let mut place = "the environment".to_owned();
        if user.is_none()
            && password.is_none()
            && let Some(path) = secrets_file
        {
            let file = crate::http::read_secrets_file(path)?;
            user = file.get(USERNAME_VAR).cloned();
            password = file.get(PASSWORD_VAR).cloned();
            place = path.display().to_string();
        }
        match (user, password) {
            (Some(user), Some(password)) => Ok(Self::login(user, password)),
            (None, None) => Ok(Self::anonymous()),
            (Some(_), None) => Err(format!(
                "{USERNAME_VAR} is set in {place} but {PASSWORD_VAR} is not"
            )),
            (None, Some(_)) => Err(format!(
                "{PASSWORD_VAR} is set in {place} but {USERNAME_VAR} is not"
            )),
        }
    }

    /// The `Authorization` value for HTTP Basic, if there are credentials.
    pub(crate) fn basic(&self) -> Option<String> {
        use base64::Engine as _;
        let (user, password) = self.login.as_ref()?;
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Some(format!("Basic {encoded}"))
    }

    /// Whether there are credentials.
    pub fn is_anonymous(&self) -> bool {
        self.login.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_wins_over_the_file_and_half_a_login_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("registry.env");
        std::fs::write(
            &file,
            format!("{USERNAME_VAR}=file-user\n{PASSWORD_VAR}=file-pw\n"),
        )
        .unwrap();
        let none = |_: &str| None;
        let from_file = Credentials::resolve(&none, Some(&file)).unwrap();
        assert_eq!(from_file, Credentials::login("file-user", "file-pw"));
        let env = |name: &str| match name {
            USERNAME_VAR => Some("env-user".to_owned()),
            PASSWORD_VAR => Some("env-pw".to_owned()),
            _ => None,
        };
        assert_eq!(
            Credentials::resolve(&env, Some(&file)).unwrap(),
            Credentials::login("env-user", "env-pw")
        );
        assert!(Credentials::resolve(&none, None).unwrap().is_anonymous());
        let half = |name: &str| (name == USERNAME_VAR).then(|| "u".to_owned());
        let why = Credentials::resolve(&half, None).unwrap_err();
        assert!(
            why.contains(PASSWORD_VAR) && why.contains("is not"),
            "{why}"
        );
        let shown = format!("{:?}", Credentials::login("env-user", "env-pw"));
        assert!(!shown.contains("env-pw"), "{shown}");
    }
}
