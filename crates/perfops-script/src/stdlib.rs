//! The standard library a script sees (the `perfops` global) and the conversions of the
//! exchange types into JS values and back.
//!
//! | JS | what it does |
//! |---|---|
//! | `perfops.hmac(alg, key, data, enc?)` | HMAC; `alg` `sha1`, `sha256`, `sha384`, `sha512` |
//! | `perfops.hash(alg, data, enc?)`, `perfops.sha256(data, enc?)`, `perfops.sha512(data, enc?)` | digests |
//! | `perfops.base64.encode(data)` / `.decode(text, as?)` | standard alphabet, padded |
//! | `perfops.base64url.encode(data)` / `.decode(text, as?)` | URL alphabet, unpadded (decode takes either) |
//! | `perfops.hex.encode(data)` / `.decode(text, as?)` | lower-case hex |
//! | `perfops.uuid()` | a v4 UUID from the runtime's seeded stream |
//! | `perfops.random()`, `Math.random()` | a float in [0, 1) from the seeded stream |
//! | `perfops.randomInt(min, max)` | an integer in min..=max from the seeded stream |
//! | `perfops.url.encode(text)` | percent-encodes all but RFC 3986's unreserved `A-Za-z0-9-._~` |
//! | `perfops.url.query(obj)` | `a=1&b=x%20y`: keys in order, an array repeats its key, null skipped |
//! | `vars`, `arrival`, `row.FEEDER.COLUMN` | the flow instance's saved values, arrival number, feeder rows |
//! | `console.log(...)` (`info`, `warn`, `error`, `debug`) | kept for the caller ([`crate::Runtime::take_log`]), never printed by the library |
//! | `JSON`, `encodeURIComponent`, `decodeURIComponent`, `atob`, `btoa` | JavaScript's own |
//!
//! `data` and `key` are a string (its UTF-8 bytes) or a `Uint8Array`; `enc` is `hex` (the
//! default), `base64`, `base64url` or `bytes` (a `Uint8Array`, e.g. for AWS's chained signing
//! keys); `as` is `text` (the default: UTF-8, an error if it is not) or `bytes`.
//!
//! The crypto and codecs are the RustCrypto and `base64`/`hex`/`uuid`/`percent-encoding`
//! crates, never our own code; this module only moves bytes between them and JS.

use std::collections::BTreeMap;
use std::rc::Rc;

