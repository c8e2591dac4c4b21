//! `[quotas]`: how GPU-hour quotas count time. The quotas themselves are kept in the
//! database and edited by administrators (`/admin/quotas`, `/api/v1/admin/quotas`).

use std::time::Duration;

use serde::Deserialize;

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
            window: HumanDuration(Duration::from_secs(30 * 86_400)),
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
        if !matches!(self.period.as_str(), "month" | "rolling" | "fixed") {
            problem(
                "quotas.period",
                format!("{:?} is not one of month, rolling, fixed", self.period),
            );
        }
        if self.window.0 < Duration::from_secs(3600) {
            problem("quotas.window", "must be at least 1h".into());
        }
    }
}
