//! A self-signed certificate for 127.0.0.1, made with `openssl`, for a test's TLS server
//! (karpor's own listener, a kubelet stand-in).

use std::path::Path;
use std::process::Command;

/// The certificate's file name in the directory [`self_signed`] writes to.
pub const CERT_FILE: &str = "tls.crt";
/// The key's file name there.
pub const KEY_FILE: &str = "tls.key";

/// Writes a self-signed leaf certificate for `127.0.0.1` (valid a day) and its key into
/// `dir` as [`CERT_FILE`] and [`KEY_FILE`]; returns the certificate's PEM.
pub fn self_signed(dir: &Path) -> Vec<u8> {
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-keyout", KEY_FILE, "-out", CERT_FILE])
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("openssl: {e}"));
    assert!(made.status.success(), "openssl: {made:?}");
    std::fs::read(dir.join(CERT_FILE)).expect("openssl wrote the certificate")
}
