//! Whether the generator ran out of CPU: the one rule behind `quick`'s warning, a stage's
//! "inconclusive" verdict and the `generator_saturated` diagnosis; whether its scripts were
//! the cause ([`scripts_bound`]), which that diagnosis then names; and whether it stalled
//! ([`stalled`]: stopped, paused, or so far behind that arrivals left late or never).
//!
//! A stall is read from three counters of a stage's `Stats`, each the generator's own:
//!
//! ```text
//!   stalled_us  its first worker's 20 ms watch woke LATE or more after it was due: the
//!               process did not run (SIGSTOP, a VM paused, its CPU taken) for that long
//!   late        arrivals sent LATE or more after their due time (sent, charged in latency)
//!   unsent      arrivals due and never sent: the generator was behind when their stage or
//!               the run ended (sent + dropped + unsent = the arrivals due)
//!
//!   stalled  <=>  any of the three > 0
//!   decides  <=>  stalled_us >= 5% of the stage's seconds, or late + unsent >= 1% of its
//!                 arrivals (sent + unsent)
//! ```
//!
//! A stall that decides makes the stage inconclusive; a smaller one (a 200 ms hiccup in a
//! minute: a few arrivals of thousands late) is said in the summary's warnings and the stage
//! is judged all the same: its percentiles up to p99 hold under 1% of late arrivals.
//!
//! LATE (200 ms) is far past the pacer's own lateness (~50 µs, a few ms on a loaded 2-core
//! machine; docs/coordinated-omission.md) and past tokio's millisecond timer: only a generator
//! that did not run for that long leaves an arrival so late. A stage where it did judges the
//! generator, not the target: before, SIGSTOP for 3 s in a 3 s stage at 50/s left 65 of its
//! 150 arrivals neither sent nor counted, and the stage FAILED "achieved 23.3/s is 47% of the
//! target ... nothing watched shows what limited it".
//!
//! A CPU share is two measurements divided: CPU seconds over wall seconds times cores. It says
//! something only when the window is long beside how far its CPU reading can be off, so a share
//! is judged only when that error is at most [`MAX_SHARE_ERROR`] of the window's capacity:
//!
//! ```text
//!   judged       <=>  error_s <= MAX_SHARE_ERROR x wall_s x cores
//!   out of CPU   <=>  judged and cpu_s / (wall_s x cores) > GENERATOR_CPU_CEILING
//!
//!   source                         error_s   judged from (wall x cores)
//!   /proc/<pid>/stat (CpuClock::Proc)   20 ms     0.2 s  (every `watch.every` >= 100 ms on 2 CPUs)
//!   getrusage       (CpuClock::Rusage)  50 ms     0.5 s  (`quick` of 0.25 s on 2 cores)
//! ```
//!
//! Why these figures:
//! - **`MAX_SHARE_ERROR` = 0.10**, the headroom above the ceiling (1.0 - 0.9): a reading that
//!   may be off by more than that could put a generator at 80 % over the ceiling, or one at 100 %
//!   under it. When blamed, the CPU read is then at least 9 times its own error.
//! - **/proc**: `utime` and `stime` are in clock ticks (USER_HZ = 100, 10 ms), each truncated, so
//!   one reading is up to 2 ticks short and a difference of two readings is off by up to 20 ms.
//!   The watched `generator_cpu_share` of `run`, `limit` and `sweep` is such a difference, over
//!   one watch period.
//! - **getrusage(RUSAGE_SELF)**: microseconds, exact for the process; but it counts the process
//!   since exec while the window is the load. What ran before the load (argument parsing, the
//!   runtime, TLS roots, `.proto` files, the workers' start) is in the reading and not in the
//!   window: 7 ms for `quick -n 5` to a closed port over plain HTTP, 19 ms over HTTPS (its roots),
//!   measured on a 2-core VM with the dev build (opt-level 1). 50 ms allows for that with room.
//!   `quick`'s summary reads it.
//!
//! So `quick -n 5` against a closed port (1 ms of load, 7 ms of start-up: "836 % of 2 cores")
//! judges nothing, while a generator busy for seconds is judged as before. It does not read
//! either clock itself: the callers do, and say which.

