//! Registry credentials, each bound to one registry host: `[registries."HOST"]
//! secrets_file` in `justonce.toml` names the file of one registry's login
//! (`NAME=value` lines, as for services). The older global form, a login in the host's
//! environment or in `registry_secrets_file`, is kept only where it can be bound to
//! one registry: the one [`REGISTRY_VAR`] names, else the only registry the
//! operation speaks to; a login that could go to several registries is refused. A
//! login is sent only to its registry (or to a token service on the same host, see
//! `client.rs`), and `Debug` never shows it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// The user name variable.
pub const USERNAME_VAR: &str = "JUSTONCE_REGISTRY_USERNAME";
/// The password (or access token) variable.
pub const PASSWORD_VAR: &str = "JUSTONCE_REGISTRY_PASSWORD";
/// The registry (`HOST[:PORT]`, as references name it) the login of the environment
/// or of `registry_secrets_file` belongs to.
pub const REGISTRY_VAR: &str = "JUSTONCE_REGISTRY_HOST";

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

/// How the environment is named as the place a login was read from.
const ENVIRONMENT: &str = "the environment";

/// Why the registry logins could not be settled. No variant holds a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// A secrets file cannot be read, or is not `NAME=value` lines.
    #[error("{reason}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What is wrong (names the file and line, never a value).
        reason: String,
    },
    /// A user name without a password, or the other way round.
    #[error("{given} is set in {place} but {missing} is not")]
    HalfLogin {
        /// The variable that is set.
        given: &'static str,
        /// The one that is not.
        missing: &'static str,
        /// The environment, or the file.
        place: String,
    },
    /// A `[registries."HOST"] secrets_file` that holds no login.
    #[error(
        "{} holds no {USERNAME_VAR} and {PASSWORD_VAR} for the registry {registry}",
        path.display()
    )]
    NoLogin {
        /// The registry.
        registry: String,
        /// The file.
        path: PathBuf,
    },
    /// The login of the environment or of `registry_secrets_file` names no registry,
    /// and the operation speaks to several: it would be sent to each of them.
    #[error(
        "the registry login in {place} belongs to no one registry, and {} are used: name its registry with {REGISTRY_VAR}=HOST[:PORT], or give each registry its own login with [registries.\"HOST\"] secrets_file = \"FILE\" in justonce.toml",
        registries.join(" and ")
    )]
    Unbound {
        /// The environment, or the file.
        place: String,
        /// The registries it could go to.
        registries: Vec<String>,
    },
}

impl CredentialsError {
    /// What is wrong, for a configuration error that names [`place`](Self::place)
    /// itself: the message without the file, so that it is said once
    /// (`configuration secrets.env: holds no …`).
    pub fn reason(&self) -> String {
        match self {
            Self::Unreadable { path, reason } => {
                reason.replacen(&format!(" {}", path.display()), "", 1)
            }
            Self::NoLogin { registry, .. } => {
                format!("holds no {USERNAME_VAR} and {PASSWORD_VAR} for the registry {registry}")
            }
            other => other.to_string(),
        }
    }

    /// The file (or `<environment>`) the error is about, for a configuration error.
    pub fn place(&self) -> PathBuf {
        match self {
            Self::Unreadable { path, .. } | Self::NoLogin { path, .. } => path.clone(),
            Self::HalfLogin { place, .. } | Self::Unbound { place, .. } => {
                PathBuf::from(if place == ENVIRONMENT {
                    "<environment>"
                } else {
                    place
                })
            }
        }
    }
}

/// Where the registry logins are read from: the global form (the environment, else
/// `registry_secrets_file`) and one file per registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoginSources {
    /// `registry_secrets_file`: read when the environment holds no login.
    pub global_file: Option<PathBuf>,
    /// `[registries."HOST"] secrets_file`, by registry (`HOST[:PORT]`).
    pub per_registry: BTreeMap<String, PathBuf>,
}

/// The login of each registry, by `HOST[:PORT]` as references name it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Logins {
    by_registry: BTreeMap<String, Credentials>,
}

/// A registry's key: hosts are case-insensitive, the port is kept as written.
fn key(registry: &str) -> String {
    registry.to_ascii_lowercase()
}

impl Logins {
    /// No login for any registry (anonymous everywhere).
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// These logins, and `credentials` for the registry `registry` (`HOST[:PORT]`).
    pub fn with(mut self, registry: &str, credentials: Credentials) -> Self {
        self.by_registry.insert(key(registry), credentials);
        self
    }