use base64::Engine as _;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::{DecodePaddingMode, general_purpose};
use hmac::{Hmac, KeyInit, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use rquickjs::function::{Opt, Rest};
use rquickjs::{
    ArrayBuffer, Atom, Coerced, Ctx, Exception, FromJs, Function, Object, Persistent, Type, TypedArray, Value,
};
use sha2::Digest;

use crate::error::one_line;
use crate::exchange::{RequestParts, ResponseView};
use crate::runtime::{LOG_LINES, Shared};

/// RFC 3986's reserved and other characters: everything but `A-Za-z0-9-._~` is encoded.
const URL_ENCODE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// base64url that decodes with or without padding (senders differ).
const BASE64URL_ANY: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_encode_padding(false).with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The largest `Uint8Array` a library function reads (element by element: the safe API has no
/// slice of a typed array). Keys and signatures are far smaller; bodies travel as strings.
const BYTES_MAX: usize = 1 << 20;

/// Installs the `perfops` global and the seeded `Math.random`.
pub(crate) fn install<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>) -> rquickjs::Result<()> {
    let p = Object::new(ctx.clone())?;
    p.set(
        "hmac",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, alg: String, key: Value<'js>, data: Value<'js>, enc: Opt<String>| {
                let key = bytes_in(&ctx, &key, "the key")?;
                let data = bytes_in(&ctx, &data, "the data")?;
                let mac = match alg.as_str() {
                    "sha1" => hmac::<Hmac<sha1::Sha1>>(&key, &data),
                    "sha256" => hmac::<Hmac<sha2::Sha256>>(&key, &data),
                    "sha384" => hmac::<Hmac<sha2::Sha384>>(&key, &data),
                    "sha512" => hmac::<Hmac<sha2::Sha512>>(&key, &data),
                    _ => return Err(unknown_alg(&ctx, &alg)),
                };
                bytes_out(&ctx, mac, enc.0.as_deref())
            },
        )?
        .with_name("hmac")?,
    )?;
    p.set(
        "hash",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, alg: String, data: Value<'js>, enc: Opt<String>| {
            let data = bytes_in(&ctx, &data, "the data")?;
            let digest = hash(&ctx, &alg, &data)?;
            bytes_out(&ctx, digest, enc.0.as_deref())
        })?
        .with_name("hash")?,
    )?;
    for alg in ["sha256", "sha512"] {
        p.set(
            alg,
            Function::new(ctx.clone(), move |ctx: Ctx<'js>, data: Value<'js>, enc: Opt<String>| {
                let data = bytes_in(&ctx, &data, "the data")?;
                let digest = hash(&ctx, alg, &data)?;
                bytes_out(&ctx, digest, enc.0.as_deref())
            })?
            .with_name(alg)?,
        )?;
    }
    p.set("base64", codec(ctx, Codec::Base64)?)?;
    p.set("base64url", codec(ctx, Codec::Base64Url)?)?;
    p.set("hex", codec(ctx, Codec::Hex)?)?;

    let url = Object::new(ctx.clone())?;
    url.set(
        "encode",
        Function::new(ctx.clone(), |text: Coerced<String>| utf8_percent_encode(&text.0, URL_ENCODE).to_string())?
            .with_name("encode")?,
    )?;
    url.set(
        "query",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, obj: Object<'js>| query(&ctx, &obj))?.with_name("query")?,
    )?;
    p.set("url", url)?;

    let rng = Rc::clone(shared);
    p.set(
        "uuid",
        Function::new(ctx.clone(), move || {
            let bytes = rng.rng.borrow_mut().u128(..).to_le_bytes();
            uuid::Builder::from_random_bytes(bytes).into_uuid().hyphenated().to_string()
        })?
        .with_name("uuid")?,
    )?;
    let rng = Rc::clone(shared);
    let random = Function::new(ctx.clone(), move || rng.rng.borrow_mut().f64())?.with_name("random")?;
    p.set("random", random.clone())?;
    let math: Object = ctx.globals().get("Math")?;
    math.set("random", random)?;
    let rng = Rc::clone(shared);
    p.set(
        "randomInt",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, min: f64, max: f64| {
            let whole = |x: f64| x.fract() == 0.0 && x.abs() <= 9_007_199_254_740_991.0;
            if !whole(min) || !whole(max) || min > max {
                return Err(Exception::throw_range(
                    &ctx,
                    &format!("randomInt(min, max) takes two safe integers, min <= max: got {min}, {max}"),
                ));
            }
            // Both are safe integers, so the casts are exact.
            Ok(rng.rng.borrow_mut().i64(min as i64..=max as i64) as f64)
        })?
        .with_name("randomInt")?,
    )?;
    ctx.globals().set("perfops", p)?;

    let console = Object::new(ctx.clone())?;
    for level in ["log", "info", "warn", "error", "debug"] {
        let log = Rc::clone(shared);
        console.set(
            level,
            Function::new(ctx.clone(), move |ctx: Ctx<'js>, args: Rest<Value<'js>>| {
                let line: Vec<String> = args.0.into_iter().map(|v| log_text(&ctx, v)).collect();
                let mut log = log.log.borrow_mut();
                if log.lines.len() < LOG_LINES {
                    log.lines.push(one_line(&line.join(" ")));
                } else {
                    log.dropped += 1;
                }
            })?
            .with_name(level)?,
        )?;
    }
    ctx.globals().set("console", console)?;
    Ok(())
}

