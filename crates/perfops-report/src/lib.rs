//! perfops' outputs, from measured statistics to what people read: the live
//! line printed every second, the ab-style summary of `quick`, and its JSON.
//!
//! Pure formatting: no I/O here; the binary decides where text goes.

pub mod live;
pub mod lttb;
pub mod quick;
pub mod results;
pub mod run;
