//! gRPC over the HTTP/2 client (#14): descriptors compiled from `.proto`
//! files at run time (`protox`: no `protoc` on the user's machine), a step's
//! message turned from JSON into protobuf (`prost-reflect`), framed, and the
//! status read from the answer.
//!
//! ```text
//!   request  POST /package.Service/Method   content-type: application/grpc
//!            te: trailers   grpc-timeout: <timeout>m
//!            body: 0 (uncompressed) | length u32 big-endian | protobuf message
//!   answer   :status 200, the messages framed the same way, then trailers
//!            grpc-status (0 = OK), grpc-message; or a "trailers-only" answer
//!            whose headers carry grpc-status and no body
//! ```
//!
//! A step renders its message as JSON with the same renderer as an HTTP
//! body (templates and all); this module encodes it with the method's input
//! descriptor: once before the run for a literal step, per request for a
//! templated one. The answer's first message is decoded to JSON only when
//! the step saves or checks something. A unary call and a server-streaming
//! one are read the same way: to the end of the stream (latency is to its
//! last message). A method that streams from the client (client or
//! bidirectional streaming) takes a list of messages (`message: [...]`, or
//! one message alone): a call sends them all, in order, ends its side of
//! the stream, and reads the answer to its end. One call is one request of
//! the step, measured from its intended start to the answer's last message;
//! nothing waits between messages (a call that paces its messages, or
//! answers to the server's, is not here). A step without `.proto` files
//! takes its descriptors from the server's reflection instead
//! (`reflection.rs`), once, before the run. Not here: compression.
//!
//! The `.proto` files, imports included, are read through
//! `perfops_core::input` (#31): inside the folder each is found in (a link
//! out of it is refused), regular files only, at most 16 MiB each.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use perfops_core::input::{self, Cap};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};
use protox::file::{ChainFileResolver, File as ProtoFile, FileResolver, GoogleFileResolver, IncludeFileResolver};

/// A method to call, resolved from its `.proto` files.
#[derive(Debug, Clone)]
pub struct GrpcMethod {
    /// `package.Service/Method`, as the step names it.
    pub name: String,
    input: MessageDescriptor,
    output: MessageDescriptor,
    /// The server answers with a stream of messages.
    pub server_streaming: bool,
    /// The client sends a stream of messages (client or bidirectional streaming).
    pub client_streaming: bool,
}

/// Why a gRPC method could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// No `.proto` file was given for a step that calls `method`.
    #[error("`{0}`: no .proto file given (`proto:` in the step, or --proto)")]
    NoProto(String),
    /// The server's reflection could not give the method's descriptors
    /// (none served, the service unknown to it, the server unreachable):
    /// the whole line, with its hint.
    #[error("{0}")]
    Reflection(String),
    /// The `.proto` files do not compile.
    #[error("{file}: {message}")]
    Compile {
        /// The file, as given.
        file: String,
        /// What protox said (with line and column).
        message: String,
    },
    /// The service is not in the files.
    #[error("no service `{service}` in {files}")]
    NoService {
        /// `package.Service`.
        service: String,
        /// The files searched.
        files: String,
    },
    /// The service has no such method.
    #[error("service `{service}` has no method `{method}` (it has: {has})")]
    NoMethod {
        /// `package.Service`.
        service: String,
        /// The method asked for.
        method: String,
        /// The methods it has.
        has: String,
    },
    /// A literal message that does not fit the method's input type.
    #[error("`{method}`: the message does not fit {input}: {message}")]
    Message {
        /// The method.
        method: String,
        /// Its input type.
        input: String,
        /// What did not fit.
        message: String,
    },
}

/// Each of `protos` is a file that can be read: the compiler said of a
/// missing one "is not in any include path" (review 2's tester).
fn exist(protos: &[PathBuf]) -> Result<(), GrpcError> {
    for p in protos {
        if let Err(e) = std::fs::metadata(p) {
            return Err(GrpcError::Compile { file: p.display().to_string(), message: format!("cannot read it: {e}") });
        }
    }
    Ok(())
}

/// Compile `protos` (each with its own folder as an include path) into a pool.
pub fn compile(protos: &[PathBuf]) -> Result<DescriptorPool, GrpcError> {
    let first = protos.first().map(|p| p.display().to_string()).unwrap_or_default();
    exist(protos)?;
    let includes = includes(protos);
    let set = compile_set(protos, &includes)
        .map_err(|e| GrpcError::Compile { file: first.clone(), message: e.to_string() })?;
    DescriptorPool::from_file_descriptor_set(set)
        .map_err(|e| GrpcError::Compile { file: first, message: e.to_string() })
}

