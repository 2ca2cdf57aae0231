//! TLS to the PostgreSQL journal on rustls, with libpq's `sslmode` semantics: one
//! [`Connector`] a journal's every connection uses (its pool and its listener).
//!
//! | `sslmode` | TLS | the server's certificate |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `allow`, `prefer` (libpq's default) | tried; plain if the server refuses it | not checked |
//! | `require` | always | not checked, unless a root certificate is given: then as `verify-ca` (libpq does the same) |
//! | `verify-ca` | always | chain checked against `sslrootcert` |
//! | `verify-full` | always | chain, and the host name the connection was made to |
//!
//! libpq's `allow` tries plain first and TLS second; tokio-postgres negotiates TLS
//! first or not at all, so here `allow` is `prefer` (both accept either).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use postgres::Socket;
use postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// libpq's `sslmode`: whether a connection is encrypted, and what of the server's
/// certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS if the server offers it (here the same as [`SslMode::Prefer`]).
    Allow,
    /// TLS if the server offers it, plain otherwise; the certificate is not checked.
    Prefer,
    /// Always TLS; the certificate is not checked (unless a root certificate is given).
    Require,
    /// Always TLS; the certificate's chain is checked against the root certificate.
    VerifyCa,
    /// Always TLS; the chain is checked, and the certificate must name the host.
    VerifyFull,
}

impl SslMode {
    /// The mode libpq's `sslmode` value `text` names.
    pub(crate) fn parse(text: &str) -> Result<Self, TlsError> {
        Ok(match text {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            other => {
                return Err(TlsError::BadMode {
                    given: other.chars().take(40).collect(),
                });
            }
        })
    }

    /// libpq's name of the mode.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Allow => "allow",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// What tokio-postgres is told: whether TLS is never, maybe or always tried.
    fn negotiation(self) -> postgres::config::SslMode {
        match self {
            Self::Disable => postgres::config::SslMode::Disable,
            Self::Allow | Self::Prefer => postgres::config::SslMode::Prefer,
            Self::Require | Self::VerifyCa | Self::VerifyFull => postgres::config::SslMode::Require,
        }
    }
}

/// The files of a TLS connection (libpq's `sslrootcert`, `sslcert`, `sslkey`), as
/// given; [`Connector::new`] reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    /// The certificate authorities the server's chain must lead to (PEM).
    pub root_cert: Option<PathBuf>,
    /// The client's certificate chain (PEM).
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
}

/// What is wrong with a journal's TLS settings, or with the server's certificate.
/// Each names the setting or the file, never a key's contents.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    /// `sslmode` is none of libpq's.
    #[error(
        "sslmode={given} is not one of disable, allow, prefer, require, verify-ca, verify-full"
    )]
    BadMode {
        /// What was given (its first 40 characters).
        given: String,
    },
    /// A file cannot be read, or does not hold what it should.
    #[error("{setting} {}: {problem}", path.display())]
    File {
        /// `sslrootcert`, `sslcert` or `sslkey`.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A mode that checks the certificate has no root certificate to check it with.
    #[error(
        "sslmode={mode} checks the server's certificate, but no sslrootcert is given (a PEM file of the certificate authority; libpq's default {} cannot be read: {problem})",
        default.display()
    )]
    NoRootCert {
        /// `verify-ca` or `verify-full`.
        mode: &'static str,
        /// libpq's default root certificate file.
        default: PathBuf,
        /// Why it cannot be read.
        problem: String,
    },
    /// `sslcert` without `sslkey`, or the other way round.
    #[error("sslcert and sslkey go together: {given} is given without {missing}")]
    HalfClientCert {
        /// The one given.
        given: &'static str,
        /// The one missing.
        missing: &'static str,
    },
    /// rustls refused the client's settings (a key that does not fit its certificate).
    #[error("the TLS client settings are refused: {0}")]
    Settings(String),
    /// The server's certificate was refused.
    #[error("sslmode={mode}: {problem}")]
    Certificate {
        /// The mode that checked it.
        mode: &'static str,
        /// Why it was refused, naming the host where it matters.
        problem: String,
    },
    /// The handshake failed for another reason.
    #[error("sslmode={mode}: the TLS handshake with {host} failed: {source}")]
    Handshake {
        /// The mode.
        mode: &'static str,
        /// The host connected to.
        host: String,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The host's name cannot be a TLS server name.
    #[error("sslmode={mode}: {host} is not a host name TLS can check")]
    BadHost {
        /// The mode.
        mode: &'static str,
        /// The host.
        host: String,
    },
}

/// Where libpq looks for a file the settings do not name: `~/.postgresql/NAME`.
fn libpq_default(home: Option<&Path>, name: &str) -> Option<PathBuf> {
    home.map(|home| home.join(".postgresql").join(name))
}

