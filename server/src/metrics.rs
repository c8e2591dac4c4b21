//! Prometheus metrics of the portal.
//!
//! Owns: the registry and the metric families. Must not touch: request handling
//! (the HTTP layer records into it).

use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use scheduler::{NodeView, QueueCounts};

/// Buckets for what takes milliseconds to seconds (a scheduling pass, a commit, a
/// bind, a Slurm poll).
const SHORT: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Sessions' kinds and the states of those not ended (`sessions::Kind`, the `state`
/// column): each pair is at zero until there is one, so a dashboard always finds them.
const SESSION_KINDS: [&str; 3] = ["notebook", "terminal", "tensorboard"];
const SESSION_STATES: [&str; 4] = ["pending", "starting", "ready", "stopping"];

/// Buckets for waiting in the queue: seconds to days.
const WAIT: [f64; 12] = [
    1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0, 259200.0,
];

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    logins: IntCounterVec,
    pub start_time: IntGauge,
    /// Read from the scheduler and the store at each scrape ([`Metrics::set_state`]).
    jobs: IntGaugeVec,
    pending_jobs: IntGaugeVec,
    gpu_slices: IntGaugeVec,
    sessions: IntGaugeVec,
    data_dir_free: IntGauge,
    data_dir_size: IntGauge,
    pub scheduler: SchedulerMetrics,
    pub ldap: LdapMetrics,
    pub slurm: SlurmMetrics,
    pub proxy: ProxyMetrics,
    pub sessions_ready: SessionMetrics,
}

/// The sessions' proxy: requests and websocket messages (each counter resolved once:
/// the proxy's path takes no lock for them).
#[derive(Clone, Debug)]
pub struct ProxyMetrics {
    pub http_requests: IntCounter,
    pub websocket_connections: IntCounter,
    pub messages_to_session: IntCounter,
    pub messages_to_browser: IntCounter,
}

/// Sessions getting ready.
#[derive(Clone, Debug)]
pub struct SessionMetrics {
    ready: Histogram,
}

/// What the internal scheduler's actor records.
#[derive(Clone, Debug)]
pub struct SchedulerMetrics {
    pass: Histogram,
    decisions: IntCounterVec,
    queue_wait: Histogram,
    commit: Histogram,
    pub usage: UsageMetrics,
}

/// Running jobs' GPUs at their latest usage sample (set by the step tasks).
#[derive(Clone, Debug)]
pub struct UsageMetrics {
    utilization: GaugeVec,
    memory: IntGaugeVec,
    sampled: IntGauge,
    idle: IntGauge,
}

/// One GPU of a running job at its latest sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuReading {
    pub index: u32,
    pub utilization_percent: u32,
    pub memory_bytes: u64,
    /// Below the idle threshold.
    pub idle: bool,
}

/// LDAP binds (logins and the service account's searches).
#[derive(Clone, Debug)]
pub struct LdapMetrics {
    bind: Histogram,
    binds: IntCounterVec,
}

/// The Slurm backend's polls of `squeue`.
#[derive(Clone, Debug)]
pub struct SlurmMetrics {
    poll: Histogram,
    failures: IntCounter,
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

/// What the scheduler decided, as counted in `atrium_scheduler_decisions_total`.
#[derive(Debug, Clone, Copy)]
pub enum DecisionKind {
    Start,
    Signal,
}

fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    buckets: &[f64],
) -> Result<Histogram, prometheus::Error> {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))?;
    registry.register(Box::new(h.clone()))?;
    Ok(h)
}

fn counters(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<IntCounterVec, prometheus::Error> {
    let c = IntCounterVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(c.clone()))?;
    Ok(c)
}

