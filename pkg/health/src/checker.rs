//! The aggregator: runs the registered checks of an endpoint concurrently, each bounded by
//! its timeout and the whole response by a deadline; reuses a passing result for the cache
//! TTL (failures are never cached); shares one in-flight run among concurrent probes;
//! damps state changes; survives panicking checks; logs each transition once.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant, SystemTime};

use futures::future::{join_all, BoxFuture, Shared};
use futures::FutureExt;
use tokio::runtime::Handle;

use crate::damping::{Damping, Thresholds, Transition};
use crate::metrics::HealthMetrics;
use crate::report::{Entry, HealthReport};
use crate::reporter::{CheckOutcome, ComponentType, HealthReporter, Reason};

/// Name of the synthetic check that fails `/readyz` once shutdown has begun.
pub const SHUTDOWN_CHECK: &str = "Shutdown";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Bound on one run of one check.
    pub check_timeout: Duration,
    /// Bound on a whole response; at least `check_timeout`.
    pub deadline: Duration,
    /// How long a passing result is reused; zero turns the cache off.
    pub cache_ttl: Duration,
    pub thresholds: Thresholds,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            check_timeout: Duration::from_secs(1),
            deadline: Duration::from_secs(2),
            cache_ttl: Duration::from_secs(1),
            thresholds: Thresholds::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Livez = 0,
    Readyz = 1,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
        }
    }
}

/// Where a registered check takes part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Membership {
    pub livez: bool,
    pub readyz: bool,
    /// Calls another process; skipped for requests that carry the hop header.
    pub upstream: bool,
}

impl Membership {
    pub const LIVEZ: Membership = Membership {
        livez: true,
        readyz: false,
        upstream: false,
    };
    pub const READYZ: Membership = Membership {
        livez: false,
        readyz: true,
        upstream: false,
    };
    pub const BOTH: Membership = Membership {
        livez: true,
        readyz: true,
        upstream: false,
    };
    pub const UPSTREAM: Membership = Membership {
        livez: false,
        readyz: true,
        upstream: true,
    };

    fn includes(self, endpoint: Endpoint) -> bool {
        match endpoint {
            Endpoint::Livez => self.livez,
            Endpoint::Readyz => self.readyz,
        }
    }
}

/// What one probe asks for.
#[derive(Debug, Clone, Default)]
pub struct ReportRequest {
    /// Names to leave out, as given (case-insensitive; comma lists already split or not).
    pub excludes: Vec<String>,
    /// One check alone (`/readyz/{check}`).
    pub only: Option<String>,
    /// The request came from another karpor process: answer from local checks only.
    pub hop: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCheck(pub String);

type SharedRun = Shared<BoxFuture<'static, Evaluation>>;

#[derive(Debug, Clone)]
struct Evaluation {
    outcome: CheckOutcome,
    duration: Duration,
    at: SystemTime,
}

#[derive(Default)]
struct SlotState {
    damping: Damping,
    fresh_until: Option<Instant>,
    last: Option<Evaluation>,
    inflight: Option<SharedRun>,
    /// The status last exported to the gauge, per endpoint.
    exported: [Option<bool>; 2],
}

struct Slot {
    reporter: Arc<dyn HealthReporter>,
    /// Shared with every report, so a probe copies a pointer, not the text.
    name: Arc<str>,
    critical: bool,
    membership: Membership,
    settings: Settings,
    metrics: HealthMetrics,
    runtime: Option<Handle>,
    state: Mutex<SlotState>,
}

/// The process's health aggregator. Cheap to clone; every clone sees the same checks.
#[derive(Clone)]
pub struct HealthChecker {
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
    /// `must_ready` from config by lowercase check name.
    overrides: BTreeMap<String, bool>,
    metrics: HealthMetrics,
    slots: RwLock<Vec<Arc<Slot>>>,
    shutting_down: AtomicBool,
    /// Where checks run: the runtime that made the checker (the one running the stores'
    /// clients and the syncer), not the one serving the probe, so a flood of probes
    /// cannot starve the checks they wait for.
    runtime: Option<Handle>,
}

impl HealthChecker {
    pub fn new(settings: Settings, metrics: HealthMetrics) -> Self {
        Self::with_overrides(settings, metrics, BTreeMap::new())
    }

