//! Cookies as a browser session keeps them, for one target: a `Set-Cookie` field parsed
//! ([`SetCookie::parse`], RFC 6265 section 5.2, dates by section 5.1.1's algorithm), a jar that
//! stores what a flow's answers set and says what its later requests carry ([`Jar`]), and the
//! `Cookie:` field written into an HTTP/1.1 request's bytes ([`Jar::apply`]).
//!
//! Owns the rules, not the run: the engine keeps one jar per flow instance (an open-model
//! arrival, a closed-loop user's iteration), hands it every `Set-Cookie` of every answer and asks
//! it before each request; this module reads no clock (the engine passes the wall clock in unix
//! seconds, read only when a jar holds or receives something) and no socket.
//!
//! Right for one target, not for the web: every request of a run goes to one host, so a cookie
//! whose `Domain` matches that host is kept and sent to it, and one that names another domain is
//! refused (a browser would keep it for that domain, where a run never goes); a host-only cookie
//! and a domain cookie of the same name and path are one cookie. No public-suffix list, no
//! `SameSite` (a run has no sites), `HttpOnly` ignored (no scripts read the jar).
//!
//! Bounded, because what comes from the network is not trusted: a jar keeps at most
//! [`MAX_COOKIES`] cookies of at most [`MAX_COOKIE_BYTES`] (name and value) each, and
//! [`MAX_JAR_BYTES`] in all (the `Cookie:` field it writes stays under nginx's default 8 KiB
//! header line); a cookie past a bound is dropped, as a browser drops one past its own. A name or
//! value with a control byte (CR, LF, NUL, ...) or a `;` is refused: it never reaches a request.

mod jar;
mod parse;

pub use jar::{Jar, MAX_COOKIE_BYTES, MAX_COOKIES, MAX_JAR_BYTES, request_path};
pub use parse::{SetCookie, cookie_date};
