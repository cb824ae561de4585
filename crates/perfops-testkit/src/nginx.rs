//! Debian's nginx on 127.0.0.1, for the tests that need a server faster than
//! the generator (the testkit's servers spend a thread per connection; the
//! demo shares the test's CPU): one process, keep-alive without a request
//! limit, `200 ok\n` for every request. `.ci/run` installs it (Debian's `nginx`).
//!
//! [`nginx_guarding`] is the other use: the reverse proxy with TLS and
//! credentials that stands in front of a team's Prometheus (#15).
//! [`nginx_proxy_logging`] is a third: a plain reverse proxy that writes the
//! access logs a service's nginx would, for `perfops import access-log`.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running nginx; dropping it stops it (by its PID) and removes its files.
pub struct Nginx {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

impl Nginx {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Start nginx on a free port of 127.0.0.1: `/` answers `ok`, `/many` with
/// 80 header fields `x-fill-N` and then `x-last: found`. Panics, saying how
/// to install it, when there is no nginx.
pub fn nginx() -> Nginx {
    nginx_holding(4096)
}

/// Like [`nginx`], holding up to `connections` open at once (it needs as
/// many file descriptors: its soft limit is raised to them, which the hard
/// limit must allow).
pub fn nginx_holding(connections: u32) -> Nginx {
    start(|port| config(port, connections), &[])
}

/// The credentials [`nginx_guarding`] asks for.
#[derive(Debug, Clone)]
pub struct Guard {
    /// `/bearer/...` wants `Authorization: Bearer TOKEN`.
    pub token: String,
    /// `/basic/...` wants basic auth as this user ...
    pub user: String,
    /// ... with this password.
    pub password: String,
}

/// nginx as a reverse proxy to `upstream`, over TLS with a fresh self-signed certificate for
/// `127.0.0.1` (its PEM is `cert.pem` in [`Nginx::dir`]), asking for `guard`'s credentials:
/// `https://127.0.0.1:PORT/bearer/X` and `/basic/X` are `http://upstream/X` once let through,
/// `401` otherwise.
pub fn nginx_guarding(upstream: SocketAddr, guard: &Guard) -> Nginx {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("rcgen: self-signed certificate");
    let files = [
        ("cert.pem", certified.cert.pem()),
        ("key.pem", certified.key_pair.serialize_pem()),
        // nginx reads `{PLAIN}` passwords as they are: no crypt(3) needed in a test.
        ("users", format!("{}:{{PLAIN}}{}\n", guard.user, guard.password)),
    ];
    let token = guard.token.clone();
    start(move |port| guarding_config(port, upstream, &token), &files)
}

/// nginx as a plain reverse proxy to `upstream` (keep-alive both ways) that
/// logs every request twice in [`Nginx::dir`]: `access.log` in nginx's
/// `combined` format, and `access.jsonl` as JSON lines (`escape=json`) with
/// nginx's variable names: `msec`, `time_iso8601`, `remote_addr`,
/// `request_method`, `request_uri`, `status`, `http_user_agent`,
/// `http_authorization` (a test's token: a real service would not log it).
pub fn nginx_proxy_logging(upstream: SocketAddr) -> Nginx {
    start(move |port| proxy_logging_config(port, upstream), &[])
}

fn proxy_logging_config(port: u16, upstream: SocketAddr) -> String {
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid nginx.pid;
error_log error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format json escape=json '{{\"msec\":\"$msec\",\"time_iso8601\":\"$time_iso8601\",'
        '\"remote_addr\":\"$remote_addr\",\"request_method\":\"$request_method\",'
        '\"request_uri\":\"$request_uri\",\"status\":\"$status\",'
        '\"http_user_agent\":\"$http_user_agent\",\"http_authorization\":\"$http_authorization\"}}';
    access_log access.log combined;
    access_log access.jsonl json;
    keepalive_timeout 65s;
    keepalive_requests 100000000;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    upstream app {{
        server {upstream};
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }}
    }}
}}
"
    )
}

