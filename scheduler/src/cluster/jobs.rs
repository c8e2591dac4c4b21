//! The job table, and `squeue`'s lines indexed by what a listing filters on.
//!
//! A queue of 100,000 pending jobs must not be walked to answer one page of
//! `squeue` or to count it. Every change to a job goes through [`Jobs`]: a job
//! changed through [`Jobs::get_mut`] is listed again when the guard drops, so the
//! index cannot fall behind the table (`Jobs::lines_consistent` checks it).

use super::state::Job;
use crate::model::{JobId, JobState};
use std::cmp::Reverse;
use std::collections::btree_map::{self, BTreeMap};
use std::collections::btree_set::{self, BTreeSet};
use std::collections::hash_map::{self, HashMap};
use std::collections::BinaryHeap;
use std::ops::{Deref, DerefMut, RangeBounds};

/// What a line of `squeue` (without the jobs that are over) is filtered on: its
/// owner, its shape (which names the partition) and the state it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct LineKey {
    pub owner: u32,
    pub shape: u32,
    pub state: JobState,
    /// The line of an array's pending tasks (one line, several tasks).
    pub array: bool,
}

impl LineKey {
    /// The line `job` has in `squeue` while it is not over: a job pending, running
    /// or completing, or an array's pending tasks (one line, PENDING); `None` for a
    /// job that is over, or an array none of whose tasks is still pending.
    pub(crate) fn of(job: &Job) -> Option<LineKey> {
        let state = if job.is_array_parent() {
            let pending = job.array.as_ref().is_some_and(|a| !a.pending.is_empty());
            if !(pending && job.state == JobState::Pending) {
                return None;
            }
            JobState::Pending
        } else if job.state.is_terminal() {
            return None;
        } else {
            job.state
        };
        Some(LineKey {
            owner: job.owner,
            shape: job.shape,
            state,
            array: job.is_array_parent(),
        })
    }
}

/// The jobs by id, with the ids of the lines `squeue` lists by [`LineKey`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Jobs {
    table: BTreeMap<JobId, Job>,
    lines: Lines,
}

#[derive(Debug, Clone, Default)]
struct Lines {
    /// Hashed: a submission finds its key's set without comparing keys down a tree;
    /// the order of keys does not matter (a listing merges their sets by id).
    by_key: HashMap<LineKey, BTreeSet<JobId>>,
}

impl Lines {
    /// Moves `job`'s line to where its state puts it now.
    fn relist(&mut self, job: &mut Job) {
        let key = LineKey::of(job);
        let state = key.map(|k| k.state);
        if state == job.line {
            return;
        }
        if let Some(old) = listed(job) {
            self.unlist(old, job.id);
        }
        if let Some(new) = key {
            self.by_key.entry(new).or_default().insert(job.id);
        }
        job.line = state;
    }

    fn unlist(&mut self, key: LineKey, id: JobId) {
        if let hash_map::Entry::Occupied(mut e) = self.by_key.entry(key) {
            e.get_mut().remove(&id);
            if e.get().is_empty() {
                e.remove();
            }
        }
    }
}

/// The key `job` is listed under: a job's owner, shape and being an array never
/// change, so it keeps only the state of its line.
fn listed(job: &Job) -> Option<LineKey> {
    job.line.map(|state| LineKey {
        owner: job.owner,
        shape: job.shape,
        state,
        array: job.is_array_parent(),
    })
}

/// A job being changed; its line follows its state when this drops.
pub(crate) struct JobMut<'a> {
    job: &'a mut Job,
    lines: &'a mut Lines,
}

impl Deref for JobMut<'_> {
    type Target = Job;
    fn deref(&self) -> &Job {
        self.job
    }
}

impl DerefMut for JobMut<'_> {
    fn deref_mut(&mut self) -> &mut Job {
        self.job
    }
}

impl Drop for JobMut<'_> {
    fn drop(&mut self) {
        self.lines.relist(self.job);
    }
}

impl Jobs {
    pub fn get(&self, id: &JobId) -> Option<&Job> {
        self.table.get(id)
    }

