//! Reading an armored SSH signature (`PROTOCOL.sshsig`) and checking it, as `ssh-keygen -Y
//! verify` does. The `ssh-key` crate decodes keys and signature blobs; this module reads the
//! SSHSIG container and OpenSSH certificates (`PROTOCOL.certkeys`) itself: a signature made with
//! a certificate (`ssh-keygen -Y sign -f KEY-cert.pub`) carries it, and the crate's SSHSIG
//! reader takes only plain keys, while its certificate reader (0.6.7) refuses a certificate
//! valid forever (`valid before` 2^64-1, what `ssh-keygen -s` makes without `-V`).
//!
//! The public-key operation of RSA (2048 to 8192 bits) and of ECDSA P-256 and P-384 runs in
//! `ring`: the `rsa` crate's exponentiation (a fixed 4-bit window over 32-bit digits whatever
//! the exponent) took 0.68 ms for a 3072-bit key, `ring` 0.045 ms; P-256 in the `p256` crate
//! 0.27 ms, in `ring` 0.05 ms. Ed25519, P-521 and keys outside `ring`'s sizes verify in `ssh-key`.

use ssh_key::public::KeyData;
use ssh_key::{Algorithm, EcdsaCurve, HashAlg, PublicKey, Signature};

/// The key an SSHSIG names: a plain public key, or a certificate for one.
#[derive(Debug, Clone)]
pub enum SigKey {
    /// A public key.
    Plain(KeyData),
    /// An OpenSSH certificate; its CA signature is checked when it is read.
    Cert(Box<Cert>),
}

/// An OpenSSH certificate whose CA signature verified. Its critical options and extensions are
/// not kept: `ssh-keygen -Y verify` does not look at them.
#[derive(Debug, Clone)]
pub struct Cert {
    key: KeyData,
    serial: u64,
    user: bool,
    key_id: String,
    principals: Vec<String>,
    valid_after: u64,
    valid_before: u64,
    ca: KeyData,
}

impl Cert {
    /// The certified key.
    pub fn public_key(&self) -> &KeyData {
        &self.key
    }

    /// The CA's key.
    pub fn signature_key(&self) -> &KeyData {
        &self.ca
    }

    /// Its serial number.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// A user certificate (not a host certificate).
    pub fn is_user(&self) -> bool {
        self.user
    }

    /// Its key id (`-I`).
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// Its principals (`-n`).
    pub fn valid_principals(&self) -> &[String] {
        &self.principals
    }

    /// Valid from this time on (seconds since the epoch).
    pub fn valid_after(&self) -> u64 {
        self.valid_after
    }

    /// Valid before this time (exclusive); `u64::MAX` is forever.
    pub fn valid_before(&self) -> u64 {
        self.valid_before
    }
}

impl SigKey {
    /// The key that made the signature (a certificate's subject key).
    pub fn key(&self) -> &KeyData {
        match self {
            SigKey::Plain(k) => k,
            SigKey::Cert(c) => c.public_key(),
        }
    }
}

/// An SSHSIG, read.
#[derive(Debug, Clone)]
pub struct Sig {
    /// Who signed.
    pub key: SigKey,
    /// The namespace it was made for.
    pub namespace: String,
    /// The hash of the message.
    pub hash_alg: HashAlg,
    /// The signature over the signed data.
    pub signature: Signature,
}

/// The SSH wire format: `uint32` and length-prefixed `string`s.
struct Wire<'a>(&'a [u8]);

impl<'a> Wire<'a> {
    fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        Some(u32::from_be_bytes(*head))
    }

    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_be_bytes(*head))
    }

    fn utf8(&mut self) -> Option<String> {
        std::str::from_utf8(self.string()?).ok().map(str::to_owned)
    }

    fn string(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.u32()?).ok()?;
        if len > self.0.len() {
            return None;
        }
        let (s, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(s)
    }
}

const MAGIC: &[u8] = b"SSHSIG";

/// The signature algorithm of RSA with SHA-1.
const SHA1_RSA: &[u8] = b"ssh-rsa";

