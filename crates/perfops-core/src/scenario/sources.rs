//! Where a scenario's variables come from outside its file: `${env.X}`
//! (read once, before the load) and the CSV files of `data:` feeders. The
//! caller hands in the environment lookup and the file reader, so this stays
//! free of I/O and tests need neither; the errors say which variable or file
//! and are input errors of the user's.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use super::feeder::{Feeder, FeederError};
use super::template::{Template, VarRef, Vars};
use super::{Body, JsonPart, Scenario, TargetSpec};

/// A variable source the scenario names is missing or broken.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// `${env.X}` with X not set: an input error, not an empty string.
    #[error("`${{env.{name}}}` is used in `{used_in}` but {name} is not set")]
    EnvNotSet {
        /// The variable.
        name: String,
        /// The template that uses it, as written.
        used_in: String,
    },
    /// A feeder's CSV file cannot be read.
    #[error("data `{data}`: cannot read {}: {error}", path.display())]
    Read {
        /// The feeder.
        data: String,
        /// The file, relative to where the scenario is.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// A feeder's CSV file is not a table of rows.
    #[error("{}: {error}", path.display())]
    Csv {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        error: FeederError,
    },
}

/// The value of every `${env.X}` the scenario uses, from `lookup`.
pub fn env(
    scenario: &Scenario,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<HashMap<String, String>, SourceError> {
    let mut env = HashMap::new();
    let target = match &scenario.target {
        TargetSpec::Url(u) if u.contains("${") => Template::parse(u, &[]).ok(),
        _ => None,
    };
    for t in target.iter().chain(templates(scenario)) {
        for v in t.vars() {
            if let VarRef::Env(name) = v {
                let value = lookup(name)
                    .ok_or_else(|| SourceError::EnvNotSet { name: name.clone(), used_in: t.source().to_string() })?;
                env.insert(name.clone(), value);
            }
        }
    }
    Ok(env)
}

/// The scenario's target with its `${env.NAME}` replaced by `env`'s values
/// (from [`env`], which reads those of the target too): what `run` parses as
/// a URL, and `check` likewise. A demo target is as it was.
pub fn target(scenario: &Scenario, env: &HashMap<String, String>) -> TargetSpec {
    match &scenario.target {
        TargetSpec::Url(u) if u.contains("${") => match Template::parse(u, &[]) {
            Ok(t) => {
                let mut out = Vec::new();
                let _ = t.render(&EnvOnly(env), &mut fastrand::Rng::with_seed(0), &mut out);
                TargetSpec::Url(String::from_utf8_lossy(&out).trim_end_matches('/').to_string())
            }
            // The parser accepted it: cannot happen, and the URL parse says the rest.
            Err(_) => scenario.target.clone(),
        },
        other => other.clone(),
    }
}

/// The environment alone, for rendering the target.
struct EnvOnly<'a>(&'a HashMap<String, String>);

impl Vars for EnvOnly<'_> {
    fn saved(&self, _: &str) -> Option<&str> {
        None
    }
    fn env(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
    fn seq(&self) -> u64 {
        0
    }
    fn feeder(&self, _: &str, _: &str) -> Option<&str> {
        None
    }
}

/// The scenario's feeders, their CSV files (relative to `base`, the
/// scenario's folder) read with `read`.
pub fn feeders(
    scenario: &Scenario,
    base: &Path,
    read: impl Fn(&Path) -> io::Result<String>,
) -> Result<Vec<Feeder>, SourceError> {
    scenario
        .data
        .iter()
        .map(|spec| {
            let path = base.join(&spec.csv);
            let csv = read(&path).map_err(|error| SourceError::Read {
                data: spec.name.clone(),
                path: path.clone(),
                error,
            })?;
            Feeder::from_csv(&spec.name, &csv, spec.mode).map_err(|error| SourceError::Csv { path, error })
        })
        .collect()
}