    pub fn get_mut(&mut self, id: &JobId) -> Option<JobMut<'_>> {
        let job = self.table.get_mut(id)?;
        Some(JobMut {
            job,
            lines: &mut self.lines,
        })
    }

    /// Adds (or replaces) a job; whatever line `job` carried (a clone of another
    /// job's) is not its own.
    pub fn insert(&mut self, id: JobId, mut job: Job) {
        job.line = None;
        self.lines.relist(&mut job);
        if let Some(old) = self.table.insert(id, job).and_then(|old| listed(&old)) {
            // The new job's line, if it has the old one's key, was just listed.
            if self.table.get(&id).and_then(listed) != Some(old) {
                self.lines.unlist(old, id);
            }
        }
    }

    pub fn remove(&mut self, id: &JobId) -> Option<Job> {
        let mut job = self.table.remove(id)?;
        if let Some(old) = listed(&job) {
            self.lines.unlist(old, *id);
        }
        job.line = None;
        Some(job)
    }

    pub fn values(&self) -> btree_map::Values<'_, JobId, Job> {
        self.table.values()
    }

    pub fn iter(&self) -> btree_map::Iter<'_, JobId, Job> {
        self.table.iter()
    }

    pub fn keys(&self) -> btree_map::Keys<'_, JobId, Job> {
        self.table.keys()
    }

    pub fn range<R: RangeBounds<JobId>>(&self, r: R) -> btree_map::Range<'_, JobId, Job> {
        self.table.range(r)
    }

    pub fn last_key_value(&self) -> Option<(&JobId, &Job)> {
        self.table.last_key_value()
    }

    /// Every job, to change what does not move a line (priorities): checked in
    /// debug builds.
    pub fn for_each_keeping_lines(&mut self, mut f: impl FnMut(&mut Job)) {
        for job in self.table.values_mut() {
            f(job);
            debug_assert_eq!(LineKey::of(job), listed(job), "a job's line moved");
        }
    }

    /// The ids of the lines whose key passes `keep`, in id order, and how many
    /// there are: merged from each key's ids, so only what is read is walked.
    pub fn lines_where(&self, mut keep: impl FnMut(&LineKey) -> bool) -> (LineIds<'_>, u64) {
        let mut total = 0u64;
        let mut sources = Vec::new();
        for (key, ids) in &self.lines.by_key {
            if keep(key) {
                total += ids.len() as u64;
                sources.push(ids.iter());
            }
        }
        (LineIds::new(sources), total)
    }

    /// Every key with lines, and the ids of its lines.
    pub fn lines_by_key(&self) -> impl Iterator<Item = (&LineKey, &BTreeSet<JobId>)> {
        self.lines.by_key.iter()
    }

    /// Whether the index holds exactly the lines a walk of every job finds.
    pub fn lines_consistent(&self) -> bool {
        let mut walked: HashMap<LineKey, BTreeSet<JobId>> = HashMap::new();
        for (id, job) in &self.table {
            if LineKey::of(job) != listed(job) || job.id != *id {
                return false;
            }
            if let Some(k) = listed(job) {
                walked.entry(k).or_default().insert(*id);
            }
        }
        walked == self.lines.by_key
    }
}

impl std::ops::Index<&JobId> for Jobs {
    type Output = Job;
    fn index(&self, id: &JobId) -> &Job {
        &self.table[id]
    }
}

/// Ids from several sets, each in order, merged into one ascending sequence.
pub(crate) struct LineIds<'a> {
    sources: Vec<btree_set::Iter<'a, JobId>>,
    heads: BinaryHeap<Reverse<(JobId, usize)>>,
}

impl<'a> LineIds<'a> {
    fn new(mut sources: Vec<btree_set::Iter<'a, JobId>>) -> Self {
        let heads = sources
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| s.next().map(|id| Reverse((*id, i))))
            .collect();
        LineIds { sources, heads }
    }
}

impl Iterator for LineIds<'_> {
    type Item = JobId;
    fn next(&mut self) -> Option<JobId> {
        let Reverse((id, i)) = self.heads.pop()?;
        if let Some(next) = self.sources[i].next() {
            self.heads.push(Reverse((*next, i)));
        }
        Some(id)
    }
}
