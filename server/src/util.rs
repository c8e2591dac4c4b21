//! Small things every layer needs: the wall clock, random tokens, free space.
//!
//! Owns: reading the clock (milliseconds and seconds since the epoch), writing a
//! time as RFC 3339, making random URL-safe text, and the space of a file system. Must not touch: anything else in the crate (it is a leaf).

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

/// Bytes available to the portal (not reserved for root) and the size of the file
/// system holding `path`: `(free, size)`.
pub fn file_system_space(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    let fs = nix::sys::statvfs::statvfs(path).map_err(std::io::Error::from)?;
    let block = fs.fragment_size();
    Ok((
        fs.blocks_available().saturating_mul(block),
        fs.blocks().saturating_mul(block),
    ))
}

/// Unix time in seconds.
pub fn now_secs() -> i64 {
    now_ms() / 1000
}

/// A time (milliseconds since the epoch) as RFC 3339 in UTC, to the second.
pub fn rfc3339(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}
