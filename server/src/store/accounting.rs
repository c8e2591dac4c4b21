//! Accounting: what jobs and sessions used over a time range, per job and summed by
//! user, group, account or calendar bucket.
//!
//! A job counts for the part of its run inside the range `[from, to)` (a job still
//! running counts up to `now`): GPU-seconds are `gpu_milli / 1000` × those seconds,
//! CPU-seconds `cpus` × those seconds. Jobs are found through the indexes on
//! `end_time` (those that ended after `from`, or still run) and checked against
//! `start_time < to`. Must not touch: who may see what (the API decides).

use jiff::civil::Date;
use jiff::{Timestamp, ToSpan};
use sqlx::any::AnyRow;
use sqlx::Row;

use super::sql::{Arg, Sql};
use super::{opt_i64, Backend, Result, Store};

/// Which jobs to account for; `None` matches everything. Times are Unix ms.
#[derive(Debug, Clone, Default)]
pub struct UsageFilter {
    pub from: i64,
    pub to: i64,
    /// Running jobs count up to this time.
    pub now: i64,
    pub user: Option<String>,
    /// Jobs of the group's current members.
    pub group: Option<String>,
    pub account: Option<String>,
    pub partition: Option<String>,
}

/// One job (or array task, or session) that ran during the range.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UsageRecord {
    pub id: i64,
    pub task: i64,
    pub user_name: String,
    pub account: String,
    pub partition: String,
    pub name: String,
    /// `job` or `session`.
    pub kind: String,
    pub state: String,
    pub exit_code: Option<i64>,
    pub exit_signal: Option<i64>,
    pub submit_time: i64,
    pub start_time: i64,
    pub end_time: Option<i64>,
    /// Seconds; `None`: unlimited.
    pub time_limit: Option<i64>,
    pub nodelist: String,
    pub cpus: i64,
    pub memory_mb: i64,
    /// Generic resources as `squeue` prints them (`gpu:2`).
    pub gres: String,
    /// GPUs given, in thousandths of a whole GPU.
    pub gpu_milli: i64,
    /// Milliseconds run inside the range.
    pub used_ms: i64,
}

impl UsageRecord {
    pub fn wall_seconds(&self) -> f64 {
        self.used_ms as f64 / 1e3
    }

    pub fn gpu_seconds(&self) -> f64 {
        self.gpu_milli as f64 * self.used_ms as f64 / 1e6
    }

    pub fn cpu_seconds(&self) -> f64 {
        self.cpus as f64 * self.used_ms as f64 / 1e3
    }
}

/// What a set of jobs used inside the range.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    pub jobs: i64,
    pub gpu_seconds: f64,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), |a, b| Usage {
            jobs: a.jobs + b.jobs,
            gpu_seconds: a.gpu_seconds + b.gpu_seconds,
            cpu_seconds: a.cpu_seconds + b.cpu_seconds,
            wall_seconds: a.wall_seconds + b.wall_seconds,
        })
    }
}

/// What to sum usage by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UsageKey {
    User,
    /// A job counts for every group its user is a member of now.
    Group,
    Account,
}

/// Usage of one user, group or account.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    pub key: String,
    pub usage: Usage,
}

/// Calendar buckets, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    Day,
    /// From Monday.
    Week,
    Month,
}

/// Usage inside one bucket, of one key (empty when not keyed).
#[derive(Debug, Clone, PartialEq)]
pub struct BucketUsage {
    /// The bucket's first instant (Unix ms).
    pub start: i64,
    pub key: String,
    pub usage: Usage,
}

/// The most buckets one query may ask for (ten years of days).
pub const MAX_BUCKETS: usize = 3660;

/// A filter as SQL over `jobs j`.
struct Filtered {
    /// The `WHERE` clause.
    clause: String,
    /// The milliseconds a job ran inside the range.
    used: String,
    /// When a job's run inside the range began.
    run_from: String,
}