/// A logged value as `console.log` shows it: strings as they are, objects as JSON.
fn log_text<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> String {
    if value.is_object()
        && !value.is_function()
        && value.as_exception().is_none()
        && let Ok(Some(json)) = ctx.json_stringify(value.clone())
        && let Ok(text) = json.to_string()
    {
        return text;
    }
    Coerced::<String>::from_js(ctx, value).map(|c| c.0).unwrap_or_default()
}

fn hmac<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length (a long one is hashed first): this cannot fail.
    let mut mac = <M as KeyInit>::new_from_slice(key).unwrap_or_else(|_| <M as KeyInit>::new(&Default::default()));
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hash<'js>(ctx: &Ctx<'js>, alg: &str, data: &[u8]) -> rquickjs::Result<Vec<u8>> {
    Ok(match alg {
        "sha1" => sha1::Sha1::digest(data).to_vec(),
        "sha256" => sha2::Sha256::digest(data).to_vec(),
        "sha384" => sha2::Sha384::digest(data).to_vec(),
        "sha512" => sha2::Sha512::digest(data).to_vec(),
        _ => return Err(unknown_alg(ctx, alg)),
    })
}

fn unknown_alg(ctx: &Ctx<'_>, alg: &str) -> rquickjs::Error {
    Exception::throw_type(ctx, &format!("unknown algorithm {alg:?}: sha1, sha256, sha384 or sha512"))
}

#[derive(Clone, Copy)]
enum Codec {
    Base64,
    Base64Url,
    Hex,
}

impl Codec {
    fn encode(self, bytes: &[u8]) -> String {
        match self {
            Codec::Base64 => STANDARD.encode(bytes),
            Codec::Base64Url => general_purpose::URL_SAFE_NO_PAD.encode(bytes),
            Codec::Hex => hex::encode(bytes),
        }
    }

    fn decode(self, text: &str) -> Result<Vec<u8>, String> {
        match self {
            Codec::Base64 => STANDARD.decode(text).map_err(|e| e.to_string()),
            Codec::Base64Url => BASE64URL_ANY.decode(text).map_err(|e| e.to_string()),
            Codec::Hex => hex::decode(text).map_err(|e| e.to_string()),
        }
    }
}

/// `{ encode(data), decode(text, as?) }` for one codec.
fn codec<'js>(ctx: &Ctx<'js>, codec: Codec) -> rquickjs::Result<Object<'js>> {
    let obj = Object::new(ctx.clone())?;
    obj.set(
        "encode",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, data: Value<'js>| {
            Ok::<_, rquickjs::Error>(codec.encode(&bytes_in(&ctx, &data, "the data")?))
        })?
        .with_name("encode")?,
    )?;
    obj.set(
        "decode",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, text: String, as_: Opt<String>| {
            let bytes = codec.decode(&text).map_err(|e| Exception::throw_type(&ctx, &format!("cannot decode: {e}")))?;
            match as_.0.as_deref() {
                None | Some("text") => match String::from_utf8(bytes) {
                    Ok(s) => Ok(rquickjs::String::from_str(ctx.clone(), &s)?.into_value()),
                    Err(_) => Err(Exception::throw_type(
                        &ctx,
                        "the decoded bytes are not UTF-8 text: decode(text, 'bytes') gives a Uint8Array",
                    )),
                },
                Some("bytes") => Ok(TypedArray::<u8>::new(ctx.clone(), bytes)?.into_value()),
                Some(other) => Err(Exception::throw_type(
                    &ctx,
                    &format!("decode's second argument is 'text' or 'bytes', not {other:?}"),
                )),
            }
        })?
        .with_name("decode")?,
    )?;
    Ok(obj)
}

/// The bytes a library function reads: a string's UTF-8 bytes as QuickJS wrote them (borrowed,
/// not copied again into a Rust `String`: a signing hook's payload is read once a call), or a
/// `Uint8Array`'s copied out.
enum Bytes<'js> {
    Text(rquickjs::CString<'js>),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Text(text) => text.as_bytes(),
            Bytes::Owned(bytes) => bytes,
        }
    }
}

