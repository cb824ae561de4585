//! The Universal Scalability Law fitted to a concurrency sweep: from a few (concurrency,
//! throughput) observations, the three numbers that say how a system scales and where it peaks.
//!
//! ```text
//!                    λ·N                          X
//!   X(N) = ─────────────────────────             │        peak: N* = √((1-σ)/κ)
//!          1 + σ·(N-1) + κ·N·(N-1)               │      .--.
//!                                                │    /      `--.      κ > 0: retrograde
//!   λ  throughput of one unit of concurrency     │  /             `--.
//!   σ  contention: the serial fraction (Amdahl)  │ /     σ only: a plateau at λ/σ
//!   κ  coherency: the cost of every pair talking │/
//!                                                +───────────────────────── N
//! ```
//!
//! This module owns the model and the fit: least squares on *relative* error, so the
//! high-throughput levels do not drown the low ones, with λ > 0, 0 ≤ σ ≤ 1 and 0 ≤ κ < 1. It does
//! not own running the sweep or choosing its levels (the engine and the binary do), and it reads
//! no clock: observations come in as plain numbers.
//!
//! The fit starts from Gunther's linearisation and refines it with a small Nelder–Mead search
//! over (σ, κ); λ is not searched but solved exactly for each (σ, κ), because for fixed σ and κ
//! the model is linear in λ. The search has a fixed budget, so [`fit`] is deterministic and
//! always returns, whatever its input.

use serde::Serialize;

/// One level of a sweep: the concurrency it ran at and the throughput it achieved.
///
/// Concurrency may be fractional (a mean number in flight, by Little's law); the throughput's
/// unit is the caller's (requests per second, say) and comes back as the unit of λ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// Concurrency of the level, N.
    pub concurrency: f64,
    /// Throughput achieved at that level, X(N).
    pub throughput: f64,
}

/// A fitted Universal Scalability Law, and how well it fits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct UslFit {
    /// Throughput of one unit of concurrency with no contention (same unit as the observations).
    pub lambda: f64,
    /// Contention, the serial fraction: 0 ≤ σ ≤ 1.
    pub sigma: f64,
    /// Coherency, the pairwise cross-talk: 0 ≤ κ < 1.
    pub kappa: f64,
    /// Coefficient of determination of the predicted throughputs over the observations.
    pub r_squared: f64,
    /// Root mean square of (predicted − observed) / observed: the fit's typical relative error.
    pub rmse_ratio: f64,
}

/// Observations that cannot be fitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UslError {
    /// Three parameters need at least three distinct concurrency levels.
    #[error("a scalability fit needs at least 3 distinct concurrency levels, got {0}")]
    TooFewLevels(usize),
    /// A concurrency or throughput that is zero, negative, NaN or infinite.
    #[error("observation {index} is not usable: concurrency and throughput must be finite and positive")]
    InvalidObservation {
        /// Position of the first bad observation in the input.
        index: usize,
    },
    /// The observations are so far apart in scale that the fitted numbers are not finite.
    #[error("the observations span too wide a range to fit in floating point")]
    OutOfRange,
}

impl UslFit {
    /// The model's throughput at concurrency `n`.
    pub fn throughput(&self, n: f64) -> f64 {
        self.lambda * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))
    }

    /// Concurrency at which throughput peaks, √((1−σ)/κ); `None` without a peak: when κ = 0
    /// (throughput rises forever, toward λ/σ) or σ = 1 (it never rises above one unit's).
    ///
    /// The peak may lie far past the largest level observed; a caller that reports it should
    /// say so rather than present an extrapolation as a measurement.
    pub fn peak_concurrency(&self) -> Option<f64> {
        if self.kappa > 0.0 && self.sigma < 1.0 { Some(((1.0 - self.sigma) / self.kappa).sqrt()) } else { None }
    }

    /// The model's throughput at [`peak_concurrency`](Self::peak_concurrency); `None` when there
    /// is no peak.
    pub fn peak_throughput(&self) -> Option<f64> {
        self.peak_concurrency().map(|n| self.throughput(n))
    }
}

/// Largest κ the fit returns: the model asks for κ < 1, and any κ near 1 is absurd already.
const KAPPA_MAX: f64 = 1.0 - 1e-9;

/// Nelder–Mead iterations per start; a 2-parameter simplex converges in well under this.
const NM_ITERATIONS: usize = 600;

