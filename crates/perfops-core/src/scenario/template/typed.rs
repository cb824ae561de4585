//! Typed values (issue #32): a template that is a whole value of a `json:` body keeps the JSON type of
//! what it renders, so a CSV column of numbers is sent as numbers. This module owns that typing rule,
//! the `:string` / `:number` conversions that override it, and the strict JSON number grammar both
//! use. It does not own where a whole value is found (the scenario's `json:` decoding makes it a
//! `JsonPart::Value`) nor what the engine does with a refused request (it counts it as `bad_value`).
//!
//! The rule, for `qty: ${orders.qty}` and `qty: "${orders.qty}"` alike (YAML's flow style,
//! `{ qty: ${x} }`, cannot hold the unquoted form, so the quotes must not change the meaning):
//!
//! | the value | no conversion | `:string` | `:number` |
//! |---|---|---|---|
//! | `3`, `-1.5e3` (an RFC 8259 number) | `3` | `"3"` | `3` |
//! | `true`, `false`, `null` | as is | `"true"` | refused |
//! | `007`, ` 3`, `abc`, `1, "admin": true` | a string | a string | refused |
//! | `${seq}`, `${random.int(..)}` | a number | a string | a number |
//! | `${uuid}` | a string | a string | refused |
//!
//! Only those exact texts go out unquoted; anything else is a JSON string, escaped, so a value can
//! never add a field or close the object (the CSV field `1, "admin": true` is sent as the string
//! `"1, \"admin\": true"`). The rule reads each value, not the column: a column holding `3` and `x`
//! sends `3` and `"x"`, and `:string` or `:number` makes it one type. A value saved from a JSON
//! response is kept as its JSON text, so a saved number is sent as a number (a saved JSON *string*
//! that holds digits is sent as a number too: `:string` keeps it a string).
//!
//! The syntax is a suffix, `${NAME:number}`, because it reads as a type annotation and stays one
//! reference (k6's and Artillery's users write the conversion in code; Gatling's `#{x.jsonStringify()}`
//! is the nearest template form, and longer).

use super::{Escape, MissingVar, Part, RenderError, Template, TemplateError, Value, VarRef, Vars, write_escaped};

/// `${x:string}` or `${x:number}`: the JSON type a whole value is sent as, whatever it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// Always a JSON string.
    String,
    /// Always a JSON number; a value that is not one refuses the request.
    Number,
}

impl Conversion {
    /// Every conversion, in the order hints list them.
    pub const ALL: [Conversion; 2] = [Conversion::String, Conversion::Number];

    /// The name written after the `:`.
    pub fn name(self) -> &'static str {
        match self {
            Conversion::String => "string",
            Conversion::Number => "number",
        }
    }

    /// The conversion written `text` (after the `:`, blanks around it ignored); `at` is its byte offset
    /// in the template, for the error.
    pub(super) fn parse(text: &str, at: usize) -> Result<Conversion, TemplateError> {
        let name = text.trim();
        let at = at + (text.len() - text.trim_start().len());
        Conversion::ALL.into_iter().find(|c| c.name() == name).ok_or_else(|| {
            let what = if name.is_empty() { "a conversion name after `:`".to_owned() } else { format!("`:{name}`") };
            let message =
                if name.is_empty() { format!("expected {what}") } else { format!("unknown conversion {what}") };
            TemplateError::new(at, message)
                .hint("write `${NAME:number}` to send a number or `${NAME:string}` to send a string")
        })
    }
}

/// A value forced to a number (`${x:number}`) was not one: the request is not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var} is not a number")]
pub struct NotANumber {
    /// The `${...}` as written in the template. The value itself is not kept: it may be a secret.
    pub var: String,
}

impl Template {
    /// True when the template is one `${...}` and nothing else: in a `json:` body it is a whole value,
    /// rendered by [`Template::render_json_value`].
    pub fn is_whole_value(&self) -> bool {
        matches!(self.parts.as_slice(), [Part::Var { .. }])
    }

