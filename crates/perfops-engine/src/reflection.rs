//! gRPC server reflection (#14): a `grpc:` step (or `quick grpc://`) that
//! names no `.proto` file asks the server for the descriptors of its
//! service, once, before the run, and is then run exactly as if they had
//! come from a `.proto` file (`grpc::method` on the pool built here).
//!
//! ```text
//!  POST /grpc.reflection.v1.ServerReflection/ServerReflectionInfo   (then v1alpha, if v1 is UNIMPLEMENTED)
//!    -> ServerReflectionRequest { file_containing_symbol: "package.Service" }
//!    <- ServerReflectionResponse { file_descriptor_response: [FileDescriptorProto bytes] }
//!       (the file and, from most servers, the files it imports)
//!  for each import still missing (a server that sends the file alone):
//!    -> ServerReflectionRequest { file_by_filename: "dep.proto" }        (same service)
//! ```
//!
//! Each request is a call of its own (one message each way, the stream
//! ended after it) on one HTTP/2 connection (`h2/conn.rs`, the run's own
//! client), over TLS when the target is: `unary.rs` connects and makes
//! each call.
//! The messages are the few fields of `grpc/reflection/v1/reflection.proto`
//! that this needs, declared here with prost's derive: the v1 and v1alpha
//! messages are the same on the wire. Not here: the run's own connections
//! (`http2.rs`); a call that fails here says why in one line, with the way
//! out (`proto:`).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use prost::Message;
use prost_reflect::DescriptorPool;
use prost_reflect::prost_types::FileDescriptorProto;

use crate::h2::conn::{Conn, LARGE_WINDOW, Windows};
use crate::http1::Stream;
use crate::target::Target;
use crate::unary::{self, UnaryError};

/// Where to ask: the run's target, its TLS settings and a deadline for the
/// whole exchange.
#[derive(Debug, Clone)]
pub struct Reflection {
    /// The server.
    pub target: Target,
    /// Accept any TLS certificate.
    pub insecure: bool,
    /// For connecting and every call together.
    pub timeout: Duration,
}