    /// With `must_ready` overrides from config by check name (case-insensitive), applied
    /// to every check registered later: the one place they are resolved. Made inside a
    /// runtime, the checker runs its checks there whichever runtime serves the probes.
    pub fn with_overrides(
        settings: Settings,
        metrics: HealthMetrics,
        overrides: BTreeMap<String, bool>,
    ) -> Self {
        HealthChecker {
            inner: Arc::new(Inner {
                settings,
                overrides: overrides
                    .into_iter()
                    .map(|(name, must)| (name.to_ascii_lowercase(), must))
                    .collect(),
                metrics,
                slots: RwLock::new(Vec::new()),
                shutting_down: AtomicBool::new(false),
                runtime: Handle::try_current().ok(),
            }),
        }
    }

    pub fn settings(&self) -> Settings {
        self.inner.settings
    }

    pub fn metrics(&self) -> &HealthMetrics {
        &self.inner.metrics
    }

    /// Adds a check after those already registered (the print order). Whether it is
    /// critical: `critical` if given, else the config's override for its name, else the
    /// reporter's own default. A check of the same name replaces the old one in place.
    pub fn register(
        &self,
        reporter: Arc<dyn HealthReporter>,
        membership: Membership,
        critical: Option<bool>,
    ) {
        let configured = self
            .inner
            .overrides
            .get(&reporter.name().to_ascii_lowercase())
            .copied();
        let slot = Arc::new(Slot {
            name: Arc::from(reporter.name()),
            critical: critical
                .or(configured)
                .unwrap_or_else(|| reporter.critical()),
            reporter,
            membership,
            settings: self.inner.settings,
            metrics: self.inner.metrics.clone(),
            runtime: self.inner.runtime.clone(),
            state: Mutex::new(SlotState {
                damping: Damping::new(self.inner.settings.thresholds),
                ..SlotState::default()
            }),
        });
        let mut slots = self.inner.slots.write().unwrap_or_else(|e| e.into_inner());
        match slots
            .iter()
            .position(|s| s.name.eq_ignore_ascii_case(&slot.name))
        {
            Some(i) => slots[i] = slot,
            None => slots.push(slot),
        }
    }

    /// Removes a check (a member cluster that was deregistered).
    pub fn deregister(&self, name: &str) {
        let mut slots = self.inner.slots.write().unwrap_or_else(|e| e.into_inner());
        slots.retain(|s| !s.name.eq_ignore_ascii_case(name));
    }

    /// From now on `/readyz` fails with `shutting down`; `/livez` is unaffected.
    pub fn begin_shutdown(&self) {
        if !self.inner.shutting_down.swap(true, Ordering::SeqCst) {
            tracing::info!("shutdown begun: readiness now fails");
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutting_down.load(Ordering::SeqCst)
    }

    /// Evaluates an endpoint. Never takes longer than the deadline (plus scheduling).
    pub async fn report(
        &self,
        endpoint: Endpoint,
        request: &ReportRequest,
    ) -> Result<HealthReport, UnknownCheck> {
        let all: Vec<Arc<Slot>> = self
            .inner
            .slots
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|s| s.membership.includes(endpoint))
            .cloned()
            .collect();
        let shutdown_applies = endpoint == Endpoint::Readyz;
        let is_shutdown =
            |name: &str| shutdown_applies && name.eq_ignore_ascii_case(SHUTDOWN_CHECK);

        let mut unknown_excludes = Vec::new();
        let mut excluded = Vec::new();
        for name in request
            .excludes
            .iter()
            .flat_map(|e| e.split(','))
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            if is_shutdown(name) || all.iter().any(|s| s.name.eq_ignore_ascii_case(name)) {
                excluded.push(name.to_ascii_lowercase());
            } else if !unknown_excludes.iter().any(|u: &String| u == name) {
                unknown_excludes.push(name.to_owned());
            }
        }
        let keep = |name: &str| !excluded.contains(&name.to_ascii_lowercase());

