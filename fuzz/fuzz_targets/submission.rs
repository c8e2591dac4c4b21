//! Fuzzes what the portal's submission builder (`server/src/sched/submission.rs`
//! `build` and `Submission::check_paths`) does with a user's text, through the
//! scheduler crate: a script's `#SBATCH` lines, then the JSON `options` as
//! `--name=value` words over them, then each `-o`/`-e` pattern expanded with the
//! request's job name and the longest job id, user and node. The builder itself
//! lives in the server crate, whose dependencies (actix, sqlx, TLS) are too heavy
//! to build instrumented here; it adds only the script, option-count and
//! environment bounds, which are plain length checks.
//!
//! Input: the script, a NUL byte, then option words separated by newlines.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scheduler::parse::limits::{MAX_HOST_NAME_BYTES, PATH_MAX};
use scheduler::parse::{expand_pattern, PatternContext};
use scheduler::{parse_args_with, parse_script_with, JobId, ParseLimits};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (script, words) = text.split_once('\0').unwrap_or((text, ""));
    let words: Vec<String> = words
        .lines()
        .filter(|w| !w.is_empty())
        .map(|w| format!("--{}", w.trim_start_matches('-')))
        .collect();
    let limits = ParseLimits::default();
    let Ok(mut req) = parse_script_with(script, &limits) else {
        return;
    };
    if let Ok(over) = parse_args_with(&words, &limits) {
        // As the builder merges them: options win.
        if over.name.is_some() {
            req.name = over.name;
        }
        if over.output.is_some() {
            req.output = over.output;
        }
        if over.error.is_some() {
            req.error = over.error;
        }
    }
    let node = "n".repeat(MAX_HOST_NAME_BYTES);
    let cx = PatternContext {
        job: JobId::task(u64::MAX, u32::MAX),
        user: "abcdefghijklmnopqrstuvwxyz012345",
        name: req.name.as_deref().unwrap_or("sbatch"),
        node: &node,
    };
    for pattern in [&req.output, &req.error].into_iter().flatten() {
        if let Ok(path) = expand_pattern(pattern, &cx) {
            assert!(path.len() <= PATH_MAX);
        }
    }
});