/// The reflection services, newest first.
const SERVICES: [&str; 2] = [
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// gRPC's `UNIMPLEMENTED`: the server has no such service.
const UNIMPLEMENTED: u32 = 12;

/// How many files one service may pull in (its imports, theirs, ...): a
/// bound on the calls a hostile or looping server can make us make.
const MAX_FILES: usize = 256;

/// `ServerReflectionRequest`, the fields this sends.
#[derive(Clone, PartialEq, prost::Message)]
struct Request {
    #[prost(oneof = "Ask", tags = "3, 4")]
    ask: Option<Ask>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Ask {
    /// A file by its name (an import).
    #[prost(string, tag = "3")]
    FileByFilename(String),
    /// The file that declares a symbol (the service).
    #[prost(string, tag = "4")]
    FileContainingSymbol(String),
}

/// `ServerReflectionResponse`, the fields this reads.
#[derive(Clone, PartialEq, prost::Message)]
struct Response {
    #[prost(oneof = "Answer", tags = "4, 7")]
    answer: Option<Answer>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Answer {
    #[prost(message, tag = "4")]
    Files(FileDescriptors),
    #[prost(message, tag = "7")]
    Error(ErrorAnswer),
}

/// `FileDescriptorResponse`: serialized `FileDescriptorProto`s.
#[derive(Clone, PartialEq, prost::Message)]
struct FileDescriptors {
    #[prost(bytes = "vec", repeated, tag = "1")]
    file_descriptor_proto: Vec<Vec<u8>>,
}

/// `ErrorResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct ErrorAnswer {
    #[prost(int32, tag = "1")]
    error_code: i32,
    #[prost(string, tag = "2")]
    error_message: String,
}

/// Why the server's reflection gave no descriptors for a service: the whole
/// line, with its hint. Ours, not `grpc.rs`'s: `grpc.rs` asks this module
/// and carries the line on as its own `GrpcError::Reflection`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ReflectionError(pub(crate) String);

/// The hint every reflection error ends with.
const HINT: &str = "add `proto: FILE` to the step (quick: --proto FILE)";

impl Reflection {
    /// The descriptors of `service` (`package.Service`) and of every file
    /// they import, as the server's reflection gives them.
    pub(crate) fn pool(&self, service: &str) -> Result<DescriptorPool, ReflectionError> {
        let fail = |why: String| ReflectionError(format!("{why}: {HINT}"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(format!("cannot start a runtime ({e})")))?;
        let at = format!("the server at {}", self.target.addr);
        let local = tokio::task::LocalSet::new();
        rt.block_on(local.run_until(async {
            match tokio::time::timeout(self.timeout, self.fetch(service)).await {
                Ok(result) => result.map_err(|e| match e {
                    Fetch::Failed(why) => fail(format!("cannot ask {at} for `{service}` by reflection: {why}")),
                    // No server: a .proto file would not help (review 2's tester).
                    Fetch::Unreachable(why) => ReflectionError(format!(
                        "cannot ask {at} for `{service}` by reflection: {why}: is the server running there?"
                    )),
                    Fetch::NoReflection => fail(format!(
                        "{at} does not serve gRPC reflection (grpc.reflection.v1 nor v1alpha), so `{service}` cannot \
                         be looked up there"
                    )),
                    Fetch::NotFound(why) => ReflectionError(format!(
                        "{at} does not know service `{service}` by reflection ({why}): check its name, or {HINT}"
                    )),
                }),
                Err(_) => {
                    Err(fail(format!("{at} did not answer reflection for `{service}` within {:?}", self.timeout)))
                }
            }
        }))
    }

    async fn fetch(&self, service: &str) -> Result<DescriptorPool, Fetch> {
        let io = unary::connect(&self.target, self.insecure).await.map_err(|e| match e {
            UnaryError::Unreachable(why) => Fetch::Unreachable(why),
            other => Fetch::Failed(other.to_string()),
        })?;
        self.files(io, service).await
    }

    /// The service's file, then every import it lacks, over one connection.
    async fn files(&self, io: Stream, service: &str) -> Result<DescriptorPool, Fetch> {
        let conn = Rc::new(Conn::new(Windows { stream: LARGE_WINDOW, connection: LARGE_WINDOW }));
        let task = conn.clone();
        let driver = tokio::task::spawn_local(async move { task.drive(io).await });
        std::future::poll_fn(|cx| conn.poll_ready(cx))
            .await
            .map_err(|kind| Fetch::Failed(format!("HTTP/2: {}", kind.name())))?;
        let mut call = Call { conn: &conn, path: SERVICES[0], target: &self.target };
        let first = match call.ask(Ask::FileContainingSymbol(service.to_string())).await {
            Err(Fetch::NoReflection) => {
                call.path = SERVICES[1];
                call.ask(Ask::FileContainingSymbol(service.to_string())).await?
            }
            other => other?,
        };
        let mut files: BTreeMap<String, FileDescriptorProto> = BTreeMap::new();
        let add = |raw: Vec<Vec<u8>>, files: &mut BTreeMap<String, FileDescriptorProto>| -> Result<(), Fetch> {
            for bytes in raw {
                let file = FileDescriptorProto::decode(bytes.as_slice())
                    .map_err(|e| Fetch::Failed(format!("a file descriptor that does not decode ({e})")))?;
                files.insert(file.name().to_string(), file);
            }
            Ok(())
        };
        add(first, &mut files)?;
        // Imports the server did not send with the file: asked for by name.
        let mut asked = BTreeSet::new();
        while let Some(missing) = files
            .values()
            .flat_map(|f| f.dependency.iter())
            .find(|d| !files.contains_key(*d) && !asked.contains(*d))
            .cloned()
        {
            if files.len() + asked.len() >= MAX_FILES {
                return Err(Fetch::Failed(format!("more than {MAX_FILES} files imported")));
            }
            asked.insert(missing.clone());
            let raw = call.ask(Ask::FileByFilename(missing.clone())).await.map_err(|e| match e {
                Fetch::NotFound(why) => Fetch::Failed(format!("its import `{missing}` is not served ({why})")),
                other => other,
            })?;
            add(raw, &mut files)?;
        }
        driver.abort();
        let mut pool = DescriptorPool::new();
        pool.add_file_descriptor_protos(files.into_values())
            .map_err(|e| Fetch::Failed(format!("the descriptors it gave do not fit together ({e})")))?;
        Ok(pool)
    }
}

/// Why a lookup failed, before it is said.
#[derive(Debug)]
enum Fetch {
    /// Neither reflection service is there.
    NoReflection,
    /// The server's reflection does not know the symbol or file.
    NotFound(String),
    /// No connection to the server (refused, unreachable).
    Unreachable(String),
    /// Anything else: protocol, a malformed answer.
    Failed(String),
}

/// One reflection service on one connection: a call per question.
struct Call<'a> {
    conn: &'a Conn,
    path: &'static str,
    target: &'a Target,
}

impl Call<'_> {
    /// Ask one question: its files, or why not.
    async fn ask(&mut self, ask: Ask) -> Result<Vec<Vec<u8>>, Fetch> {
        let request = Request { ask: Some(ask) }.encode_to_vec();
        let reply = unary::ask(self.conn, self.target, self.path, &[], &request)
            .await
            .map_err(|e| Fetch::Failed(e.to_string()))?;
        match reply.status {
            0 => {}
            UNIMPLEMENTED => return Err(Fetch::NoReflection),
            code => return Err(Fetch::Failed(format!("gRPC status {code} {}", reply.message).trim().to_string())),
        }
        let message = reply.body.ok_or_else(|| Fetch::Failed("no answer message".into()))?;
        let answer =
            Response::decode(message).map_err(|e| Fetch::Failed(format!("an answer that does not decode ({e})")))?;
        match answer.answer {
            Some(Answer::Files(f)) => Ok(f.file_descriptor_proto),
            // NOT_FOUND, or whatever the server says it could not find.
            Some(Answer::Error(e)) => {
                let code = if e.error_code == 5 { "NOT_FOUND".to_string() } else { format!("status {}", e.error_code) };
                Err(Fetch::NotFound(format!("{code}: {}", e.error_message).trim_end_matches([':', ' ']).into()))
            }
            None => Err(Fetch::Failed("an answer with neither files nor an error".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request's bytes are reflection.proto's: field 4 (a string) for
    /// a symbol, field 3 for a file name; framed as gRPC frames a message.
    #[test]
    fn requests_are_reflection_protos_bytes() {
        // (question, the message's bytes)
        let cases = [
            (Ask::FileContainingSymbol("a.B".into()), vec![0x22, 3, b'a', b'.', b'B']), // tag 4, wire type 2
            (Ask::FileByFilename("x.proto".into()), [&[0x1a, 7][..], b"x.proto"].concat()), // tag 3
        ];
        for (ask, want) in cases {
            let framed = unary::frame(&Request { ask: Some(ask.clone()) }.encode_to_vec());
            assert_eq!(&framed[..5], &[0, 0, 0, 0, want.len() as u8], "{ask:?}");
            assert_eq!(&framed[5..], &want[..], "{ask:?}");
        }
    }

    /// An answer's files and errors decode from the bytes a server sends
    /// (written here field by field, as the wire has them).
    #[test]
    fn answers_decode() {
        // file_descriptor_response (4) { file_descriptor_proto (1): "ab", "c" }
        let files = [&[0x22, 7, 0x0a, 2][..], b"ab", &[0x0a, 1], b"c"].concat();
        let got = Response::decode(files.as_slice()).unwrap();
        assert_eq!(
            got.answer,
            Some(Answer::Files(FileDescriptors { file_descriptor_proto: vec![b"ab".to_vec(), b"c".to_vec()] }))
        );
        // error_response (7) { error_code (1): 5, error_message (2): "nf" }
        let error = [&[0x3a, 6, 0x08, 5, 0x12, 2][..], b"nf"].concat();
        let got = Response::decode(error.as_slice()).unwrap();
        assert_eq!(got.answer, Some(Answer::Error(ErrorAnswer { error_code: 5, error_message: "nf".into() })));
        // A frame cut short is no message.
        let mut short = bytes::Bytes::from_static(&[0, 0, 0, 0, 9, 1, 2]);
        assert_eq!(unary::unframe(&mut short), None);
        let mut compressed = bytes::Bytes::from_static(&[1, 0, 0, 0, 0]);
        assert_eq!(unary::unframe(&mut compressed), None, "compression was not asked for");
    }
}