fn filter_sql<'a>(backend: Backend, filter: &'a UsageFilter, sql: &mut Sql<'a>) -> Filtered {
    let from = sql.arg(Arg::Int(filter.from));
    let to = sql.arg(Arg::Int(filter.to));
    let now = sql.arg(Arg::Int(filter.now));
    let (least, greatest) = match backend {
        Backend::Sqlite => ("MIN", "MAX"),
        Backend::Postgres => ("LEAST", "GREATEST"),
    };
    let used = format!(
        "{greatest}(0, {least}(COALESCE(j.end_time, {now}), {to}) - {greatest}(j.start_time, {from}))"
    );
    let mut clauses = vec![
        format!("j.start_time IS NOT NULL AND j.start_time < {to}"),
        format!(
            "(j.end_time > {from} OR (j.end_time IS NULL AND j.state IN ('RUNNING', 'COMPLETING')))"
        ),
    ];
    if let Some(user) = &filter.user {
        clauses.push(format!("j.user_name = {}", sql.arg(Arg::Text(user))));
    }
    if let Some(account) = &filter.account {
        clauses.push(format!("j.account = {}", sql.arg(Arg::Text(account))));
    }
    if let Some(partition) = &filter.partition {
        clauses.push(format!("j.partition = {}", sql.arg(Arg::Text(partition))));
    }
    if let Some(group) = &filter.group {
        clauses.push(format!(
            "j.user_name IN (SELECT u.username FROM users u \
             JOIN memberships m ON m.user_id = u.id JOIN groups g ON g.id = m.group_id \
             WHERE g.name = {})",
            sql.arg(Arg::Text(group))
        ));
    }
    Filtered {
        clause: clauses.join(" AND "),
        used,
        run_from: format!("{greatest}(j.start_time, {from})"),
    }
}

/// The grouping column of `key` and the joins it needs.
fn key_sql(key: Option<UsageKey>) -> (&'static str, &'static str) {
    match key {
        None => ("''", ""),
        // Not the bare column: SQLite would then walk the whole (user_name, end_time)
        // index to group without sorting, instead of the range of end times.
        Some(UsageKey::User) => ("j.user_name || ''", ""),
        Some(UsageKey::Account) => ("j.account", ""),
        // Joined on an expression for the same reason: the jobs of the range come
        // first, each then finds its user's groups (not every job of every member).
        Some(UsageKey::Group) => (
            "kg.name",
            "JOIN users ku ON ku.username = j.user_name || '' \
             JOIN memberships km ON km.user_id = ku.id JOIN groups kg ON kg.id = km.group_id",
        ),
    }
}

fn usage_from_row(row: &AnyRow) -> Result<Usage> {
    Ok(Usage {
        jobs: row.try_get("jobs")?,
        gpu_seconds: row.try_get::<f64, _>("gpu_milli_ms")? / 1e6,
        cpu_seconds: row.try_get::<f64, _>("cpu_ms")? / 1e3,
        wall_seconds: row.try_get::<f64, _>("used_ms")? / 1e3,
    })
}

/// The sums of a usage query over `used` (the expression of ms run in range).
fn sums_sql(used: &str) -> String {
    format!(
        "COUNT(*) AS jobs, \
         COALESCE(SUM(CAST(j.gpu_milli AS DOUBLE PRECISION) * {used}), 0.0) AS gpu_milli_ms, \
         COALESCE(SUM(CAST(j.cpus AS DOUBLE PRECISION) * {used}), 0.0) AS cpu_ms, \
         COALESCE(SUM(CAST({used} AS DOUBLE PRECISION)), 0.0) AS used_ms"
    )
}

fn record_from_row(row: &AnyRow) -> Result<UsageRecord> {
    Ok(UsageRecord {
        id: row.try_get("id")?,
        task: row.try_get("task")?,
        user_name: row.try_get("user_name")?,
        account: row.try_get("account")?,
        partition: row.try_get("partition")?,
        name: row.try_get("name")?,
        kind: row.try_get("kind")?,
        state: row.try_get("state")?,
        exit_code: opt_i64(row, "exit_code")?,
        exit_signal: opt_i64(row, "exit_signal")?,
        submit_time: row.try_get("submit_time")?,
        start_time: row.try_get("start_time")?,
        end_time: opt_i64(row, "end_time")?,
        time_limit: opt_i64(row, "time_limit")?,
        nodelist: row.try_get("nodelist")?,
        cpus: row.try_get("cpus")?,
        memory_mb: row.try_get("memory_mb")?,
        gres: row.try_get("gpus")?,
        gpu_milli: row.try_get("gpu_milli")?,
        used_ms: row.try_get("used_ms")?,
    })
}

