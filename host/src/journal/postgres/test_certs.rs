//! Certificates for the TLS tests: a certificate authority of the test's own, and
//! what it signs (a server's certificate for some host names, a client's for a
//! user), written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// A certificate authority: its certificate's file, and what it signs with.
pub(crate) struct Authority {
    /// Its certificate (PEM), what `sslrootcert` names.
    pub cert: PathBuf,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM files.
pub(crate) struct Leaf {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM, mode 0600).
    pub key: PathBuf,
}

impl Authority {
    /// A new authority named `name`, its certificate written to `dir/NAME.crt`.
    pub(crate) fn new(dir: &Path, name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::CrlSign,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let cert = dir.join(format!("{name}.crt"));
        std::fs::write(&cert, issuer.pem()).unwrap();
        Self { cert, issuer }
    }

    /// A certificate it signs, for `hosts` (its subject alternative names) and the
    /// common name `common_name` (a client certificate's user), written to
    /// `dir/NAME.crt` and `dir/NAME.key`.
    pub(crate) fn sign(&self, dir: &Path, name: &str, hosts: &[&str], common_name: &str) -> Leaf {
        let mut params =
            CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let leaf = Leaf {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&leaf.cert, cert.pem()).unwrap();
        write_private(&leaf.key, &key.serialize_pem());
        leaf
    }
}

/// Writes `text` to `path`, readable by its owner alone.
pub(crate) fn write_private(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}
