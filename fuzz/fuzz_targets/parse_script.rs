//! Fuzzes the `#SBATCH` parser: any input parses or fails with an error, never
//! panics, and a parsed request keeps every bound (array indices below
//! `MaxArraySize`, host lists, names, paths) and survives a JSON round trip.
//! Run with `-rss_limit_mb=256 -malloc_limit_mb=256` so that an allocation that
//! grows with the values written (not their length) is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scheduler::parse::limits::{MAX_HOSTS, MAX_HOST_NAME_BYTES, MAX_NAME_BYTES, PATH_MAX};
use scheduler::{parse_script_with, JobRequest, ParseLimits};

fn check(req: &JobRequest, limits: &ParseLimits) {
    if let Some(a) = &req.array {
        assert!(a.fits(limits.max_array_size));
        assert!(a.len() <= u64::from(limits.max_array_size.get()));
    }
    for list in [&req.nodelist, &req.exclude] {
        assert!(list.len() <= MAX_HOSTS);
        assert!(list.iter().all(|h| h.len() <= MAX_HOST_NAME_BYTES));
    }
    assert!(req.name.as_ref().is_none_or(|n| n.len() <= MAX_NAME_BYTES));
    assert!(req.output.as_ref().is_none_or(|p| p.len() <= PATH_MAX));
    if let Some(b) = &req.begin {
        let _ = b.resolve(1_700_000_000);
    }
    let json = serde_json_roundtrip(req);
    assert_eq!(&json, req);
}

fn serde_json_roundtrip(req: &JobRequest) -> JobRequest {
    let text = serde_json::to_string(req).expect("serialize");
    serde_json::from_str(&text).expect("read back")
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let limits = ParseLimits::default();
        if let Ok(req) = parse_script_with(text, &limits) {
            check(&req, &limits);
        }
        let _ = scheduler::parse::expand_hostlist(text);
    }
});