/// A string's UTF-8 bytes, or a `Uint8Array`'s (or an `ArrayBuffer`'s) bytes.
fn bytes_in<'js>(ctx: &Ctx<'js>, value: &Value<'js>, what: &str) -> rquickjs::Result<Bytes<'js>> {
    if let Some(s) = value.as_string() {
        return Ok(Bytes::Text(s.clone().to_cstring()?));
    }
    if let Some(obj) = value.as_object() {
        let array = match TypedArray::<u8>::from_object(obj.clone()) {
            Ok(a) => Some(a.into_object()),
            Err(_) => ArrayBuffer::from_object(obj.clone())
                .and_then(|b| TypedArray::<u8>::from_arraybuffer(b).ok())
                .map(TypedArray::into_object),
        };
        if let Some(array) = array {
            let len: usize = array.get("length")?;
            if len > BYTES_MAX {
                return Err(Exception::throw_range(
                    ctx,
                    &format!("{what} is {len} bytes: a Uint8Array argument holds at most {BYTES_MAX}"),
                ));
            }
            return (0..len as u32).map(|i| array.get::<u32, u8>(i)).collect::<rquickjs::Result<_>>().map(Bytes::Owned);
        }
    }
    Err(Exception::throw_type(ctx, &format!("{what} must be a string or a Uint8Array, not {}", value.type_name())))
}

/// Lower-case hex of `bytes` as a JS string, written through a byte buffer (`hex::encode`
/// collects `char`s one at a time: 1,700 instructions of a signing call for a 32-byte digest,
/// callgrind).
fn hex_text<'js>(ctx: &Ctx<'js>, bytes: &[u8]) -> rquickjs::Result<Value<'js>> {
    let mut out = vec![0u8; bytes.len() * 2];
    // The buffer is exactly twice the input, and hex digits are ASCII: neither can fail.
    let text = match hex::encode_to_slice(bytes, &mut out) {
        Ok(()) => std::str::from_utf8(&out).unwrap_or_default(),
        Err(_) => "",
    };
    Ok(rquickjs::String::from_str(ctx.clone(), text)?.into_value())
}

/// Bytes in the encoding a function was asked for.
fn bytes_out<'js>(ctx: &Ctx<'js>, bytes: Vec<u8>, enc: Option<&str>) -> rquickjs::Result<Value<'js>> {
    let text = match enc {
        None | Some("hex") => return hex_text(ctx, &bytes),
        Some("base64") => STANDARD.encode(&bytes),
        Some("base64url") => general_purpose::URL_SAFE_NO_PAD.encode(&bytes),
        Some("bytes") => return Ok(TypedArray::<u8>::new(ctx.clone(), bytes)?.into_value()),
        Some(other) => {
            return Err(Exception::throw_type(
                ctx,
                &format!("unknown encoding {other:?}: hex, base64, base64url or bytes"),
            ));
        }
    };
    Ok(rquickjs::String::from_str(ctx.clone(), &text)?.into_value())
}

/// `a=1&b=x%20y` from an object's own properties, in order.
fn query<'js>(ctx: &Ctx<'js>, obj: &Object<'js>) -> rquickjs::Result<String> {
    let mut out = String::new();
    let mut pair = |key: &str, value: Value<'js>| -> rquickjs::Result<()> {
        if value.is_undefined() || value.is_null() {
            return Ok(());
        }
        let text = Coerced::<String>::from_js(ctx, value)?.0;
        if !out.is_empty() {
            out.push('&');
        }
        out.extend(utf8_percent_encode(key, URL_ENCODE));
        out.push('=');
        out.extend(utf8_percent_encode(&text, URL_ENCODE));
        Ok(())
    };
    for prop in obj.props::<String, Value>() {
        let (key, value) = prop?;
        if let Some(array) = value.as_array() {
            for item in array.iter::<Value>() {
                pair(&key, item?)?;
            }
        } else {
            pair(&key, value)?;
        }
    }
    Ok(out)
}

