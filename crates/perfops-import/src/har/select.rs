//! Which recorded requests become steps, and which of their header fields
//! are sent: the main host's requests, without static assets, without the
//! header fields a browser adds on its own.
//!
//! This module owns those three rules; it does not look at what flows
//! between requests (`correlate.rs`).
//!
//! - The main host is `--host`, else the host (and port) of the first
//!   document request (an HTML response), else of the first request: the site
//!   the user opened. Requests to other hosts (CDNs, analytics, fonts) are
//!   left out unless `--include-host` names them; a scenario has one
//!   `target:`, so a host included that way is sent to the target too.
//! - Static assets (images, CSS, scripts, fonts, media) are known by their
//!   response's MIME type or, when a server labels them loosely, by the
//!   path's extension. They are left out unless `--include-static`: a
//!   browser caches them, a CDN serves them, and a load test of the service
//!   is about its own answers.
//! - Header fields: hop-by-hop fields, HTTP/2 pseudo-headers, the ones the
//!   client computes (`Host`, `Content-Length`), and what the browser says
//!   about itself (`sec-ch-*`, `sec-fetch-*`, `User-Agent` unless asked,
//!   `Accept-Encoding`, `Accept-Language`, `Referer`, `Origin`, cache
//!   validators that would turn answers into 304s) are dropped.

use super::read::Entry;

/// What the caller chose (the flags of `perfops import har`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// The main host (`host` or `host:port`); `None`: found from the recording.
    pub host: Option<String>,
    /// Keep static assets.
    pub include_static: bool,
    /// Other hosts whose requests are kept.
    pub include_hosts: Vec<String>,
    /// Keep the recorded `User-Agent`.
    pub keep_user_agent: bool,
}

/// Why an entry was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// A static asset of the main host.
    Static,
    /// A request to another host.
    OtherHost,
}