/// Why a signature file cannot be read, in plain words that follow "it" (`is cut short: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What is wrong.
    pub what: String,
    /// The file is not an SSH signature at all (other text, another armor, binary, damaged),
    /// as opposed to a signature of a kind mcpsum does not accept.
    pub junk: bool,
    /// What to do, when it is more than signing again.
    pub hint: Option<String>,
    /// The file holds a private key (some `-----BEGIN ... PRIVATE KEY-----` armor): whoever can
    /// read the file has the key. Nothing of it is said but that.
    pub private_key: bool,
}

impl ParseError {
    fn junk(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            junk: true,
            hint: None,
            private_key: false,
        }
    }

    fn refused(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            junk: false,
            hint: None,
            private_key: false,
        }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

const BEGIN: &str = "-----BEGIN SSH SIGNATURE-----";
const END: &str = "-----END SSH SIGNATURE-----";

/// The bytes inside the `-----BEGIN SSH SIGNATURE-----` armor, or what the file is instead.
fn dearmor(pem: &[u8]) -> Result<Vec<u8>, ParseError> {
    let Some(text) = std::str::from_utf8(pem).ok().filter(|t| !t.contains('\0')) else {
        return Err(ParseError::junk("holds binary data, not text"));
    };
    // Anywhere in the file, before anything of it is quoted.
    if text.lines().map(str::trim).any(|l| {
        l.strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
            .is_some_and(|label| label.ends_with("PRIVATE KEY"))
    }) {
        return Err(ParseError {
            private_key: true,
            ..ParseError::junk("holds a private key, not a signature")
        });
    }
    let Some(first) = text.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Err(ParseError::junk("is empty"));
    };
    let label = first
        .strip_prefix("-----BEGIN ")
        .and_then(|l| l.strip_suffix("-----"));
    match label {
        None => {
            return Err(ParseError::junk(format!(
                "has no `{BEGIN}` line at its start"
            )));
        }
        Some(label) if label != "SSH SIGNATURE" => {
            let label: String = crate::text::sanitize_line(label).chars().take(40).collect();
            return Err(ParseError::junk(format!(
                "is a `-----BEGIN {label}-----` block, not a signature"
            )));
        }
        Some(_) => {}
    }
    if !text.lines().any(|l| l.trim() == END) {
        return Err(ParseError::junk(format!(
            "is cut short: it has no `{END}` line"
        )));
    }
    // Lines of 70 characters, as ssh-keygen writes them (and the `ssh-key` crate reads them).
    let damaged = |_| {
        ParseError::junk(format!(
            "has damaged text between its `{BEGIN}` and `{END}` lines (not the base64 in lines of 70 characters that `ssh-keygen` writes)"
        ))
    };
    let mut decoder = pem_rfc7468::Decoder::new_wrapped(pem, 70).map_err(damaged)?;
    let mut blob = Vec::new();
    decoder.decode_to_end(&mut blob).map_err(damaged)?;
    Ok(blob)
}