/// The files on disk that compiling `protos` reads: each given file and
/// every file it imports, transitively, where the compiler found it (the
/// well-known `google/protobuf/*.proto` that protox carries are not
/// files). A fleet ships them to its agents, which compile them again.
pub fn proto_sources(protos: &[PathBuf]) -> Result<Vec<PathBuf>, GrpcError> {
    let first = protos.first().map(|p| p.display().to_string()).unwrap_or_default();
    exist(protos)?;
    let includes = includes(protos);
    let set = compile_set(protos, &includes)
        .map_err(|e| GrpcError::Compile { file: first.clone(), message: e.to_string() })?;
    let mut files = Vec::new();
    for f in &set.file {
        // The first include that has it is where protox took it from.
        if let Some(path) = includes.iter().map(|i| i.join(f.name())).find(|p| p.is_file())
            && !files.contains(&path)
        {
            files.push(path);
        }
    }
    Ok(files)
}

/// What `protox::compile(protos, includes)` does, but with every file read
/// through [`SafeInclude`].
fn compile_set(
    protos: &[PathBuf],
    includes: &[PathBuf],
) -> Result<prost_reflect::prost_types::FileDescriptorSet, protox::Error> {
    let mut resolver = ChainFileResolver::new();
    for include in includes {
        resolver.add(SafeInclude(include.clone()));
    }
    // The well-known google/protobuf/*.proto that protox carries: not files.
    resolver.add(GoogleFileResolver::new());
    Ok(protox::Compiler::with_file_resolver(resolver)
        .include_source_info(true)
        .include_imports(true)
        .open_files(protos)?
        .file_descriptor_set())
}

/// protox's include path (`IncludeFileResolver`), its files opened under
/// `perfops_core::input`'s rule rather than followed wherever a link leads.
struct SafeInclude(PathBuf);

impl FileResolver for SafeInclude {
    fn resolve_path(&self, path: &Path) -> Option<String> {
        IncludeFileResolver::new(self.0.clone()).resolve_path(path)
    }

    fn open_file(&self, name: &str) -> Result<ProtoFile, protox::Error> {
        match input::read(&self.0, Path::new(name), Cap::PROTO) {
            Ok(bytes) => {
                let text =
                    String::from_utf8(bytes).map_err(|_| protox::Error::new(format!("{name} is not UTF-8 text")))?;
                ProtoFile::from_source(name, &text)
            }
            // The next include path may have it.
            Err(e) if e.is_not_found() => Err(protox::Error::file_not_found(name)),
            Err(e) => Err(protox::Error::new(e)),
        }
    }
}

/// Each file's folder, in order, once: the include paths of [`compile`].
fn includes(protos: &[PathBuf]) -> Vec<PathBuf> {
    let mut includes: Vec<PathBuf> = Vec::new();
    for p in protos {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        if !includes.contains(&dir) {
            includes.push(dir);
        }
    }
    includes
}

/// `service`'s `method` in `pool`.
pub fn method(pool: &DescriptorPool, service: &str, method: &str, files: &str) -> Result<GrpcMethod, GrpcError> {
    let svc = pool
        .get_service_by_name(service)
        .ok_or_else(|| GrpcError::NoService { service: service.into(), files: files.into() })?;
    let Some(m) = svc.methods().find(|m| m.name() == method) else {
        let has: Vec<String> = svc.methods().map(|m| m.name().to_string()).collect();
        return Err(GrpcError::NoMethod { service: service.into(), method: method.into(), has: has.join(", ") });
    };
    Ok(GrpcMethod {
        name: format!("{service}/{method}"),
        input: m.input(),
        output: m.output(),
        server_streaming: m.is_server_streaming(),
        client_streaming: m.is_client_streaming(),
    })
}

/// Resolves the methods of a plan's steps, compiling each set of files once
/// and asking the server's reflection once per service.
#[derive(Default)]
pub(crate) struct Resolver {
    pools: HashMap<Vec<PathBuf>, DescriptorPool>,
    /// Where to ask for a step without `.proto` files (none: such a step is an error).
    pub(crate) reflection: Option<crate::reflection::Reflection>,
    reflected: HashMap<String, DescriptorPool>,
}

impl Resolver {
    /// The method `service/method` from `protos`.
    pub(crate) fn resolve(
        &mut self,
        protos: Vec<PathBuf>,
        service: &str,
        name: &str,
    ) -> Result<Arc<GrpcMethod>, GrpcError> {
        if protos.is_empty() {
            let Some(reflection) = &self.reflection else {
                return Err(GrpcError::NoProto(format!("{service}/{name}")));
            };
            let pool = match self.reflected.get(service) {
                Some(p) => p.clone(),
                None => {
                    let p = reflection.pool(service).map_err(|e| GrpcError::Reflection(e.0))?;
                    self.reflected.insert(service.to_string(), p.clone());
                    p
                }
            };
            return method(&pool, service, name, "the server's reflection").map(Arc::new);
        }
        let files: Vec<String> = protos.iter().map(|p| p.display().to_string()).collect();
        let pool = match self.pools.get(&protos) {
            Some(p) => p.clone(),
            None => {
                let p = compile(&protos)?;
                self.pools.insert(protos, p.clone());
                p
            }
        };
        method(&pool, service, name, &files.join(", ")).map(Arc::new)
    }
}

