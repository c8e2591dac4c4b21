//! Licenses (`-L name[:count]`): counted site resources a job holds while it runs,
//! as Slurm's `Licenses=` (a site names them and their counts; a job waits with
//! reason `Licenses` while others hold them).

use super::state::Shape;
use super::Cluster;
use crate::error::SubmitError;
use crate::model::JobRequest;

impl Cluster {
    /// The licenses `req` asks, sorted by name; an unknown license or more than
    /// exist is refused, as Slurm refuses them at submit.
    pub(crate) fn licenses_asked(
        &self,
        req: &JobRequest,
    ) -> Result<Vec<(String, u32)>, SubmitError> {
        let mut out: Vec<(String, u32)> = Vec::with_capacity(req.licenses.len());
        for l in &req.licenses {
            let Some(&total) = self.cfg.licenses.get(&l.name) else {
                let known: Vec<&str> = self.cfg.licenses.keys().map(String::as_str).collect();
                return Err(SubmitError::Invalid(format!(
                    "no such license \"{}\" ({})",
                    l.name,
                    if known.is_empty() {
                        "this cluster has none".to_string()
                    } else {
                        format!("this cluster has {}", known.join(", "))
                    }
                )));
            };
            if l.count > total {
                return Err(SubmitError::Unsatisfiable(format!(
                    "{} licenses {} asked; the cluster has {total}",
                    l.count, l.name
                )));
            }
            out.push((l.name.clone(), l.count));
        }
        out.sort();
        Ok(out)
    }

    /// Whether the licenses of `shape` are free now.
    pub(crate) fn licenses_free_for(&self, shape: &Shape) -> bool {
        shape.key.licenses.iter().all(|(name, n)| {
            let total = self.cfg.licenses.get(name).copied().unwrap_or(0);
            let used = self.licenses_used.get(name).copied().unwrap_or(0);
            total.saturating_sub(used) >= *n
        })
    }

    /// A job of shape `shape_id` starts: it holds its licenses.
    pub(crate) fn take_licenses(&mut self, shape_id: u32) {
        let Some(shape) = self.shapes.get(shape_id as usize) else {
            return;
        };
        for (name, n) in &shape.key.licenses {
            *self.licenses_used.entry(name.clone()).or_default() += n;
        }
    }

    /// A job of shape `shape_id` stops: its licenses are free again.
    pub(crate) fn return_licenses(&mut self, shape_id: u32) {
        let Some(shape) = self.shapes.get(shape_id as usize) else {
            return;
        };
        for (name, n) in &shape.key.licenses {
            if let Some(used) = self.licenses_used.get_mut(name) {
                *used = used.saturating_sub(*n);
            }
        }
    }
}
