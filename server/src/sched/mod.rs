//! Scheduling on this machine: what the node offers (inventory) and, later, the actor that owns the scheduler.
pub mod inventory;
