//! Largest-Triangle-Three-Buckets downsampling (Steinarsson, 2013), so a
//! chart of an hour-long run carries about as many points as it has pixels
//! and still shows every spike.
//!
//! It picks indices rather than building new points, so several series of
//! one chart can share one x array: [`keep`] takes the union of each series'
//! picks. What to keep is decided here; what the points mean is not.
//!
//! ```text
//!   bucket:   | first |   1   |   2   | ... |  n-2  | last |
//!   keeps:        a  ->  the point of bucket 1 that makes the largest
//!                        triangle with a and the mean of bucket 2, and so on
//! ```

/// Indices of the `threshold` points of `(x[i], y[i])` that LTTB keeps, in
/// increasing order. The first and last points are always kept; all points
/// are kept when there are no more than `threshold` (or `threshold < 3`,
/// where there are no middle buckets to choose from).
///
/// A missing value (`None`) is never chosen over a present one in its bucket;
/// a bucket with no value at all keeps its first index, so the gap stays a gap.
pub fn indices(x: &[f64], y: &[Option<f64>], threshold: usize) -> Vec<usize> {
    let n = x.len().min(y.len());
    if threshold >= n || threshold < 3 {
        return (0..n).collect();
    }
    let mut out = Vec::with_capacity(threshold);
    out.push(0);
    // The middle buckets share n - 2 points; bucket i is [start(i), start(i + 1)).
    let every = (n - 2) as f64 / (threshold - 2) as f64;
    let start = |i: usize| ((i as f64 * every) as usize + 1).min(n - 1);
    let mut a = 0;
    for bucket in 0..threshold - 2 {
        let (from, to) = (start(bucket), start(bucket + 1).max(start(bucket) + 1));
        // The next bucket's mean; the last middle bucket looks at the last point.
        let (next_from, next_to) =
            if bucket + 1 < threshold - 2 { (to, start(bucket + 2).max(to + 1)) } else { (n - 1, n) };
        let (mut sx, mut sy, mut k) = (0.0, 0.0, 0.0);
        for j in next_from..next_to.min(n) {
            if let Some(v) = y[j] {
                sx += x[j];
                sy += v;
                k += 1.0;
            }
        }
        let ay = y[a];
        let (cx, cy) = if k > 0.0 { (sx / k, sy / k) } else { (x[next_from], ay.unwrap_or(0.0)) };
        let mut best: Option<(usize, f64)> = None;
        for j in from..to.min(n - 1) {
            let Some(v) = y[j] else { continue };
            // Twice the triangle's area; a missing `a` counts as level with the point.
            let ay = ay.unwrap_or(v);
            let area = ((x[a] - cx) * (v - ay) - (x[a] - x[j]) * (cy - ay)).abs();
            if best.is_none_or(|(_, b)| area > b) {
                best = Some((j, area));
            }
        }
        a = best.map_or(from, |(j, _)| j);
        out.push(a);
    }
    out.push(n - 1);
    out.dedup();
    out
}

/// The indices to keep of a chart whose `series` share the x array `x`:
/// each series gets an equal share of `budget` and the union of their picks
/// is kept, so a spike in any one of them survives.
pub fn keep(x: &[f64], series: &[&[Option<f64>]], budget: usize) -> Vec<usize> {
    let n = x.len();
    if n <= budget || series.is_empty() {
        return (0..n).collect();
    }
    let share = (budget / series.len()).max(3);
    let mut all: Vec<usize> = series.iter().flat_map(|y| indices(x, y, share)).collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// `values` at `idx`.
pub fn pick<T: Copy>(values: &[T], idx: &[usize]) -> Vec<T> {
    idx.iter().filter_map(|&i| values.get(i).copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xs(n: usize) -> Vec<f64> {
        (0..n).map(|i| i as f64).collect()
    }

    fn some(v: &[f64]) -> Vec<Option<f64>> {
        v.iter().copied().map(Some).collect()
    }

    #[test]
    fn table() {
        let spike: Vec<f64> = (0..100).map(|i| if i == 37 { 50.0 } else { 1.0 }).collect();
        let dip: Vec<f64> = (0..100).map(|i| if i == 71 { -9.0 } else { 0.0 }).collect();
        let line: Vec<f64> = (0..10).map(|i| 2.0 * i as f64).collect();
        let cases: Vec<(&str, Vec<f64>, usize, Vec<usize>)> = vec![
            // Nothing to drop: every index, in order.
            ("fewer points than the threshold", vec![1.0, 2.0, 3.0], 5, vec![0, 1, 2]),
            ("exactly the threshold", vec![1.0, 2.0, 3.0], 3, vec![0, 1, 2]),
            // Below 3 there are no middle buckets: LTTB is undefined, keep all.
            ("threshold 2", vec![1.0, 5.0, 2.0, 4.0], 2, vec![0, 1, 2, 3]),
            ("empty", vec![], 10, vec![]),
            // 8 middle points in 4 buckets of 2: on a straight line every
            // triangle is flat, so each bucket keeps its first point.
            ("straight line", line, 6, vec![0, 1, 3, 5, 7, 9]),
        ];
        for (what, y, threshold, want) in cases {
            assert_eq!(indices(&xs(y.len()), &some(&y), threshold), want, "{what}");
        }
        // One spike in 100 points survives a cut to 10; so does a dip.
        for (what, y, at) in [("spike", spike, 37), ("dip", dip, 71)] {
            let got = indices(&xs(100), &some(&y), 10);
            assert_eq!(got.len(), 10, "{what}: {got:?}");
            assert!(got.contains(&at), "{what} at {at} lost: {got:?}");
            assert_eq!((got[0], got[9]), (0, 99), "{what}: first and last kept");
            assert!(got.windows(2).all(|w| w[0] < w[1]), "{what}: increasing {got:?}");
        }
    }

    #[test]
    fn gaps_stay_gaps_and_values_win_over_gaps() {
        // 38 middle points in 10 buckets starting at 1, 4, 8, 12, 16, 20, ...
        // Points 10..20 are missing: buckets [12, 16) and [16, 20) hold only
        // gaps and keep their first index; bucket [8, 12) has values at 8
        // and 9 and must pick one of them.
        let y: Vec<Option<f64>> =
            (0..40).map(|i| if (10..20).contains(&i) { None } else { Some(i as f64 % 7.0) }).collect();
        let got = indices(&xs(40), &y, 12);
        let in_gap: Vec<usize> = got.iter().copied().filter(|i| (10..20).contains(i)).collect();
        assert_eq!(in_gap, vec![12, 16], "{got:?}");
        assert!(got.contains(&8) || got.contains(&9), "{got:?}");
        // All missing: still one index per bucket, no panic.
        assert_eq!(indices(&xs(50), &[None; 50], 5).len(), 5);
    }

    #[test]
    fn a_chart_keeps_each_series_spikes() {
        let x = xs(1000);
        let a: Vec<Option<f64>> = (0..1000).map(|i| Some(if i == 100 { 9.0 } else { 1.0 })).collect();
        let b: Vec<Option<f64>> = (0..1000).map(|i| Some(if i == 900 { 9.0 } else { 1.0 })).collect();
        let got = keep(&x, &[&a, &b], 100);
        assert!(got.contains(&100) && got.contains(&900), "{got:?}");
        assert!(got.len() <= 100, "{} points", got.len());
        assert_eq!(keep(&x, &[&a], 5000).len(), 1000, "under budget: all");
        assert_eq!(pick(&[10, 11, 12], &[0, 2]), vec![10, 12]);
    }
}