impl GrpcMethod {
    /// The request body of the message `json`: its protobuf encoding, framed.
    /// A method that streams from the client takes a JSON list of messages
    /// (each framed, in order; `[]` sends none) or one message alone.
    pub(crate) fn encode(&self, json: &[u8]) -> Result<Bytes, String> {
        let mut out = BytesMut::new();
        if self.client_streaming {
            let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| e.to_string())?;
            let messages = match value {
                serde_json::Value::Array(items) => items,
                one => vec![one],
            };
            for (i, m) in messages.into_iter().enumerate() {
                let msg =
                    DynamicMessage::deserialize(self.input.clone(), m).map_err(|e| format!("message {i}: {e}"))?;
                frame_into(&msg, &mut out)?;
            }
        } else {
            let mut de = serde_json::Deserializer::from_slice(json);
            let msg = DynamicMessage::deserialize(self.input.clone(), &mut de).map_err(|e| e.to_string())?;
            de.end().map_err(|e| e.to_string())?;
            frame_into(&msg, &mut out)?;
        }
        Ok(out.freeze())
    }

    /// Check that a literal message fits (before the run, for a clear error).
    pub(crate) fn check(&self, json: &[u8]) -> Result<(), GrpcError> {
        self.encode(json).map(|_| ()).map_err(|message| GrpcError::Message {
            method: self.name.clone(),
            input: self.input.full_name().to_string(),
            message,
        })
    }

    /// The first message of a response `body` as JSON (for `save` and
    /// `expect`); `None` when there is none or it does not decode.
    pub(crate) fn first_as_json(&self, body: &[u8]) -> Option<Vec<u8>> {
        let (flags, rest) = (body.first()?, body.get(1..)?);
        if *flags != 0 {
            return None; // compressed: not asked for, so not expected
        }
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let msg = DynamicMessage::decode(self.output.clone(), rest.get(4..4 + len)?).ok()?;
        serde_json::to_vec(&msg).ok()
    }
}

/// Append `msg` to `out` in gRPC's frame: uncompressed, its length, its bytes.
fn frame_into(msg: &DynamicMessage, out: &mut BytesMut) -> Result<(), String> {
    let len = msg.encoded_len();
    out.reserve(5 + len);
    out.put_u8(0);
    out.put_u32(u32::try_from(len).map_err(|_| "a message over 4 GiB".to_string())?);
    msg.encode(out).map_err(|e| e.to_string())
}