/// Reads `-----BEGIN SSH SIGNATURE-----` text. The error says what is wrong, in a few words.
pub fn parse(pem: &[u8]) -> Result<Sig, ParseError> {
    let blob = dearmor(pem)?;
    let malformed = || {
        ParseError::junk(
            "is cut short or damaged inside its armor: it does not hold a whole SSH signature",
        )
    };
    let mut w = Wire(&blob);
    if w.0.get(..MAGIC.len()) != Some(MAGIC) {
        return Err(ParseError::junk(
            "does not hold an SSH signature inside its armor (its data does not begin with `SSHSIG`)",
        ));
    }
    w.0 = &w.0[MAGIC.len()..];
    // Versions 0 and 1 lay the signature out alike, and the version is not signed:
    // `ssh-keygen -Y verify` (OpenSSH 9.2) reads both and refuses any later one.
    let version = w.u32().ok_or_else(malformed)?;
    if version > 1 {
        return Err(ParseError::refused(format!(
            "is of signature version {version}; mcpsum reads versions 0 and 1, as `ssh-keygen -Y verify` (OpenSSH 9.2) does"
        )));
    }
    let key_blob = w.string().ok_or_else(malformed)?;
    let namespace = w.string().ok_or_else(malformed)?;
    let _reserved = w.string().ok_or_else(malformed)?;
    let hash_alg = w.string().ok_or_else(malformed)?;
    let sig_blob = w.string().ok_or_else(malformed)?;
    if !w.0.is_empty() {
        return Err(malformed());
    }
    let namespace = std::str::from_utf8(namespace)
        .ok()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ParseError::refused("has an empty or non-UTF-8 namespace"))?
        .to_owned();
    // ssh-keygen verifies these two only.
    let hash_alg = match hash_alg {
        b"sha256" => HashAlg::Sha256,
        b"sha512" => HashAlg::Sha512,
        other => {
            return Err(ParseError::refused(format!(
                "hashes the lockfile with `{}`; `ssh-keygen -Y sign` uses `sha512` or `sha256`",
                crate::text::sanitize_line(&String::from_utf8_lossy(other))
            )));
        }
    };
    // ssh-keygen refuses an RSA SSHSIG made with SHA-1 (`ssh-rsa`), and so does mcpsum.
    if Wire(sig_blob).string() == Some(SHA1_RSA) {
        return Err(ParseError::refused(
            "is made with `ssh-rsa` (RSA with SHA-1), which neither mcpsum nor `ssh-keygen -Y verify` accepts: SHA-1 signatures can be forged",
        ));
    }
    let signature = Signature::try_from(sig_blob)
        .map_err(|e| ParseError::refused(format!("holds a signature mcpsum cannot read ({e})")))?;
    let key_type = Wire(key_blob).string().ok_or_else(malformed)?;
    let key = if key_type.ends_with(b"-cert-v01@openssh.com") {
        SigKey::Cert(Box::new(certificate(key_blob)?))
    } else {
        SigKey::Plain(
            PublicKey::from_bytes(key_blob)
                .map_err(|e| {
                    ParseError::refused(format!("names a public key mcpsum cannot read ({e})"))
                })?
                .key_data()
                .clone(),
        )
    };
    Ok(Sig {
        key,
        namespace,
        hash_alg,
        signature,
    })
}

