//! Support for atrium's black-box tests: throwaway PostgreSQL, headless Chromium,
//! supervised child processes and deadline-bounded waiting.

pub mod support;