/// The property names every call sets or reads (`req`'s fields, the globals a call sets), made
/// atoms once per runtime. Why: a name given as text is looked up in QuickJS's atom table on
/// each set or get (hashed, compared, freed after): twelve of them a signing call,
/// ~2,800 instructions (callgrind of `sign_bench`); a kept atom is a reference count.
pub(crate) struct Names {
    method: Persistent<Atom<'static>>,
    path: Persistent<Atom<'static>>,
    headers: Persistent<Atom<'static>>,
    body: Persistent<Atom<'static>>,
    vars: Persistent<Atom<'static>>,
    arrival: Persistent<Atom<'static>>,
    row: Persistent<Atom<'static>>,
}

/// [`Names`] in one call.
pub(crate) struct Keys<'js> {
    pub(crate) method: Atom<'js>,
    pub(crate) path: Atom<'js>,
    pub(crate) headers: Atom<'js>,
    pub(crate) body: Atom<'js>,
    pub(crate) vars: Atom<'js>,
    pub(crate) arrival: Atom<'js>,
    pub(crate) row: Atom<'js>,
}

impl Names {
    pub(crate) fn new(ctx: &Ctx<'_>) -> rquickjs::Result<Names> {
        let atom = |name: &str| Atom::from_str(ctx.clone(), name).map(|a| Persistent::save(ctx, a));
        Ok(Names {
            method: atom("method")?,
            path: atom("path")?,
            headers: atom("headers")?,
            body: atom("body")?,
            vars: atom("vars")?,
            arrival: atom("arrival")?,
            row: atom("row")?,
        })
    }

    pub(crate) fn keys<'js>(&self, ctx: &Ctx<'js>) -> rquickjs::Result<Keys<'js>> {
        Ok(Keys {
            method: self.method.clone().restore(ctx)?,
            path: self.path.clone().restore(ctx)?,
            headers: self.headers.clone().restore(ctx)?,
            body: self.body.clone().restore(ctx)?,
            vars: self.vars.clone().restore(ctx)?,
            arrival: self.arrival.clone().restore(ctx)?,
            row: self.row.clone().restore(ctx)?,
        })
    }
}

/// `vars` for a call: the flow's saved values as string properties; with each name's atom and
/// the value made, in the map's order, for [`vars_unchanged`] (which reads them back by atom,
/// not by name: a name is an atom-table lookup).
pub(crate) fn vars_to_js<'js>(
    ctx: &Ctx<'js>,
    vars: &BTreeMap<String, String>,
) -> rquickjs::Result<(Object<'js>, Vec<(Atom<'js>, Value<'js>)>)> {
    let obj = Object::new(ctx.clone())?;
    let mut values = Vec::with_capacity(vars.len());
    for (name, value) in vars {
        let value = rquickjs::String::from_str(ctx.clone(), value)?.into_value();
        let atom = Atom::from_str(ctx.clone(), name)?;
        obj.set(atom.clone(), value.clone())?;
        values.push((atom, value));
    }
    Ok((obj, values))
}

/// Whether a call left `vars` as it was given: the same object, as many keys, each holding the
/// very value put there (compared by identity, without reading any text back). Most hooks only
/// read `vars`; this spares them the copy back (a sixth of an empty hook's cost, profiled).
pub(crate) fn vars_unchanged<'js>(now: &Value<'js>, given: &Object<'js>, values: &[(Atom<'js>, Value<'js>)]) -> bool {
    if now != given.as_value() || given.keys::<Atom>().count() != values.len() {
        return false;
    }
    values.iter().all(|(atom, value)| given.get::<_, Value>(atom.clone()).is_ok_and(|v| v == *value))
}