impl Store {
    /// Jobs that ran during the range, by start time, `limit` from `offset`.
    #[tracing::instrument(skip_all, fields(from = filter.from, to = filter.to), err)]
    pub async fn usage_records(
        &self,
        filter: &UsageFilter,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<UsageRecord>> {
        let mut sql = Sql::default();
        let Filtered { clause, used, .. } = filter_sql(self.backend, filter, &mut sql);
        let limit = sql.arg(Arg::Int(limit));
        let offset = sql.arg(Arg::Int(offset));
        let text = format!(
            "SELECT j.id, j.task, j.user_name, j.account, j.partition, j.name, j.state, \
             j.exit_code, j.exit_signal, j.submit_time, j.start_time, j.end_time, j.time_limit, \
             j.nodelist, j.cpus, j.memory_mb, j.gpus, j.gpu_milli, {used} AS used_ms, \
             CASE WHEN EXISTS (SELECT 1 FROM sessions s WHERE s.job_id = j.id) \
             THEN 'session' ELSE 'job' END AS kind \
             FROM jobs j WHERE {clause} ORDER BY j.start_time, j.id, j.task \
             LIMIT {limit} OFFSET {offset}"
        );
        sql.bind(&text)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(record_from_row)
            .collect()
    }

    /// What every job of the range used, summed.
    #[tracing::instrument(skip_all, fields(from = filter.from, to = filter.to), err)]
    pub async fn usage_total(&self, filter: &UsageFilter) -> Result<Usage> {
        let mut sql = Sql::default();
        let Filtered { clause, used, .. } = filter_sql(self.backend, filter, &mut sql);
        let text = format!("SELECT {} FROM jobs j WHERE {clause}", sums_sql(&used));
        let row = sql.bind(&text).fetch_one(&self.pool).await?;
        usage_from_row(&row)
    }

    /// Usage summed by user, group or account, most GPU-seconds first.
    #[tracing::instrument(skip_all, fields(from = filter.from, to = filter.to, ?key), err)]
    pub async fn usage_by(&self, filter: &UsageFilter, key: UsageKey) -> Result<Vec<UsageRow>> {
        let mut sql = Sql::default();
        let Filtered { clause, used, .. } = filter_sql(self.backend, filter, &mut sql);
        let (column, joins) = key_sql(Some(key));
        let text = format!(
            "SELECT {column} AS key, {} FROM jobs j {joins} WHERE {clause} \
             GROUP BY {column} ORDER BY gpu_milli_ms DESC, key",
            sums_sql(&used)
        );
        sql.bind(&text)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| {
                Ok(UsageRow {
                    key: row.try_get("key")?,
                    usage: usage_from_row(row)?,
                })
            })
            .collect()
    }

