//! Certificates for development and tests: CAs, serving and client certificates, and a
//! kubeconfig for the development server.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// The OID of the Organization attribute: rcgen keeps one value per attribute type, so a
/// second O goes in under this custom type.
const ORGANIZATION_OID: &[u64] = &[2, 5, 4, 10];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("writing {path}: {message}")]
    Write { path: String, message: String },
    #[error("reading {path}: {message}")]
    Read { path: String, message: String },
}

/// A certificate and its private key, in PEM.
#[derive(Debug, Clone)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// A certificate authority able to issue certificates.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    pub pem: Pem,
}

/// What to put in a leaf certificate.
#[derive(Debug, Clone, Default)]
pub struct Leaf {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ips: Vec<IpAddr>,
    pub server: bool,
    pub client: bool,
    /// Makes the certificate expired (for tests).
    pub expired: bool,
    /// Makes the certificate valid only from 2100 on (for tests).
    pub not_yet_valid: bool,
}

fn name(common_name: &str, organizations: &[String]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for (i, org) in organizations.iter().enumerate() {
        if i == 0 {
            dn.push(DnType::OrganizationName, org.as_str());
        } else {
            dn.push(DnType::CustomDnType(ORGANIZATION_OID.to_vec()), org.as_str());
        }
    }
    dn
}

impl Authority {
    pub fn new(common_name: &str) -> Result<Authority, Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        let pem = Pem { cert: cert.pem(), key: key.serialize_pem() };
        Ok(Authority { issuer: Issuer::new(params, key), pem })
    }

    /// Loads an authority written earlier.
    pub fn load(cert_pem: &str, key_pem: &str) -> Result<Authority, Error> {
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        Ok(Authority { issuer, pem: Pem { cert: cert_pem.to_string(), key: key_pem.to_string() } })
    }

    pub fn issue(&self, leaf: &Leaf) -> Result<Pem, Error> {
        let mut params = CertificateParams::new(leaf.dns_names.clone())?;
        params.subject_alt_names.extend(leaf.ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.distinguished_name = name(&leaf.common_name, &leaf.organizations);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        if leaf.server {
            params.extended_key_usages.push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if leaf.client {
            params.extended_key_usages.push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        params.use_authority_key_identifier_extension = true;
        if leaf.expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        if leaf.not_yet_valid {
            params.not_before = rcgen::date_time_ymd(2100, 1, 1);
            params.not_after = rcgen::date_time_ymd(2101, 1, 1);
        }
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Pem { cert: cert.pem(), key: key.serialize_pem() })
    }
}

fn write(path: &Path, contents: &str, private: bool) -> Result<(), Error> {
    let err = |e: std::io::Error| Error::Write { path: path.display().to_string(), message: e.to_string() };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    std::fs::write(path, contents).map_err(err)?;
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::Read { path: path.display().to_string(), message: e.to_string() })
}

/// The common name of the development front-proxy client certificate, and so the only name
/// development mode allows a front proxy to have (a real deployment sets
/// `--requestheader-allowed-names` the same way).
pub const DEV_FRONT_PROXY_CN: &str = "front-proxy-client";

/// Where the development PKI lives.
#[derive(Debug, Clone)]
pub struct DevPki {
    pub dir: PathBuf,
}

impl DevPki {
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn serving_cert(&self) -> PathBuf {
        self.path("serving.crt")
    }
    pub fn serving_key(&self) -> PathBuf {
        self.path("serving.key")
    }
    pub fn serving_ca(&self) -> PathBuf {
        self.path("serving-ca.crt")
    }
    pub fn client_ca(&self) -> PathBuf {
        self.path("client-ca.crt")
    }
    pub fn front_proxy_ca(&self) -> PathBuf {
        self.path("front-proxy-ca.crt")
    }
    pub fn kubeconfig(&self) -> PathBuf {
        self.path("kubeconfig")
    }

    fn save(&self, stem: &str, pem: &Pem) -> Result<(), Error> {
        write(&self.path(&format!("{stem}.crt")), &pem.cert, false)?;
        write(&self.path(&format!("{stem}.key")), &pem.key, true)
    }

