//! Prometheus metrics of the portal.
//!
//! Owns: the registry and the metric families. Must not touch: request handling
//! (the HTTP layer records into it).

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    logins: IntCounterVec,
    pub start_time: IntGauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// How a login attempt ended, as counted in `atrium_logins_total`.
#[derive(Debug, Clone, Copy)]
pub enum LoginOutcome {
    Ok,
    Failed,
    RateLimited,
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new_custom(Some("atrium".into()), None)?;
        let requests = IntCounterVec::new(
            Opts::new(
                "http_requests_total",
                "HTTP requests by route, method and status",
            ),
            &["route", "method", "status"],
        )?;
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "http_request_duration_seconds",
                "Time to answer an HTTP request, by route",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0,
            ]),
            &["route"],
        )?;
        let logins = IntCounterVec::new(
            Opts::new("logins_total", "Login attempts by outcome"),
            &["outcome"],
        )?;
        let start_time = IntGauge::new("start_time_seconds", "Unix time the portal started")?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(logins.clone()))?;
        registry.register(Box::new(start_time.clone()))?;
        for outcome in ["ok", "failed", "rate_limited"] {
            logins.with_label_values(&[outcome]);
        }
        Ok(Self {
            registry,
            requests,
            latency,
            logins,
            start_time,
        })
    }

    pub fn observe_request(&self, route: &str, method: &str, status: &str, seconds: f64) {
        self.requests
            .with_label_values(&[route, method, status])
            .inc();
        self.latency.with_label_values(&[route]).observe(seconds);
    }

    pub fn login(&self, outcome: LoginOutcome) {
        let label = match outcome {
            LoginOutcome::Ok => "ok",
            LoginOutcome::Failed => "failed",
            LoginOutcome::RateLimited => "rate_limited",
        };
        self.logins.with_label_values(&[label]).inc();
    }

    /// The text exposition format.
    pub fn render(&self) -> Result<String, prometheus::Error> {
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_requests_and_logins() {
        let m = Metrics::new().expect("metrics");
        m.observe_request("/api/v1/me", "GET", "200", 0.0004);
        m.login(LoginOutcome::Failed);
        let text = m.render().expect("render");
        assert!(text.contains(
            "atrium_http_requests_total{method=\"GET\",route=\"/api/v1/me\",status=\"200\"} 1"
        ));
        assert!(text.contains("atrium_logins_total{outcome=\"failed\"} 1"));
        assert!(text.contains("atrium_http_request_duration_seconds_bucket"));
    }
}