fn gauges(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<IntGaugeVec, prometheus::Error> {
    let g = IntGaugeVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(g.clone()))?;
    Ok(g)
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new_custom(Some("atrium".into()), None)?;
        let r = &registry;
        let requests = counters(
            r,
            "http_requests_total",
            "HTTP requests by route, method and status",
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
        registry.register(Box::new(latency.clone()))?;
        let logins = counters(r, "logins_total", "Login attempts by outcome", &["outcome"])?;
        let start_time = IntGauge::new("start_time_seconds", "Unix time the portal started")?;
        registry.register(Box::new(start_time.clone()))?;
        for outcome in ["ok", "failed", "rate_limited"] {
            logins.with_label_values(&[outcome]);
        }
        let scheduler = SchedulerMetrics {
            pass: histogram(
                r,
                "scheduler_pass_duration_seconds",
                "Time of one scheduling pass of the internal scheduler",
                &SHORT,
            )?,
            decisions: counters(
                r,
                "scheduler_decisions_total",
                "What scheduling passes decided: jobs started, and jobs signalled \
                 (cancelled, time limit, node failure)",
                &["decision"],
            )?,
            queue_wait: histogram(
                r,
                "job_queue_wait_seconds",
                "Time from submission to start of the jobs started",
                &WAIT,
            )?,
            commit: histogram(
                r,
                "store_commit_duration_seconds",
                "Time to write one batch of the scheduler (its log and job rows) to the \
                 database, durably",
                &SHORT,
            )?,
            usage: UsageMetrics::new(r)?,
        };
        for kind in ["start", "signal"] {
            scheduler.decisions.with_label_values(&[kind]);
        }
        let ldap = LdapMetrics {
            bind: histogram(
                r,
                "ldap_bind_duration_seconds",
                "Time of one LDAP bind, failed or not",
                &SHORT,
            )?,
            binds: counters(
                r,
                "ldap_binds_total",
                "LDAP binds by outcome (ok, rejected: wrong credentials, error: the \
                 directory could not be asked)",
                &["outcome"],
            )?,
        };
        for outcome in ["ok", "rejected", "error"] {
            ldap.binds.with_label_values(&[outcome]);
        }
        let slurm = SlurmMetrics {
            poll: histogram(
                r,
                "slurm_poll_duration_seconds",
                "Time of one poll of Slurm's queue (squeue), failed or not",
                &SHORT,
            )?,
            failures: IntCounter::new(
                "slurm_poll_failures_total",
                "Polls of Slurm's queue that failed (Slurm unreachable or its answer unread)",
            )?,
        };
        registry.register(Box::new(slurm.failures.clone()))?;
        let requests_by_kind = counters(
            r,
            "proxy_requests_total",
            "Requests proxied to sessions: HTTP requests, and websocket connections opened",
            &["kind"],
        )?;
        let messages = counters(
            r,
            "proxy_websocket_messages_total",
            "Websocket messages (text and binary) relayed, by direction",
            &["direction"],
        )?;
        let proxy = ProxyMetrics {
            http_requests: requests_by_kind.with_label_values(&["http"]),
            websocket_connections: requests_by_kind.with_label_values(&["websocket"]),
            messages_to_session: messages.with_label_values(&["to_session"]),
            messages_to_browser: messages.with_label_values(&["to_browser"]),
        };
        let sessions_ready = SessionMetrics {
            ready: histogram(
                r,
                "session_ready_seconds",
                "Time from asking for a session to its server answering",
                &[
                    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                ],
            )?,
        };
        let jobs = gauges(
            r,
            "jobs",
            "Jobs pending, running or completing, by partition and state (an array's \
             pending tasks count once)",
            &["partition", "state"],
        )?;
        let pending_jobs = gauges(r, "pending_jobs", "Pending jobs by reason", &["reason"])?;
        let gpu_slices = gauges(
            r,
            "gpu_slices",
            "GPU slices (whole GPUs, MIG instances, shards) per node and type, allocated \
             or free",
            &["node", "type", "state"],
        )?;
        let sessions = gauges(
            r,
            "sessions",
            "Interactive sessions not ended, by kind and state",
            &["kind", "state"],
        )?;
        let data_dir_free = IntGauge::new(
            "data_dir_free_bytes",
            "Space left for the portal on the file system of its data directory",
        )?;
        let data_dir_size = IntGauge::new(
            "data_dir_size_bytes",
            "Size of the file system of the portal's data directory",
        )?;
        registry.register(Box::new(data_dir_free.clone()))?;
        registry.register(Box::new(data_dir_size.clone()))?;
        Ok(Self {
            registry,
            requests,
            latency,
            logins,
            start_time,
            jobs,
            pending_jobs,
            gpu_slices,
            sessions,
            data_dir_free,
            data_dir_size,
            scheduler,
            ldap,
            slurm,
            proxy,
            sessions_ready,
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

    /// The queue, the GPUs and the sessions as they are now; label sets that are gone
    /// (a partition with no job left) are dropped.
    pub fn set_state(
        &self,
        queue: &QueueCounts,
        nodes: &[NodeView],
        sessions: &[(String, String, i64)],
    ) {
        self.jobs.reset();
        for ((partition, state), n) in &queue.by_state {
            self.jobs
                .with_label_values(&[partition.as_str(), state.name()])
                .set(*n as i64);
        }
        self.pending_jobs.reset();
        for (reason, n) in &queue.pending_by_reason {
            self.pending_jobs
                .with_label_values(&[reason.name()])
                .set(*n as i64);
        }
        self.gpu_slices.reset();
        for node in nodes {
            for s in &node.slices {
                let labels = |state| [node.name.as_str(), s.r#type.as_str(), state];
                self.gpu_slices
                    .with_label_values(&labels("allocated"))
                    .set(i64::from(s.used));
                self.gpu_slices
                    .with_label_values(&labels("free"))
                    .set(i64::from(s.total.saturating_sub(s.used)));
            }
        }
        self.sessions.reset();
        for kind in SESSION_KINDS {
            for state in SESSION_STATES {
                self.sessions.with_label_values(&[kind, state]).set(0);
            }
        }
        for (kind, state, n) in sessions {
            self.sessions
                .with_label_values(&[kind.as_str(), state.as_str()])
                .set(*n);
        }
    }

    /// The data directory's file system: bytes available to the portal, and its size.
    pub fn set_data_dir(&self, free: u64, size: u64) {
        self.data_dir_free
            .set(i64::try_from(free).unwrap_or(i64::MAX));
        self.data_dir_size
            .set(i64::try_from(size).unwrap_or(i64::MAX));
    }

    /// The text exposition format.
    pub fn render(&self) -> Result<String, prometheus::Error> {
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

impl SchedulerMetrics {
    pub fn pass(&self, seconds: f64) {
        self.pass.observe(seconds);
    }

    pub fn decided(&self, kind: DecisionKind, n: usize) {
        let label = match kind {
            DecisionKind::Start => "start",
            DecisionKind::Signal => "signal",
        };
        self.decisions.with_label_values(&[label]).inc_by(n as u64);
    }

    /// A job started `seconds` after it was submitted.
    pub fn waited(&self, seconds: f64) {
        self.queue_wait.observe(seconds.max(0.0));
    }

    pub fn committed(&self, seconds: f64) {
        self.commit.observe(seconds);
    }
}

impl UsageMetrics {
    fn new(r: &Registry) -> Result<Self, prometheus::Error> {
        let utilization = GaugeVec::new(
            Opts::new(
                "job_gpu_utilization_ratio",
                "Utilisation of each GPU a running job holds, at the job's latest usage \
                 sample (0 to 1)",
            ),
            &["node", "gpu"],
        )?;
        r.register(Box::new(utilization.clone()))?;
        let sampled = IntGauge::new(
            "job_gpus_sampled",
            "GPUs held by running jobs whose utilisation was read at the latest sample",
        )?;
        let idle = IntGauge::new(
            "job_gpus_idle",
            "GPUs held by running jobs that were idle (under 10 % busy) at the latest \
             sample",
        )?;
        r.register(Box::new(sampled.clone()))?;
        r.register(Box::new(idle.clone()))?;
        Ok(UsageMetrics {
            utilization,
            memory: gauges(
                r,
                "job_gpu_memory_used_bytes",
                "Memory used on each GPU a running job holds, at the job's latest usage \
                 sample",
                &["node", "gpu"],
            )?,
            sampled,
            idle,
        })
    }

    /// A running job's GPUs were read: `before` is what the last reading of the same
    /// job said (counted out first).
    pub fn gpus(&self, node: &str, before: &[GpuReading], now: &[GpuReading]) {
        self.gone(node, before);
        for g in now {
            let gpu = g.index.to_string();
            self.utilization
                .with_label_values(&[node, &gpu])
                .set(f64::from(g.utilization_percent) / 100.0);
            self.memory
                .with_label_values(&[node, &gpu])
                .set(g.memory_bytes as i64);
            self.sampled.inc();
            if g.idle {
                self.idle.inc();
            }
        }
    }

    /// The job that held these GPUs ended.
    pub fn gone(&self, node: &str, readings: &[GpuReading]) {
        for g in readings {
            let gpu = g.index.to_string();
            let _ = self.utilization.remove_label_values(&[node, &gpu]);
            let _ = self.memory.remove_label_values(&[node, &gpu]);
            self.sampled.dec();
            if g.idle {
                self.idle.dec();
            }
        }
    }
}

impl LdapMetrics {
    /// A bind that took `seconds`: `Some(true)` accepted, `Some(false)` refused the
    /// credentials, `None` could not be asked.
    pub fn bind(&self, seconds: f64, accepted: Option<bool>) {
        self.bind.observe(seconds);
        let outcome = match accepted {
            Some(true) => "ok",
            Some(false) => "rejected",
            None => "error",
        };
        self.binds.with_label_values(&[outcome]).inc();
    }
}

impl SessionMetrics {
    pub fn ready_after(&self, seconds: f64) {
        self.ready.observe(seconds.max(0.0));
    }
}

impl SlurmMetrics {
    pub fn poll(&self, seconds: f64, ok: bool) {
        self.poll.observe(seconds);
        if !ok {
            self.failures.inc();
        }
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

    #[test]
    fn each_scrape_shows_the_state_as_it_is_now() {
        use scheduler::{JobState, NodeState, PendingReason, SliceUsage};
        let m = Metrics::new().expect("metrics");
        let mut queue = QueueCounts::default();
        queue.by_state.insert(("gpu".into(), JobState::Pending), 3);
        queue.by_state.insert(("gpu".into(), JobState::Running), 1);
        queue.pending_by_reason.insert(PendingReason::Resources, 3);
        let node = NodeView {
            name: "n1".into(),
            state: NodeState::Mixed,
            partitions: vec!["gpu".into()],
            cpus_total: 8,
            cpus_free: 4,
            memory_mb_total: 1024,
            memory_mb_free: 512,
            features: Vec::new(),
            slices: vec![SliceUsage {
                r#type: "a100".into(),
                total: 4,
                used: 1,
            }],
        };
        let sessions = vec![("notebook".to_string(), "ready".to_string(), 2)];
        m.set_state(&queue, std::slice::from_ref(&node), &sessions);
        let text = m.render().expect("render");
        for line in [
            "atrium_jobs{partition=\"gpu\",state=\"PENDING\"} 3",
            "atrium_jobs{partition=\"gpu\",state=\"RUNNING\"} 1",
            "atrium_pending_jobs{reason=\"Resources\"} 3",
            "atrium_gpu_slices{node=\"n1\",state=\"allocated\",type=\"a100\"} 1",
            "atrium_gpu_slices{node=\"n1\",state=\"free\",type=\"a100\"} 3",
            "atrium_sessions{kind=\"notebook\",state=\"ready\"} 2",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // Nothing left: the label sets go.
        m.set_state(&QueueCounts::default(), &[], &[]);
        let text = m.render().expect("render");
        assert!(!text.contains("atrium_jobs{"), "{text}");
        assert!(
            text.contains("atrium_sessions{kind=\"notebook\",state=\"ready\"} 0"),
            "{text}"
        );
    }
}