/// A snapped-to-zero parameter is kept when it costs no more than this, relatively: the
/// simpler model is preferred when it fits as well to within rounding.
const SNAP_TOLERANCE: f64 = 1e-9;

/// Fit the Universal Scalability Law to a sweep by least squares on relative error.
///
/// Levels may repeat (several runs at one concurrency); at least three must be distinct. The
/// order of `obs` does not matter.
pub fn fit(obs: &[Observation]) -> Result<UslFit, UslError> {
    if let Some(index) = obs.iter().position(|o| !(is_positive(o.concurrency) && is_positive(o.throughput))) {
        return Err(UslError::InvalidObservation { index });
    }
    let mut levels: Vec<f64> = obs.iter().map(|o| o.concurrency).collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    if levels.len() < 3 {
        return Err(UslError::TooFewLevels(levels.len()));
    }

    // Work with throughput divided by its maximum: the fit is invariant to the throughput's
    // unit, and this keeps squares of very large or very small rates inside f64.
    let x_max = obs.iter().map(|o| o.throughput).fold(0.0, f64::max);
    let data: Vec<(f64, f64)> = obs.iter().map(|o| (o.concurrency, o.throughput / x_max)).collect();
    let problem = Problem::new(&data, levels[levels.len() - 1]);

    let (sigma, kappa) = problem.snap_to_zero(problem.search());
    let (lambda_norm, cost) = problem.profile(sigma, kappa).ok_or(UslError::OutOfRange)?;
    let fitted = UslFit {
        lambda: lambda_norm * x_max,
        sigma,
        kappa,
        r_squared: r_squared(&data, |n| lambda_norm * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))),
        rmse_ratio: (cost / data.len() as f64).sqrt(),
    };
    let numbers = [fitted.lambda, fitted.sigma, fitted.kappa, fitted.r_squared, fitted.rmse_ratio];
    if numbers.iter().all(|v| v.is_finite()) && fitted.lambda > 0.0 { Ok(fitted) } else { Err(UslError::OutOfRange) }
}

fn is_positive(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

/// R² of `model`'s throughputs over `data`.
fn r_squared(data: &[(f64, f64)], model: impl Fn(f64) -> f64) -> f64 {
    let n = data.len() as f64;
    let mean = data.iter().map(|&(_, x)| x).sum::<f64>() / n;
    let ss_res: f64 = data.iter().map(|&(c, x)| (model(c) - x).powi(2)).sum();
    let ss_tot: f64 = data.iter().map(|&(_, x)| (x - mean).powi(2)).sum();
    // Every throughput equal: there is no variance to explain, so R² is 1 for a fit that
    // reproduces them (to rounding) and 0 otherwise, rather than a 0/0. (Throughputs are
    // normalised to at most 1, so the absolute tolerance is a relative one.)
    if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else if ss_res <= 1e-20 * n {
        1.0
    } else {
        0.0
    }
}

/// The least-squares problem over (σ, κ), with λ profiled out.
struct Problem<'a> {
    /// (concurrency, throughput / max throughput).
    data: &'a [(f64, f64)],
    /// Scale of σ and κ in the search: their contributions to the denominator at the largest
    /// level, σ·(N−1) and κ·N·(N−1). Searching in those units makes both coordinates O(1),
    /// where κ itself is often a thousand times smaller than σ.
    scale: [f64; 2],
}

impl<'a> Problem<'a> {
    fn new(data: &'a [(f64, f64)], n_max: f64) -> Self {
        let scale = [(n_max - 1.0).max(1.0), (n_max * (n_max - 1.0)).max(1.0)];
        Problem { data, scale }
    }

    /// (σ, κ) from search coordinates, clamped into the allowed box. The search itself is
    /// unconstrained; clamping here makes the cost flat outside the box, and the simplex walks
    /// back in.
    fn params(&self, z: [f64; 2]) -> (f64, f64) {
        let sigma = (z[0] / self.scale[0]).clamp(0.0, 1.0);
        let kappa = (z[1] / self.scale[1]).clamp(0.0, KAPPA_MAX);
        // NaN clamps to NaN; a NaN coordinate means "nowhere", so park it at the origin.
        (if sigma.is_nan() { 0.0 } else { sigma }, if kappa.is_nan() { 0.0 } else { kappa })
    }

