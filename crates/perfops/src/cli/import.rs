//! The flags of `perfops import access-log` and `perfops import har`, and
//! what they become: the options of `perfops_import`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use perfops_core::units::parse_duration;
use perfops_import::access_log::{FieldMap, Format};

/// Flags of `perfops import`.
#[derive(Debug, Args)]
pub(crate) struct ImportFlags {
    #[command(subcommand)]
    pub(crate) what: ImportCommand,
}

/// What to import.
#[derive(Debug, Subcommand)]
pub(crate) enum ImportCommand {
    /// A service's access log (nginx/Apache combined or common, JSON lines; gzip'd or not): endpoints
    /// weighted by their share, sessions as flows, stages from the log's mean and peak rate.
    #[command(name = "access-log", after_help = crate::help::IMPORT_ACCESS_LOG)]
    AccessLog(AccessLogFlags),
    /// A browser recording (HAR): the requests as flows and steps, with the values that pass from a
    /// response to a later request found and saved.
    #[command(after_help = crate::help::IMPORT_HAR)]
    Har(HarFlags),
}

/// Where the scenario goes, for both imports.
#[derive(Debug, Args)]
pub(crate) struct OutFlags {
    /// Write the scenario to FILE (its CSV feeders beside it); default: standard output (the
    /// feeders in the current directory).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// The scenario's `name:` (default: the input file's name without its extensions).
    #[arg(long)]
    pub(crate) name: Option<String>,
}

/// The line formats `--format` takes.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum FormatFlag {
    /// Each line as it comes: `{` starts JSON, anything else is combined or common.
    Auto,
    /// nginx/Apache combined (extra fields after the user agent are allowed).
    Combined,
    /// nginx/Apache common.
    Common,
    /// One JSON object per line (see --field).
    Json,
}

/// Flags of `perfops import access-log`.
#[derive(Debug, Args)]
pub(crate) struct AccessLogFlags {
    /// The access log (gzip'd or not: told by its first bytes).
    file: PathBuf,
    #[command(flatten)]
    pub(crate) out: OutFlags,
    /// The line format.
    #[arg(long, value_enum, default_value = "auto")]
    format: FormatFlag,
    /// JSON lines: which key holds a field, `FIELD=KEY[,FIELD=KEY...]` (repeatable). Fields: time,
    /// method, path, request, query, status, client, agent, auth. Default: nginx's variable names
    /// (`time_iso8601`, `msec`, `request_method`, `request_uri`, `status`, `remote_addr`,
    /// `http_user_agent`, `http_authorization`) and common alternatives; a dotted key also looks
    /// into nested objects (`http.request.method`).
    #[arg(long = "field", value_name = "FIELD=KEY")]
    fields: Vec<String>,
    /// The stages' rates are the log's times N: `--scale 3` for three times the load it shows.
    #[arg(long, value_name = "N", default_value_t = 1.0)]
    scale: f64,
    /// The scenario's target (the log does not say which host it served).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    target: String,
    /// A header for every request, `Name: value`, kept as a template (repeatable): a credential the
    /// log cannot carry, e.g. 'Authorization: Bearer ${env.TOKEN}'.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// A gap longer than this between a client's requests ends its session.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    session_gap: Duration,
    /// Drop query strings (by default they are kept, as a feeder column with the logged values).
    #[arg(long)]
    no_query: bool,
    /// Write at most N flows (the least frequent endpoints past them are left out, and counted).
    #[arg(long, value_name = "N", default_value_t = 100)]
    max_flows: usize,
    /// Also write the log's requests as a replay file FILE beside the scenario, and make the
    /// scenario replay them at their recorded offsets (one flow per endpoint; no sessions, no
    /// stages). A file name, not a path: `perfops run` reads it from the scenario's folder.
    #[arg(long, value_name = "FILE")]
    pub(crate) replay: Option<String>,
}

/// Flags of `perfops import har`.
#[derive(Debug, Args)]
pub(crate) struct HarFlags {
    /// The recording (HAR 1.2, as browsers' developer tools save it).
    file: PathBuf,
    #[command(flatten)]
    pub(crate) out: OutFlags,
    /// Keep static assets (images, scripts, styles, fonts), left out by default.
    #[arg(long)]
    include_static: bool,
    /// Keep requests to HOST too, besides the recording's main host (repeatable); other hosts are
    /// left out.
    #[arg(long = "include-host", value_name = "HOST")]
    include_hosts: Vec<String>,
    /// The main host (`host` or `host:port`): its requests become the steps and it is the
    /// target. Default: the host of the first page recorded.
    #[arg(long, value_name = "HOST")]
    host: Option<String>,
    /// Keep the recorded User-Agent header (dropped by default, with the browser's other headers).
    #[arg(long)]
    keep_user_agent: bool,
    /// Also write the recording's requests as a replay file FILE beside the scenario, and make the
    /// scenario replay them at their recorded offsets (one flow per request; the steps whose answers
    /// later requests use run once in setup). A file name, not a path: `perfops run` reads it from
    /// the scenario's folder.
    #[arg(long, value_name = "FILE")]
    pub(crate) replay: Option<String>,
}

/// `--replay FILE`: a file name, written beside the scenario.
fn replay_name(replay: Option<&String>) -> Result<(), String> {
    match replay.filter(|r| r.is_empty() || r.contains(['/', '\\']) || r.starts_with('.')) {
        Some(r) => Err(format!(
            "--replay `{r}`: a file name (it is written beside the scenario, where `perfops run` reads it)"
        )),
        None => Ok(()),
    }
}

impl AccessLogFlags {
    /// The input file and the library's options; `data_prefix` names the feeders' files.
    pub(crate) fn options(
        &self,
        data_prefix: String,
    ) -> Result<(PathBuf, perfops_import::access_log::Options), String> {
        let mut fields = FieldMap::default();
        for spec in &self.fields {
            fields.set(spec).map_err(|e| format!("--field: {e}"))?;
        }
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err(format!("--scale {}: a factor above 0 (e.g. 3 for three times the log's rate)", self.scale));
        }
        let mut headers = Vec::new();
        for h in &self.headers {
            let Some((name, value)) = h.split_once(':') else {
                return Err(format!("--header `{h}` is not `Name: value`"));
            };
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
        replay_name(self.replay.as_ref())?;
        let format = match self.format {
            FormatFlag::Auto => Format::Auto,
            FormatFlag::Combined => Format::Combined,
            FormatFlag::Common => Format::Common,
            FormatFlag::Json => Format::Json,
        };
        Ok((
            self.file.clone(),
            perfops_import::access_log::Options {
                name: self.out.name.clone(),
                target: self.target.clone(),
                format,
                fields,
                scale: self.scale,
                session_gap: self.session_gap,
                keep_query: !self.no_query,
                headers,
                data_prefix,
                max_flows: self.max_flows,
                replay: self.replay.clone(),
            },
        ))
    }
}

impl HarFlags {
    /// The input file and the library's options.
    pub(crate) fn options(&self) -> Result<(PathBuf, perfops_import::har::HarOptions), String> {
        replay_name(self.replay.as_ref())?;
        Ok((
            self.file.clone(),
            perfops_import::har::HarOptions {
                name: self.out.name.clone(),
                include_static: self.include_static,
                include_hosts: self.include_hosts.clone(),
                host: self.host.clone(),
                keep_user_agent: self.keep_user_agent,
            },
        ))
    }
}