/// Generator CPU (share of the cores it may use) above this makes a stage inconclusive, `quick`
/// warn and the diagnosis name the generator.
pub const GENERATOR_CPU_CEILING: f64 = 0.90;

/// The most a CPU reading may be off, as a share of the window's capacity, for its share to be
/// judged: the headroom above [`GENERATOR_CPU_CEILING`].
pub const MAX_SHARE_ERROR: f64 = 0.10;

/// Where a generator's CPU time was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuClock {
    /// `/proc/<pid>/stat`'s `utime + stime`, in ticks of 10 ms: two readings' difference.
    Proc,
    /// getrusage(RUSAGE_SELF): the whole process since exec, start-up included.
    Rusage,
}

impl CpuClock {
    /// How far a CPU time read from this clock may be from the window's own, seconds.
    pub fn error_s(self) -> f64 {
        match self {
            CpuClock::Proc => 0.020,
            CpuClock::Rusage => 0.050,
        }
    }
}

/// A window over which the generator's CPU was read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuWindow {
    /// CPU seconds (user + system) read over it.
    pub cpu_s: f64,
    /// Its wall-clock length, seconds.
    pub wall_s: f64,
    /// The cores the generator could use over it.
    pub cores: f64,
    /// Where the CPU seconds were read.
    pub clock: CpuClock,
}

impl CpuWindow {
    /// The share of its cores the generator used (0 over an empty window).
    pub fn share(&self) -> f64 {
        let capacity = self.capacity_s();
        if capacity > 0.0 { self.cpu_s / capacity } else { 0.0 }
    }

    /// Whether the window is long enough for its share to be judged.
    pub fn judged(&self) -> bool {
        let capacity = self.capacity_s();
        capacity.is_finite() && self.clock.error_s() <= MAX_SHARE_ERROR * capacity
    }

    /// The share, when it is judged and the generator ran out of CPU over the window.
    pub fn out_of_cpu(&self) -> Option<f64> {
        let share = self.share();
        (self.judged() && saturated(share)).then_some(share)
    }

    fn capacity_s(&self) -> f64 {
        self.wall_s.max(0.0) * self.cores.max(0.0)
    }
}

/// Whether a share that was judged (see [`CpuWindow::judged`]) is above the ceiling. Watched
/// shares reach the verdict and the diagnosis already judged (the caller keeps only those).
pub fn saturated(share: f64) -> bool {
    share > GENERATOR_CPU_CEILING
}

/// The watched series of the share of the generator's cores spent in scripts (hooks and
/// `script:` steps), per second: the workers' `script_ns` summed, over the second times the
/// cores. Only a scenario with scripts has it.
pub const SCRIPT_CPU_SHARE: &str = "script_cpu_share";

/// Whether the generator's scripts were its limit: it ran out of CPU (its share above the
/// ceiling, or, where its own CPU was not read, its scripts' share alone above it) and the
/// scripts took most of what it used (more than half). Then the figures judge the scripts, not
/// the server: a signing hook of 200 µs holds a core at 5,000 requests/s whatever the server
/// does.
pub fn scripts_bound(generator_share: Option<f64>, script_share: f64) -> bool {
    let used = generator_share.unwrap_or(script_share).max(script_share);
    saturated(used) && script_share > 0.5 * used
}

/// How late an arrival (or the generator's own watch) must be for the generator to have
/// stalled: see the module doc.
pub const LATE: std::time::Duration = std::time::Duration::from_millis(200);

/// Whether the stall in a stage of `stats` that ran `ran_s` seconds is large enough that the
/// stage judges the generator, not the target (module doc).
pub fn stall_decides(stats: &crate::measure::Stats, ran_s: f64) -> bool {
    let arrivals = (stats.sent + stats.unsent).max(1) as f64;
    stats.stalled_us as f64 >= 0.05 * ran_s * 1e6 || (stats.late + stats.unsent) as f64 >= 0.01 * arrivals
}

