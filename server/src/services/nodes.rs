//! Nodes as administrators control them: drain (no new work, running work
//! finishes), resume, or down (its work fails or is requeued at once).
//!
//! Owns: the checks on an action and its reason, and the audit entry with the node's
//! state before and after. Must not touch: HTTP types, the scheduler's own rules.

use scheduler::NodeCommand;
use serde::Serialize;
use utoipa::ToSchema;

use super::{Audit, ServiceError};
use crate::auth::Principal;
use crate::sched::Scheduler;

#[derive(Debug, Serialize, ToSchema)]
pub struct NodeChanged {
    pub node: String,
    /// The node's state now, as `sinfo` names it.
    pub state: String,
}

/// The nodes service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Nodes {
    scheduler: Scheduler,
    audit: Audit,
}

impl Nodes {
    pub fn new(scheduler: Scheduler, audit: Audit) -> Nodes {
        Nodes { scheduler, audit }
    }

    /// Drain, resume or down `node` for `caller` (an administrator), audited with its
    /// state before and after: the one path for the API and the pages.
    pub async fn set(
        &self,
        caller: &Principal,
        client_addr: &str,
        node: &str,
        action: &str,
        reason: &str,
    ) -> Result<NodeChanged, ServiceError> {
        let reason = reason.trim().to_string();
        if reason.len() > 200 || reason.chars().any(char::is_control) {
            return Err(ServiceError::invalid(
                "reason",
                "reason: at most 200 characters, on one line",
            ));
        }
        let command = match action {
            "drain" | "down" if reason.is_empty() => {
                return Err(ServiceError::invalid(
                    "reason",
                    format!(
                        "reason: say why the node is {}",
                        if action == "drain" { "drained" } else { "down" }
                    ),
                ))
            }
            "drain" => NodeCommand::Drain {
                reason: reason.clone(),
            },
            "down" => NodeCommand::Down {
                reason: reason.clone(),
            },
            "resume" => NodeCommand::Resume,
            other => {
                return Err(ServiceError::invalid(
                    "action",
                    format!("action: {other:?} is not one of drain, resume, down"),
                ))
            }
        };
        let (nodes, _) = self.scheduler.nodes().await?;
        let before = nodes
            .iter()
            .find(|n| n.name == node)
            .ok_or(ServiceError::NotFound)?
            .state
            .clone();
        self.scheduler.set_node(node.to_string(), command).await?;
        let (nodes, _) = self.scheduler.nodes().await?;
        let after = nodes
            .iter()
            .find(|n| n.name == node)
            .map(|n| n.state.clone())
            .unwrap_or_else(|| before.clone());
        self.audit
            .record(
                &caller.username,
                client_addr,
                &format!("node.{action}"),
                node,
                serde_json::json!({"before": before, "after": after, "reason": reason}),
            )
            .await?;
        Ok(NodeChanged {
            node: node.to_string(),
            state: after.name().to_string(),
        })
    }
}
