//! The simulated CPU work of `GET /orders`: a chain of SipHash rounds whose count is calibrated once
//! at start-up so that it takes the configured time on an idle core.
//!
//! Calibrated by time, then run by count, on purpose: the work is real computation with a fixed CPU
//! cost, so when the cores are contended it takes longer in wall-clock time, exactly as a real
//! handler's CPU work would. (Spinning "until 500 µs have passed" would instead do less work the
//! more it is preempted.) It does not know about requests or models.

use std::hash::{BuildHasher, RandomState};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Rounds run per calibration step, before looking at the clock.
const STEP_ROUNDS: u64 = 256;
/// How long one calibration sample runs.
const SAMPLE: Duration = Duration::from_millis(8);
/// Samples taken; the fastest wins, because a sample can only be slowed down by other load.
const SAMPLES: usize = 3;

/// A fixed amount of hashing, about `cpu_work` long on this machine when the core is free.
#[derive(Debug, Clone)]
pub(crate) struct CpuWork {
    rounds: u64,
    key: RandomState,
}

impl CpuWork {
    /// Calibrates the number of rounds for `target` (about 25 ms of start-up; none for zero).
    pub(crate) fn calibrate(target: Duration) -> CpuWork {
        let key = RandomState::new();
        if target.is_zero() {
            return CpuWork { rounds: 0, key };
        }
        let mut best_rounds_per_sec = 0.0f64;
        for _ in 0..SAMPLES {
            let start = Instant::now();
            let mut rounds = 0u64;
            let mut seed = 0u64;
            while start.elapsed() < SAMPLE {
                seed = spin(&key, seed, STEP_ROUNDS);
                rounds += STEP_ROUNDS;
            }
            black_box(seed);
            best_rounds_per_sec = best_rounds_per_sec.max(rounds as f64 / start.elapsed().as_secs_f64());
        }
        let rounds = (best_rounds_per_sec * target.as_secs_f64()).round().max(1.0) as u64;
        CpuWork { rounds, key }
    }

    /// Does the work; the result is returned so that the compiler cannot drop it.
    pub(crate) fn run(&self, seed: u64) -> u64 {
        spin(&self.key, seed, self.rounds)
    }
}

/// `rounds` dependent hashes: each one needs the previous one, so none can be skipped or reordered.
fn spin(key: &RandomState, seed: u64, rounds: u64) -> u64 {
    let mut h = seed;
    for i in 0..rounds {
        h = key.hash_one(black_box(h ^ i));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrated_work_takes_about_the_target() {
        let work = CpuWork::calibrate(Duration::from_millis(2));
        let start = Instant::now();
        for seed in 0..10 {
            black_box(work.run(seed));
        }
        let per_run = start.elapsed() / 10;
        // Loose bounds: the machine is shared, and contention can only make it slower.
        assert!(per_run >= Duration::from_micros(1000), "{per_run:?}");
        assert!(per_run <= Duration::from_millis(20), "{per_run:?}");
        assert_eq!(CpuWork::calibrate(Duration::ZERO).run(7), 7);
    }
}
