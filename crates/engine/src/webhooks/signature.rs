//! `X-Devicecloud-Signature` (docs/api.md, "Webhooks"): `sha256=` and the hex HMAC-SHA256 of the
//! exact body bytes, keyed with the UTF-8 bytes of the webhook's secret, so that a receiver can
//! tell a delivery from the service apart from a forged one.

use hmac::{KeyInit, Mac};

type HmacSha256 = hmac::Hmac<sha2_hmac::Sha256>;

/// The header value for `body` signed with `secret`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC accepts any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_rfc_4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        assert_eq!(
            sign("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