    /// The byte offset of the first `:string` / `:number` in the source, if any (for `check`, which
    /// refuses one where it would change nothing).
    pub fn conversion_at(&self) -> Option<usize> {
        self.parts.iter().find_map(|p| match p {
            Part::Var { span, to: Some(_), .. } => Some(span.start),
            _ => None,
        })
    }

    /// The references forced to a number (`${x:number}`), for `check`'s look at a feeder's rows.
    pub fn forced_numbers(&self) -> impl Iterator<Item = &VarRef> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var { var, to: Some(Conversion::Number), .. } => Some(var),
            _ => None,
        })
    }

    /// Append the template as a whole JSON value (quotes included), typed as the module doc says.
    ///
    /// A template that is not a whole value is a JSON string of its rendered text. A missing value
    /// renders as `""` and is reported, as [`Template::render_escaped`] does; a value that `:number`
    /// cannot send stops rendering with [`RenderError::NotANumber`], and `out` must not be sent.
    pub fn render_json_value(
        &self,
        vars: &dyn Vars,
        rng: &mut fastrand::Rng,
        out: &mut Vec<u8>,
    ) -> Result<(), RenderError> {
        let [Part::Var { var, span, to }] = self.parts.as_slice() else {
            out.push(b'"');
            let r = self.render_escaped(vars, rng, out, Escape::JsonString);
            out.push(b'"');
            return r.map_err(RenderError::from);
        };
        let refused = || NotANumber { var: self.source[span.clone()].to_owned() }.into();
        let start = out.len();
        let value = match var.value(vars, rng, out) {
            Value::Found(value) => value,
            Value::Written => {
                // A built-in, written at `start`: `${seq}` and `${random.int}` are digits, `${uuid}` is not
                // a number.
                let number = !matches!(var, VarRef::Uuid);
                match (to, number) {
                    (Some(Conversion::Number), false) => {
                        out.truncate(start);
                        return Err(refused());
                    }
                    (Some(Conversion::String), _) | (None, false) => {
                        out.insert(start, b'"');
                        out.push(b'"');
                    }
                    _ => {}
                }
                return Ok(());
            }
            Value::Missing => {
                out.extend_from_slice(b"\"\"");
                return Err(MissingVar(self.source[span.clone()].to_owned()).into());
            }
        };
        let number = is_json_number(value.as_bytes());
        let raw = match to {
            Some(Conversion::Number) if !number => return Err(refused()),
            Some(Conversion::Number) => true,
            Some(Conversion::String) => false,
            None => number || matches!(value, "true" | "false" | "null"),
        };
        if raw {
            out.extend_from_slice(value.as_bytes());
        } else {
            out.push(b'"');
            write_escaped(out, value.as_bytes(), Escape::JsonString);
            out.push(b'"');
        }
        Ok(())
    }
}

