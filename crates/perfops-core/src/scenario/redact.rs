//! What must not reach a results directory: header values that may carry
//! secrets in the copied scenario, and secret-looking arguments in the
//! recorded command line. A pure reference (`Bearer ${token}`) is kept: it
//! is no secret itself, and the copy stays runnable.

use std::sync::OnceLock;

use regex::Regex;

/// Replace header values that may carry secrets with `<redacted>`, unless
/// they are pure references (`Bearer ${token}` is no secret itself).
pub fn redact(text: &str) -> String {
    static HEADER: OnceLock<Regex> = OnceLock::new();
    let re = HEADER.get_or_init(|| {
        // A constant pattern: tested below, so this cannot fail at run time.
        Regex::new(
            r#"(?i)((?:authorization|proxy-authorization|cookie|x-api-key)["']?\s*:\s*)("[^"\n]*"|'[^'\n]*'|[^,}\n#]+)"#,
        )
        .expect("valid redaction pattern")
    });
    re.replace_all(text, |c: &regex::Captures<'_>| {
        let value = &c[2];
        if value.contains("${") { c[0].to_string() } else { format!("{}\"<redacted>\"", &c[1]) }
    })
    .into_owned()
}

/// A command-line argument, `<redacted>` (after its `name=` if it has one)
/// when it names a secret.
pub fn redact_arg(a: &str) -> String {
    let lower = a.to_ascii_lowercase();
    if ["authorization", "cookie", "token", "password", "secret"].iter().any(|w| lower.contains(w)) {
        match a.split_once(['=', ':']) {
            Some((k, _)) => format!("{k}=<redacted>"),
            None => "<redacted>".into(),
        }
    } else {
        a.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_references_kept() {
        let cases = [
            // A literal bearer token in a flow mapping.
            ("headers: { Authorization: \"Bearer abc123\" }", "headers: { Authorization: \"<redacted>\" }"),
            // An unquoted value to the end of the line.
            ("  Cookie: session=xyz", "  Cookie: \"<redacted>\""),
            // A pure reference: no secret, kept as written.
            ("headers: { Authorization: \"Bearer ${token}\" }", "headers: { Authorization: \"Bearer ${token}\" }"),
            // Single quotes, and the next header left alone.
            ("x-api-key: 'k-1', Accept: json", "x-api-key: \"<redacted>\", Accept: json"),
        ];
        for (input, want) in cases {
            assert_eq!(redact(input), want);
        }
        assert_eq!(redact_arg("Authorization: Bearer x"), "Authorization=<redacted>");
        assert_eq!(redact_arg("--quiet"), "--quiet");
    }
}