/// Every template of the scenario, for finding `${env.X}` uses.
fn templates(s: &Scenario) -> Vec<&Template> {
    let mut out: Vec<&Template> = s.defaults.headers.iter().map(|(_, t)| t).collect();
    for step in s.setup.iter().chain(s.flows.iter().flat_map(|f| f.steps.iter())) {
        out.push(&step.path);
        out.extend(step.headers.iter().map(|(_, t)| t));
        match &step.body {
            Body::Raw(t) => out.push(t),
            Body::Form(f) => out.extend(f.iter().map(|(_, t)| t)),
            Body::Json(parts) => out.extend(parts.iter().filter_map(|p| match p {
                JsonPart::String(t) => Some(t),
                JsonPart::Literal(_) => None,
            })),
            Body::None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
target: http://127.0.0.1:8080
defaults: { headers: { X-Api-Key: "${env.API_KEY}" } }
data: { pages: { csv: data/paths.csv } }
flows: { browse: { steps: [ { request: "GET /${pages.path}?u=${env.USER_ID}" } ] } }
load: { stages: [ { rate: 10, hold: 1s } ] }
"#;

    fn scenario() -> Scenario {
        super::super::parse("s.yaml", TEXT, &[]).unwrap_or_else(|d| panic!("{}", d.render(TEXT)))
    }

    #[test]
    fn env_values_come_from_the_lookup_and_a_missing_one_is_named() {
        let s = scenario();
        let all = |name: &str| Some(format!("<{name}>"));
        let values = env(&s, all).expect("every variable set");
        assert_eq!(values.get("API_KEY").map(String::as_str), Some("<API_KEY>"));
        assert_eq!(values.get("USER_ID").map(String::as_str), Some("<USER_ID>"));
        let cases = [
            // The header default is the first template that uses it.
            ("API_KEY", "`${env.API_KEY}` is used in `${env.API_KEY}` but API_KEY is not set"),
            // A step's path, named as written.
            ("USER_ID", "`${env.USER_ID}` is used in `/${pages.path}?u=${env.USER_ID}` but USER_ID is not set"),
        ];
        for (missing, want) in cases {
            let err = env(&s, |name: &str| (name != missing).then(|| "x".to_string())).expect_err(missing);
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn feeders_are_read_beside_the_scenario_and_errors_name_the_file() {
        let s = scenario();
        let base = Path::new("/scenarios");
        let read = feeders(&s, base, |p| {
            assert_eq!(p, Path::new("/scenarios/data/paths.csv"), "relative to the scenario's folder");
            Ok("path\na\nb\n".into())
        })
        .expect("a good table");
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].name(), "pages");
        let unreadable = feeders_err(&s, base, || Err(io::Error::new(io::ErrorKind::NotFound, "no such file")));
        assert_eq!(unreadable, "data `pages`: cannot read /scenarios/data/paths.csv: no such file");
        let empty = feeders_err(&s, base, || Ok(String::new()));
        assert!(empty.starts_with("/scenarios/data/paths.csv: "), "{empty}");
    }

    /// #11: `${env.X}` in `target` is read with the others and resolved
    /// before the URL is parsed; only the environment may be used there.
    #[test]
    fn the_target_takes_env_values_only() {
        let parse = |target: &str| {
            let text = TEXT.replace("http://127.0.0.1:8080", target);
            super::super::parse("s.yaml", &text, &[]).map_err(|d| d.render(&text))
        };
        let set = |name: &str| Some(format!("<{name}>"));
        // (target as written, resolved with every variable set to `<NAME>`)
        let cases = [
            ("http://127.0.0.1:${env.PORT}", "http://127.0.0.1:<PORT>"),
            ("${env.TARGET}/", "<TARGET>"), // the whole URL, its trailing slash dropped as for any URL
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"), // nothing to resolve
        ];
        for (target, want) in cases {
            let s = parse(target).unwrap_or_else(|e| panic!("{target}: {e}"));
            let env = env(&s, set).expect("set");
            assert_eq!(super::target(&s, &env), TargetSpec::Url(want.into()), "{target}");
        }
        for bad in ["http://127.0.0.1:${seq}", "http://${pages.host}:1", "http://127.0.0.1:${env.PORT"] {
            assert!(parse(bad).is_err(), "{bad} must be refused where the target is written");
        }
        let s = parse("http://127.0.0.1:${env.PORT}").unwrap();
        let err = env(&s, |n: &str| (n != "PORT").then(|| "x".into())).expect_err("PORT unset");
        assert!(err.to_string().contains("PORT is not set"), "{err}");
    }

    fn feeders_err(s: &Scenario, base: &Path, read: impl Fn() -> io::Result<String>) -> String {
        match feeders(s, base, |_| read()) {
            Ok(_) => panic!("an error expected"),
            Err(e) => e.to_string(),
        }
    }
}
