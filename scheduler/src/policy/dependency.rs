//! Dependency evaluation (`after`, `afterany`, `afterok`, `afternotok`,
//! `singleton`; all-of or any-of) against the states of other jobs.

use crate::cluster::Cluster;
use crate::model::{DepKind, Dependency, JobId, JobState, Time};

/// Outcome of evaluating a dependency at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DepStatus {
    Satisfied,
    /// Not yet; re-evaluate at this time if given (else on a job event).
    Waiting(Option<Time>),
    Never,
}

/// What is known of a job a dependency names.
struct Target {
    started: Option<Time>,
    /// `Some(ok)` once over.
    over: Option<bool>,
}

impl Cluster {
    fn target(&self, id: JobId) -> Option<Target> {
        if let Some(j) = self.jobs.get(&id) {
            if let Some(a) = &j.array {
                let over = (a.pending.is_empty() && a.active == 0)
                    .then_some(a.done_not_ok == 0 && j.state == JobState::Completed);
                return Some(Target {
                    started: a.first_start,
                    over,
                });
            }
            let over = j
                .state
                .is_terminal()
                .then_some(j.state == JobState::Completed);
            return Some(Target {
                started: j
                    .start_time
                    .or(if over.is_some() { j.end_time } else { None }),
                over,
            });
        }
        let task = id.task?;
        let parent = self.jobs.get(&JobId::new(id.job))?;
        let a = parent.array.as_ref()?;
        let pending = a
            .pending
            .iter()
            .any(|&(f, l, s)| task >= f && task <= l && (task - f) % s == 0);
        if pending {
            return Some(Target {
                started: None,
                over: None,
            });
        }
        // Cancelled before it was split off.
        if parent.state == JobState::Cancelled {
            return Some(Target {
                started: None,
                over: Some(false),
            });
        }
        None
    }

    /// Whether every job a dependency names exists.
    pub(crate) fn dependency_known(&self, dep: &Dependency) -> Result<(), String> {
        for item in &dep.items {
            for t in &item.targets {
                if self.target(t.job).is_none() {
                    return Err(format!("job {} does not exist", t.job));
                }
            }
        }
        Ok(())
    }

    pub(crate) fn evaluate_dependency(&self, dep: &Dependency, now: Time) -> DepStatus {
        let mut statuses = Vec::with_capacity(dep.items.len());
        for item in &dep.items {
            let mut st = DepStatus::Satisfied;
            for t in &item.targets {
                let s = match self.target(t.job) {
                    None => DepStatus::Never,
                    Some(tg) => match item.kind {
                        DepKind::After => match (tg.started, tg.over) {
                            (Some(s), _) => {
                                let at = s + t.delay_secs as i64;
                                if at <= now {
                                    DepStatus::Satisfied
                                } else {
                                    DepStatus::Waiting(Some(at))
                                }
                            }
                            (None, Some(_)) => DepStatus::Satisfied,
                            (None, None) => DepStatus::Waiting(None),
                        },
                        DepKind::AfterAny => match tg.over {
                            Some(_) => DepStatus::Satisfied,
                            None => DepStatus::Waiting(None),
                        },
                        DepKind::AfterOk => match tg.over {
                            Some(true) => DepStatus::Satisfied,
                            Some(false) => DepStatus::Never,
                            None => DepStatus::Waiting(None),
                        },
                        DepKind::AfterNotOk => match tg.over {
                            Some(false) => DepStatus::Satisfied,
                            Some(true) => DepStatus::Never,
                            None => DepStatus::Waiting(None),
                        },
                        DepKind::Singleton => DepStatus::Satisfied,
                    },
                };
                st = all_of(st, s);
            }
            statuses.push(st);
        }
        if dep.any {
            let mut out = DepStatus::Never;
            for s in statuses {
                out = match (out, s) {
                    (DepStatus::Satisfied, _) | (_, DepStatus::Satisfied) => DepStatus::Satisfied,
                    (DepStatus::Waiting(a), DepStatus::Waiting(b)) => {
                        DepStatus::Waiting(min_opt(a, b))
                    }
                    (DepStatus::Waiting(a), DepStatus::Never)
                    | (DepStatus::Never, DepStatus::Waiting(a)) => DepStatus::Waiting(a),
                    (DepStatus::Never, DepStatus::Never) => DepStatus::Never,
                };
            }
            out
        } else {
            statuses.into_iter().fold(DepStatus::Satisfied, all_of)
        }
    }

    /// Whether a singleton job must wait: another job with its name and user runs.
    pub(crate) fn singleton_blocked(&self, id: JobId) -> bool {
        let Some(j) = self.jobs.get(&id) else {
            return false;
        };
        let Some(dep) = &j.req.dependency else {
            return false;
        };
        if !dep.items.iter().any(|i| i.kind == DepKind::Singleton) {
            return false;
        }
        let user = &self.owners[j.owner as usize].owner.user;
        let name = j.req.name.as_deref().unwrap_or("");
        self.running_by_end.iter().any(|(_, rid)| {
            rid.job != id.job
                && self.jobs.get(rid).is_some_and(|r| {
                    r.req.name.as_deref().unwrap_or("") == name
                        && self.owners[r.owner as usize].owner.user == *user
                })
        })
    }
}

fn min_opt(a: Option<Time>, b: Option<Time>) -> Option<Time> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) | (None, a) => a,
    }
}

fn all_of(a: DepStatus, b: DepStatus) -> DepStatus {
    match (a, b) {
        (DepStatus::Never, _) | (_, DepStatus::Never) => DepStatus::Never,
        (DepStatus::Waiting(x), DepStatus::Waiting(y)) => DepStatus::Waiting(x.max(y).or(x).or(y)),
        (DepStatus::Waiting(x), DepStatus::Satisfied)
        | (DepStatus::Satisfied, DepStatus::Waiting(x)) => DepStatus::Waiting(x),
        (DepStatus::Satisfied, DepStatus::Satisfied) => DepStatus::Satisfied,
    }
}
