//! The plain HTTP client the harnesses use to talk to the servers they start (Prometheus, the
//! OpenTelemetry Collector): one HTTP/1.0 request on a new connection, with a connect timeout and
//! read and write timeouts, so that nothing here can hang a test; and the Prometheus HTTP API on
//! top of it (instant and range queries, a wait until a query has data), shared by Debian's
//! Prometheus ([`crate::prometheus`]) and the current one ([`crate::receivers`]).
//!
//! HTTP/1.0 because the answer then ends with the connection: no chunked decoding, no
//! keep-alive bookkeeping, and a server that keeps the connection open past its answer is a bug
//! the timeout reports.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a request may take to connect.
const CONNECT: Duration = Duration::from_secs(1);
/// How long one read or write may block.
const IO: Duration = Duration::from_secs(5);

/// Percent-encoding of a query parameter: everything but unreserved characters.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `GET target` over HTTP/1.0: status and body.
pub(crate) fn get(addr: SocketAddr, target: &str) -> Result<(u16, String), String> {
    request(addr, &format!("GET {target} HTTP/1.0\r\nHost: {addr}\r\n\r\n").into_bytes())
}

/// `POST target` over HTTP/1.0 with `headers` (name, value) and `body`: status and body.
pub(crate) fn post(
    addr: SocketAddr,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<(u16, String), String> {
    let mut head = format!("POST {target} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    request(addr, &bytes)
}

/// Sends `bytes` on a new connection and reads the answer until the server closes it.
pub(crate) fn request(addr: SocketAddr, bytes: &[u8]) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect_timeout(&addr, CONNECT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(IO)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(IO)).map_err(|e| e.to_string())?;
    s.write_all(bytes).map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(|| format!("no response head: {answer:?}"))?;
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("bad head: {head}"))?;
    Ok((status, body.to_string()))
}

/// The Prometheus HTTP API of the server at an address.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PromApi(pub(crate) SocketAddr);

impl PromApi {
    /// An instant query at `time` (unix seconds; now when `None`): the API's JSON answer.
    pub(crate) fn query(self, query: &str, time: Option<f64>) -> Result<Value, String> {
        let mut target = format!("/api/v1/query?query={}", encode(query));
        if let Some(t) = time {
            target.push_str(&format!("&time={t:.3}"));
        }
        self.api(&target)
    }

    /// A range query from `start` to `end` (unix seconds) every `step`: the API's JSON answer.
    pub(crate) fn query_range(self, query: &str, start: f64, end: f64, step: Duration) -> Result<Value, String> {
        self.api(&format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step={:.3}",
            encode(query),
            step.as_secs_f64()
        ))
    }

    /// The result array of `query` (now), empty on an error.
    pub(crate) fn series(self, query: &str) -> Vec<Value> {
        self.query(query, None).ok().and_then(|v| v["data"]["result"].as_array().cloned()).unwrap_or_default()
    }

    /// Wait until `query` returns at least one series, for at most `limit`; the series.
    pub(crate) fn wait_for_data(self, query: &str, limit: Duration) -> Result<Vec<Value>, String> {
        let deadline = Instant::now() + limit;
        loop {
            let got = self.series(query);
            if !got.is_empty() {
                return Ok(got);
            }
            if Instant::now() >= deadline {
                return Err(format!("`{query}` returned no data within {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `GET target`, an answer whose `status` is `success`.
    fn api(self, target: &str) -> Result<Value, String> {
        let (status, body) = get(self.0, target)?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("HTTP {status}: {e}: {body}"))?;
        match v["status"].as_str() {
            Some("success") => Ok(v),
            _ => Err(format!("HTTP {status}: {body}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(encode(r#"sum(x{a=~"b.*"}) by (c)"#), "sum%28x%7Ba%3D~%22b.%2A%22%7D%29%20by%20%28c%29");
    }
}
