//! `outputs:` in a scenario and `--output NAME[=ARG]` on the command line:
//! one spelling of an output chosen by name, parsed by one rule.
//!
//! This module owns the shape (`NAME` or `NAME=ARG`, a name of lower-case
//! letters, digits, `-` and `_`) and where a scenario wrote it. Which names
//! exist is the binary's registry: the core knows no output, so a name it
//! does not know is reported by the registry, at the [`Origin`] kept here.

use super::Origin;

/// One output chosen by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSpec {
    /// The registry's name, e.g. `jsonl`.
    pub name: String,
    /// What follows `=`, e.g. `-` or a file; `None` when nothing does.
    pub arg: Option<String>,
    /// Where the scenario wrote it (the default for one from the command line).
    pub at: Origin,
}

impl OutputSpec {
    /// `NAME` or `NAME=ARG`, or why it is neither.
    pub fn parse(text: &str) -> Result<OutputSpec, String> {
        let text = text.trim();
        let (name, arg) = match text.split_once('=') {
            Some((name, arg)) => (name.trim(), Some(arg.trim().to_string())),
            None => (text, None),
        };
        if name.is_empty() {
            return Err(format!("`{text}` names no output: write NAME or NAME=ARG (e.g. jsonl=-)"));
        }
        if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') {
            return Err(format!("`{name}` is not an output name: lower-case letters, digits, `-` and `_`"));
        }
        Ok(OutputSpec { name: name.to_string(), arg, at: Origin::default() })
    }
}

impl std::str::FromStr for OutputSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<OutputSpec, String> {
        OutputSpec::parse(s)
    }
}

impl std::fmt::Display for OutputSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.arg {
            Some(arg) => write!(f, "{}={arg}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name and its argument, or a part of the error.
    type Want = Result<(&'static str, Option<&'static str>), &'static str>;

    #[test]
    fn names_and_arguments() {
        let cases: [(&str, Want); 7] = [
            // A name alone.
            ("jsonl", Ok(("jsonl", None))),
            // A name and its argument; only the first `=` splits.
            ("jsonl=-", Ok(("jsonl", Some("-")))),
            ("prometheus=127.0.0.1:9464", Ok(("prometheus", Some("127.0.0.1:9464")))),
            ("remote=http://h/x?a=b", Ok(("remote", Some("http://h/x?a=b")))),
            // An empty argument is the output's to judge.
            ("jsonl=", Ok(("jsonl", Some("")))),
            // No name.
            ("=x", Err("names no output")),
            // A name is a plain word: a typo of the shape is caught here.
            ("JSON Lines=x", Err("is not an output name")),
        ];
        for (text, want) in cases {
            let got = OutputSpec::parse(text);
            match (got, want) {
                (Ok(s), Ok((name, arg))) => assert_eq!((s.name.as_str(), s.arg.as_deref()), (name, arg), "{text}"),
                (Err(e), Err(part)) => assert!(e.contains(part), "{text}: {e}"),
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }
}
