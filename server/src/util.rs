//! Small things every layer needs: the wall clock and random tokens.
//!
//! Owns: reading the clock (milliseconds and seconds since the epoch) and making
//! random URL-safe text. Must not touch: anything else in the crate (it is a leaf).

/// Unix time in milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `n` random bytes as unpadded base64url text.
pub fn random_text(n: usize) -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut bytes = vec![0u8; n];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Unix time in seconds.
pub fn now_secs() -> i64 {
    now_ms() / 1000
}
