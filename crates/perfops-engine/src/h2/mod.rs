//! HTTP/2 of our own (#14): the frame codec (`frame`), HPACK with its
//! Huffman code (`hpack`, `huffman`; our requests' blocks indexed per
//! connection: `encoder`), a client connection (`conn`), what one of its
//! streams comes to (`answer`) and what it runs on, dated by the kernel
//! where it can be (`stamped`).
//! `http2.rs` pools these connections and runs a request on a stream.
//!
//! Why by hand and not the `h2` crate: per request against nginx (50
//! connections x 10 streams, TLS), callgrind counted ~27,900 user-space
//! instructions for perfops on `h2`, ~20,000 of them the crate's and the
//! `http`/`bytes` types it builds, against h2load's ~19,300 in all; see
//! bench/README.md, "Where an HTTP/2 request's CPU goes", for that and the
//! figures of this client. Each module's doc says what it saves.

pub(crate) mod answer;
pub(crate) mod conn;
pub(crate) mod encoder;
pub(crate) mod frame;
pub(crate) mod hpack;
pub(crate) mod huffman;
pub(crate) mod stamped;

#[cfg(test)]
mod tests;