/// How the generator stalled in a stage of `stats` (module doc), said as the reason that
/// makes it inconclusive when it [decides](stall_decides); `None` when it did not stall.
pub fn stalled(stats: &crate::measure::Stats) -> Option<String> {
    let (late, unsent, stalled_us) = (stats.late, stats.unsent, stats.stalled_us);
    if late == 0 && unsent == 0 && stalled_us == 0 {
        return None;
    }
    let head = match stalled_us {
        // Not stopped: behind its schedule (a starved worker, or a load started late).
        0 => "the generator was behind its schedule".to_string(),
        us => format!("the generator stalled for {:.1} s", us as f64 / 1e6),
    };
    let mut what = Vec::new();
    if late > 0 {
        what.push(format!(
            "{late} arrival{} went out more than {} ms late",
            if late == 1 { "" } else { "s" },
            LATE.as_millis()
        ));
    }
    if unsent > 0 {
        what.push(format!("{unsent} {} never sent", if unsent == 1 { "was" } else { "were" }));
    }
    let what = if what.is_empty() { String::new() } else { format!(" ({})", what.join(", ")) };
    Some(format!("{head}{what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stall's reason names the generator with its figures; no stall, no reason.
    #[test]
    fn a_stall_names_the_generator_with_its_figures() {
        use crate::measure::Stats;
        // (stalled_us, late, unsent, the reason)
        let cases: [(u64, u64, u64, Option<&str>); 5] = [
            // Nothing late, nothing lost, never stopped: no stall.
            (0, 0, 0, None),
            // The issue's run: stopped 3 s, the stage's last arrivals never sent.
            (3_000_000, 0, 65, Some("the generator stalled for 3.0 s (65 were never sent)")),
            // Stopped within a longer stage: its arrivals went out late, charged in latency.
            (2_040_000, 101, 0, Some("the generator stalled for 2.0 s (101 arrivals went out more than 200 ms late)")),
            // Behind without its watch seeing it stopped (a starved worker; an agent's seconds).
            (
                0,
                1,
                1,
                Some(
                    "the generator was behind its schedule (1 arrival went out more than 200 ms late, 1 was never sent)",
                ),
            ),
            // Stopped between two arrivals (a low rate): the stop alone.
            (260_000, 0, 0, Some("the generator stalled for 0.3 s")),
        ];
        for (stalled_us, late, unsent, want) in cases {
            let s = Stats { stalled_us, late, unsent, ..Stats::default() };
            assert_eq!(stalled(&s).as_deref(), want, "{stalled_us} {late} {unsent}");
        }
    }

    /// Which stalls decide a stage: 5% of its time, or 1% of its arrivals late or never sent.
    #[test]
    fn a_stall_decides_a_stage_when_it_is_a_share_of_it() {
        use crate::measure::Stats;
        // (stalled_us, late, unsent, sent, the stage's seconds, decides)
        let cases: [(u64, u64, u64, u64, f64, bool); 6] = [
            // no stall
            (0, 0, 0, 1000, 10.0, false),
            // a 200 ms hiccup in a minute, 3 arrivals of 6,000 late: judged all the same
            (200_000, 3, 0, 6000, 60.0, false),
            // stopped 3 s of a 3 s stage
            (3_000_000, 0, 65, 85, 3.0, true),
            // 0.5 s of 10 s: 5%
            (500_000, 0, 0, 1000, 10.0, true),
            // 10 of 1,000 arrivals late (1%), the watch saw no stop (a starved worker)
            (0, 10, 0, 1000, 10.0, true),
            // one arrival late of 1,000
            (0, 1, 0, 1000, 10.0, false),
        ];
        for (i, (stalled_us, late, unsent, sent, ran_s, want)) in cases.into_iter().enumerate() {
            let s = Stats { stalled_us, late, unsent, sent, ..Stats::default() };
            assert_eq!(stall_decides(&s, ran_s), want, "case {i}");
        }
    }

    #[test]
    fn scripts_are_named_when_they_took_most_of_a_saturated_generator() {
        // (generator's share, scripts' share, scripts bound)
        let cases = [
            // Out of CPU, 80 of its 95 points in scripts: the scripts were the limit.
            (Some(0.95), 0.80, true),
            // Out of CPU, scripts a tenth of it: the generator's own work (sockets) was.
            (Some(0.95), 0.10, false),
            // Scripts took most of a generator that had CPU left: nothing was the limit.
            (Some(0.50), 0.45, false),
            // The generator's CPU not read (no watch): the scripts' share alone above the ceiling.
            (None, 0.97, true),
            (None, 0.40, false),
            // A reading of the generator below its scripts' (two clocks, two windows): the larger counts.
            (Some(0.30), 0.93, true),
            // Exactly half of a saturated generator is not "most".
            (Some(0.96), 0.48, false),
        ];
        for (generator, scripts, want) in cases {
            assert_eq!(scripts_bound(generator, scripts), want, "{generator:?} {scripts}");
        }
    }

    #[test]
    fn a_share_is_judged_only_over_a_window_long_beside_its_error() {
        use CpuClock::{Proc, Rusage};
        // (cpu s, wall s, cores, clock, out of CPU: Some(share) or None)
        let cases = [
            // `quick -n 5` to a closed port: 7 ms of start-up over 1.4 ms of load on 2 cores
            // ("the generator used 836% of its 2 core(s)"): nothing judged.
            (0.007, 0.0014, 2.0, Rusage, None),
            // HTTPS start-up (19 ms) over a 100 ms run: still too short to say.
            (0.190, 0.100, 2.0, Rusage, None),
            // 0.25 s on 2 cores is 0.5 s of capacity, the least getrusage's 50 ms allows: judged.
            (0.475, 0.250, 2.0, Rusage, Some(0.95)),
            // A 10 s quick run that kept one core busy: the warning stands.
            (9.7, 10.0, 1.0, Rusage, Some(0.97)),
            // Busy but under the ceiling: judged, not out of CPU.
            (8.0, 10.0, 1.0, Rusage, None),
            // Exactly at the ceiling is not above it.
            (0.9, 1.0, 1.0, Rusage, None),
            // A watched sample over 1 s on 2 CPUs at 99 %: judged (0.02 <= 0.1 x 2).
            (1.98, 1.0, 2.0, Proc, Some(0.99)),
            // `watch.every: 100ms` on 2 CPUs: 0.2 s of capacity, exactly what /proc's 20 ms allow.
            (0.19, 0.1, 2.0, Proc, Some(0.95)),
            // The same period on 1 CPU: two ticks could be 20 points of share; not judged.
            (0.099, 0.1, 1.0, Proc, None),
            // No cores, no wall time, or nonsense: never judged, never a panic.
            (1.0, 1.0, 0.0, Proc, None),
            (1.0, 0.0, 2.0, Rusage, None),
            (1.0, f64::INFINITY, 2.0, Rusage, None),
            (f64::NAN, 10.0, 2.0, Rusage, None),
        ];
        for (cpu_s, wall_s, cores, clock, want) in cases {
            let w = CpuWindow { cpu_s, wall_s, cores, clock };
            let got = w.out_of_cpu();
            match (got, want) {
                (Some(g), Some(x)) => assert!((g - x).abs() < 1e-9, "{w:?}: {g} != {x}"),
                (g, x) => assert_eq!(g, x, "{w:?}"),
            }
        }
    }

    #[test]
    fn the_ceiling_is_the_verdicts_and_the_diagnosis() {
        // (share, above the ceiling)
        let cases = [
            (0.97, true),  // verdict.rs' test of an inconclusive stage
            (0.99, true),  // diagnose.rs' test of generator_saturated
            (0.90, false), // at it: not above
            (0.30, false), // an idle generator
        ];
        for (share, want) in cases {
            assert_eq!(saturated(share), want, "{share}");
        }
    }
}
