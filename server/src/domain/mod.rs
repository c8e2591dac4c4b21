//! Pure value types of the domain that several layers share (configuration, the
//! services, authentication): parsed once, compared and printed without IO.
//!
//! Owns: LDAP distinguished names in normal form, configured group lists, POSIX
//! identities, quotas (scopes and limits), the vocabulary of benchmark runs (suites,
//! metrics), GPU requests as `--gres` spells them, numbers as people read them
//! (plurals, axis ticks, the precision of a column and its total).
//! Must not touch: anything with IO, the store, the scheduler, HTTP (it is a leaf:
//! it depends on nothing else in the crate).

pub mod benchmark;
pub mod dn;
pub mod gres;
pub mod groups;
pub mod identity;
pub mod numbers;
pub mod quota;
