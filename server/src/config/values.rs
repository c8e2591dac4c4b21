//! Value types that several sections share: a secret that never prints, and a
//! duration written as humans write it.
//!
//! Owns: [`Secret`] and [`HumanDuration`], how they read from TOML and how they print.
//! Must not touch: any section's keys, defaults or rules.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// A value that must never be printed: `Debug` and `Display` show `***`.
#[derive(Clone, Deserialize, Default, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A duration written as humans do: `90s`, `15m`, `1h 30m`, `8h`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    pub const fn from_secs(secs: u64) -> Self {
        Self(Duration::from_secs(secs))
    }
    pub const fn from_millis(millis: u64) -> Self {
        Self(Duration::from_millis(millis))
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text)
            .map(HumanDuration)
            .map_err(|e| serde::de::Error::custom(format!("{text:?} is not a duration: {e}")))
    }
}

/// As it is written: `1h`, `200ms`, `1h 30m`.
impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl fmt::Debug for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        assert_eq!(format!("{:?}", Secret::new("hunter2")), "***");
    }

    #[test]
    fn durations_print_as_written() {
        assert_eq!(HumanDuration::from_secs(3600).to_string(), "1h");
        assert_eq!(HumanDuration::from_millis(200).to_string(), "200ms");
        assert_eq!(HumanDuration::from_secs(1).to_string(), "1s");
    }
}
