//! Byte-level boundary values: tool definitions written another way with the same RFC 8785 meaning, requested roots and tool names as a careless host might compare them.
//!
//! A host must digest a definition's canonical form, normalise a requested
//! root before comparing it, and compare tool names code point for code
//! point (MODEL.md section 4). What it does with bytes it received can only
//! be told apart when the bytes are not already in the form it assumes:
//! these values are chosen so that they are not, and they travel to the
//! host as written (the scenario format keeps a definition's text, and a
//! request's roots and names are strings the host receives untouched).

use serde_json::Value;

/// How `written_form` writes a definition, by `form % 5`: keys in reverse
/// order; non-ASCII and `.` escaped as `\uXXXX`; integral numbers as `N.0`;
/// integral numbers in exponent form (`1e1` for ten); all of those at once.
/// Each is the same value under RFC 8785 and other bytes than its canonical
/// text (given a key pair, a non-ASCII character or `.`, and an integral
/// number in the definition, as the fuzzer's probe tools have).
pub const WRITTEN_FORMS: u8 = 5;

/// The form of [`written_form`] that only reverses every object's keys: a
/// textual re-ordering, so it holds whatever map type serde_json was built with.
pub const REVERSED_KEYS: u8 = 0;

#[derive(Clone, Copy, Default)]
struct Form {
    reverse_keys: bool,
    escape: bool,
    numbers: Numbers,
}

#[derive(Clone, Copy, Default, PartialEq)]
enum Numbers {
    #[default]
    AsParsed,
    Point,
    Exponent,
}

/// `value` written in form `form % WRITTEN_FORMS` (see [`WRITTEN_FORMS`]), compact.
pub fn written_form(value: &Value, form: u8) -> String {
    let form = match form % WRITTEN_FORMS {
        0 => Form {
            reverse_keys: true,
            ..Form::default()
        },
        1 => Form {
            escape: true,
            ..Form::default()
        },
        2 => Form {
            numbers: Numbers::Point,
            ..Form::default()
        },
        3 => Form {
            numbers: Numbers::Exponent,
            ..Form::default()
        },
        _ => Form {
            reverse_keys: true,
            escape: true,
            numbers: Numbers::Exponent,
        },
    };
    let mut out = String::new();
    write(value, form, &mut out);
    out
}

fn write(value: &Value, form: Form, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, form, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            let entries: Vec<(&String, &Value)> = if form.reverse_keys {
                map.iter().rev().collect()
            } else {
                map.iter().collect()
            };
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, form, out);
                out.push(':');
                write(v, form, out);
            }
            out.push('}');
        }
        Value::String(s) => write_string(s, form, out),
        Value::Number(n) => out.push_str(&write_number(n, form.numbers)),
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn write_string(s: &str, form: Form, out: &mut String) {
    // serde_json escapes only `"`, `\` and control characters; the others
    // are raw, and none of them occurs inside an escape it wrote.
    let plain = Value::String(s.to_string()).to_string();
    if !form.escape {
        out.push_str(&plain);
        return;
    }
    for c in plain.chars() {
        if c == '.' || !c.is_ascii() {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
}

/// An integral number below 2^53 in the asked form; anything else as serde_json writes it.
fn write_number(n: &serde_json::Number, numbers: Numbers) -> String {
    let integral = n
        .as_i64()
        .map(|i| i as i128)
        .or_else(|| n.as_u64().map(|u| u as i128))
        .or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0)
                .map(|f| f as i128)
        })
        .filter(|i| i.unsigned_abs() < 1 << 53);
    match (integral, numbers) {
        (Some(i), Numbers::Point) => format!("{i}.0"),
        (Some(0), Numbers::Exponent) => "0e0".to_string(),
        (Some(mut i), Numbers::Exponent) => {
            let mut exponent = 0;
            while i % 10 == 0 {
                i /= 10;
                exponent += 1;
            }
            format!("{i}e{exponent}")
        }
        _ => n.to_string(),
    }
}

/// Writable roots a delegation asks for, written as a person or a model
/// might, under a parent whose root is `/w/repo`: inside once normalised
/// (`.`, doubled and trailing separators; out and back in), or outside
/// although the text starts with the parent's root (`..` out of it, a
/// sibling sharing its prefix, `..` above it).
pub const WRITTEN_ROOTS: [&str; 6] = [
    "/w/repo/./src//",
    "/w/repo/../other",
    "/w/repo2",
    "/w/repo/src/../..",
    "/w/repo/../repo/src",
    "/w/repo-old/../repo2",
];

/// Tool names a delegation asks for in place of `probe.read`: the name
/// itself, variants a careless comparison takes for it (fullwidth letter,
/// zero-width space, soft hyphen, fullwidth full stop: equal after NFKC
/// with invisible characters removed), and look-alikes no normalisation
/// joins (a Cyrillic `е`, one code point more). Only the first names a
/// tool the parent sealed.
pub const WRITTEN_NAMES: [&str; 7] = [
    "probe.read",
    "\u{ff50}robe.read",
    "probe\u{200b}.read",
    "probe.re\u{ad}ad",
    "probe\u{ff0e}read",
    "prob\u{435}.read",
    "probe.reads",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::{canonical_json, digest_value, parse_strict};
    use serde_json::json;

    #[test]
    fn every_form_is_other_bytes_with_the_same_canonical_digest() {
        let definition = json!({
            "name": "probe.read",
            "description": "probe.read, caf\u{e9} \u{1f600}",
            "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "maximum": 10, "minimum": 0.5}}},
        });
        let canonical = canonical_json(&definition).unwrap();
        let mut texts = std::collections::BTreeSet::new();
        for form in 0..WRITTEN_FORMS {
            let text = written_form(&definition, form);
            assert_ne!(text, canonical, "form {form} is other bytes");
            let back = parse_strict(&text).unwrap_or_else(|e| panic!("form {form}: {e}: {text}"));
            assert_eq!(
                digest_value(&back).unwrap(),
                digest_value(&definition).unwrap(),
                "form {form}: {text}"
            );
            texts.insert(text);
        }
        assert_eq!(texts.len(), WRITTEN_FORMS as usize, "{texts:#?}");
        let all = written_form(&definition, 4);
        assert!(all.contains(r"\ud83d\ude00") && all.contains("1e1") && all.contains("0.5"));
        assert!(written_form(&definition, 2).contains("\"maximum\":10.0"));
        // Positive control: written plainly, the same text as the canonical form.
        assert_eq!(
            written_form(&json!({"a": 1}), 1),
            canonical_json(&json!({"a": 1})).unwrap()
        );
    }

    #[test]
    fn written_roots_and_names_are_the_boundaries_they_claim() {
        use crate::path::NormalPath;
        let inside = |root: &str| {
            NormalPath::parse(root)
                .is_ok_and(|p| p.to_string() == "/w/repo" || p.to_string().starts_with("/w/repo/"))
        };
        let verdicts: Vec<(bool, bool)> = WRITTEN_ROOTS
            .iter()
            .map(|r| (r.starts_with("/w/repo"), inside(r)))
            .collect();
        // Every root passes a string-prefix test; two are inside.
        assert!(verdicts.iter().all(|(prefix, _)| *prefix));
        assert_eq!(
            verdicts.iter().filter(|(_, inside)| *inside).count(),
            2,
            "{verdicts:?}"
        );
        assert_eq!(
            WRITTEN_NAMES.iter().filter(|n| **n == "probe.read").count(),
            1
        );
    }
}
