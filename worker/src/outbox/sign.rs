//! Standard Webhooks signatures: `webhook-signature: v1,<base64(HMAC-SHA256(
//! key, "<id>.<timestamp>.<body>"))>`, with `webhook-id` the event id (the
//! receiver's deduplication key) and `webhook-timestamp` Unix seconds (the
//! receiver refuses old ones, which stops replays).

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The `webhook-signature` value for one delivery.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    // HMAC takes keys of any length: `new_from_slice` cannot fail here.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    let digest = mac.finalize().into_bytes();
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification (its
    /// reference libraries' test vector).
    #[test]
    fn signs_as_the_standard_webhooks_reference_does() {
        let key = base64::engine::general_purpose::STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        let sig = signature(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
