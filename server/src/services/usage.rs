//! Usage accounting: what jobs and sessions used over a time range, per job or summed
//! by user, group, account or calendar bucket.
//!
//! Owns: who may see whose usage (users their own; administrators everyone's; asking
//! for another user's is refused, not silently narrowed) and how an answer is
//! assembled from the store's sums. Must not touch: HTTP types (CSV, SVG and JSON are
//! the handlers'), SQL (the store).

use super::ServiceError;
use crate::accounting::answer::{Accounting, JobUsage, KeyUsage};
use crate::accounting::{GroupBy, Query};
use crate::auth::Principal;
use crate::store::{BucketUsage, Store, UsageKey};
use crate::util::now_ms;

/// `pairs` (a query string's) as `caller`'s query, checked and narrowed to what they
/// may see.
pub fn query_for(caller: &Principal, pairs: &[(String, String)]) -> Result<Query, ServiceError> {
    let mut query = Query::parse(pairs, now_ms())?;
    query
        .restrict_to(&caller.username, caller.acts_as_admin())
        .map_err(ServiceError::Forbidden)?;
    Ok(query)
}

/// The accounting service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Usage {
    store: Store,
}

impl Usage {
    pub fn new(store: Store) -> Usage {
        Usage { store }
    }

    /// The accounting answer for `query`.
    pub async fn answer(&self, query: &Query, limit: i64) -> Result<Accounting, ServiceError> {
        let f = &query.filter;
        let mut answer = Accounting::new(f.from, f.to, query.group_by);
        let total = match query.group_by {
            GroupBy::Job => {
                let mut records = self.store.usage_records(f, limit + 1, query.offset).await?;
                if records.len() as i64 > limit {
                    records.truncate(limit as usize);
                    answer.next = Some(query.offset + limit);
                }
                answer.jobs = Some(records.iter().map(|r| JobUsage::of(r, f.now)).collect());
                self.store.usage_total(f).await?
            }
            GroupBy::Key(key) => {
                let rows = self.store.usage_by(f, key).await?;
                // Every job has one user and one account: their rows add up to the total
                // (a job counts in each of its user's groups, or in none).
                let total = match key {
                    UsageKey::Group => self.store.usage_total(f).await?,
                    UsageKey::User | UsageKey::Account => rows.iter().map(|r| r.usage).sum(),
                };
                answer.rows = Some(rows.into_iter().map(KeyUsage::of_row).collect());
                total
            }
            GroupBy::Bucket(bucket) => {
                let rows = self.store.usage_by_bucket(f, bucket, None).await?;
                answer.rows = Some(rows.into_iter().map(KeyUsage::of_bucket).collect());
                self.store.usage_total(f).await?
            }
        };
        answer.totals = total.into();
        Ok(answer)
    }

    /// Usage per calendar bucket of `query`, stacked by `key` (for charts).
    pub async fn by_bucket(
        &self,
        query: &Query,
        key: UsageKey,
    ) -> Result<Vec<BucketUsage>, ServiceError> {
        Ok(self
            .store
            .usage_by_bucket(&query.filter, query.bucket, Some(key))
            .await?)
    }
}