    /// Creates whatever is missing: a serving CA and certificate, a client CA with an admin
    /// certificate, and a separate front-proxy CA with its client certificate (the front-proxy
    /// CA must never be the client CA).
    pub fn ensure(dir: &Path) -> Result<DevPki, Error> {
        let pki = DevPki { dir: dir.to_path_buf() };
        if pki.path("serving.crt").exists()
            && pki.path("admin.crt").exists()
            && pki.path("front-proxy-client.crt").exists()
        {
            return Ok(pki);
        }
        let serving_ca = Authority::new("crd-apiserver-serving-ca")?;
        pki.save("serving-ca", &serving_ca.pem)?;
        let serving = serving_ca.issue(&Leaf {
            common_name: "crd-apiserver".into(),
            dns_names: vec![
                "localhost".into(),
                "crd-apiserver".into(),
                "crd-apiserver.crd-apiserver".into(),
                "crd-apiserver.crd-apiserver.svc".into(),
                // Per-group Services of the OpenAPI slices (api::openapi::slices).
                "*.crd-apiserver.svc".into(),
            ],
            ips: vec![IpAddr::from([127, 0, 0, 1]), IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1])],
            server: true,
            ..Leaf::default()
        })?;
        pki.save("serving", &serving)?;
        let client_ca = Authority::new("crd-apiserver-client-ca")?;
        pki.save("client-ca", &client_ca.pem)?;
        let admin = client_ca.issue(&Leaf {
            common_name: "dev-admin".into(),
            organizations: vec!["system:masters".into()],
            client: true,
            ..Leaf::default()
        })?;
        pki.save("admin", &admin)?;
        let proxy_ca = Authority::new("crd-apiserver-front-proxy-ca")?;
        pki.save("front-proxy-ca", &proxy_ca.pem)?;
        let proxy =
            proxy_ca.issue(&Leaf { common_name: DEV_FRONT_PROXY_CN.into(), client: true, ..Leaf::default() })?;
        pki.save("front-proxy-client", &proxy)?;
        Ok(pki)
    }

    /// Writes a kubeconfig that reaches `server` as the admin user.
    pub fn write_kubeconfig(&self, server: &str) -> Result<PathBuf, Error> {
        let b64 = |path: PathBuf| read(&path).map(|t| base64::engine::general_purpose::STANDARD.encode(t));
        let text =
            kubeconfig(server, &b64(self.serving_ca())?, &b64(self.path("admin.crt"))?, &b64(self.path("admin.key"))?);
        let path = self.kubeconfig();
        write(&path, &text, true)?;
        Ok(path)
    }
}

/// A kubeconfig with one cluster, one user and one context.
pub fn kubeconfig(server: &str, ca_b64: &str, cert_b64: &str, key_b64: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: crd-apiserver
  cluster:
    server: {server}
    certificate-authority-data: {ca_b64}
users:
- name: crd-apiserver-admin
  user:
    client-certificate-data: {cert_b64}
    client-key-data: {key_b64}
contexts:
- name: crd-apiserver
  context:
    cluster: crd-apiserver
    user: crd-apiserver-admin
    namespace: default
current-context: crd-apiserver
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::x509::{CaBundle, subject};
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    #[test]
    fn issued_client_certificates_verify_and_carry_every_group() {
        let ca = Authority::new("test-ca").unwrap();
        let leaf = ca
            .issue(&Leaf {
                common_name: "bob".into(),
                organizations: vec!["a".into(), "b".into()],
                client: true,
                ..Leaf::default()
            })
            .unwrap();
        let bundle = CaBundle::from_pem(ca.pem.cert.as_bytes()).unwrap();
        bundle.verify_client(&[der(&leaf.cert)]).unwrap();
        assert_eq!(subject(&der(&leaf.cert)).unwrap(), ("bob".to_string(), vec!["a".to_string(), "b".to_string()]));
        let other = Authority::new("other").unwrap();
        assert!(CaBundle::from_pem(other.pem.cert.as_bytes()).unwrap().verify_client(&[der(&leaf.cert)]).is_err());
        let expired =
            ca.issue(&Leaf { common_name: "old".into(), client: true, expired: true, ..Leaf::default() }).unwrap();
        assert!(bundle.verify_client(&[der(&expired.cert)]).unwrap_err().contains("expired"));
        let server_only = ca.issue(&Leaf { common_name: "srv".into(), server: true, ..Leaf::default() }).unwrap();
        assert!(bundle.verify_client(&[der(&server_only.cert)]).is_err());
    }

    #[test]
    fn dev_pki_is_created_once() {
        let dir = tempfile::tempdir().unwrap();
        let pki = DevPki::ensure(dir.path()).unwrap();
        let first = std::fs::read_to_string(pki.serving_cert()).unwrap();
        DevPki::ensure(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(pki.serving_cert()).unwrap(), first);
        let kubeconfig = pki.write_kubeconfig("https://127.0.0.1:1").unwrap();
        assert!(std::fs::read_to_string(kubeconfig).unwrap().contains("server: https://127.0.0.1:1"));
        let reloaded = Authority::load(
            &std::fs::read_to_string(pki.path("client-ca.crt")).unwrap(),
            &std::fs::read_to_string(pki.path("client-ca.key")).unwrap(),
        )
        .unwrap();
        reloaded.issue(&Leaf { common_name: "x".into(), client: true, ..Leaf::default() }).unwrap();
    }
}
