//! A byte-stable pretty printer for `expected.json`.
//!
//! `serde_json`'s own output order for object keys depends on whether some crate in the build
//! enables its `preserve_order` feature, which would make the golden files depend on how cargo
//! was invoked. This printer sorts keys by their bytes, indents by two spaces and ends the text
//! with a newline, whatever the feature set.

use serde_json::Value;

/// Pretty-prints `value` with sorted object keys and a trailing newline.
#[must_use]
pub fn to_string_pretty(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out.push('\n');
    out
}

fn write_value(out: &mut String, value: &Value, depth: usize) {
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_value(out, item, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                out.push_str(&scalar(&Value::String(key.clone())));
                out.push_str(": ");
                write_value(out, &map[key], depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
        other => out.push_str(&scalar(other)),
    }
}

/// A scalar (or empty container) in `serde_json`'s compact notation.
fn scalar(value: &Value) -> String {
    value.to_string()
}

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("  ");
    }
}

#[cfg(test)]
mod tests {
    use super::to_string_pretty;
    use serde_json::json;

    #[test]
    fn sorts_keys_and_indents() {
        let v = json!({"b": [1, {"z": null, "a": "é"}], "a": {}, "c": []});
        let want = "{\n  \"a\": {},\n  \"b\": [\n    1,\n    {\n      \"a\": \"é\",\n      \"z\": null\n    }\n  ],\n  \"c\": []\n}\n";
        assert_eq!(to_string_pretty(&v), want);
        let back: serde_json::Value = serde_json::from_str(&to_string_pretty(&v)).unwrap();
        assert_eq!(back, v);
    }
}