        let (selected, include_shutdown): (Vec<Arc<Slot>>, bool) = match &request.only {
            Some(only) if is_shutdown(only) => (Vec::new(), true),
            Some(only) => {
                let slot = all
                    .iter()
                    .find(|s| s.name.eq_ignore_ascii_case(only))
                    .ok_or_else(|| UnknownCheck(only.clone()))?;
                (vec![slot.clone()], false)
            }
            None => {
                let selected = all
                    .into_iter()
                    .filter(|s| keep(&s.name) && !(request.hop && s.membership.upstream))
                    .collect();
                let shutting_down = shutdown_applies && self.is_shutting_down();
                (selected, shutting_down && keep(SHUTDOWN_CHECK))
            }
        };

        let evaluations = self.run_all(&selected).await;
        let mut entries: Vec<Entry> = selected
            .iter()
            .zip(evaluations)
            .map(|(slot, e)| {
                slot.export_status(endpoint, e.outcome.is_pass());
                Entry {
                    name: slot.name.clone(),
                    critical: slot.critical,
                    component_type: slot.reporter.component_type(),
                    outcome: e.outcome,
                    duration: e.duration,
                    at: e.at,
                }
            })
            .collect();
        if include_shutdown {
            let outcome = if self.is_shutting_down() {
                CheckOutcome::fail(Reason::ShuttingDown, "SIGTERM or SIGINT received")
            } else {
                CheckOutcome::Pass
            };
            entries.push(Entry {
                name: Arc::from(SHUTDOWN_CHECK),
                critical: true,
                component_type: ComponentType::System,
                outcome,
                duration: Duration::ZERO,
                at: SystemTime::now(),
            });
            let pass = !self.is_shutting_down();
            self.inner
                .metrics
                .set_status(SHUTDOWN_CHECK, endpoint.as_str(), pass);
        }
        Ok(HealthReport {
            withheld: Vec::new(),
            entries,
            unknown_excludes,
            alone: request.only.is_some(),
        })
    }
}

impl HealthChecker {
    /// Every check's evaluation, in order. When all are cached (the common case under
    /// frequent probes) no timer is armed and nothing is awaited.
    async fn run_all(&self, selected: &[Arc<Slot>]) -> Vec<Evaluation> {
        let pending: Vec<Pending> = selected.iter().map(|slot| slot.evaluate()).collect();
        if pending.iter().all(|p| matches!(p, Pending::Ready(_))) {
            return pending
                .into_iter()
                .map(|p| match p {
                    Pending::Ready(e) => e,
                    Pending::Running(_) => unreachable!("all are ready"),
                })
                .collect();
        }
        let deadline = tokio::time::Instant::now() + self.inner.settings.deadline;
        let runs = pending.into_iter().map(|p| async move {
            let run = match p {
                Pending::Ready(e) => return e,
                Pending::Running(run) => run,
            };
            let started = Instant::now();
            match tokio::time::timeout_at(deadline, run).await {
                Ok(evaluation) => evaluation,
                Err(_) => Evaluation {
                    outcome: CheckOutcome::fail(
                        Reason::Timeout,
                        "no answer before the response deadline",
                    ),
                    duration: started.elapsed(),
                    at: SystemTime::now(),
                },
            }
        });
        join_all(runs).await
    }
}