/// True when `text` is exactly a JSON number (RFC 8259 §6: `-? (0 | [1-9][0-9]*) (.[0-9]+)?
/// ([eE][+-]?[0-9]+)?`), with nothing around it: no blank, no `+`, no leading zero, no `NaN`. Such text
/// holds no byte that could end a JSON value, so it can go into a body unquoted.
pub fn is_json_number(text: &[u8]) -> bool {
    let digits = |i: usize| text[i.min(text.len())..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut i = usize::from(text.first() == Some(&b'-'));
    match text.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i += digits(i),
        _ => return false,
    }
    if text.get(i) == Some(&b'.') {
        let n = digits(i + 1);
        if n == 0 {
            return false;
        }
        i += 1 + n;
    }
    if matches!(text.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(text.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(i);
        if n == 0 {
            return false;
        }
        i += n;
    }
    i == text.len()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// A saved value and a feeder row of `orders`, by name.
    struct Row(HashMap<&'static str, &'static str>);

    impl Vars for Row {
        fn saved(&self, name: &str) -> Option<&str> {
            self.0.get(name).copied()
        }
        fn env(&self, _: &str) -> Option<&str> {
            None
        }
        fn seq(&self) -> u64 {
            7
        }
        fn feeder(&self, feeder: &str, column: &str) -> Option<&str> {
            (feeder == "orders").then(|| self.0.get(column).copied()).flatten()
        }
    }

    fn row() -> Row {
        Row(HashMap::from([
            ("qty", "3"),
            ("price", "-1.5e3"),
            ("sku", "abc"),
            ("zip", "007"),
            ("padded", " 3"),
            ("flag", "true"),
            ("none", "null"),
            ("evil", "1, \"admin\": true"),
            ("close", "3}"),
            ("empty", ""),
            // Saved from a JSON response: a number is kept as its JSON text.
            ("id", "42"),
        ]))
    }

    fn render(text: &str) -> (String, Result<(), RenderError>) {
        let t = Template::parse(text, &["orders"]).unwrap();
        let mut out = b"{\"v\":".to_vec();
        let r = t.render_json_value(&row(), &mut fastrand::Rng::with_seed(1), &mut out);
        out.push(b'}');
        (String::from_utf8(out).unwrap(), r)
    }

    /// Issue #32, want 5: a whole `json:` value keeps its value's type, a conversion forces one, and no
    /// value can change the body's structure.
    #[test]
    fn whole_values_keep_their_type() {
        let not_a_number = |var: &str| Err(RenderError::NotANumber(NotANumber { var: var.into() }));
        // (template, body sent (when sent), result)
        let cases: Vec<(&str, &str, Result<(), RenderError>)> = vec![
            // The issue's case: a CSV column of numbers is sent as a number, not `"3"`.
            ("${orders.qty}", r#"{"v":3}"#, Ok(())),
            // Any RFC 8259 number stays one.
            ("${orders.price}", r#"{"v":-1.5e3}"#, Ok(())),
            // A column that is not a number is a string.
            ("${orders.sku}", r#"{"v":"abc"}"#, Ok(())),
            // A leading zero is not a JSON number: a zip code stays a string.
            ("${orders.zip}", r#"{"v":"007"}"#, Ok(())),
            // Blanks are kept, and make it a string.
            ("${orders.padded}", r#"{"v":" 3"}"#, Ok(())),
            // true, false and null keep their type.
            ("${orders.flag}", r#"{"v":true}"#, Ok(())),
            ("${orders.none}", r#"{"v":null}"#, Ok(())),
            // :string forces a string, of a number or of `true`.
            ("${orders.qty:string}", r#"{"v":"3"}"#, Ok(())),
            ("${orders.flag:string}", r#"{"v":"true"}"#, Ok(())),
            // :number of a number: the number.
            ("${orders.qty:number}", r#"{"v":3}"#, Ok(())),
            // :number of `abc`: refused, named as written, and the value is not in the error.
            ("${orders.sku:number}", "", not_a_number("${orders.sku:number}")),
            // :number of `true` and of an empty field: refused too.
            ("${orders.flag:number}", "", not_a_number("${orders.flag:number}")),
            ("${ orders.empty : number }", "", not_a_number("${ orders.empty : number }")),
            // A value saved from a JSON response as a number stays a number.
            ("${id}", r#"{"v":42}"#, Ok(())),
            // Injection: a CSV field that would add a field is one string, escaped.
            ("${orders.evil}", r#"{"v":"1, \"admin\": true"}"#, Ok(())),
            // ... and one that would close the object, too; forced to a number it is refused.
            ("${orders.close}", r#"{"v":"3}"}"#, Ok(())),
            ("${orders.close:number}", "", not_a_number("${orders.close:number}")),
            // Built-ins: `${seq}` is a number, or a string when asked.
            ("${seq}", r#"{"v":7}"#, Ok(())),
            ("${seq:string}", r#"{"v":"7"}"#, Ok(())),
            // `${uuid}` is a string; it cannot be a number.
            ("${uuid:number}", "", not_a_number("${uuid:number}")),
            // A missing value renders as an empty string and is reported, as elsewhere.
            ("${nope}", r#"{"v":""}"#, Err(RenderError::Missing(MissingVar("${nope}".into())))),
            // Text around a reference: not a whole value, a string as before.
            ("n-${orders.qty}", r#"{"v":"n-3"}"#, Ok(())),
        ];
        for (text, want, want_r) in cases {
            let (got, r) = render(text);
            assert_eq!(r, want_r, "{text:?}");
            if !r.as_ref().is_err_and(RenderError::refuses) {
                assert_eq!(got, want, "{text:?}");
                // Whatever the value, the body is valid JSON with one field.
                let v: serde_json::Value = serde_json::from_str(&got).unwrap();
                assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{got}");
            }
        }
        let (uuid, _) = render("${uuid}");
        assert!(serde_json::from_str::<serde_json::Value>(&uuid).unwrap()["v"].is_string(), "{uuid}");
        let (n, _) = render("${random.int(1,9):number}");
        assert!(serde_json::from_str::<serde_json::Value>(&n).unwrap()["v"].is_u64(), "{n}");
    }

    #[test]
    fn conversions_parse() {
        // (text, byte offset of the error, message contains)
        let bad: &[(&str, usize, &str)] = &[
            // An unknown conversion points at its name, and the hint lists the two.
            ("${orders.qty:int}", 13, "unknown conversion `:int`"),
            // Blanks before the name are skipped.
            ("${qty: nmuber}", 7, "unknown conversion `:nmuber`"),
            // Nothing after the colon.
            ("${qty:}", 6, "expected a conversion name"),
            // The reference before the colon is still checked.
            ("${1qty:number}", 2, "unexpected '1'"),
        ];
        for (text, offset, message) in bad {
            let e = Template::parse(text, &["orders"]).unwrap_err();
            assert_eq!(e.offset, *offset, "{text:?}: {e:?}");
            assert!(e.message.contains(message), "{text:?}: {e:?}");
            let lists = e.hint.as_deref().is_some_and(|h| h.contains(":number") && h.contains(":string"));
            assert_eq!(lists, message.contains("conversion"), "{e:?}");
        }
        let t = Template::parse("${ orders.qty : number }", &["orders"]).unwrap();
        assert!(t.is_whole_value());
        assert_eq!(t.conversion_at(), Some(0));
        let t = Template::parse("/o/${qty}-${n:string}", &[]).unwrap();
        assert!(!t.is_whole_value());
        assert_eq!(t.conversion_at(), Some(10));
        assert_eq!(Template::parse("${qty}", &[]).unwrap().conversion_at(), None);
    }

    #[test]
    fn json_numbers() {
        // (text, is a JSON number)
        let cases: &[(&str, bool)] = &[
            ("0", true),       // zero
            ("-0", true),      // negative zero
            ("3", true),       // an integer
            ("-12.50", true),  // a fraction, trailing zero kept
            ("1e5", true),     // an exponent
            ("1E-5", true),    // signed exponent, capital E
            ("2.5e+10", true), // fraction and exponent
            ("", false),       // empty
            ("-", false),      // a sign alone
            ("007", false),    // leading zero
            ("+3", false),     // a plus sign
            (".5", false),     // no integer part
            ("5.", false),     // no fraction digits
            ("1e", false),     // no exponent digits
            (" 3", false),     // a blank
            ("3 ", false),     // a trailing blank
            ("NaN", false),    // not JSON
            ("0x10", false),   // not JSON
            ("3}", false),     // trailing structure
        ];
        for (text, want) in cases {
            assert_eq!(is_json_number(text.as_bytes()), *want, "{text:?}");
        }
    }

    proptest! {
        /// What passes as a number parses as one, alone, in JSON.
        #[test]
        fn what_passes_is_json(text in "[-+0-9.eE }a]{0,12}") {
            if is_json_number(text.as_bytes()) {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                prop_assert!(v.is_number());
            }
        }

        /// Every number Rust prints is one.
        #[test]
        fn printed_numbers_pass(n in any::<i64>(), f in -1e300f64..1e300) {
            prop_assert!(is_json_number(n.to_string().as_bytes()));
            prop_assert!(is_json_number(f.to_string().as_bytes()));
        }
    }
}
