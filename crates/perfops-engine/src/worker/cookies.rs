//! A flow instance's cookie jar in the engine (`defaults.cookies`, on by
//! default): the `Cookie:` field a request carries, written into its
//! HTTP/1.1 bytes before it goes out (HTTP/2 converts those bytes), and the
//! `Set-Cookie` fields of every answer (each redirect's too) kept. The rules
//! (parse, path, domain, expiry, bounds) are `perfops_core::cookie`'s; the
//! jar lives with its arrival (`arrival.rs`).
//!
//! What it costs a scenario whose server sets no cookie: per request, one
//! test that the jar is empty; per answer, a flag the head's parse set
//! (HTTP/1.1, whose parse a repeated head skips) or an empty list (HTTP/2).
//! The wall clock is read only when a jar holds or receives a cookie.
//! Measured (callgrind, `--workers 1` against nginx, the engine's own
//! instructions per request): a scenario's closed loop with the jar on,
//! 1,246.7 before the jar and 1,269.5 with it; `quick -n 200000 -c 50`
//! (no jar) 1,249.2 and 1,270.7; `quick -r 5000 -d 5s` 1,780.5 and 1,802.8.
//! Before the test moved ahead of the call (`Request::cookies`), the call
//! itself cost 21 more.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use perfops_core::cookie::{Jar, request_path};

use super::{Request, Worker};

impl<'a> Request<'a> {
    /// The flow's jar when it holds a cookie (`None`: no jar, or an empty
    /// one: the request goes as written).
    #[inline]
    pub(super) fn cookies(&self) -> Option<&'a RefCell<Jar>> {
        self.jar.filter(|j| !j.borrow().is_empty())
    }
}

/// The wall clock in unix seconds: `Expires` is a date, `Max-Age` counts
/// from when the answer came.
fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl Worker {
    /// `request` (HTTP/1.1 bytes) as it goes out: with the cookies of `jar`
    /// for it, written into `out`, or as it is when there is nothing in the
    /// jar for this request. Out of line: the caller tests the jar first
    /// (`Request::cookies`), so that a flow without cookies pays that test.
    #[inline(never)]
    pub(super) fn with_cookies<'r>(&self, jar: &RefCell<Jar>, request: &'r [u8], out: &'r mut Vec<u8>) -> &'r [u8] {
        if jar.borrow_mut().apply(request, self.shared.target.tls, unix_now(), out) { out } else { request }
    }

    /// Keep in `jar` the `Set-Cookie` fields among an answer's `fields`,
    /// answered to a request for `path` (its path and query).
    #[inline(never)]
    pub(super) fn keep_cookies<'f>(
        &self,
        jar: &RefCell<Jar>,
        path: &[u8],
        fields: impl IntoIterator<Item = (&'f str, &'f [u8])>,
    ) {
        let target = &self.shared.target;
        // `request_path` reads a request line's target: give it one.
        let path = request_path(&[b"GET ", path].concat()).to_string();
        let now = unix_now();
        let mut jar = jar.borrow_mut();
        for (name, value) in fields {
            if name.eq_ignore_ascii_case("set-cookie") {
                jar.store(value, &target.host, &path, target.tls, now);
            }
        }
    }
}
