//! Where a scenario's variables come from outside its file: `${env.X}`
//! (read once, before the load) and the CSV files of `data:` feeders. The
//! caller hands in the environment lookup and the file reader, so this stays
//! free of I/O and tests need neither. Every problem is reported at once, as
//! a [`Diagnostic`] at the place in the file that asks for the variable or the
//! file, with a hint: they are input errors of the user's, as the file's own.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::Path;

use super::diag::{Diagnostic, Diagnostics, did_you_mean};
use super::feeder::Feeder;
use super::template::{Template, VarRef, Vars};
use super::{FeederSpec, Scenario, TargetSpec, VarUse};

/// The value of every `${env.X}` the scenario uses, from `lookup`; or every
/// variable that is not set, each at its first use.
pub fn env(
    scenario: &Scenario,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<HashMap<String, String>, Diagnostics> {
    env_of(&scenario.outside_vars, lookup)
}

/// [`env`] from the variables' uses alone: a file with errors still has them ([`super::Partial`]).
pub fn env_of(
    outside_vars: &[VarUse],
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<HashMap<String, String>, Diagnostics> {
    let mut env = HashMap::new();
    let mut unset: Vec<Diagnostic> = Vec::new();
    let mut uses: Vec<(&str, &VarUse)> = outside_vars
        .iter()
        .filter_map(|u| match &u.var {
            VarRef::Env(name) => Some((name.as_str(), u)),
            _ => None,
        })
        .collect();
    uses.sort_by_key(|(_, u)| (u.at.file == "--set", u.at.line, u.at.column));
    let mut seen = HashSet::new();
    for (name, u) in uses.into_iter().filter(|(name, _)| seen.insert(*name)) {
        match lookup(name) {
            Some(value) => {
                env.insert(name.to_string(), value);
            }
            None => unset.push(u.at.error(
                format!("`${{env.{name}}}` is used in `{}` but {name} is not set", u.used_in),
                Some(format!(
                    "set it where perfops runs (`export {name}=...`); it is read once, before the load, and never written to the results"
                )),
            )),
        }
    }
    if unset.is_empty() { Ok(env) } else { Err(Diagnostics(unset)) }
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
/// scenario's folder) read with `read`; or what is wrong with each.
pub fn feeders(
    scenario: &Scenario,
    base: &Path,
    read: impl Fn(&Path) -> io::Result<String>,
) -> Result<Vec<Feeder>, Diagnostics> {
    feeders_of(&scenario.data, &scenario.outside_vars, base, read)
}

/// [`feeders`] from the feeders and the variables' uses alone: a file with errors still has them
/// ([`super::Partial`]).
pub fn feeders_of(
    data: &[FeederSpec],
    outside_vars: &[VarUse],
    base: &Path,
    read: impl Fn(&Path) -> io::Result<String>,
) -> Result<Vec<Feeder>, Diagnostics> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for spec in data {
        let path = base.join(&spec.csv);
        match read(&path) {
            Err(error) => errors.push(spec.at.error(
                format!("data `{}`: cannot read {}: {error}", spec.name, path.display()),
                Some("a CSV file's path is relative to the scenario file's folder".into()),
            )),
            Ok(csv) => match Feeder::from_csv(&spec.name, &csv, spec.mode) {
                Ok(feeder) => {
                    errors.extend(unknown_columns(outside_vars, &feeder, &path));
                    out.push(feeder);
                }
                Err(error) => errors.push(spec.at.error(
                    format!("data `{}`: {}: {error}", spec.name, path.display()),
                    Some("the first row names the columns; every row has as many fields".into()),
                )),
            },
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(Diagnostics(errors)) }
}

/// A `${feeder.column}` whose feeder's file (read from `path`) has no such
/// column: without this check it rendered as an empty value, silently, and a
/// run against the wrong URLs passed.
fn unknown_columns<'s>(
    outside_vars: &'s [VarUse],
    feeder: &'s Feeder,
    path: &'s Path,
) -> impl Iterator<Item = Diagnostic> + 's {
    outside_vars.iter().filter_map(move |u| match &u.var {
        VarRef::Feeder { feeder: name, column } if name == feeder.name() && feeder.column_index(column).is_none() => {
            let columns = feeder.columns();
            let names: Vec<&str> = columns.iter().map(String::as_str).collect();
            let hint = match did_you_mean(column, &names) {
                Some(near) => format!("did you mean `${{{name}.{near}}}`? its columns: {}", columns.join(", ")),
                None => format!("its columns: {} (the first row of the file names them)", columns.join(", ")),
            };
            Some(u.at.error(format!("`${{{name}.{column}}}`: {} has no column `{column}`", path.display()), Some(hint)))
        }
        _ => None,
    })
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
    fn env_values_come_from_the_lookup_and_every_missing_one_is_named_where_it_is_used() {
        let s = scenario();
        let all = |name: &str| Some(format!("<{name}>"));
        let values = env(&s, all).expect("every variable set");
        assert_eq!(values.get("API_KEY").map(String::as_str), Some("<API_KEY>"));
        assert_eq!(values.get("USER_ID").map(String::as_str), Some("<USER_ID>"));
        // (variables unset, each error as `check` prints it: at the `${` of the first use)
        let cases: [(&[&str], &[&str]); 3] = [
            // The header default, line 3; the hint says where it is read.
            (
                &["API_KEY"],
                &["s.yaml:3:36: error: `${env.API_KEY}` is used in `${env.API_KEY}` but API_KEY is not set"],
            ),
            // A step's path, named as written; the column is the variable's, not the request's.
            (
                &["USER_ID"],
                &[
                    "s.yaml:5:62: error: `${env.USER_ID}` is used in `/${pages.path}?u=${env.USER_ID}` but USER_ID is not set",
                ],
            ),
            // Both at once, in the file's order (it stopped at the first).
            (&["USER_ID", "API_KEY"], &["s.yaml:3:36", "s.yaml:5:62"]),
        ];
        for (missing, want) in cases {
            let err = env(&s, |name: &str| (!missing.contains(&name)).then(|| "x".to_string())).expect_err("unset");
            assert_eq!(err.0.len(), want.len(), "{err}");
            for (d, w) in err.0.iter().zip(want) {
                assert!(d.to_string().starts_with(w), "{d}\nwant {w}");
                assert!(d.hint.as_deref().is_some_and(|h| h.contains("export")), "{d}");
            }
        }
    }

    /// A variable used twice is asked for once, at its first use.
    #[test]
    fn an_unset_variable_used_twice_is_one_error() {
        let text = TEXT.replace("?u=${env.USER_ID}", "?u=${env.API_KEY}");
        let s = super::super::parse("s.yaml", &text, &[]).unwrap_or_else(|d| panic!("{}", d.render(&text)));
        let err = env(&s, |_: &str| None).expect_err("unset");
        assert_eq!(err.0.len(), 1, "{err}");
        assert_eq!((err.0[0].line, err.0[0].path.as_str()), (3, "defaults.headers.X-Api-Key"));
    }

    #[test]
    fn feeders_are_read_beside_the_scenario_and_errors_point_at_their_csv() {
        let s = scenario();
        let base = Path::new("/scenarios");
        let read = feeders(&s, base, |p| {
            assert_eq!(p, Path::new("/scenarios/data/paths.csv"), "relative to the scenario's folder");
            Ok("path\na\nb\n".into())
        })
        .expect("a good table");
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].name(), "pages");
        // `data: { pages: { csv: data/paths.csv } }` is line 4; `data/paths.csv` starts at column 23.
        let unreadable = feeders_err(&s, base, || Err(io::Error::new(io::ErrorKind::NotFound, "no such file")));
        assert_eq!(
            unreadable,
            "s.yaml:4:23: error: data `pages`: cannot read /scenarios/data/paths.csv: no such file (at `data.pages.csv`)\n  \
             hint: a CSV file's path is relative to the scenario file's folder\n"
        );
        let empty = feeders_err(&s, base, || Ok(String::new()));
        assert!(empty.starts_with("s.yaml:4:23: error: data `pages`: /scenarios/data/paths.csv: line "), "{empty}");
    }

    /// A column the file lacks is refused where it is used (it rendered as an
    /// empty value, silently); a known one, or another feeder's, is not.
    #[test]
    fn a_column_the_csv_lacks_is_named_with_the_columns_it_has() {
        let s = scenario();
        // (the CSV text, the error at `${pages.path}` or none)
        let cases = [
            ("path\na\n", None),                                                    // the column is there
            ("paht\na\n", Some("did you mean `${pages.paht}`? its columns: paht")), // a typo in the file
            ("url,id\na,1\n", Some("its columns: url, id (the first row of the file names them)")), // nothing near
        ];
        for (csv, want) in cases {
            let got = feeders(&s, Path::new(""), |_| Ok(csv.to_string()));
            match (got, want) {
                (Ok(_), None) => {}
                (Err(e), Some(hint)) => {
                    let d = &e.0[0];
                    assert_eq!((d.line, d.column), (5, 46), "{d}");
                    assert_eq!(d.message, "`${pages.path}`: data/paths.csv has no column `path`");
                    assert_eq!(d.hint.as_deref(), Some(hint), "{csv:?}");
                }
                (got, want) => panic!("{csv:?}: {got:?}, want {want:?}"),
            }
        }
    }

    /// Two feeders that cannot be read are two errors, not the first alone.
    #[test]
    fn every_feeder_that_cannot_be_read_is_named() {
        let text = TEXT.replace(
            "data: { pages: { csv: data/paths.csv } }",
            "data: { pages: { csv: a.csv }, users: { csv: b.csv } }",
        );
        let s = super::super::parse("s.yaml", &text, &[]).unwrap_or_else(|d| panic!("{}", d.render(&text)));
        let err = feeders(&s, Path::new(""), |_| Err(io::ErrorKind::NotFound.into())).expect_err("none readable");
        let paths: Vec<&str> = err.0.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["data.pages.csv", "data.users.csv"]);
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
