//! Text from outside (a run's name, a stage's name, a line of a results
//! file, a peer's name) made safe to print on a terminal (#31): every
//! control character is written as a visible escape, so that a name holding
//! `ESC [ 2 J` or a carriage return cannot clear the screen, recolour the
//! output or forge a line.
//!
//! Escaped: C0 (U+0000..U+001F, tab and newline included: a name has
//! neither), DEL (U+007F) and C1 (U+0080..U+009F, which some terminals take
//! as 8-bit escapes: U+009B is CSI), and the marks that reorder or hide
//! text (bidirectional overrides and isolates, zero-width characters, the
//! byte-order mark: `evil\u{202e}gnp.exe` reads as `evilexe.png`), each as
//! Rust writes it (`\u{1b}`, `\n`, `\t`). Everything else, any other
//! Unicode included, is kept; a
//! backslash too, so that escaping twice changes nothing (a table escapes
//! its names, then its whole text).
//! [`lines`] keeps the newlines of a text of many lines (a table, an error
//! message) and escapes the rest.
//!
//! HTML output does not need this: the report's and the comparison's pages
//! escape for HTML, and a control character in a page does nothing.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character escaped.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_but(text, None)
}

/// `text` with every control character but `\n` escaped: a text
/// of lines, printed as lines.
pub fn lines(text: &str) -> Cow<'_, str> {
    escape_but(text, Some('\n'))
}

fn needs(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

fn escape_but(text: &str, keep: Option<char>) -> Cow<'_, str> {
    if !text.chars().any(|c| needs(c) && Some(c) != keep) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !needs(c) || Some(c) == keep {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            _ => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_control_character_is_escaped() {
        // (text, escaped, escaped keeping newlines)
        let cases = [
            ("orders", "orders", "orders"),                // plain: untouched
            ("café ✓ 注文", "café ✓ 注文", "café ✓ 注文"), // Unicode is not control
            ("evil\u{202e}gnp.exe", "evil\\u{202e}gnp.exe", "evil\\u{202e}gnp.exe"), // a bidi override reorders what follows
            ("a\u{200b}b", "a\\u{200b}b", "a\\u{200b}b"), // a zero-width space hides in a name
            ("\u{1b}[31mred\u{1b}[0m", "\\u{1b}[31mred\\u{1b}[0m", "\\u{1b}[31mred\\u{1b}[0m"), // ESC: colours
            ("\u{1b}]0;title\u{7}", "\\u{1b}]0;title\\u{7}", "\\u{1b}]0;title\\u{7}"), // OSC, ended by BEL
            ("a\rb", "a\\rb", "a\\rb"),                   // CR: overwrites the line
            ("a\nb", "a\\nb", "a\nb"),                    // LF: a forged line; kept by `lines`
            ("a\tb", "a\\tb", "a\\tb"),                   // tab
            ("\u{0}\u{8}", "\\u{0}\\u{8}", "\\u{0}\\u{8}"), // NUL, backspace
            ("\u{7f}", "\\u{7f}", "\\u{7f}"),             // DEL
            ("\u{9b}2J", "\\u{9b}2J", "\\u{9b}2J"),       // C1 CSI: an 8-bit escape
            ("\u{85}", "\\u{85}", "\\u{85}"),             // C1 NEL
            ("a\\b", "a\\b", "a\\b"),                     // a backslash is kept
        ];
        for (text, want, want_lines) in cases {
            assert_eq!(escape(text), want, "{text:?}");
            assert_eq!(lines(text), want_lines, "{text:?}");
        }
        assert!(matches!(escape("plain"), Cow::Borrowed(_)), "no copy when nothing is escaped");
        let once = escape("\u{1b}[2J\n");
        assert_eq!(escape(&once), once, "escaping twice changes nothing");
    }

    proptest! {
        /// Whatever the text, what is printed holds no control character,
        /// and `lines` none but newlines.
        #[test]
        fn nothing_printed_is_a_control_character(text in any::<String>()) {
            prop_assert!(!escape(&text).chars().any(char::is_control));
            prop_assert!(!lines(&text).chars().any(|c| c.is_control() && c != '\n'));
            prop_assert_eq!(lines(&text).matches('\n').count(), text.matches('\n').count());
        }
    }
}