    /// The model without λ at each level, divided by the observed throughput: λ·a_i is the
    /// predicted-to-observed ratio. Scaled so the largest is 1 (λ scales back inversely).
    fn ratios(&self, sigma: f64, kappa: f64) -> Option<(Vec<f64>, f64)> {
        let a: Vec<f64> =
            self.data.iter().map(|&(n, x)| n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0)) / x).collect();
        let a_max = a.iter().copied().fold(0.0, f64::max);
        if !(a_max.is_finite() && a_max > 0.0) || a.iter().any(|v| !v.is_finite()) {
            return None;
        }
        Some((a.into_iter().map(|v| v / a_max).collect(), a_max))
    }

    /// The best λ for (σ, κ), in normalised throughput units, and the cost there: the sum of
    /// squared relative errors. Minimising Σ(λ·a_i − 1)² gives λ = Σa / Σa². `None` where the
    /// model is undefined (a level so large its denominator overflows).
    fn profile(&self, sigma: f64, kappa: f64) -> Option<(f64, f64)> {
        let (a, a_max) = self.ratios(sigma, kappa)?;
        let lambda = a.iter().sum::<f64>() / a.iter().map(|v| v * v).sum::<f64>();
        let cost = a.iter().map(|v| (lambda * v - 1.0).powi(2)).sum::<f64>();
        let lambda = lambda / a_max;
        (lambda.is_finite() && lambda > 0.0 && cost.is_finite()).then_some((lambda, cost))
    }

    /// The cost at (σ, κ), infinite where undefined, so a search steps away from there.
    fn cost(&self, sigma: f64, kappa: f64) -> f64 {
        self.profile(sigma, kappa).map_or(f64::INFINITY, |(_, cost)| cost)
    }

    fn cost_at(&self, z: [f64; 2]) -> f64 {
        let (sigma, kappa) = self.params(z);
        self.cost(sigma, kappa)
    }

    /// Gunther's linearisation: with λ taken from the lowest level, N/C(N) − 1 = (σ+κ)·(N−1) +
    /// κ·(N−1)², a quadratic through the origin in N−1, fitted by ordinary least squares.
    /// Exact on exact data whose lowest level is 1; otherwise only a starting point.
    fn linearised(&self) -> (f64, f64) {
        let &(n0, x0) = self.data.iter().min_by(|a, b| a.0.total_cmp(&b.0)).unwrap_or(&(1.0, 1.0));
        let lambda0 = x0 / n0;
        let (mut s2, mut s3, mut s4, mut sxy, mut sx2y) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(n, x) in self.data {
            let (dx, y) = (n - 1.0, lambda0 * n / x - 1.0);
            s2 += dx * dx;
            s3 += dx * dx * dx;
            s4 += dx * dx * dx * dx;
            sxy += dx * y;
            sx2y += dx * dx * y;
        }
        let det = s2 * s4 - s3 * s3;
        if !(det.is_finite() && det.abs() > f64::EPSILON * s2 * s4) {
            return (0.0, 0.0);
        }
        let a = (sxy * s4 - sx2y * s3) / det;
        let b = (s2 * sx2y - s3 * sxy) / det;
        let (sigma, kappa) = (a - b, b);
        if sigma.is_finite() && kappa.is_finite() {
            (sigma.clamp(0.0, 1.0), kappa.clamp(0.0, KAPPA_MAX))
        } else {
            (0.0, 0.0)
        }
    }

    /// Refine from the linearisation and from the best point of a coarse grid, keeping the
    /// better: two starts guard against the linearisation pointing into the wrong valley when
    /// the lowest level is noisy.
    fn search(&self) -> (f64, f64) {
        let (s0, k0) = self.linearised();
        let from_line = [s0 * self.scale[0], k0 * self.scale[1]];
        // Contributions at the largest level from none to ten times the one-unit term.
        const GRID: [f64; 6] = [0.0, 0.1, 0.3, 1.0, 3.0, 10.0];
        let mut from_grid = [0.0, 0.0];
        let mut grid_cost = f64::INFINITY;
        for zs in GRID {
            for zk in GRID {
                let c = self.cost_at([zs, zk]);
                if c < grid_cost {
                    (from_grid, grid_cost) = ([zs, zk], c);
                }
            }
        }
        let mut best = ([0.0, 0.0], f64::INFINITY);
        for start in [from_line, from_grid] {
            let found = nelder_mead(|z| self.cost_at(z), start);
            if found.1 < best.1 {
                best = found;
            }
        }
        self.params(best.0)
    }

    /// Set σ, κ or both to exactly 0 when that fits as well: a search that ends at κ = 1e-17
    /// would otherwise report a peak at a concurrency of 3·10⁸ for perfectly linear data.
    fn snap_to_zero(&self, (sigma, kappa): (f64, f64)) -> (f64, f64) {
        let cost = self.cost(sigma, kappa);
        // The absolute part is rounding: an RMS relative error of 1e-12 is an exact fit.
        let tolerance = cost * SNAP_TOLERANCE + 1e-24 * self.data.len() as f64;
        [(0.0, 0.0), (sigma, 0.0), (0.0, kappa)]
            .into_iter()
            .find(|&(s, k)| self.cost(s, k) <= cost + tolerance)
            .unwrap_or((sigma, kappa))
    }
}

