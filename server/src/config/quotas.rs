//! `[quotas]`: how GPU-hour quotas count time.
//!
//! Owns: [`QuotasConfig`], its defaults and checks, and the usage period it names.
//! Must not touch: the quotas themselves (kept in the database and edited by
//! administrators: `/admin/quotas`, `/api/v1/admin/quotas`).

use serde::Deserialize;

use super::check::{at_least, one_of};
use super::HumanDuration;

/// How GPU-hour quotas count time.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct QuotasConfig {
    /// `month` (calendar months, UTC: usage starts again on the first), `rolling`
    /// (the last `window`), or `fixed` (periods of `window` from the epoch).
    pub period: String,
    /// The length of a `rolling` or `fixed` period.
    pub window: HumanDuration,
}

impl Default for QuotasConfig {
    fn default() -> Self {
        QuotasConfig {
            period: "month".into(),
            window: HumanDuration::from_secs(30 * 86_400),
        }
    }
}

impl QuotasConfig {
    /// The period as the scheduler counts it.
    pub fn usage_period(&self) -> scheduler::UsagePeriod {
        let secs = self.window.0.as_secs().max(1);
        match self.period.as_str() {
            "rolling" => scheduler::UsagePeriod::Rolling { secs },
            "fixed" => scheduler::UsagePeriod::Fixed { secs },
            _ => scheduler::UsagePeriod::Month,
        }
    }

    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        one_of(
            problem,
            "quotas.period",
            &self.period,
            &["month", "rolling", "fixed"],
        );
        let hour = HumanDuration::from_secs(3600);
        at_least(problem, "quotas.window", self.window, hour);
    }
}
