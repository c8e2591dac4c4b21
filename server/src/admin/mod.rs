//! Administration: quotas (kept in the database, enforced by the scheduler and at
//! session start), disabled accounts, and what administrators change through the
//! pages and the API.
//! Owns: turning stored quotas into scheduler limits, and the checks made before a
//! session starts. Must not touch: HTTP, or the scheduler's own rules.

pub mod quotas;

pub use quotas::{Audit, QuotaLimits, Quotas};