    /// The login for `registry` (`HOST[:PORT]`); anonymous when it has none.
    pub fn for_registry(&self, registry: &str) -> Credentials {
        self.by_registry
            .get(&key(registry))
            .cloned()
            .unwrap_or_default()
    }

    /// The logins `sources` name, with the environment `env`, for an operation that
    /// speaks to `registries`. Each `[registries."HOST"]` file is that registry's.
    /// The global login ([`USERNAME_VAR`] and [`PASSWORD_VAR`] from `env`, else from
    /// the global file, read only when the environment has neither) goes to the
    /// registry [`REGISTRY_VAR`] names (from the same place), else to the only one
    /// of `registries` without a login of its own; with several such, it is refused
    /// ([`CredentialsError::Unbound`]) rather than sent to each.
    pub fn resolve(
        env: &dyn Fn(&str) -> Option<String>,
        sources: &LoginSources,
        registries: &BTreeSet<String>,
    ) -> Result<Self, CredentialsError> {
        let mut logins = Self::anonymous();
        for (registry, path) in &sources.per_registry {
            let file = read(path)?;
            let place = path.display().to_string();
            let login = login_of(file.get(USERNAME_VAR), file.get(PASSWORD_VAR), &place)?
                .ok_or_else(|| CredentialsError::NoLogin {
                    registry: registry.clone(),
                    path: path.clone(),
                })?;
            logins = logins.with(registry, login);
        }
        let (mut user, mut password, mut bound) =
            (env(USERNAME_VAR), env(PASSWORD_VAR), env(REGISTRY_VAR));
        let mut place = ENVIRONMENT.to_owned();
        if user.is_none()
            && password.is_none()
            && let Some(path) = &sources.global_file
        {
            let file = read(path)?;
            user = file.get(USERNAME_VAR).cloned();
            password = file.get(PASSWORD_VAR).cloned();
            bound = bound.or_else(|| file.get(REGISTRY_VAR).cloned());
            place = path.display().to_string();
        }
        let Some(login) = login_of(user.as_ref(), password.as_ref(), &place)? else {
            return Ok(logins);
        };
        let registry = match bound {
            Some(registry) => registry,
            None => {
                let unclaimed: Vec<String> = registries
                    .iter()
                    .filter(|r| !logins.by_registry.contains_key(&key(r)))
                    .cloned()
                    .collect();
                match unclaimed.as_slice() {
                    [] => return Ok(logins),
                    [one] => one.clone(),
                    _ => {
                        return Err(CredentialsError::Unbound {
                            place,
                            registries: unclaimed,
                        });
                    }
                }
            }
        };
        // A registry's own file wins over the global login.
        if !logins.by_registry.contains_key(&key(&registry)) {
            logins = logins.with(&registry, login);
        }
        Ok(logins)
    }
}

fn read(path: &Path) -> Result<BTreeMap<String, String>, CredentialsError> {
    crate::http::read_secrets_file(path).map_err(|reason| CredentialsError::Unreadable {
        path: path.to_path_buf(),
        reason,
    })
}