/// `host` or `host:port` of a URL, as written in it (a default port left out).
pub fn authority(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

/// The main host of `entries` (see the module doc), and the scheme it was reached over.
pub fn main_host(entries: &[Entry], chosen: Option<&str>) -> Option<(String, String)> {
    if let Some(h) = chosen {
        let h = h.trim().trim_end_matches('/');
        let h = h.strip_prefix("http://").or_else(|| h.strip_prefix("https://")).unwrap_or(h);
        let scheme =
            entries.iter().find(|e| authority(&e.url).eq_ignore_ascii_case(h)).map_or("http", |e| e.url.scheme());
        return Some((h.to_ascii_lowercase(), scheme.to_string()));
    }
    let first =
        entries.iter().find(|e| e.mime == "text/html" || e.mime == "application/xhtml+xml").or(entries.first())?;
    Some((authority(&first.url).to_ascii_lowercase(), first.url.scheme().to_string()))
}

/// Whether `entry` is kept, given the main host; `Err` says why not.
pub fn keep(entry: &Entry, main: &str, sel: &Selection) -> Result<(), Left> {
    let host = authority(&entry.url).to_ascii_lowercase();
    let included = host == main
        || sel.include_hosts.iter().any(|h| {
            let h = h.trim().to_ascii_lowercase();
            h == host || entry.url.host_str().is_some_and(|bare| bare.eq_ignore_ascii_case(&h))
        });
    if !included {
        return Err(Left::OtherHost);
    }
    if !sel.include_static && is_static(entry) {
        return Err(Left::Static);
    }
    Ok(())
}

/// A static asset: by the response's MIME type, else by the path's extension.
pub fn is_static(entry: &Entry) -> bool {
    let m = entry.mime.as_str();
    let by_mime = m.starts_with("image/")
        || m.starts_with("font/")
        || m.starts_with("video/")
        || m.starts_with("audio/")
        || matches!(
            m,
            "text/css"
                | "text/javascript"
                | "application/javascript"
                | "application/x-javascript"
                | "application/ecmascript"
                | "application/font-woff"
                | "application/font-woff2"
                | "application/x-font-woff"
                | "application/x-font-ttf"
                | "application/vnd.ms-fontobject"
                | "application/wasm"
                | "application/manifest+json"
        );
    if by_mime {
        return true;
    }
    // The icon a browser asks for on its own, whatever the server answered.
    if entry.url.path() == "/favicon.ico" {
        return true;
    }
    // A JSON or HTML answer is never an asset, whatever its path says.
    if matches!(m, "application/json" | "text/html") || m.ends_with("+json") {
        return false;
    }
    let path = entry.url.path();
    let ext = path.rsplit('/').next().and_then(|last| last.rsplit_once('.')).map(|(_, e)| e.to_ascii_lowercase());
    matches!(
        ext.as_deref(),
        Some(
            "png"
                | "jpg"
                | "jpeg"
                | "gif"
                | "svg"
                | "ico"
                | "webp"
                | "avif"
                | "bmp"
                | "css"
                | "js"
                | "mjs"
                | "map"
                | "woff"
                | "woff2"
                | "ttf"
                | "otf"
                | "eot"
                | "mp4"
                | "webm"
                | "mp3"
                | "ogg"
                | "wav"
                | "wasm"
        )
    )
}

/// Whether a request header field is sent by the scenario (see the module doc).
pub fn keep_header(name: &str, sel: &Selection) -> bool {
    let n = name.to_ascii_lowercase();
    if n.starts_with(':') || n.starts_with("sec-ch-") || n.starts_with("sec-fetch-") || n.starts_with("proxy-") {
        return false;
    }
    if n == "user-agent" {
        return sel.keep_user_agent;
    }
    !matches!(
        n.as_str(),
        "host"
            | "content-length"
            | "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "accept-encoding"
            | "accept-language"
            | "upgrade-insecure-requests"
            | "referer"
            | "origin"
            | "dnt"
            | "priority"
            | "purpose"
            | "pragma"
            | "cache-control"
            | "if-none-match"
            | "if-modified-since"
            | "x-devtools-emulate-network-conditions-client-id"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(url: &str, mime: &str) -> Entry {
        Entry {
            index: 0,
            started_ms: None,
            time_ms: 0.0,
            page: None,
            method: "GET".into(),
            url: url::Url::parse(url).unwrap(),
            request_headers: Vec::new(),
            post: None,
            status: Some(200),
            response_headers: Vec::new(),
            mime: mime.into(),
            response_text: None,
        }
    }

    #[test]
    fn what_is_kept() {
        let sel = Selection::default();
        let with_static = Selection { include_static: true, ..Selection::default() };
        let with_cdn = Selection { include_hosts: vec!["cdn.example.com".into()], ..Selection::default() };
        let cases: &[(&str, &str, &Selection, Result<(), Left>)] = &[
            // The service's JSON: kept.
            ("http://shop.test:8080/orders", "application/json", &sel, Ok(())),
            // A page: kept (the document is the service's answer too).
            ("http://shop.test:8080/", "text/html", &sel, Ok(())),
            // A stylesheet, by its MIME type.
            ("http://shop.test:8080/app", "text/css", &sel, Err(Left::Static)),
            // A script served as text/plain: by its extension.
            ("http://shop.test:8080/app.js", "text/plain", &sel, Err(Left::Static)),
            // A font.
            ("http://shop.test:8080/f.woff2", "font/woff2", &sel, Err(Left::Static)),
            // The browser's own icon request, answered 404 in JSON.
            ("http://shop.test:8080/favicon.ico", "application/json", &sel, Err(Left::Static)),
            // JSON at a path ending in .js is still JSON.
            ("http://shop.test:8080/config.js", "application/json", &sel, Ok(())),
            // Asked for: static kept.
            ("http://shop.test:8080/logo.png", "image/png", &with_static, Ok(())),
            // Another port is another host.
            ("http://shop.test:9090/orders", "application/json", &sel, Err(Left::OtherHost)),
            // A third party.
            ("https://cdn.example.com/lib.json", "application/json", &sel, Err(Left::OtherHost)),
            // ... unless named.
            ("https://cdn.example.com/lib.json", "application/json", &with_cdn, Ok(())),
            // A named host's static assets are still static.
            ("https://cdn.example.com/lib.js", "application/javascript", &with_cdn, Err(Left::Static)),
        ];
        for (url, mime, sel, want) in cases {
            assert_eq!(keep(&entry(url, mime), "shop.test:8080", sel), *want, "{url} {mime}");
        }
    }

    #[test]
    fn the_main_host() {
        let entries = [
            entry("https://fonts.example.com/x.css", "text/css"),
            entry("http://shop.test:8080/", "text/html"),
            entry("http://shop.test:8080/auth", "application/json"),
        ];
        // The first document, not the first request.
        assert_eq!(main_host(&entries, None), Some(("shop.test:8080".into(), "http".into())));
        // No document: the first request.
        assert_eq!(main_host(&entries[2..], None), Some(("shop.test:8080".into(), "http".into())));
        // Chosen, written as a URL: its host, the scheme it was reached over.
        assert_eq!(
            main_host(&entries, Some("https://fonts.example.com/")),
            Some(("fonts.example.com".into(), "https".into()))
        );
        assert_eq!(main_host(&[], None), None);
    }

    #[test]
    fn headers_sent() {
        let sel = Selection::default();
        let ua = Selection { keep_user_agent: true, ..Selection::default() };
        let cases: &[(&str, &Selection, bool)] = &[
            // What the request is about: kept.
            ("Accept", &sel, true),
            ("Content-Type", &sel, true),
            ("Authorization", &sel, true),
            ("X-Requested-With", &sel, true),
            // HTTP/2 pseudo-headers.
            (":authority", &sel, false),
            (":path", &sel, false),
            // Computed by the client.
            ("Host", &sel, false),
            ("content-length", &sel, false),
            // Browser noise.
            ("sec-ch-ua-platform", &sel, false),
            ("Sec-Fetch-Mode", &sel, false),
            ("Accept-Encoding", &sel, false),
            ("Referer", &sel, false),
            ("If-None-Match", &sel, false),
            // User-Agent only when asked.
            ("User-Agent", &sel, false),
            ("User-Agent", &ua, true),
        ];
        for (name, sel, want) in cases {
            assert_eq!(keep_header(name, sel), *want, "{name}");
        }
    }
}