/// A certificate blob (`PROTOCOL.certkeys`), read and its CA's signature checked over the
/// bytes signed, as OpenSSH reads one: a certificate whose signature does not verify, or whose
/// CA key is itself a certificate, is unreadable.
fn certificate(blob: &[u8]) -> Result<Cert, ParseError> {
    let cert =
        |e: String| ParseError::refused(format!("carries a certificate mcpsum cannot accept: {e}"));
    let malformed = || cert("it is cut short or damaged".to_owned());
    let mut w = Wire(blob);
    let kind = w.string().ok_or_else(malformed)?;
    let plain = kind
        .strip_suffix(b"-cert-v01@openssh.com")
        .ok_or_else(malformed)?;
    // How many fields the key has after the nonce.
    let fields = match plain {
        b"ssh-ed25519" => 1,
        b"ssh-rsa" | b"ecdsa-sha2-nistp256" | b"ecdsa-sha2-nistp384" | b"ecdsa-sha2-nistp521" => 2,
        other => {
            return Err(cert(format!(
                "its type `{}-cert-v01@openssh.com` is not one mcpsum reads",
                crate::text::sanitize_line(&String::from_utf8_lossy(other))
            )));
        }
    };
    let _nonce = w.string().ok_or_else(malformed)?;
    // The certified key, as a plain key's blob: its type, then the same fields.
    let start = blob.len() - w.0.len();
    for _ in 0..fields {
        w.string().ok_or_else(malformed)?;
    }
    let end = blob.len() - w.0.len();
    let mut key_blob = Vec::with_capacity(4 + plain.len() + end - start);
    key_blob.extend_from_slice(&u32::try_from(plain.len()).unwrap_or(0).to_be_bytes());
    key_blob.extend_from_slice(plain);
    key_blob.extend_from_slice(&blob[start..end]);
    let key = PublicKey::from_bytes(&key_blob)
        .map_err(|e| cert(format!("its certified key cannot be read ({e})")))?
        .key_data()
        .clone();
    let serial = w.u64().ok_or_else(malformed)?;
    let user = match w.u32().ok_or_else(malformed)? {
        1 => true,
        2 => false,
        other => return Err(cert(format!("its kind {other} is neither user nor host"))),
    };
    let key_id = w.utf8().ok_or_else(malformed)?;
    let mut names = Wire(w.string().ok_or_else(malformed)?);
    let mut principals = Vec::new();
    while !names.0.is_empty() {
        principals.push(names.utf8().ok_or_else(malformed)?);
    }
    let valid_after = w.u64().ok_or_else(malformed)?;
    let valid_before = w.u64().ok_or_else(malformed)?;
    let _critical_options = w.string().ok_or_else(malformed)?;
    let _extensions = w.string().ok_or_else(malformed)?;
    let _reserved = w.string().ok_or_else(malformed)?;
    let ca = PublicKey::from_bytes(w.string().ok_or_else(malformed)?)
        .map_err(|e| cert(format!("its CA key cannot be read ({e})")))?
        .key_data()
        .clone();
    let signed = &blob[..blob.len() - w.0.len()];
    let ca_sig = w.string().ok_or_else(malformed)?;
    // `ssh-keygen -s` with an RSA CA signs with `rsa-sha2-512` by default since OpenSSH 8.2,
    // and `ssh`/`sshd` refuse `ssh-rsa` from a CA by default (`CASignatureAlgorithms`);
    // `ssh-keygen -Y verify` (9.2) still takes it. A chosen-prefix SHA-1 collision is exactly
    // a certificate the CA signed for one key passing for another: refused, saying so.
    if Wire(ca_sig).string() == Some(SHA1_RSA) {
        return Err(ParseError {
            what: format!(
                "its certificate `{}` is signed by its CA (RSA key {}) with `ssh-rsa` (SHA-1), which mcpsum refuses: SHA-1 signatures can be forged, and `ssh` and `sshd` refuse them from a CA by default (`CASignatureAlgorithms`), though `ssh-keygen -Y verify` still takes them",
                crate::text::sanitize_line(&key_id),
                ca.fingerprint(HashAlg::Sha256)
            ),
            junk: false,
            hint: Some(format!(
                "have the CA issue the certificate again with SHA-512: `ssh-keygen -s CA_KEY -t rsa-sha2-512 -I {} -n PRINCIPALS KEY.pub` (OpenSSH 8.2 and later do so by default), then sign the lockfile with the new certificate (`mcpsum sign --key KEY-cert.pub`)",
                crate::text::sanitize_line(&key_id)
            )),
            private_key: false,
        });
    }
    let signature = Signature::try_from(ca_sig)
        .map_err(|e| cert(format!("its CA's signature cannot be read ({e})")))?;
    if !w.0.is_empty() {
        return Err(malformed());
    }
    if !verify(&ca, signed, &signature) {
        return Err(cert("its CA's signature on it does not verify".to_owned()));
    }
    Ok(Cert {
        key,
        serial,
        user,
        key_id,
        principals,
        valid_after,
        valid_before,
        ca,
    })
}