/// Minimise `f` over the plane by Nelder–Mead (reflection 1, expansion 2, contraction ½,
/// shrink ½), restarted once from its own answer with a fresh simplex, since a simplex can
/// collapse early on a curved valley. A fixed budget: always returns.
fn nelder_mead(f: impl Fn([f64; 2]) -> f64, start: [f64; 2]) -> ([f64; 2], f64) {
    let mut best = (start, f(start));
    for _ in 0..2 {
        let x0 = best.0;
        let step = |v: f64| 0.1 + 0.1 * v.abs();
        let mut simplex = [(x0, f(x0)), ([x0[0] + step(x0[0]), x0[1]], 0.0), ([x0[0], x0[1] + step(x0[1])], 0.0)];
        for p in &mut simplex[1..] {
            p.1 = f(p.0);
        }
        for _ in 0..NM_ITERATIONS {
            simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
            let [lo, mid, hi] = simplex;
            let size = (0..2)
                .map(|i| (mid.0[i] - lo.0[i]).abs().max((hi.0[i] - lo.0[i]).abs()) / (1.0 + lo.0[i].abs()))
                .fold(0.0, f64::max);
            if size < 1e-13 || !size.is_finite() {
                break;
            }
            let centroid = [(lo.0[0] + mid.0[0]) / 2.0, (lo.0[1] + mid.0[1]) / 2.0];
            let along = |t: f64| [centroid[0] + t * (hi.0[0] - centroid[0]), centroid[1] + t * (hi.0[1] - centroid[1])];
            let reflected = along(-1.0);
            let fr = f(reflected);
            if fr < lo.1 {
                let expanded = along(-2.0);
                let fe = f(expanded);
                simplex[2] = if fe < fr { (expanded, fe) } else { (reflected, fr) };
            } else if fr < mid.1 {
                simplex[2] = (reflected, fr);
            } else {
                // Contract toward the better of the worst point and its reflection.
                let contracted = if fr < hi.1 { along(-0.5) } else { along(0.5) };
                let fc = f(contracted);
                if fc < hi.1.min(fr) {
                    simplex[2] = (contracted, fc);
                } else {
                    for p in &mut simplex[1..] {
                        p.0 = [(p.0[0] + lo.0[0]) / 2.0, (p.0[1] + lo.0[1]) / 2.0];
                        p.1 = f(p.0);
                    }
                }
            }
        }
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        if simplex[0].1 <= best.1 {
            best = simplex[0];
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn model(lambda: f64, sigma: f64, kappa: f64) -> UslFit {
        UslFit { lambda, sigma, kappa, r_squared: 1.0, rmse_ratio: 0.0 }
    }

    fn sweep(truth: &UslFit, levels: &[f64], noise: &[f64]) -> Vec<Observation> {
        levels
            .iter()
            .zip(noise.iter().cycle())
            .map(|(&n, e)| Observation { concurrency: n, throughput: truth.throughput(n) * (1.0 + e) })
            .collect()
    }

    fn observations(points: &[(f64, f64)]) -> Vec<Observation> {
        points.iter().map(|&(concurrency, throughput)| Observation { concurrency, throughput }).collect()
    }

    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs()
    }

    const LEVELS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0];

    #[test]
    fn exact_data_recovers_its_parameters() {
        let cases = [
            // A typical service: peak near N = 31.
            (model(1000.0, 0.05, 0.001), &LEVELS[..]),
            // Strong coherency, peak near 9: most levels are past it.
            (model(250.0, 0.1, 0.01), &LEVELS[..]),
            // Weak contention and coherency, peak near 220, far past the levels.
            (model(42.0, 0.01, 0.00002), &LEVELS[..]),
            // Lowest level is not 1, so the linearisation's λ is off: the search must fix it.
            (model(1000.0, 0.05, 0.001), &[4.0, 8.0, 16.0, 32.0, 64.0, 128.0][..]),
            // Fractional levels (mean in flight, by Little's law).
            (model(80.0, 0.2, 0.003), &[0.5, 1.5, 3.7, 9.2, 20.4, 41.0][..]),
            // Three levels only: as many as parameters.
            (model(500.0, 0.08, 0.002), &[1.0, 10.0, 40.0][..]),
        ];
        for (truth, levels) in cases {
            let got = fit(&sweep(&truth, levels, &[0.0])).unwrap();
            assert!(close(got.lambda, truth.lambda, 1e-3), "{truth:?}: λ {got:?}");
            assert!(close(got.sigma, truth.sigma, 1e-3), "{truth:?}: σ {got:?}");
            assert!(close(got.kappa, truth.kappa, 1e-3), "{truth:?}: κ {got:?}");
            assert!(got.r_squared > 0.999_999 && got.rmse_ratio < 1e-6, "{truth:?}: {got:?}");
        }
    }

    #[test]
    fn noisy_data_finds_the_peak() {
        // ±3% at most, deterministic; neither all-up nor alternating, so no trivial cancelling.
        let noise = [0.03, -0.02, -0.03, 0.01, 0.025, -0.01, 0.0, -0.025, 0.03, 0.015, -0.03];
        let cases = [
            // Peak at 30.8, inside the levels.
            model(1000.0, 0.05, 0.001),
            // Peak at 9.5, with levels past it on the way down.
            model(250.0, 0.1, 0.01),
            // Peak at 43.6, near the top of the levels.
            model(300.0, 0.05, 0.0005),
        ];
        for truth in cases {
            let got = fit(&sweep(&truth, &LEVELS, &noise)).unwrap();
            let (n_peak, x_peak) = (truth.peak_concurrency().unwrap(), truth.peak_throughput().unwrap());
            let got_n = got.peak_concurrency().unwrap();
            let got_x = got.peak_throughput().unwrap();
            assert!(close(got_n, n_peak, 0.10), "{truth:?}: peak at {got_n} vs {n_peak} ({got:?})");
            assert!(close(got_x, x_peak, 0.05), "{truth:?}: peak {got_x} vs {x_peak} ({got:?})");
            assert!(got.rmse_ratio > 0.005 && got.rmse_ratio < 0.03, "{got:?}");
        }
    }

    #[test]
    fn linear_data_has_no_peak() {
        let truth = model(120.0, 0.0, 0.0);
        let got = fit(&sweep(&truth, &LEVELS, &[0.0])).unwrap();
        assert_eq!((got.sigma, got.kappa), (0.0, 0.0), "{got:?}");
        assert!(close(got.lambda, 120.0, 1e-9));
        assert_eq!(got.peak_concurrency(), None);
        assert_eq!(got.peak_throughput(), None);
    }

    #[test]
    fn a_plateau_is_fitted_near_its_ceiling() {
        // A CPU-bound server: linear at first, then flat at 1000/s.
        let obs =
            observations(&[(1.0, 100.0), (2.0, 200.0), (5.0, 480.0), (10.0, 800.0), (20.0, 950.0), (50.0, 1000.0)]);
        let got = fit(&obs).unwrap();
        let max = (0..=490).map(|i| got.throughput(1.0 + f64::from(i) * 0.1)).fold(0.0, f64::max);
        assert!(close(max, 1000.0, 0.10), "max {max} ({got:?})");
        assert!(got.r_squared > 0.98, "{got:?}");
    }

    #[test]
    fn retrograde_data_peaks_between_the_right_levels() {
        // (observations, (lower level, upper level) the peak must lie between)
        let cases = [
            // Rises to 640/s at 16, falls to 330/s at 64: the peak lies between 8 and 32.
            (
                observations(&[
                    (1.0, 100.0),
                    (2.0, 190.0),
                    (4.0, 350.0),
                    (8.0, 560.0),
                    (16.0, 640.0),
                    (32.0, 520.0),
                    (64.0, 330.0),
                ]),
                (8.0, 32.0),
            ),
            // Peaks early, at 4, and collapses: between 2 and 8.
            (
                observations(&[(1.0, 50.0), (2.0, 85.0), (4.0, 100.0), (8.0, 90.0), (16.0, 60.0), (32.0, 35.0)]),
                (2.0, 8.0),
            ),
        ];
        for (obs, (lo, hi)) in cases {
            let got = fit(&obs).unwrap();
            let peak = got.peak_concurrency().unwrap();
            assert!(peak > lo && peak < hi, "peak {peak} not in ({lo}, {hi}): {got:?}");
        }
    }

    #[test]
    fn unusable_observations_are_errors() {
        let obs = observations;
        let cases = [
            // Nothing at all.
            (obs(&[]), UslError::TooFewLevels(0)),
            // Many points, but two levels only.
            (obs(&[(1.0, 10.0), (2.0, 19.0), (1.0, 11.0), (2.0, 18.0)]), UslError::TooFewLevels(2)),
            // Zero throughput: a dead level is not a point on the curve.
            (obs(&[(1.0, 10.0), (2.0, 0.0), (4.0, 30.0)]), UslError::InvalidObservation { index: 1 }),
            // Negative concurrency.
            (obs(&[(-1.0, 10.0), (2.0, 19.0), (4.0, 30.0)]), UslError::InvalidObservation { index: 0 }),
            // NaN throughput.
            (obs(&[(1.0, 10.0), (2.0, 19.0), (4.0, f64::NAN)]), UslError::InvalidObservation { index: 2 }),
            // Infinite concurrency.
            (obs(&[(1.0, 10.0), (f64::INFINITY, 19.0), (4.0, 30.0)]), UslError::InvalidObservation { index: 1 }),
        ];
        for (input, want) in cases {
            assert_eq!(fit(&input), Err(want), "{input:?}");
        }
    }

    #[test]
    fn the_order_of_observations_does_not_matter() {
        let truth = model(1000.0, 0.05, 0.001);
        let noise = [0.03, -0.02, -0.03, 0.01];
        let obs = sweep(&truth, &LEVELS, &noise);
        // Every third level first, then the rest backwards: a deterministic shuffle.
        let shuffled: Vec<Observation> = obs
            .iter()
            .step_by(3)
            .chain(obs.iter().enumerate().filter(|(i, _)| i % 3 != 0).map(|(_, o)| o).rev())
            .copied()
            .collect();
        assert_eq!(shuffled.len(), obs.len());
        let (a, b) = (fit(&obs).unwrap(), fit(&shuffled).unwrap());
        assert!(close(a.sigma, b.sigma, 1e-6) && close(a.kappa, b.kappa, 1e-6), "{a:?} vs {b:?}");
    }

    fn check(result: Result<UslFit, UslError>) -> Result<(), TestCaseError> {
        if let Ok(f) = result {
            for v in [f.lambda, f.sigma, f.kappa, f.r_squared, f.rmse_ratio] {
                prop_assert!(v.is_finite(), "{:?}", f);
            }
            prop_assert!(f.lambda > 0.0);
            prop_assert!((0.0..=1.0).contains(&f.sigma));
            prop_assert!((0.0..1.0).contains(&f.kappa));
            prop_assert!(f.rmse_ratio >= 0.0 && f.r_squared <= 1.0);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn plausible_sweeps_fit_or_err_with_finite_numbers(
            points in prop::collection::vec((0.01f64..1e5, 1e-6f64..1e9), 0..16),
        ) {
            check(fit(&observations(&points)))?;
        }

        #[test]
        fn any_numbers_fit_or_err_without_panicking(
            points in prop::collection::vec((any::<f64>(), any::<f64>()), 0..8),
        ) {
            check(fit(&observations(&points)))?;
        }

        #[test]
        fn positive_extremes_fit_or_err_without_panicking(
            points in prop::collection::vec((1e-300f64..1e300, 1e-300f64..1e300), 3..8),
        ) {
            check(fit(&observations(&points)))?;
        }
    }
}