    /// Usage per calendar bucket of the range (and per key when `key` is given): a job
    /// running across buckets counts in each for the time it ran there. Buckets
    /// without usage are left out.
    #[tracing::instrument(skip_all, fields(from = filter.from, to = filter.to, ?bucket, ?key), err)]
    pub async fn usage_by_bucket(
        &self,
        filter: &UsageFilter,
        bucket: Bucket,
        key: Option<UsageKey>,
    ) -> Result<Vec<BucketUsage>> {
        let bounds = bucket_bounds(filter.from, filter.to, bucket);
        let mut sql = Sql::default();
        let Filtered {
            clause,
            used,
            run_from,
        } = filter_sql(self.backend, filter, &mut sql);
        let (column, joins) = key_sql(key);
        let text = format!(
            "SELECT {column} AS key, {run_from} AS run_from, {used} AS used_ms, \
             j.gpu_milli, j.cpus FROM jobs j {joins} WHERE {clause}"
        );
        let rows = sql.bind(&text).fetch_all(&self.pool).await?;
        let spans = rows
            .iter()
            .map(|row| {
                Ok(Span {
                    key: row.try_get("key")?,
                    from: row.try_get("run_from")?,
                    ms: row.try_get("used_ms")?,
                    gpu_milli: row.try_get("gpu_milli")?,
                    cpus: row.try_get("cpus")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(split_into_buckets(&bounds, &spans))
    }
}

/// What one job ran inside the range: from when, for how long.
#[derive(Debug, Clone)]
struct Span {
    key: String,
    from: i64,
    ms: i64,
    gpu_milli: i64,
    cpus: i64,
}

/// The bucket starts covering `[from, to)`, the first at or before `from`, plus the
/// end of the last; at most [`MAX_BUCKETS`] buckets.
pub fn bucket_bounds(from: i64, to: i64, bucket: Bucket) -> Vec<i64> {
    let day = |ms: i64| -> Date {
        Timestamp::from_millisecond(ms)
            .unwrap_or(Timestamp::UNIX_EPOCH)
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date()
    };
    let first = day(from);
    let mut start = match bucket {
        Bucket::Day => first,
        Bucket::Week => {
            let back = i64::from(first.weekday().to_monday_zero_offset());
            first.checked_sub(back.days()).unwrap_or(first)
        }
        Bucket::Month => first.first_of_month(),
    };
    let step = match bucket {
        Bucket::Day => 1.day(),
        Bucket::Week => 1.week(),
        Bucket::Month => 1.month(),
    };
    let ms = |d: Date| -> i64 {
        d.to_zoned(jiff::tz::TimeZone::UTC)
            .map(|z| z.timestamp().as_millisecond())
            .unwrap_or(i64::MAX)
    };
    let mut bounds = vec![ms(start)];
    while *bounds.last().unwrap_or(&i64::MAX) < to && bounds.len() <= MAX_BUCKETS {
        match start.checked_add(step) {
            Ok(next) => {
                start = next;
                bounds.push(ms(start));
            }
            Err(_) => break,
        }
    }
    bounds
}

/// Spread each span over the buckets it touches.
fn split_into_buckets(bounds: &[i64], spans: &[Span]) -> Vec<BucketUsage> {
    use std::collections::BTreeMap;
    let mut sums: BTreeMap<(i64, &str), Usage> = BTreeMap::new();
    for span in spans.iter().filter(|s| s.ms > 0) {
        let end = span.from + span.ms;
        // The bucket holding `span.from`: the last start at or before it.
        let mut i = bounds
            .partition_point(|b| *b <= span.from)
            .saturating_sub(1);
        while i + 1 < bounds.len() && bounds[i] < end {
            let ms = end.min(bounds[i + 1]) - span.from.max(bounds[i]);
            if ms > 0 {
                let u = sums.entry((bounds[i], span.key.as_str())).or_default();
                u.jobs += 1;
                u.gpu_seconds += span.gpu_milli as f64 * ms as f64 / 1e6;
                u.cpu_seconds += span.cpus as f64 * ms as f64 / 1e3;
                u.wall_seconds += ms as f64 / 1e3;
            }
            i += 1;
        }
    }
    sums.into_iter()
        .map(|((start, key), usage)| BucketUsage {
            start,
            key: key.to_string(),
            usage,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>().expect("time").as_millisecond()
    }

    #[test]
    fn buckets_follow_the_calendar_in_utc() {
        let month = bucket_bounds(
            ms("2025-01-15T10:00:00Z"),
            ms("2025-03-01T00:00:00Z"),
            Bucket::Month,
        );
        assert_eq!(
            month,
            [
                ms("2025-01-01T00:00:00Z"),
                ms("2025-02-01T00:00:00Z"),
                ms("2025-03-01T00:00:00Z")
            ]
        );
        // 2025-03-05 is a Wednesday: its week starts on Monday the 3rd.
        let week = bucket_bounds(
            ms("2025-03-05T12:00:00Z"),
            ms("2025-03-11T00:00:00Z"),
            Bucket::Week,
        );
        assert_eq!(
            week,
            [
                ms("2025-03-03T00:00:00Z"),
                ms("2025-03-10T00:00:00Z"),
                ms("2025-03-17T00:00:00Z")
            ]
        );
        let days = bucket_bounds(
            ms("2025-03-01T00:00:00Z"),
            ms("2025-03-03T00:00:00Z"),
            Bucket::Day,
        );
        assert_eq!(days.len(), 3);
        let many = bucket_bounds(0, i64::MAX / 4, Bucket::Day);
        assert!(many.len() <= MAX_BUCKETS + 1);
    }

    #[test]
    fn a_span_across_buckets_counts_in_each_for_its_time_there() {
        let bounds = bucket_bounds(
            ms("2025-03-01T00:00:00Z"),
            ms("2025-03-04T00:00:00Z"),
            Bucket::Day,
        );
        let span = Span {
            key: "alice".into(),
            from: ms("2025-03-01T18:00:00Z"),
            ms: 30 * 3_600_000, // until 03-03 00:00
            gpu_milli: 2000,
            cpus: 4,
        };
        let got = split_into_buckets(&bounds, &[span]);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].start, ms("2025-03-01T00:00:00Z"));
        assert_eq!(got[0].usage.gpu_seconds, 2.0 * 6.0 * 3600.0);
        assert_eq!(got[1].usage.gpu_seconds, 2.0 * 24.0 * 3600.0);
        assert_eq!(got[1].usage.cpu_seconds, 4.0 * 24.0 * 3600.0);
        assert_eq!(got[0].usage.jobs + got[1].usage.jobs, 2);
    }
}
