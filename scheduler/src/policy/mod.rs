//! Scheduling policy: multifactor priority with fair-share, limits per user, group
//! and account, and dependency evaluation. Owns the rules; the cluster calls them.
//! Must not change placement or node state.

pub(crate) mod dependency;
pub(crate) mod limits;
pub(crate) mod priority;