/// The login of `user` and `password`, none for neither, an error for one alone.
fn login_of(
    user: Option<&String>,
    password: Option<&String>,
    place: &str,
) -> Result<Option<Credentials>, CredentialsError> {
    let half = |given, missing| CredentialsError::HalfLogin {
        given,
        missing,
        place: place.to_owned(),
    };
    match (user, password) {
        (Some(user), Some(password)) => Ok(Some(Credentials::login(user, password))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(half(USERNAME_VAR, PASSWORD_VAR)),
        (None, Some(_)) => Err(half(PASSWORD_VAR, USERNAME_VAR)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registries(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_environment_wins_over_the_file_and_half_a_login_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let global = file(
            dir.path(),
            "registry.env",
            &format!("{USERNAME_VAR}=file-user\n{PASSWORD_VAR}=file-pw\n"),
        );
        let sources = LoginSources {
            global_file: Some(global),
            ..LoginSources::default()
        };
        let one = registries(&["ghcr.io"]);
        let none = |_: &str| None;
        let from_file = Logins::resolve(&none, &sources, &one).unwrap();
        assert_eq!(
            from_file.for_registry("ghcr.io"),
            Credentials::login("file-user", "file-pw")
        );
        let env = |name: &str| match name {
            USERNAME_VAR => Some("env-user".to_owned()),
            PASSWORD_VAR => Some("env-pw".to_owned()),
            _ => None,
        };
        assert_eq!(
            Logins::resolve(&env, &sources, &one)
                .unwrap()
                .for_registry("GHCR.io"),
            Credentials::login("env-user", "env-pw")
        );
        let anonymous = Logins::resolve(&none, &LoginSources::default(), &one).unwrap();
        assert!(anonymous.for_registry("ghcr.io").is_anonymous());
        let half = |name: &str| (name == USERNAME_VAR).then(|| "u".to_owned());
        let why = Logins::resolve(&half, &LoginSources::default(), &one).unwrap_err();
        assert!(
            matches!(
                why,
                CredentialsError::HalfLogin {
                    missing: PASSWORD_VAR,
                    ..
                }
            ),
            "{why}"
        );
        let shown = format!("{:?}", Credentials::login("env-user", "env-pw"));
        assert!(!shown.contains("env-pw"), "{shown}");
    }

    #[test]
    fn a_login_goes_to_its_own_registry_and_a_global_one_only_where_it_binds_to_one() {
        let dir = tempfile::tempdir().unwrap();
        let ghcr = file(
            dir.path(),
            "ghcr.env",
            &format!("{USERNAME_VAR}=g\n{PASSWORD_VAR}=g-pw\n"),
        );
        let env = |name: &str| match name {
            USERNAME_VAR => Some("user".to_owned()),
            PASSWORD_VAR => Some("secret".to_owned()),
            _ => None,
        };
        let two = registries(&["ghcr.io", "registry.example:5000"]);

        // One login, two registries: refused, naming both ways out.
        let why = Logins::resolve(&env, &LoginSources::default(), &two).unwrap_err();
        assert!(matches!(why, CredentialsError::Unbound { .. }), "{why}");
        let said = why.to_string();
        assert!(
            said.contains(REGISTRY_VAR)
                && said.contains("[registries.")
                && said.contains("ghcr.io"),
            "{said}"
        );

        // The one registry without a file of its own takes the global login.
        let sources = LoginSources {
            global_file: None,
            per_registry: BTreeMap::from([("ghcr.io".to_owned(), ghcr.clone())]),
        };
        let logins = Logins::resolve(&env, &sources, &two).unwrap();
        assert_eq!(
            logins.for_registry("ghcr.io"),
            Credentials::login("g", "g-pw")
        );
        assert_eq!(
            logins.for_registry("registry.example:5000"),
            Credentials::login("user", "secret")
        );
        assert!(logins.for_registry("elsewhere.example").is_anonymous());

        // Bound by name: that registry alone, whatever else is used.
        let bound = |name: &str| match name {
            REGISTRY_VAR => Some("registry.example:5000".to_owned()),
            other => env(other),
        };
        let logins = Logins::resolve(&bound, &LoginSources::default(), &two).unwrap();
        assert!(logins.for_registry("ghcr.io").is_anonymous());
        assert_eq!(
            logins.for_registry("registry.example:5000"),
            Credentials::login("user", "secret")
        );

        // A registry's file with no login in it is named.
        let empty = file(dir.path(), "empty.env", "# nothing\n");
        let sources = LoginSources {
            global_file: None,
            per_registry: BTreeMap::from([("ghcr.io".to_owned(), empty)]),
        };
        let none = |_: &str| None;
        let why = Logins::resolve(&none, &sources, &two).unwrap_err();
        assert!(matches!(why, CredentialsError::NoLogin { .. }), "{why}");
    }

    #[test]
    fn a_configuration_error_names_the_secrets_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let two = BTreeSet::from(["ghcr.io".to_owned(), "registry.example:5000".to_owned()]);
        let none = |_: &str| None;
        let empty = file(dir.path(), "empty.env", "# nothing\n");
        let bad = file(dir.path(), "bad.env", "not a line\n");
        let missing = dir.path().join("missing.env");
        for path in [empty, bad, missing] {
            let sources = LoginSources {
                global_file: None,
                per_registry: BTreeMap::from([("ghcr.io".to_owned(), path.clone())]),
            };
            let why = Logins::resolve(&none, &sources, &two).unwrap_err();
            let error = crate::Error::Config {
                path: why.place(),
                reason: why.reason(),
            }
            .to_string();
            let named = path.display().to_string();
            assert_eq!(error.matches(&named).count(), 1, "{error}");
            assert!(
                error.starts_with(&format!("configuration {named}: ")),
                "{error}"
            );
        }
    }
}