/// `vars` after a call, back as text (see [`crate::FlowState`] for the rules).
pub(crate) fn vars_from_js<'js>(ctx: &Ctx<'js>, vars: Value<'js>) -> Result<BTreeMap<String, String>, String> {
    let Some(obj) = vars.as_object() else {
        return Err(format!("`vars` must stay an object, not {}", vars.type_name()));
    };
    let mut out = BTreeMap::new();
    let mut bytes = 0usize;
    for prop in obj.props::<String, Value>() {
        let (name, value) = prop.map_err(|e| e.to_string())?;
        let text = match value.type_of() {
            Type::Undefined | Type::Null | Type::Uninitialized => continue,
            Type::String => value.as_string().and_then(|s| s.to_string().ok()),
            Type::Bool | Type::Int | Type::Float | Type::BigInt => {
                Coerced::<String>::from_js(ctx, value).ok().map(|c| c.0)
            }
            Type::Object | Type::Array => ctx.json_stringify(value).ok().flatten().and_then(|s| s.to_string().ok()),
            _ => {
                return Err(format!(
                    "vars.{name} is a {}: saved values are strings, numbers, booleans or JSON",
                    value.type_name()
                ));
            }
        };
        let Some(text) = text else {
            return Err(format!("vars.{name} cannot be saved as text"));
        };
        bytes += name.len() + text.len();
        if bytes > VARS_MAX {
            return Err(format!(
                "vars hold more than {} MiB (vars.{name} is {} bytes): a flow keeps at most what one captured answer holds",
                VARS_MAX >> 20,
                text.len()
            ));
        }
        out.insert(name, text);
    }
    Ok(out)
}

/// The most a flow instance's `vars` may hold, names and values, bytes: what
/// one captured answer holds (`save:` takes its values from one). The heap's
/// limit bounds a script, not what it copies out: a hook saving a 50 MiB
/// string in each flow took a run to 940 MB in 3 s (attacker review).
pub(crate) const VARS_MAX: usize = 1 << 20;

/// `row` for a call: `row.FEEDER.COLUMN`.
pub(crate) fn rows_to_js<'js>(
    ctx: &Ctx<'js>,
    rows: &[(String, Vec<(String, String)>)],
) -> rquickjs::Result<Object<'js>> {
    let obj = Object::new(ctx.clone())?;
    for (feeder, columns) in rows {
        let row = Object::new(ctx.clone())?;
        for (column, value) in columns {
            row.set(column.as_str(), value.as_str())?;
        }
        obj.set(feeder.as_str(), row)?;
    }
    Ok(obj)
}

/// What a request hook was given, kept to tell what it left as it was: a field whose value is
/// still the very value put there (compared by identity, as `vars` is) is the request's own,
/// already checked and already text, and is not read back. A signing hook adds two fields and
/// leaves the rest: reading every field back (a string conversion, an allocation and a check
/// each) cost more than building them (callgrind: 13,700 instructions per signed request, of
/// the crossing's 29,500).
#[derive(Default)]
pub(crate) struct Given<'js> {
    method: Option<Value<'js>>,
    path: Option<Value<'js>>,
    body: Option<Value<'js>>,
    /// Each header name's atom, the value put under it (a string, or the array of a name sent
    /// more than once), and the index of its first field in the request.
    headers: Vec<(Atom<'js>, Value<'js>, usize)>,
}

