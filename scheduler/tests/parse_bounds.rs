//! The `#SBATCH` parser stays bounded on hostile input: arbitrary text and
//! adversarial directives (overlapping huge arrays, host lists of enormous
//! expansion, `%x` patterns, long values, many directives) either parse into a
//! request within every documented bound or are refused, and no parse allocates
//! more than a fixed budget plus a small multiple of its input. A counting
//! allocator measures the peak; this binary holds one test so nothing else
//! allocates meanwhile.
// The counting allocator wraps the system allocator; nothing else is unsafe.
#![allow(unsafe_code)]
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use scheduler::parse::limits::{
    MAX_COMMENT_BYTES, MAX_HOSTS, MAX_HOST_NAME_BYTES, MAX_NAME_BYTES, PATH_MAX,
};
use scheduler::{parse_args, parse_script, JobRequest, MaxArraySize};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counting;
static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = NOW.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        NOW.fetch_sub(l.size(), Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if n > l.size() {
            grew(n - l.size());
        } else {
            NOW.fetch_sub(l.size() - n, Relaxed);
        }
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes a parse may allocate beyond its input: two host lists of the most names
/// (with `String` overheads), the array bitset and the rest, with room to spare.
const BUDGET: usize = 8 << 20;

/// `f()` and the most bytes it held at once beyond what was held before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = NOW.load(Relaxed);
    PEAK.store(before, Relaxed);
    let out = f();
    (out, PEAK.load(Relaxed).saturating_sub(before))
}

fn assert_bounded(req: &JobRequest) {
    if let Some(a) = &req.array {
        assert!(a.fits(MaxArraySize::DEFAULT), "{a}");
        assert!(a.len() <= u64::from(MaxArraySize::DEFAULT.get()));
        assert!(a.ranges.len() <= MaxArraySize::DEFAULT.get() as usize);
    }
    for list in [&req.nodelist, &req.exclude] {
        assert!(list.len() <= MAX_HOSTS);
        assert!(list.iter().all(|h| h.len() <= MAX_HOST_NAME_BYTES));
    }
    for name in [&req.name, &req.partition, &req.account, &req.qos] {
        assert!(name.as_ref().is_none_or(|n| n.len() <= MAX_NAME_BYTES));
    }
    assert!(req
        .comment
        .as_ref()
        .is_none_or(|c| c.len() <= MAX_COMMENT_BYTES));
    for path in [&req.output, &req.error, &req.chdir] {
        assert!(path.as_ref().is_none_or(|p| p.len() <= PATH_MAX));
    }
}

/// Parses `script` (and its directives again as options), checking the result's
/// bounds and the memory it took.
fn check(script: &str) {
    let (parsed, peak) = peak_of(|| parse_script(script));
    assert!(
        peak <= BUDGET + 16 * script.len(),
        "parsing {} bytes took {peak} bytes",
        script.len()
    );
    if let Ok(req) = &parsed {
        assert_bounded(req);
    }
    let words: Vec<&str> = script
        .lines()
        .filter_map(|l| l.strip_prefix("#SBATCH"))
        .flat_map(str::split_whitespace)
        .collect();
    let (parsed, peak) = peak_of(|| parse_args(&words));
    assert!(
        peak <= BUDGET + 16 * script.len(),
        "options took {peak} bytes"
    );
    if let Ok(req) = &parsed {
        assert_bounded(req);
    }
}

/// One hostile directive: `kind` picks the attack, `n` and `k` size it.
fn hostile(kind: u8, n: u32, k: usize) -> String {
    match kind % 10 {
        0 => format!("--array={}", vec![format!("0-{n}"); k].join(",")),
        1 => format!(
            "--array={}",
            vec![format!("{}-{n}:{}", k % 7, k % 5 + 1); k].join(",")
        ),
        2 => format!("-w {}[0-{n}]", "n".repeat(k % 80)),
        3 => format!(
            "--exclude=x[{}]",
            vec![format!("0-{n}"); k % 50 + 1].join(",")
        ),
        4 => format!("-J {} -o {}", "j".repeat(k * 3), "%x".repeat(k)),
        5 => format!("--comment={}", "c".repeat(k * 5)),
        6 => format!("--export=ALL,{}", vec![format!("V{n}=x"); k].join(",")),
        7 => format!("--dependency=afterok{}", format!(":{n}").repeat(k)),
        8 => format!("-C {}", vec!["f"; k].join("&")),
        _ => format!("-e {}/%{}a", "d".repeat(k), n % 12),
    }
}

fn script_of(directives: &[String], repeat: usize) -> String {
    let mut s = String::from("#!/bin/bash\n");
    for _ in 0..repeat {
        for d in directives {
            s.push_str("#SBATCH ");
            s.push_str(d);
            s.push('\n');
        }
    }
    s.push_str("srun true\n");
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn parsing_hostile_directives_stays_bounded(
        text in "(#SBATCH [ -~]{0,200}\n){0,20}",
        attacks in prop::collection::vec((any::<u8>(), 0u32..4_000_000, 1usize..1500), 1..6),
        repeat in 1usize..300,
    ) {
        check(&text);
        let directives: Vec<String> =
            attacks.iter().map(|&(kind, n, k)| hostile(kind, n, k)).collect();
        check(&script_of(&directives, 1));
        check(&script_of(&directives[..1], repeat));
    }
}
