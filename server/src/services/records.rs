//! What the services hand their callers of the store: plain values (rows, keys,
//! buckets, sort orders) as the store reads them, never a handle to the database.
//! The HTTP layer names these through here, not through the store.

pub use crate::store::{
    bucket_bounds, ApiToken, BenchmarkRecord, BenchmarkRun, BenchmarkSort, Bucket, JobRecord,
    Usage, UsageKey, UsageRecord, UsageRow, User,
};