/// `grpc-timeout` for a deadline of `timeout`: milliseconds, as gRPC
/// clients send it (at most 8 digits).
pub(crate) fn timeout_header(timeout: Duration) -> String {
    let ms = timeout.as_millis().clamp(1, 99_999_999);
    format!("{ms}m")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ECHO: &str = r#"syntax = "proto3";
package bench;
service Echo {
  rpc Say (Msg) returns (Msg);
  rpc Count (Msg) returns (stream Msg);
  rpc Upload (stream Msg) returns (Msg);
  rpc Chat (stream Msg) returns (stream Msg);
}
message Msg { string text = 1; int64 n = 2; }
"#;

    /// A directory of its own per call: the tests run in parallel in one
    /// process, and each removes its directory when done (a shared one was
    /// removed under another test's compile, flaking it in CI).
    fn pool() -> (PathBuf, DescriptorPool) {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("perfops-grpc-unit-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("echo.proto");
        std::fs::write(&file, ECHO).unwrap();
        let pool = compile(std::slice::from_ref(&file)).expect("compiles");
        (dir, pool)
    }

    /// Methods resolve from a .proto compiled at run time; what cannot be
    /// called says why.
    #[test]
    fn methods_resolve_from_proto_files() {
        let (dir, pool) = pool();
        let say = method(&pool, "bench.Echo", "Say", "echo.proto").expect("Say");
        assert!(!say.server_streaming);
        assert!(method(&pool, "bench.Echo", "Count", "echo.proto").expect("Count").server_streaming);
        let upload = method(&pool, "bench.Echo", "Upload", "echo.proto").expect("client streaming");
        assert!(upload.client_streaming && !upload.server_streaming);
        let chat = method(&pool, "bench.Echo", "Chat", "echo.proto").expect("bidirectional streaming");
        assert!(chat.client_streaming && chat.server_streaming);
        // (service, method, error starts with)
        let cases = [
            ("bench.Nope", "Say", "no service `bench.Nope`"), // unknown service
            ("bench.Echo", "Shout", "service `bench.Echo` has no method"), // unknown method, with the list
        ];
        for (service, m, want) in cases {
            let e = method(&pool, service, m, "echo.proto").expect_err(m).to_string();
            assert!(e.starts_with(want), "{e}");
        }
        std::fs::write(dir.join("bad.proto"), "syntax = \"proto3\";\nmessage {").unwrap();
        let e = compile(&[dir.join("bad.proto")]).expect_err("a syntax error").to_string();
        assert!(e.contains("bad.proto"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// #31: a `.proto` file, or an import, that is a link out of its folder
    /// is refused with the rule; one that stays inside compiles. Before, the
    /// compiler followed any link (a FIFO import hung it).
    #[test]
    fn proto_files_linked_out_of_their_folder_are_refused() {
        let dir = std::env::temp_dir().join(format!("perfops-grpc-linked-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("s")).unwrap();
        std::fs::write(dir.join("outside.proto"), "syntax = \"proto3\";\npackage x;\nmessage M {}\n").unwrap();
        std::fs::write(dir.join("s/inside.proto"), "syntax = \"proto3\";\npackage y;\nmessage N {}\n").unwrap();
        std::os::unix::fs::symlink("../outside.proto", dir.join("s/common.proto")).unwrap();
        std::os::unix::fs::symlink("inside.proto", dir.join("s/alias.proto")).unwrap();
        let importing = |name: &str| format!("syntax = \"proto3\";\nimport \"{name}\";\nservice S {{}}\n");
        std::fs::write(dir.join("s/a.proto"), importing("common.proto")).unwrap();
        std::fs::write(dir.join("s/b.proto"), importing("alias.proto")).unwrap();
        // (the file compiled, the error it gives or none)
        let cases = [
            ("s/common.proto", Some("is a symbolic link that leads out of")), // given: a link out
            ("s/a.proto", Some("is a symbolic link that leads out of")),      // imported: a link out
            ("s/b.proto", None),                                              // imported: a link inside
        ];
        for (file, want) in cases {
            match (compile(&[dir.join(file)]), want) {
                (Ok(_), None) => {}
                (Err(e), Some(w)) => {
                    let e = e.to_string();
                    assert!(e.contains(w) && e.contains("a .proto file is read only inside its folder"), "{file}: {e}");
                }
                (got, _) => panic!("{file}: {:?}", got.map(|_| "compiled")),
            }
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A message goes out as protobuf in gRPC's frame, and comes back as JSON.
    #[test]
    fn messages_round_trip_through_frames() {
        let (dir, pool) = pool();
        let say = method(&pool, "bench.Echo", "Say", "echo.proto").unwrap();
        let framed = say.encode(br#"{"text":"hi","n":"7"}"#).expect("fits");
        // text (field 1): 0a 02 'h' 'i'; n (field 2): 10 07
        assert_eq!(&framed[..], &[0, 0, 0, 0, 6, 0x0a, 2, b'h', b'i', 0x10, 7]);
        let json: serde_json::Value = serde_json::from_slice(&say.first_as_json(&framed).unwrap()).unwrap();
        assert_eq!(json, serde_json::json!({"text": "hi", "n": "7"}));
        assert!(say.encode(br#"{"nope": 1}"#).is_err(), "an unknown field");
        assert!(say.check(br#"{"text": 5}"#).is_err(), "a number for a string");
        assert_eq!(say.first_as_json(&[0, 0, 0]), None, "a cut frame");
        assert_eq!(timeout_header(Duration::from_secs(5)), "5000m");

        // A client stream: a list is its messages, each framed, in order.
        let upload = method(&pool, "bench.Echo", "Upload", "echo.proto").unwrap();
        // (message JSON, the body's bytes)
        let cases: [(&[u8], &[u8]); 3] = [
            (br#"[{"text":"a"},{"n":"1"}]"#, &[0, 0, 0, 0, 3, 0x0a, 1, b'a', 0, 0, 0, 0, 2, 0x10, 1]), // two messages
            (br#"{"text":"a"}"#, &[0, 0, 0, 0, 3, 0x0a, 1, b'a']), // one message alone
            (b"[]", &[]),                                          // none: the stream ends at once
        ];
        for (json, want) in cases {
            assert_eq!(&upload.encode(json).expect("fits")[..], want, "{}", String::from_utf8_lossy(json));
        }
        let e = upload.check(br#"[{"text":"a"},{"text":5}]"#).expect_err("the second does not fit").to_string();
        assert!(e.contains("message 1"), "{e}");
        assert!(say.encode(br#"[{"text":"a"}]"#).is_err(), "a list is no message of a unary call");
        let _ = std::fs::remove_dir_all(dir);
    }
}