/// `req` for a request hook, and what it was given.
pub(crate) fn request_to_js<'js>(
    ctx: &Ctx<'js>,
    keys: &Keys<'js>,
    request: &RequestParts,
) -> rquickjs::Result<(Object<'js>, Given<'js>)> {
    let text = |s: &str| rquickjs::String::from_str(ctx.clone(), s).map(rquickjs::String::into_value);
    let obj = Object::new(ctx.clone())?;
    let mut given = Given { headers: Vec::with_capacity(request.headers.len()), ..Given::default() };
    let method = text(&request.method)?;
    obj.set(keys.method.clone(), method.clone())?;
    given.method = Some(method);
    let path = text(&request.path)?;
    obj.set(keys.path.clone(), path.clone())?;
    given.path = Some(path);
    let headers = Object::new(ctx.clone())?;
    for (i, (name, value)) in request.headers.iter().enumerate() {
        // A name's first field: a string, or an array of all its fields when it repeats (asked
        // of the list, not of the object: a property read from Rust costs an atom lookup).
        if request.headers[..i].iter().any(|(n, _)| n == name) {
            continue;
        }
        let mut same = request.headers[i + 1..].iter().filter(|(n, _)| n == name).peekable();
        let value = if same.peek().is_none() {
            text(value)?
        } else {
            let array = rquickjs::Array::new(ctx.clone())?;
            array.set(0, value.as_str())?;
            for (j, (_, v)) in same.enumerate() {
                array.set(j + 1, v.as_str())?;
            }
            array.into_value()
        };
        let atom = Atom::from_str(ctx.clone(), name)?;
        headers.set(atom.clone(), value.clone())?;
        given.headers.push((atom, value, i));
    }
    obj.set(keys.headers.clone(), headers)?;
    // UTF-8 checked first: `from_utf8_lossy` walks a valid body in chunks, several times slower.
    let body = match std::str::from_utf8(&request.body) {
        Ok(body) => text(body)?,
        Err(_) => text(&String::from_utf8_lossy(&request.body))?,
    };
    obj.set(keys.body.clone(), body.clone())?;
    given.body = Some(body);
    Ok((obj, given))
}

