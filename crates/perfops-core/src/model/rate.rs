//! The `Rate` newtype: arrivals per second, finite and non-negative.

use std::fmt;
use std::str::FromStr;

/// Arrivals (or requests) per second. Always finite and `>= 0`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Rate(f64);

/// A rate that is negative, not a number, or infinite.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("rate must be a finite number >= 0 (per second), got `{0}`")]
pub struct RateError(pub String);

impl Rate {
    /// Zero arrivals per second.
    pub const ZERO: Rate = Rate(0.0);

    /// A rate in arrivals per second.
    pub fn per_second(value: f64) -> Result<Rate, RateError> {
        if value.is_finite() && value >= 0.0 { Ok(Rate(value)) } else { Err(RateError(value.to_string())) }
    }

    /// Arrivals per second as a float.
    pub fn as_f64(self) -> f64 {
        self.0
    }
}

impl FromStr for Rate {
    type Err = RateError;
    /// Accepts `500`, `500/s`, `30000/m`, `1.5k` style values.
    fn from_str(s: &str) -> Result<Rate, RateError> {
        let t = s.trim();
        let (num, per) = match t.split_once('/') {
            Some((n, unit)) => {
                let secs = match unit.trim() {
                    "s" | "1s" | "sec" => 1.0,
                    "m" | "1m" | "min" => 60.0,
                    "h" | "1h" => 3600.0,
                    _ => return Err(RateError(s.to_string())),
                };
                (n.trim(), secs)
            }
            None => (t, 1.0),
        };
        let (digits, mult) = match num.strip_suffix(['k', 'K']) {
            Some(d) => (d, 1000.0),
            None => (num, 1.0),
        };
        let v: f64 = digits.parse().map_err(|_| RateError(s.to_string()))?;
        Rate::per_second(v * mult / per)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        let cases = [
            ("500", 500.0),    // bare number is per second
            ("500/s", 500.0),  // explicit unit
            ("6000/m", 100.0), // per minute
            ("1.5k", 1500.0),  // k suffix
            ("0", 0.0),        // zero is a valid (idle) rate
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<Rate>().unwrap().as_f64(), want, "{text}");
        }
        for bad in ["-1", "abc", "10/fortnight", "inf", "NaN"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad} should be rejected");
        }
    }
}