/// A check's result for one probe: at hand, or still to be awaited.
enum Pending {
    Ready(Evaluation),
    Running(BoxFuture<'static, Evaluation>),
}

fn lock(state: &Mutex<SlotState>) -> MutexGuard<'_, SlotState> {
    // A panic never happens while the lock is held, but a poisoned lock must not take
    // health down with it.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl Slot {
    /// The cached pass, the run already in flight, or a new run.
    fn evaluate(self: &Arc<Self>) -> Pending {
        let mut state = lock(&self.state);
        if let (Some(until), Some(last)) = (state.fresh_until, &state.last) {
            if Instant::now() < until {
                return Pending::Ready(last.clone());
            }
        }
        if let Some(run) = &state.inflight {
            return Pending::Running(run.clone().boxed());
        }
        // Spawned, so a run finishes and records its result even when every probe that
        // waited on it has gone.
        let task = match &self.runtime {
            Some(runtime) => runtime.spawn(self.clone().run()),
            None => tokio::spawn(self.clone().run()),
        };
        let run = async move {
            task.await.unwrap_or_else(|_| Evaluation {
                outcome: CheckOutcome::fail(Reason::Panicked, "check task was cancelled"),
                duration: Duration::ZERO,
                at: SystemTime::now(),
            })
        }
        .boxed()
        .shared();
        state.inflight = Some(run.clone());
        Pending::Running(run.boxed())
    }

    /// Sets the status gauge when the reported state for `endpoint` changes, so steady
    /// probes do not touch the metrics registry.
    fn export_status(&self, endpoint: Endpoint, pass: bool) {
        let index = endpoint as usize;
        let mut state = lock(&self.state);
        if state.exported[index] != Some(pass) {
            state.exported[index] = Some(pass);
            // Under the lock, so concurrent probes cannot leave the gauge behind.
            self.metrics.set_status(&self.name, endpoint.as_str(), pass);
        }
    }

    async fn run(self: Arc<Self>) -> Evaluation {
        self.metrics.record_run(&self.name);
        let started = Instant::now();
        let check = AssertUnwindSafe(self.reporter.check()).catch_unwind();
        let raw = match tokio::time::timeout(self.settings.check_timeout, check).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(panic)) => CheckOutcome::fail(Reason::Panicked, panic_message(&*panic)),
            Err(_) => CheckOutcome::fail(
                Reason::Timeout,
                format!("no answer within {:?}", self.settings.check_timeout),
            ),
        };
        let duration = started.elapsed();
        self.metrics
            .observe_duration(&self.name, duration.as_secs_f64());
        self.complete(raw, duration)
    }

    fn complete(&self, raw: CheckOutcome, duration: Duration) -> Evaluation {
        let now = Instant::now();
        let mut state = lock(&self.state);
        let (reported, transition) = state.damping.observe(&raw, now);
        let ttl = self.settings.cache_ttl;
        state.fresh_until =
            (reported.is_pass() && raw.is_pass() && !ttl.is_zero()).then(|| now + ttl);
        let evaluation = Evaluation {
            outcome: reported,
            duration,
            at: SystemTime::now(),
        };
        state.last = Some(evaluation.clone());
        state.inflight = None;
        drop(state);
        if let Some(transition) = transition {
            self.log_transition(&transition);
        }
        evaluation
    }

    fn log_transition(&self, t: &Transition) {
        let to_pass = t.to.is_pass();
        if t.from_pass.is_some() {
            self.metrics.record_transition(&self.name, to_pass);
        }
        let previous = humanize(t.time_in_previous);
        match (&t.to, &t.raw) {
            (CheckOutcome::Fail(f), _) => tracing::warn!(
                check = %self.name,
                critical = self.critical,
                reason = %f.reason,
                error = %f.detail,
                previous_state_for = %previous,
                "health check failed"
            ),
            (CheckOutcome::Pass, Some(last)) => tracing::info!(
                check = %self.name,
                last_error = %last.detail,
                failed_for = %previous,
                "health check recovered"
            ),
            (CheckOutcome::Pass, None) => {
                tracing::info!(check = %self.name, "health check passing")
            }
        }
    }
}

fn humanize(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned());
    format!("check panicked: {text}")
}
