//! Payload decoding: any bytes read from Redis either decode to a payload
//! this build could have written, or give a typed error; never a panic.
#![no_main]

use compactor_shared::payload::{Payload, PayloadError, PAYLOAD_VERSION};
use compactor_shared::EntityKey;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let payload = match Payload::decode(data) {
        Ok(payload) => payload,
        Err(e) => {
            // Displaying the error (it is logged and dead-lettered) is safe.
            assert!(!e.to_string().is_empty());
            if let PayloadError::UnknownVersion { found } = e {
                assert_ne!(found, u64::from(PAYLOAD_VERSION), "own version refused");
            }
            return;
        }
    };
    assert_eq!(payload.v, PAYLOAD_VERSION, "decoded a foreign version");

    // decode → encode → decode is the identity, and the encoding is canonical.
    let encoded = payload.encode();
    let again = Payload::decode(encoded.as_bytes())
        .unwrap_or_else(|e| panic!("re-encoded payload {encoded:?} does not decode: {e}"));
    assert_eq!(again, payload, "decode(encode(p)) != p");
    assert_eq!(again.encode(), encoded, "encoding is not canonical");

    // Decoding enforces everything construction does: the payload is one
    // `Payload::new` would have built.
    let built = Payload::new(payload.key.clone(), payload.trigger.clone())
        .unwrap_or_else(|e| panic!("decoded a payload that Payload::new refuses: {e}"));
    assert_eq!(built, payload);

    // Its key is valid on its own and survives the job-key round trip.
    let key = &payload.key;
    assert_eq!(
        EntityKey::parse(key.domain(), key.entity_id()).as_ref(),
        Ok(key),
        "decoded key does not re-parse"
    );
    assert_eq!(key.job_key().parse::<EntityKey>().as_ref(), Ok(key));
});
