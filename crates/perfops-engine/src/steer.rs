//! A running load's plan, re-planned by hand (the live page's buttons,
//! `perfops ctl`): what the workers switch to, and how they learn of it.
//!
//! The caller publishes a whole new plan ([`Replan::publish`]: the load
//! model, the stage ends, the end) that is equal to the old one before the
//! instant it takes effect (`perfops_core::model::StagedPlan` makes it so),
//! so a worker may switch at any moment before that instant and no arrival
//! number or due time it has used moves. The cost stays off the hot path:
//!
//! ```text
//!   steering ──publish──> Replan { generation +1, plan }
//!                            │ read every 20 ms by each worker's stop watcher
//!                            v (the one that already looks at the stop flag)
//!   worker: plan (RefCell), generation (Cell) ──stop_notify──> the pacer, asleep or at its next
//!                                              wake-up: arrival n again, under the new plan
//! ```
//!
//! Per request nothing is added to the open model (the pacer compares a
//! `Cell` once per wake-up); a closed-model user borrows the worker's plan
//! once per request, as it asked the model before.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use perfops_core::model::{LoadModel, Schedule};

/// A load's plan as the workers run it.
#[derive(Debug, Clone)]
pub struct Current {
    /// The model: its schedule (open) or users over time (closed).
    pub load: LoadModel,
    /// End offset of each stage (empty: one stage).
    pub stage_ends: Vec<Duration>,
    /// When the load's time is up, from its start ([`LoadModel::end`]).
    pub end: Option<Duration>,
}

impl Current {
    /// The open model's schedule.
    #[inline]
    pub(crate) fn schedule(&self) -> Option<&Schedule> {
        match &self.load {
            LoadModel::Open { schedule, .. } => Some(schedule),
            LoadModel::Closed { .. } => None,
        }
    }

    /// When stage `stage` ends, from the load's start (`None`: no end known).
    pub(crate) fn stage_end(&self, stage: u16) -> Option<Duration> {
        self.stage_ends.get(usize::from(stage)).copied().or(self.end)
    }

    /// The stage an arrival due at `offset` belongs to.
    #[inline]
    pub(crate) fn stage_at(&self, offset: Duration) -> u16 {
        self.stage_ends.iter().position(|&end| offset < end).unwrap_or(self.stage_ends.len().saturating_sub(1)) as u16
    }
}

/// Where a new plan is published for a running load's workers.
#[derive(Debug, Default)]
pub struct Replan {
    generation: AtomicU64,
    plan: Mutex<Option<Arc<Current>>>,
}

impl Replan {
    /// Nothing published yet: the workers run the [`crate::Plan`]'s own.
    pub fn new() -> Arc<Replan> {
        Arc::default()
    }

    /// Make `plan` the load's from now on (equal to the old one before the
    /// instant it changes anything: see the module doc).
    pub fn publish(&self, plan: Current) {
        *self.plan.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(plan));
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// How many plans were published.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The last plan published, if any.
    pub fn current(&self) -> Option<Arc<Current>> {
        self.plan.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}
