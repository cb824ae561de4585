//! The standard library against outside references: RFC 4231's HMAC test vectors, Python's
//! `hmac` module on inputs of our own, FIPS 180's digests, RFC 4648's codecs; and the seeded
//! random stream (reproducible per seed, disjoint between shards).

use std::process::Command;

use perfops_script::{Clock, FlowState, Limits, Runtime, ScriptError, Scripts, stream_seed};
use proptest::prelude::*;

/// The value of the JS expression `expr` as text (`String(expr)`), from a runtime seeded `seed`.
fn eval_seeded(expr: &str, seed: u64) -> Result<String, ScriptError> {
    let src = format!("function run() {{ vars.out = String({expr}); }}");
    let scripts = Scripts::compile(&[("t.js", src.as_str())]).map_err(|mut e| e.remove(0))?;
    let mut rt = Runtime::new(&scripts, Limits::default(), seed, Clock::frozen(0))?;
    let mut state = FlowState::default();
    rt.step(scripts.hook("run").expect("run"), &mut state)?;
    Ok(state.vars.remove("out").unwrap_or_default())
}

fn eval(expr: &str) -> String {
    eval_seeded(expr, 1).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

/// JS text of a `Uint8Array` holding `bytes` (through the library's own hex decoder).
fn bytes(bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("perfops.hex.decode('{hex}', 'bytes')")
}

#[test]
fn hmac_matches_rfc_4231() {
    // (key, data, HMAC-SHA-256, HMAC-SHA-512): RFC 4231 section 4, test cases 1-4, 6 and 7
    // (case 5 is a truncated output, which the library does not do).
    let cases: &[(Vec<u8>, Vec<u8>, &str, &str)] = &[
        // 1: a 20-byte key, short data.
        (vec![0x0b; 20], b"Hi There".to_vec(),
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
         "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854"),
        // 2: a key shorter than the output.
        (b"Jefe".to_vec(), b"what do ya want for nothing?".to_vec(),
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
         "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"),
        // 3: binary key and data (not UTF-8: the Uint8Array path).
        (vec![0xaa; 20], vec![0xdd; 50],
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
         "fa73b0089d56a284efb0f0756c890be9b1b5dbdd8ee81a3655f83e33b2279d39bf3e848279a722c806b485a47e67c807b946a337bee8942674278859e13292fb"),
        // 4: a 25-byte key.
        ((1..=25).collect(), vec![0xcd; 50],
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
         "b0ba465637458c6990e5a8c5f61d4af7e576d97ff94b872de76f8050361ee3dba91ca5c11aa25eb4d679275cc5788063a5f19741120c4f2de2adebeb10a298dd"),
        // 6: a key longer than the block (hashed first).
        (vec![0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First".to_vec(),
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
         "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f3526b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598"),
        // 7: key and data both longer than the block.
        (vec![0xaa; 131], b"This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.".to_vec(),
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
         "e37b6a775dc87dbaa4dfa9f96e5e3ffddebd71f8867289865df5a32d20cdc944b6022cac3c4982b10d5eeb55c3e4de15134676fb6de0446065c97440fa8c6a58"),
    ];
    for (key, data, sha256, sha512) in cases {
        let (k, d) = (bytes(key), bytes(data));
        assert_eq!(eval(&format!("perfops.hmac('sha256', {k}, {d})")), *sha256);
        assert_eq!(eval(&format!("perfops.hmac('sha512', {k}, {d}, 'hex')")), *sha512);
    }
}

#[test]
fn hmac_matches_pythons_hmac_module() {
    // Inputs as a signing hook meets them: text keys and messages, non-ASCII, empty, long.
    let cases: &[(&str, &str)] = &[
        ("secret-key-0123456789", "POST\n/orders/17\n1764400000000\n{\"qty\":2}"),
        ("", ""),
        ("clé", "prix: 12 € — ünïcode"),
        ("k", &"x".repeat(5000)),
    ];
    let algs = ["sha1", "sha256", "sha384", "sha512"];
    let encs = ["hex", "base64", "base64url"];
    // One Python run prints every (case, alg, enc) in order.
    let mut py = String::from("import base64, hashlib, hmac, json, sys\ncases = json.loads(sys.argv[1])\n");
    py.push_str(
        "for k, d in cases:\n  for a in ['sha1','sha256','sha384','sha512']:\n    m = hmac.new(k.encode(), d.encode(), getattr(hashlib, a)).digest()\n    print(m.hex()); print(base64.b64encode(m).decode()); print(base64.urlsafe_b64encode(m).decode().rstrip('='))\n",
    );
    let json = format!(
        "[{}]",
        cases.iter().map(|(k, d)| format!("[{},{}]", js_string(k), js_string(d))).collect::<Vec<_>>().join(",")
    );
    let out =
        Command::new("python3").args(["-c", &py, &json]).output().expect("python3 runs (the test servers need it too)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut python = stdout.lines();
    for (key, data) in cases {
        for alg in algs {
            for enc in encs {
                let ours = eval(&format!("perfops.hmac('{alg}', {}, {}, '{enc}')", js_string(key), js_string(data)));
                assert_eq!(Some(ours.as_str()), python.next(), "{alg} {enc} key {key:?}");
            }
        }
    }
}

/// A JS (and JSON) string literal.
fn js_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[test]
fn digests_and_codecs() {
    let cases: &[(&str, &str)] = &[
        // FIPS 180-2's "abc" digests.
        ("perfops.sha256('abc')", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "perfops.sha512('abc')",
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
        ),
        ("perfops.hash('sha1', 'abc')", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        // A digest in base64, as many APIs send it.
        ("perfops.sha256('', 'base64')", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="),
        // RFC 4648's base64 vectors, and UTF-8 text in and out.
        ("perfops.base64.encode('foobar')", "Zm9vYmFy"),
        ("perfops.base64.encode('fo')", "Zm8="),
        ("perfops.base64.decode('Zm9vYmE=')", "fooba"),
        ("perfops.base64.decode(perfops.base64.encode('clé €'))", "clé €"),
        // base64url: URL alphabet, no padding; decoding takes it padded or not.
        ("perfops.base64url.encode(perfops.hex.decode('fbff', 'bytes'))", "-_8"),
        ("perfops.hex.encode(perfops.base64url.decode('-_8=', 'bytes'))", "fbff"),
        // hex, lower case; decode as bytes gives a Uint8Array.
        ("perfops.hex.encode('hi')", "6869"),
        ("perfops.hex.decode('6869')", "hi"),
        ("perfops.hex.decode('00ff', 'bytes').length", "2"),
        // URL encoding: RFC 3986's unreserved characters stay, the rest is encoded (also what
        // encodeURIComponent leaves: !'()*).
        ("perfops.url.encode(\"a b&c/é~!'()*\")", "a%20b%26c%2F%C3%A9~%21%27%28%29%2A"),
        ("encodeURIComponent('a b')", "a%20b"),
        // A query from an object: order kept, arrays repeat the key, null skipped.
        ("perfops.url.query({ a: 1, b: 'x y', c: [1, 2], d: null })", "a=1&b=x%20y&c=1&c=2"),
        // JSON is JavaScript's own.
        ("JSON.stringify({ a: [1, 'x'] })", "{\"a\":[1,\"x\"]}"),
    ];
    for (expr, want) in cases {
        assert_eq!(eval(expr), *want, "{expr}");
    }
    // A binary HMAC as the next one's key (AWS's chained signing keys), against Python.
    let chained = eval("perfops.hmac('sha256', perfops.hmac('sha256', 'AWS4k', '20150830', 'bytes'), 'us-east-1')");
    let python = Command::new("python3")
        .args([
            "-c",
            "import hmac,hashlib;k=hmac.new(b'AWS4k',b'20150830',hashlib.sha256).digest();print(hmac.new(k,b'us-east-1',hashlib.sha256).hexdigest())",
        ])
        .output()
        .expect("python3");
    assert_eq!(chained, String::from_utf8_lossy(&python.stdout).trim());
}

#[test]
fn misuse_is_a_typed_exception() {
    let cases: &[(&str, &str)] = &[
        // An algorithm the library does not have.
        ("perfops.hmac('md5', 'k', 'd')", "TypeError: unknown algorithm \"md5\""),
        // An encoding it does not have.
        ("perfops.sha256('x', 'latin1')", "TypeError: unknown encoding \"latin1\""),
        // Data that is neither text nor bytes.
        ("perfops.sha256({})", "TypeError: the data must be a string or a Uint8Array"),
        // Bad base64.
        ("perfops.base64.decode('***')", "TypeError: cannot decode"),
        // Bytes that are not text, asked for as text.
        ("perfops.hex.decode('ff')", "TypeError: the decoded bytes are not UTF-8"),
        // Bounds the wrong way round.
        ("perfops.randomInt(6, 1)", "RangeError: randomInt(min, max)"),
        // Fractional bounds.
        ("perfops.randomInt(1.5, 2)", "RangeError: randomInt(min, max)"),
        // Arguments missing altogether: rquickjs's own message, as a TypeError.
        ("perfops.hmac()", "TypeError: Error calling function with 0 argument(s)"),
        ("perfops.url.query()", "TypeError: Error calling function with 0 argument(s)"),
    ];
    for (expr, want) in cases {
        match eval_seeded(expr, 1) {
            Err(ScriptError::Exception { message, .. }) => {
                assert!(message.starts_with(want), "{expr}: {message}")
            }
            other => panic!("{expr}: {other:?}"),
        }
    }
}

#[test]
fn uuids_and_random_numbers() {
    let uuid = eval("perfops.uuid()");
    let parts: Vec<&str> = uuid.split('-').collect();
    assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12], "{uuid}");
    assert!(parts[2].starts_with('4'), "version 4: {uuid}");
    assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "RFC 4122 variant: {uuid}");
    // Within bounds, both ends reachable.
    let draws = eval("Array.from({ length: 2000 }, () => perfops.randomInt(1, 6)).join(',')");
    let draws: Vec<i64> = draws.split(',').map(|d| d.parse().unwrap()).collect();
    assert!(draws.iter().all(|d| (1..=6).contains(d)));
    assert!(draws.contains(&1) && draws.contains(&6));
    let f: f64 = eval("Math.random()").parse().unwrap();
    assert!((0.0..1.0).contains(&f));
}

/// 500 draws of the runtime's stream (Math.random, perfops.random and uuid share it).
const DRAWS: &str =
    "Array.from({ length: 500 }, (_, i) => i % 2 ? Math.random() : perfops.randomInt(0, 2 ** 52)).join(',')";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn one_seed_one_stream(run in any::<u64>(), shard in 0u32..1000, worker in 0u32..64) {
        let seed = stream_seed(run, shard, worker);
        let a = eval_seeded(DRAWS, seed).unwrap();
        let b = eval_seeded(DRAWS, seed).unwrap();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn shards_draw_disjoint_streams(run in any::<u64>(), shard in 0u32..1000, other in 0u32..1000, worker in 0u32..64) {
        prop_assume!(shard != other);
        let a = eval_seeded(DRAWS, stream_seed(run, shard, worker)).unwrap();
        let b = eval_seeded(DRAWS, stream_seed(run, other, worker)).unwrap();
        let a: std::collections::HashSet<&str> = a.split(',').collect();
        let shared = b.split(',').filter(|d| a.contains(d)).count();
        // 500 draws from 2^52 values: a chance collision is ~10^-10.
        prop_assert_eq!(shared, 0);
    }
}
