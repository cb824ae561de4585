//! Checks of what the user gives `perfops k8s`, each failing with an input
//! error's message: names and namespaces (DNS labels), quantities, and where
//! each CSV file goes under the scenario's mount. Pure; `manifest.rs` trusts what
//! passed them.

use super::manifest::MAX_NAME;

/// A DNS label (RFC 1123): lowercase letters, digits and `-`, starting and
/// ending with a letter or digit, at most `max` bytes.
pub(crate) fn dns_label(what: &str, s: &str, max: usize) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= max
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} `{s}` must be lowercase letters, digits and '-', start and end with a letter or digit, at most {max} characters"
        ))
    }
}

/// An object name prefix: a DNS label starting with a letter (Service
/// names must).
pub(crate) fn name(s: &str) -> Result<(), String> {
    dns_label("--name", s, MAX_NAME)?;
    if s.starts_with(|c: char| c.is_ascii_lowercase()) {
        Ok(())
    } else {
        Err(format!("--name `{s}` must start with a letter"))
    }
}

/// The default name prefix: `perfops-` and the scenario's name made a
/// DNS label (anything else becomes `-`), cut to fit.
pub(crate) fn default_name(scenario: &str) -> String {
    let mut slug = String::new();
    for c in scenario.chars().map(|c| c.to_ascii_lowercase()) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    slug.truncate(MAX_NAME - "perfops-".len());
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() { "perfops".to_string() } else { format!("perfops-{slug}") }
}

/// A Kubernetes quantity as a user writes one: a decimal number and an
/// optional suffix (`500m`, `1`, `1.5`, `512Mi`, `2G`).
pub(crate) fn quantity(flag: &str, s: &str) -> Result<(), String> {
    const SUFFIXES: &[&str] = &["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let digits_end = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (number, suffix) = s.split_at(digits_end);
    let mut parts = number.split('.');
    let whole = parts.next().unwrap_or("");
    let frac = parts.next();
    let ok = parts.next().is_none()
        && !whole.is_empty()
        && frac.is_none_or(|f| !f.is_empty())
        && SUFFIXES.contains(&suffix)
        && number.bytes().any(|b| b.is_ascii_digit() && b != b'0');
    if ok { Ok(()) } else { Err(format!("{flag} `{s}` is not a positive quantity like 500m, 1, 1.5, 512Mi or 2Gi")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quantities: what a user writes, and mistakes.
    #[test]
    fn quantities() {
        let cases: &[(&str, bool)] = &[
            ("1", true),      // whole CPUs
            ("500m", true),   // millicores
            ("1.5", true),    // a decimal
            ("512Mi", true),  // binary suffix
            ("2G", true),     // decimal suffix
            ("0", false),     // nothing: no container runs on it
            ("0.0m", false),  // still nothing
            ("", false),      // empty
            ("1.", false),    // dangling point
            (".5", false),    // no whole part
            ("1.2.3", false), // two points
            ("2GB", false),   // not a Kubernetes suffix
            ("1_000", false), // YAML 1.1 would read a number
            ("-1", false),    // negative
            ("1 Gi", false),  // a space
        ];
        for (q, ok) in cases {
            assert_eq!(quantity("--agent-cpu", q).is_ok(), *ok, "{q}");
        }
    }

    /// Default name prefixes from scenario names.
    #[test]
    fn default_names() {
        let cases: &[(&str, &str)] = &[
            ("orders", "perfops-orders"),
            // Case and punctuation: lowercased, runs of others become one '-'.
            ("Checkout API (v2)!", "perfops-checkout-api-v2"),
            // Nothing usable: the bare prefix.
            ("???", "perfops"),
            // Too long: cut to 40 in all.
            ("a-very-long-scenario-name-that-goes-on-and-on", "perfops-a-very-long-scenario-name-that-g"),
            // Cut just after a '-': without it.
            ("abcdefghij-abcdefghij-abcdefghi-xyz", "perfops-abcdefghij-abcdefghij-abcdefghi"),
        ];
        for (scenario, want) in cases {
            let got = default_name(scenario);
            assert_eq!(got, *want, "{scenario}");
            name(&got).unwrap();
        }
    }

    /// DNS labels and name prefixes.
    #[test]
    fn labels_and_names() {
        let cases: &[(&str, bool)] = &[
            ("load", true),       // a namespace
            ("perf-ops-1", true), // digits and dashes inside
            ("Load", false),      // uppercase
            ("-load", false),     // leading dash
            ("load-", false),     // trailing dash
            ("lo_ad", false),     // underscore
            ("", false),          // empty
        ];
        for (s, ok) in cases {
            assert_eq!(dns_label("--namespace", s, 63).is_ok(), *ok, "{s}");
        }
        assert!(name("1perf").is_err(), "a Service name starts with a letter");
        assert!(name(&"a".repeat(MAX_NAME + 1)).is_err(), "too long");
    }
}