/// How [`nginx_h2`] serves HTTP/2.
#[derive(Debug, Clone, Default)]
pub struct H2Config {
    /// Over TLS (ALPN `h2` and `http/1.1`, a fresh self-signed certificate
    /// for `127.0.0.1`, `cert.pem` in [`Nginx::dir`]); else in clear text
    /// (h2c with prior knowledge: nginx 1.22's `listen ... http2` without `ssl`).
    pub tls: bool,
    /// `http2_max_concurrent_streams` (nginx's default: 128).
    pub max_concurrent_streams: Option<u32>,
    /// `keepalive_requests`: after this many requests on a connection nginx
    /// sends `GOAWAY` (it applies to HTTP/2 since 1.19.7).
    pub keepalive_requests: Option<u32>,
}

/// nginx speaking HTTP/2 as `config` says, `200 ok\n` for every request
/// but `/reset`, whose streams it resets (`return 444`: `RST_STREAM`), and
/// `/big`, whose header block (40 fields `x-fill-N` of 1000 characters,
/// then `x-last: found`) is larger than a frame: nginx sends it as HEADERS
/// and CONTINUATION frames, and `/fields?n=N`, which answers 400 unless
/// the request's `x-seq` is `sN` and else says the fields it decoded
/// (`X-CONST|HOST|PATH|USER-AGENT`),
/// its access log (`access.log` in [`Nginx::dir`]) one line per request:
/// `CONNECTION REQUESTS_ON_IT PROTOCOL STATUS` (`$connection
/// $connection_requests $server_protocol $status`), so that a test sees
/// which requests shared a connection.
pub fn nginx_h2(config: &H2Config) -> Nginx {
    let mut files = Vec::new();
    if config.tls {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("rcgen: self-signed certificate");
        files.push(("cert.pem", certified.cert.pem()));
        files.push(("key.pem", certified.key_pair.serialize_pem()));
    }
    let c = config.clone();
    start(move |port| h2_config(port, &c), &files)
}

/// nginx as a site with a session in two cookies (HTTP/1.1, or with `h2c`
/// HTTP/2 in clear text with prior knowledge), each answer saying in its
/// status whether the request carried what a browser would have:
///
/// - `/shop/login` sets `a=A<request id>` and `b=B<request id>` (two `Set-Cookie`
///   fields, `Path=/`) and `c=C1` with no `Path` (its default path: `/shop`);
/// - `/shop/app` answers 401 unless both `a` and `b` came, 403 unless `c` did;
/// - `/echo` answers 403 unless the header `X-A` is cookie `a`'s value (a
///   value taken with `cookie:a` and sent elsewhere than in a cookie);
/// - `/outside` answers 409 if `c` came (its path is `/shop`'s);
/// - `/logout` deletes `a` (`Max-Age=0`); `/gone` answers 409 if `a` still came,
///   401 unless `b` did;
/// - `/fresh` answers 409 if any cookie came (a session's first request).
///
/// Its access log (`access.log` in [`Nginx::dir`]) is `STATUS URI COOKIE`
/// per request.
pub fn nginx_cookies(h2c: bool) -> Nginx {
    start(move |port| cookies_config(port, h2c), &[])
}