/// The one TLS connector of a journal: the mode, and the rustls client made from
/// the settings' files (none for `disable`).
#[derive(Clone)]
pub(crate) struct Connector {
    mode: SslMode,
    /// The mode that checks the certificate, as it is applied (a `require` given a
    /// root certificate checks the chain, as libpq does): what errors name.
    checks: SslMode,
    client: Option<Arc<ClientConfig>>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sslmode={}", self.mode.name())
    }
}

impl Connector {
    /// A connector for `mode` with `files` (read now, so a bad file is found at
    /// start). `home` is where libpq's defaults are looked for (`~/.postgresql/`:
    /// `root.crt`, and `postgresql.crt` with `postgresql.key`), used when they exist
    /// and the files are not named.
    pub(crate) fn new(
        mode: SslMode,
        files: &TlsFiles,
        home: Option<&Path>,
    ) -> Result<Self, TlsError> {
        if mode == SslMode::Disable {
            return Ok(Self {
                mode,
                checks: mode,
                client: None,
            });
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = match (&files.root_cert, libpq_default(home, "root.crt")) {
            (Some(path), _) => Some(read_roots(path)?),
            (None, Some(default)) if default.exists() => match mode {
                // A default file that exists but is broken is libpq's error too.
                SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                    Some(read_roots(&default)?)
                }
                _ => None,
            },
            (None, default) => {
                if let SslMode::VerifyCa | SslMode::VerifyFull = mode {
                    let default =
                        default.unwrap_or_else(|| PathBuf::from("~/.postgresql/root.crt"));
                    let problem = match std::fs::metadata(&default) {
                        Ok(_) => "not a file".to_string(),
                        Err(e) => e.to_string(),
                    };
                    return Err(TlsError::NoRootCert {
                        mode: mode.name(),
                        default,
                        problem,
                    });
                }
                None
            }
        };
        let checks = match (mode, &roots) {
            (SslMode::Require, Some(_)) => SslMode::VerifyCa,
            _ => mode,
        };
        let chain = match (checks, roots) {
            (SslMode::VerifyCa | SslMode::VerifyFull, Some(roots)) => Some(
                rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider.clone(),
                )
                .build()
                .map_err(|e| TlsError::Settings(e.to_string()))?,
            ),
            _ => None,
        };
        let verifier = Arc::new(Verifier {
            chain,
            host_name: checks == SslMode::VerifyFull,
            algorithms: provider.signature_verification_algorithms,
        });
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Settings(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let default_cert = libpq_default(home, "postgresql.crt").filter(|p| p.exists());
        let default_key = libpq_default(home, "postgresql.key").filter(|p| p.exists());
        let cert = files.cert.clone().or(default_cert);
        let key = files.key.clone().or(default_key);
        let mut client = match (cert, key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = read_certs("sslcert", &cert)?;
                let key = read_key(&key)?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| TlsError::Settings(e.to_string()))?
            }
            (Some(_), None) => {
                return Err(TlsError::HalfClientCert {
                    given: "sslcert",
                    missing: "sslkey",
                });
            }
            (None, Some(_)) => {
                return Err(TlsError::HalfClientCert {
                    given: "sslkey",
                    missing: "sslcert",
                });
            }
        };
        // What libpq 17 sends, and PostgreSQL 17 requires of a direct TLS
        // connection (`sslnegotiation=direct`); servers before 17 ignore it.
        client.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(Self {
            mode,
            checks,
            client: Some(Arc::new(client)),
        })
    }

    /// The mode as given.
    #[cfg(test)]
    pub(crate) fn mode(&self) -> SslMode {
        self.mode
    }

    /// The mode that checks the server's certificate, as applied.
    #[cfg(test)]
    pub(crate) fn checks(&self) -> SslMode {
        self.checks
    }

    /// The name of the mode when it must encrypt (`require`, `verify-ca`,
    /// `verify-full`), as given.
    pub(crate) fn required(&self) -> Option<&'static str> {
        (self.mode.negotiation() == postgres::config::SslMode::Require).then(|| self.mode.name())
    }

    /// Sets, in `config`, whether tokio-postgres asks the server for TLS.
    pub(crate) fn negotiate_in(&self, config: &mut postgres::Config) {
        config.ssl_mode(self.mode.negotiation());
    }
}

fn file_error(setting: &'static str, path: &Path, problem: impl ToString) -> TlsError {
    TlsError::File {
        setting,
        path: path.to_path_buf(),
        problem: problem.to_string(),
    }
}

fn read_certs(
    setting: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = std::fs::read(path)
        .map_err(|e| file_error(setting, path, format!("cannot read it: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(setting, path, format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(file_error(
            setting,
            path,
            "holds no certificate (a PEM `BEGIN CERTIFICATE` block)",
        ));
    }
    Ok(certs)
}

