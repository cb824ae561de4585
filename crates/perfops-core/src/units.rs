//! Human units on the command line and in scenario files: durations such as
//! `500ms`, `30s`, `5m`, `1h30m`.

use std::time::Duration;

/// A duration that could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{0}` is not a duration: use a number with a unit, e.g. 500ms, 30s, 5m, 1h")]
pub struct DurationError(pub String);

/// Parse `500ms`, `1.5s`, `2m`, `1h30m`, `250us`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    let err = || DurationError(text.to_string());
    if s.is_empty() {
        return Err(err());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| err());
    }
    let mut total = 0.0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(err)?;
        if num_len == 0 {
            return Err(err());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| err())?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        total += value * factor;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases = [
            ("30s", 30_000),      // the common case
            ("500ms", 500),       // sub-second
            ("2m", 120_000),      // minutes
            ("1h30m", 5_400_000), // compound
            ("1.5s", 1_500),      // fractional
            ("10", 10_000),       // bare number = seconds
        ];
        for (text, ms) in cases {
            assert_eq!(parse_duration(text), Ok(Duration::from_millis(ms)), "{text}");
        }
        for bad in ["", "s", "10 parsecs", "-5s", "1..2s", "ms5"] {
            assert!(parse_duration(bad).is_err(), "{bad} should be rejected");
        }
    }
}