/// Whether `sig` is `key`'s signature over `data`. RSA must be `rsa-sha2-256` or
/// `rsa-sha2-512` (`ssh-rsa`'s SHA-1 is refused, as ssh-keygen refuses it in an SSHSIG and the
/// `ssh-key` crate cannot read it).
pub fn verify(key: &KeyData, data: &[u8], sig: &Signature) -> bool {
    use ring::signature as rs;
    match (key, sig.algorithm()) {
        (KeyData::Rsa(k), Algorithm::Rsa { hash: Some(hash) }) => {
            let (Some(n), Some(e)) = (k.n.as_positive_bytes(), k.e.as_positive_bytes()) else {
                return false;
            };
            let bits = rsa_bits(n);
            // `ring` takes 2048 to 8192 bits and an exponent below 2^33.
            if !(2048..=8192).contains(&bits) || e.len() > 4 {
                return fallback(key, data, sig);
            }
            let params = match hash {
                HashAlg::Sha256 => &rs::RSA_PKCS1_2048_8192_SHA256,
                HashAlg::Sha512 => &rs::RSA_PKCS1_2048_8192_SHA512,
                _ => return false,
            };
            // OpenSSH pads a signature shorter than the modulus with leading zeros.
            let s = sig.as_bytes();
            let padded;
            let s = if s.len() < n.len() {
                padded = [vec![0; n.len() - s.len()], s.to_vec()].concat();
                &padded[..]
            } else {
                s
            };
            rs::RsaPublicKeyComponents { n, e }
                .verify(params, data, s)
                .is_ok()
        }
        (KeyData::Ecdsa(k), Algorithm::Ecdsa { curve }) if k.curve() == curve => {
            let (alg, width): (&dyn rs::VerificationAlgorithm, usize) = match curve {
                EcdsaCurve::NistP256 => (&rs::ECDSA_P256_SHA256_FIXED, 32),
                EcdsaCurve::NistP384 => (&rs::ECDSA_P384_SHA384_FIXED, 48),
                EcdsaCurve::NistP521 => return fallback(key, data, sig),
            };
            // `mpint r, mpint s` to the fixed-width `r || s`.
            let mut w = Wire(sig.as_bytes());
            let mut fixed = Vec::with_capacity(2 * width);
            for _ in 0..2 {
                let Some(v) = w.string() else {
                    return false;
                };
                let v = &v[v.iter().take_while(|&&b| b == 0).count()..];
                if v.len() > width {
                    return false;
                }
                fixed.resize(fixed.len() + width - v.len(), 0);
                fixed.extend_from_slice(v);
            }
            w.0.is_empty()
                && rs::UnparsedPublicKey::new(alg, k.as_sec1_bytes())
                    .verify(data, &fixed)
                    .is_ok()
        }
        (KeyData::Rsa(_) | KeyData::Ecdsa(_), _) => false,
        _ => fallback(key, data, sig),
    }
}

/// The size of an RSA modulus (big-endian, no leading zero byte) in bits.
fn rsa_bits(n: &[u8]) -> usize {
    n.len() * 8 - n.first().map_or(8, |b| b.leading_zeros() as usize)
}

/// Why mcpsum does not check signatures of `key` at all, if it does not: an RSA key shorter
/// than 2048 bits (which ssh-keygen still makes and accepts) proves too little.
pub fn weak_key(key: &KeyData) -> Option<String> {
    let KeyData::Rsa(k) = key else {
        return None;
    };
    let bits = k.n.as_positive_bytes().map_or(0, rsa_bits);
    (bits < 2048).then(|| {
        format!("an RSA key of {bits} bits; mcpsum checks RSA signatures of 2048 bits or more")
    })
}

fn fallback(key: &KeyData, data: &[u8], sig: &Signature) -> bool {
    signature::Verifier::verify(key, data, sig).is_ok()
}

/// The data an SSHSIG signs: the namespace, the hash algorithm and the message's hash.
pub fn signed_data(sig: &Sig, msg: &[u8]) -> Option<Vec<u8>> {
    ssh_key::SshSig::signed_data(&sig.namespace, sig.hash_alg, msg).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_strings_stop_at_the_end() {
        let mut w = Wire(&[0, 0, 0, 2, b'h', b'i', 0, 0, 0, 9, b'x']);
        assert_eq!(w.string(), Some(&b"hi"[..]));
        assert_eq!(w.string(), None);
        assert_eq!(Wire(&[0, 0]).u32(), None);
    }

    #[test]
    fn not_a_signature() {
        assert!(parse(b"hello").is_err());
        let pem = "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n";
        assert!(
            parse(pem.as_bytes())
                .unwrap_err()
                .what
                .contains("cut short or damaged")
        );
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\n";
        let e = parse(format!("text first\n{key}").as_bytes()).unwrap_err();
        assert!(e.private_key && e.junk, "{e:?}");
        assert!(
            !e.what.contains("b3Bl") && !e.what.contains("OPENSSH"),
            "{e:?}"
        );
    }
}