/// The request a hook left, checked: nothing with CR, LF or NUL reaches a request line or a
/// header, whatever the script computed. What it left as it was `given` stays as it is in
/// `request`, untouched (not copied: a signing hook changes two headers of a request and a
/// copy of the rest was ~1,800 instructions a call); `request` changes only if all is sound.
pub(crate) fn request_from_js<'js>(
    ctx: &Ctx<'js>,
    keys: &Keys<'js>,
    obj: &Object<'js>,
    request: &mut RequestParts,
    given: &Given<'js>,
) -> Result<(), String> {
    let field = |key: &Atom<'js>| -> Result<Value<'js>, String> { obj.get(key.clone()).map_err(|e| e.to_string()) };
    let text = |field: &str, v: Value<'js>| -> Result<String, String> {
        v.as_string()
            .and_then(|s| s.to_string().ok())
            .ok_or_else(|| format!("req.{field} must be a string, not {}", v.type_name()))
    };
    let v = field(&keys.method)?;
    let method = if given.method.as_ref() == Some(&v) {
        None
    } else {
        let method = text("method", v)?;
        if method.is_empty() || !method.bytes().all(is_token) {
            return Err(format!("req.method {:?} is not an HTTP method", short(&method)));
        }
        Some(method)
    };
    let v = field(&keys.path)?;
    let path = if given.path.as_ref() == Some(&v) {
        None
    } else {
        let path = text("path", v)?;
        if path.is_empty() || path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(format!(
                "req.path {:?} is not a request target (no spaces or control characters)",
                short(&path)
            ));
        }
        Some(path)
    };
    let headers_value = field(&keys.headers)?;
    let Some(headers_obj) = headers_value.as_object() else {
        return Err(format!("req.headers must be an object, not {}", headers_value.type_name()));
    };
    /// A property of `req.headers`: a name as given (the index of its first field in the
    /// request), or a field the hook set.
    enum Field {
        Given(usize),
        New(String, String),
    }
    let mut fields = Vec::with_capacity(given.headers.len() + 2);
    for prop in headers_obj.props::<Atom, Value>() {
        let (atom, value) = prop.map_err(|e| e.to_string())?;
        if let Some(&(_, _, first)) = given.headers.iter().find(|(a, v, _)| *a == atom && *v == value) {
            fields.push(Field::Given(first));
            continue;
        }
        let name = atom.to_string().map_err(|e| e.to_string())?;
        if name.is_empty() || !name.bytes().all(is_token) {
            return Err(format!("header name {:?} is not a token", short(&name)));
        }
        let mut push = |v: Value<'js>| -> Result<(), String> {
            let text = match v.type_of() {
                Type::String | Type::Int | Type::Float | Type::Bool => {
                    Coerced::<String>::from_js(ctx, v).map_err(|e| e.to_string())?.0
                }
                _ => return Err(format!("header {name} is a {}, not a string", v.type_name())),
            };
            if text.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                return Err(format!("header {name}'s value holds CR, LF or NUL"));
            }
            fields.push(Field::New(name.clone(), text));
            Ok(())
        };
        if let Some(array) = value.as_array() {
            for item in array.iter::<Value>() {
                push(item.map_err(|e| e.to_string())?)?;
            }
        } else if !value.is_undefined() && !value.is_null() {
            push(value)?;
        }
    }
    let body_value = field(&keys.body)?;
    let body = if given.body.as_ref() == Some(&body_value) {
        None
    } else {
        match body_value.type_of() {
            Type::Undefined | Type::Null => Some(Vec::new()),
            Type::String => {
                let text = body_value.as_string().and_then(|s| s.to_string().ok()).unwrap_or_default();
                // Unchanged text keeps the original bytes (which may not have been UTF-8).
                if text.as_bytes() == request.body.as_slice() || text == String::from_utf8_lossy(&request.body) {
                    None
                } else {
                    Some(text.into_bytes())
                }
            }
            _ => {
                return Err(format!("req.body must be a string, not {}", body_value.type_name()));
            }
        }
    };
    // Each name once in the request and every one of them still first, in order: the
    // request's fields stay where they are and the hook's follow them. Otherwise the list is
    // made again: each given name's fields at its place, in the object's order.
    let kept = given.headers.len() == request.headers.len()
        && fields.len() >= request.headers.len()
        && fields
            .iter()
            .take(request.headers.len())
            .enumerate()
            .all(|(i, f)| matches!(f, Field::Given(first) if *first == i));
    if kept {
        request.headers.extend(fields.into_iter().skip(given.headers.len()).filter_map(|f| match f {
            Field::New(name, value) => Some((name, value)),
            Field::Given(_) => None,
        }));
    } else {
        let mut headers = Vec::with_capacity(fields.len() + request.headers.len());
        for f in fields {
            match f {
                Field::Given(first) => {
                    // As given: the request's own fields of that name.
                    let name = &request.headers[first].0;
                    headers.extend(request.headers[first..].iter().filter(|(n, _)| n == name).cloned());
                }
                Field::New(name, value) => headers.push((name, value)),
            }
        }
        request.headers = headers;
    }
    if let Some(method) = method {
        request.method = method;
    }
    if let Some(path) = path {
        request.path = path;
    }
    if let Some(body) = body {
        request.body = body;
    }
    Ok(())
}

/// `res` for a response hook.
pub(crate) fn response_to_js<'js>(ctx: &Ctx<'js>, response: ResponseView<'_>) -> rquickjs::Result<Object<'js>> {
    let obj = Object::new(ctx.clone())?;
    obj.set("status", response.status)?;
    let mut joined: Vec<(String, String)> = Vec::new();
    for (name, value) in response.headers {
        let name = name.to_ascii_lowercase();
        match joined.iter_mut().find(|(n, _)| *n == name) {
            Some((n, v)) => {
                v.push_str(if n == "set-cookie" { "\n" } else { ", " });
                v.push_str(value);
            }
            None => joined.push((name, (*value).to_string())),
        }
    }
    let headers = Object::new(ctx.clone())?;
    for (name, value) in joined {
        headers.set(name, value)?;
    }
    obj.set("headers", headers)?;
    obj.set("body", String::from_utf8_lossy(response.body).as_ref())?;
    Ok(obj)
}

/// RFC 9110's token characters (methods and header names).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The start of a value for an error message (a script's value may be long).
fn short(text: &str) -> String {
    text.chars().take(40).collect()
}