fn cookies_config(port: u16, h2c: bool) -> String {
    let http2 = if h2c { " http2" } else { "" };
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid nginx.pid;
error_log error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format cookies '$status $uri \"$http_cookie\"';
    access_log access.log cookies;
    keepalive_timeout 65s;
    keepalive_requests 100000000;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server {{
        listen 127.0.0.1:{port}{http2} backlog=4096;
        default_type text/plain;
        location = /shop/login {{
            add_header Set-Cookie \"a=A$request_id; Path=/; HttpOnly\" always;
            add_header Set-Cookie \"b=B$request_id; Path=/; Max-Age=3600\" always;
            add_header Set-Cookie \"c=C1\" always;
            return 200 \"welcome\\n\";
        }}
        location = /shop/app {{
            if ($cookie_a = \"\") {{ return 401; }}
            if ($cookie_b = \"\") {{ return 401; }}
            if ($cookie_c = \"\") {{ return 403; }}
            return 200 \"app\\n\";
        }}
        location = /echo {{
            if ($http_x_a = \"\") {{ return 403; }}
            if ($http_x_a != $cookie_a) {{ return 403; }}
            return 200 \"echo\\n\";
        }}
        location = /outside {{
            if ($cookie_c != \"\") {{ return 409; }}
            return 200 \"outside\\n\";
        }}
        location = /logout {{
            add_header Set-Cookie \"a=; Path=/; Max-Age=0\" always;
            return 200 \"bye\\n\";
        }}
        location = /fresh {{
            if ($http_cookie != \"\") {{ return 409; }}
            return 200 \"fresh\\n\";
        }}
        location = /gone {{
            if ($cookie_a != \"\") {{ return 409; }}
            if ($cookie_b = \"\") {{ return 401; }}
            return 200 \"gone\\n\";
        }}
    }}
}}
"
    )
}

/// nginx in front of `upstream` (an HTTP/1.1 server: the testkit's SSE
/// server), speaking HTTP/2 to its clients (in clear text with prior
/// knowledge, or with `tls` by ALPN over TLS with a fresh self-signed
/// certificate for `127.0.0.1`), passing each piece of an answer on as it
/// comes (`proxy_buffering off`, nothing postponed): a streamed answer over
/// HTTP/2, each event in DATA frames as the upstream sent it. Its access
/// log (`access.log` in [`Nginx::dir`]) is `PROTOCOL STATUS` per request.
pub fn nginx_h2_streaming(upstream: SocketAddr, tls: bool) -> Nginx {
    let mut files = Vec::new();
    if tls {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("rcgen: self-signed certificate");
        files.push(("cert.pem", certified.cert.pem()));
        files.push(("key.pem", certified.key_pair.serialize_pem()));
    }
    start(move |port| h2_streaming_config(port, upstream, tls), &files)
}

fn h2_streaming_config(port: u16, upstream: SocketAddr, tls: bool) -> String {
    let listen = if tls {
        format!(
            "listen 127.0.0.1:{port} ssl http2 backlog=4096;\n        ssl_certificate cert.pem;\n        ssl_certificate_key key.pem;"
        )
    } else {
        format!("listen 127.0.0.1:{port} http2 backlog=4096;")
    };
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid nginx.pid;
error_log error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format proto '$server_protocol $status';
    access_log access.log proto;
    keepalive_timeout 65s;
    keepalive_requests 100000000;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    upstream app {{
        server {upstream};
        keepalive 16;
    }}
    server {{
        {listen}
        location / {{
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering off;
            postpone_output 0;
        }}
    }}
}}
"
    )
}

/// The lines of an [`nginx_h2`]'s access log: (connection, requests on it so far, protocol, status).
pub fn access_log(n: &Nginx) -> Vec<(u64, u64, String, u16)> {
    let text = std::fs::read_to_string(n.dir.join("access.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?, f.next()?.to_string(), f.next()?.parse().ok()?))
        })
        .collect()
}

fn h2_config(port: u16, c: &H2Config) -> String {
    let listen = if c.tls {
        format!(
            "listen 127.0.0.1:{port} ssl http2 backlog=4096;\n        ssl_certificate cert.pem;\n        ssl_certificate_key key.pem;"
        )
    } else {
        format!("listen 127.0.0.1:{port} http2 backlog=4096;")
    };
    let streams = c.max_concurrent_streams.map_or(String::new(), |n| format!("http2_max_concurrent_streams {n};"));
    let requests = c.keepalive_requests.unwrap_or(100_000_000);
    // ~1000 characters that Huffman does not shrink much (digits and capitals: 6-7 bits).
    let fill: String =
        (0..1000u32).map(|i| char::from(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[(i * 7 % 36) as usize])).collect();
    let big: String = (0..40).map(|i| format!("add_header x-fill-{i} \"{fill}\";\n            ")).collect();
    format!(
        "daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 8192;
pid nginx.pid;
error_log error.log warn;
events {{ worker_connections 4096; }}
http {{
    log_format conn '$connection $connection_requests $server_protocol $status';
    access_log access.log conn;
    keepalive_timeout 65s;
    keepalive_requests {requests};
    {streams}
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server {{
        {listen}
        default_type text/plain;
        location / {{ return 200 \"ok\\n\"; }}
        location /reset {{ return 444; }}
        location /big {{
            {big}add_header x-last found;
            return 200 \"big\\n\";
        }}
        location /fields {{
            if ($http_x_seq != \"s$arg_n\") {{ return 400; }}
            return 200 \"$http_x_const|$host|$uri|$http_user_agent\\n\";
        }}
    }}
}}
"
    )
}

impl Nginx {
    /// Its prefix directory: `cert.pem` of [`nginx_guarding`] is there.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

/// Start nginx with the configuration `config` gives for a free port, `files` beside it.
fn start(config: impl Fn(u16) -> String, files: &[(&str, String)]) -> Nginx {
    // The port is free when asked and taken by nginx a moment later; another
    // process may take it in between, so try a few ports.
    let mut last = String::new();
    for attempt in 0..3 {
        let port =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).and_then(|l| l.local_addr()).expect("a free port").port();
        let dir = std::env::temp_dir().join(format!("perfops-nginx-{}-{port}-{attempt}", std::process::id()));
        std::fs::create_dir_all(dir.join("tmp")).expect("nginx prefix dir");
        std::fs::write(dir.join("nginx.conf"), config(port)).expect("nginx.conf");
        for (name, text) in files {
            std::fs::write(dir.join(name), text).expect("a file beside nginx.conf");
        }
        let child = Command::new("nginx")
            .arg("-p")
            .arg(format!("{}/", dir.display()))
            .args(["-c", "nginx.conf", "-e", "error.log"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run nginx ({e}): install it (apt-get install nginx)"));
        let mut n = Nginx { child, dir, addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = n.child.try_wait() {
                break; // exited: the port was taken, or the config refused
            }
            if TcpStream::connect(n.addr).is_ok() {
                return n;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        last = std::fs::read_to_string(n.dir.join("error.log")).unwrap_or_default();
    }
    panic!("nginx did not start on 127.0.0.1; its error log:\n{last}");
}

fn guarding_config(port: u16, upstream: SocketAddr, token: &str) -> String {
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid nginx.pid;
error_log error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate cert.pem;
        ssl_certificate_key key.pem;
        location /bearer/ {{
            if ($http_authorization != \"Bearer {token}\") {{ return 401; }}
            proxy_pass http://{upstream}/;
        }}
        location /basic/ {{
            auth_basic \"prometheus\";
            auth_basic_user_file users;
            proxy_pass http://{upstream}/;
        }}
    }}
}}
"
    )
}

fn config(port: u16, connections: u32) -> String {
    // nginx starts closing idle keep-alive connections when fewer than a
    // sixteenth of its slots are free: an eighth more, so it never does.
    let slots = connections + connections / 8 + 64;
    // `/many`: 80 small header fields, then `x-last` (past the 64th).
    let many: String = (0..80).map(|i| format!("add_header x-fill-{i} {i};\n            ")).collect();
    // A few descriptors more than slots: the listener, the logs.
    let files = slots + 32;
    format!(
        "daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile {files};
pid nginx.pid;
error_log error.log warn;
events {{ worker_connections {slots}; }}
http {{
    access_log off;
    keepalive_timeout 65s;
    keepalive_requests 100000000;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        default_type text/plain;
        location / {{ return 200 \"ok\\n\"; }}
        location /many {{
            {many}add_header x-last found;
            return 200 \"many\\n\";
        }}
    }}
}}
"
    )
}
