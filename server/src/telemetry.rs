//! Logging setup: `tracing` to stderr, as text or JSON, filtered by `log.filter`
//! (or `RUST_LOG` when set). Colours only on a terminal: a log file or journald
//! gets plain `key=value` fields.

use tracing_subscriber::EnvFilter;

use crate::config::LogConfig;

pub fn init(config: &LogConfig) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_new(&config.filter).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let result = if config.format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    // Already initialised (tests that start twice): keep the first.
    let _ = result;
}
