//! A Slurm-like scheduler for GPU slices, as a pure library.
//!
//! Owns: the cluster model (nodes, GPUs, MIG instances, shards, partitions), job
//! requests and their `#SBATCH` parsing, priority, limits, placement and backfill.
//! Must not touch: IO, clocks, threads or async. Time is always an argument.

pub mod model;
pub mod parse;

pub use model::*;
pub use parse::{parse_args, parse_script, ParseError};