fn read_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs("sslrootcert", path)? {
        roots.add(cert).map_err(|e| {
            file_error(
                "sslrootcert",
                path,
                format!("a certificate is refused: {e}"),
            )
        })?;
    }
    Ok(roots)
}

/// The client's private key; as libpq, refused when group or others may read it
/// (`0600`, or `0640` for a file root owns).
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| file_error("sslkey", path, format!("cannot read it: {e}")))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let mode = meta.permissions().mode();
        let allowed = if meta.uid() == 0 { 0o037 } else { 0o077 };
        if mode & allowed != 0 {
            return Err(file_error(
                "sslkey",
                path,
                "group or others may read it (chmod 0600 it, as libpq requires)",
            ));
        }
    }
    let _ = meta;
    let bytes = std::fs::read(path)
        .map_err(|e| file_error("sslkey", path, format!("cannot read it: {e}")))?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|_| {
        file_error(
            "sslkey",
            path,
            "holds no private key (a PEM `BEGIN … PRIVATE KEY` block)",
        )
    })
}

/// What of the server's certificate is checked: with a chain (`verify-ca`,
/// `verify-full`, `require` given a root certificate), webpki checks it against the
/// root certificates, and the host name only when `host_name` (`verify-full`);
/// without (`require`, `prefer`, `allow`), nothing of the certificate is checked,
/// which protects against a passive listener only, as in libpq. The handshake's
/// signatures are checked either way.
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    host_name: bool,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        let verified =
            chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match verified {
            // webpki checks the name only after the chain: a chain that failed
            // never gets here.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.host_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// What the server's certificate was refused for, in words that name the host.
fn certificate_problem(error: &CertificateError, host: &str) -> String {
    match error {
        CertificateError::NotValidForName => {
            format!("the server's certificate is not valid for host {host}")
        }
        CertificateError::NotValidForNameContext { presented, .. } => format!(
            "the server's certificate is not valid for host {host} (it names {})",
            if presented.is_empty() {
                "no host".to_string()
            } else {
                presented
                    .iter()
                    .map(|name| bare_name(name))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
        CertificateError::UnknownIssuer => format!(
            "the certificate of {host} is not signed by a certificate authority of sslrootcert"
        ),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            format!("the certificate of {host} has expired")
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            format!("the certificate of {host} is not valid yet")
        }
        other => format!("the certificate of {host} is refused: {other}"),
    }
}

/// A name the certificate presents, without rustls's wrapping (`DnsName("db")`
/// is `db`).
fn bare_name(name: &str) -> &str {
    name.split_once("(\"")
        .and_then(|(_, rest)| rest.strip_suffix("\")"))
        .unwrap_or(name)
}

impl MakeTlsConnect<Socket> for Connector {
    type Stream = TlsStream;
    type TlsConnect = HostConnect;
    type Error = TlsError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<HostConnect, TlsError> {
        let name = ServerName::try_from(domain.to_string()).map_err(|_| TlsError::BadHost {
            mode: self.checks.name(),
            host: domain.to_string(),
        })?;
        Ok(HostConnect {
            client: self.client.clone(),
            checks: self.checks,
            host: domain.to_string(),
            name,
        })
    }
}

/// The connector for one host of the journal's URL.
pub(crate) struct HostConnect {
    client: Option<Arc<ClientConfig>>,
    checks: SslMode,
    host: String,
    name: ServerName<'static>,
}

impl TlsConnect<Socket> for HostConnect {
    type Stream = TlsStream;
    type Error = TlsError;
    type Future = Pin<Box<dyn Future<Output = Result<TlsStream, TlsError>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let mode = self.checks.name();
            let Some(client) = self.client else {
                // `disable` never asks the server for TLS.
                return Err(TlsError::Settings("sslmode=disable has no TLS".into()));
            };
            let connector = tokio_rustls::TlsConnector::from(client);
            match connector.connect(self.name, stream).await {
                Ok(stream) => Ok(TlsStream(stream)),
                Err(e) => {
                    let rustls_error = e
                        .get_ref()
                        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
                    match rustls_error {
                        Some(rustls::Error::InvalidCertificate(cert)) => {
                            Err(TlsError::Certificate {
                                mode,
                                problem: certificate_problem(cert, &self.host),
                            })
                        }
                        _ => Err(TlsError::Handshake {
                            mode,
                            host: self.host,
                            source: e,
                        }),
                    }
                }
            }
        })
    }
}

/// An encrypted connection to the journal's server.
pub(crate) struct TlsStream(tokio_rustls::client::TlsStream<Socket>);

impl postgres::tls::TlsStream for TlsStream {
    /// None: SCRAM runs without channel binding (`channel_binding=prefer`, the
    /// default, accepts that; `require` is refused by the client).
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
