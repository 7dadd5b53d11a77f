//! Structural comparison of JSON documents (canonical dumps), reporting differences by path.
//!
//! Object key order is irrelevant, array order is significant, integers compare exactly, and
//! keys starting with `x-` are ignored on both sides so implementations may add diagnostics to
//! their dumps, except in the objects whose keys are stored strings: the top-level `columns`
//! object (column names) and every `metadata` object (metadata keys) `[DUMP-10]`.

use std::fmt;

use serde_json::Value;

/// One difference between an expected and an actual document.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// Where, e.g. `$.columns["label"].rows[3].values[0]`.
    pub path: String,
    /// The expected value there (`None`: the key or index should not exist).
    pub expected: Option<Value>,
    /// The actual value there (`None`: the key or index is missing).
    pub actual: Option<Value>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "(absent)".to_string(), brief);
        write!(f, "{}: expected {}, got {}", self.path, show(&self.expected), show(&self.actual))
    }
}

/// A value in compact JSON, shortened to about 80 characters.
fn brief(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 { format!("{}…", s.chars().take(80).collect::<String>()) } else { s }
}

/// Every difference between `expected` and `actual`, in document order.
#[must_use]
pub fn diff(expected: &Value, actual: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    walk("$".to_string(), expected, actual, false, &mut out);
    out
}

/// True when the documents are equal under the rules of this module.
#[must_use]
pub fn equal(expected: &Value, actual: &Value) -> bool {
    diff(expected, actual).is_empty()
}

/// The first `max` differences, one per line, and a count of the rest.
#[must_use]
pub fn render(diffs: &[Difference], max: usize) -> String {
    let mut lines: Vec<String> = diffs.iter().take(max).map(ToString::to_string).collect();
    if diffs.len() > max {
        lines.push(format!("… and {} more difference(s)", diffs.len() - max));
    }
    lines.join("\n")
}

fn ignored(key: &str) -> bool {
    key.starts_with("x-")
}

fn key_path(base: &str, key: &str) -> String {
    let simple = !key.is_empty()
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !key.as_bytes()[0].is_ascii_digit();
    if simple { format!("{base}.{key}") } else { format!("{base}[{}]", Value::String(key.to_string())) }
}

/// True for the members whose value is an object keyed by stored strings (column names or
/// metadata keys), where `x-` keys are data, not diagnostics `[DUMP-10]`.
fn user_keyed(parent: &str, key: &str) -> bool {
    key == "metadata" || (parent == "$" && key == "columns")
}

fn walk(path: String, e: &Value, a: &Value, user_keys: bool, out: &mut Vec<Difference>) {
    match (e, a) {
        (Value::Object(em), Value::Object(am)) => {
            let mut keys: Vec<&String> = em.keys().chain(am.keys()).filter(|k| user_keys || !ignored(k)).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = key_path(&path, k);
                match (em.get(k), am.get(k)) {
                    (Some(ev), Some(av)) => {
                        let user = !user_keys && user_keyed(&path, k);
                        walk(p, ev, av, user, out);
                    }
                    (ev, av) => out.push(Difference { path: p, expected: ev.cloned(), actual: av.cloned() }),
                }
            }
        }
        (Value::Array(ea), Value::Array(aa)) => {
            for i in 0..ea.len().max(aa.len()) {
                let p = format!("{path}[{i}]");
                match (ea.get(i), aa.get(i)) {
                    (Some(ev), Some(av)) => walk(p, ev, av, false, out),
                    (ev, av) => out.push(Difference { path: p, expected: ev.cloned(), actual: av.cloned() }),
                }
            }
        }
        _ if e == a => {}
        _ => out.push(Difference { path, expected: Some(e.clone()), actual: Some(a.clone()) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_paths() {
        let e = json!({"columns": {"é t": {"rows": [1, 2]}}, "n": "1", "x-note": 1});
        let a = json!({"n": "1", "columns": {"é t": {"rows": [1, 3, 4]}}, "x-other": true});
        let d = diff(&e, &a);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].to_string(), "$.columns[\"é t\"].rows[1]: expected 2, got 3");
        assert_eq!(d[1].to_string(), "$.columns[\"é t\"].rows[2]: expected (absent), got 4");
        assert!(equal(&json!({"a": 1, "b": 2}), &json!({"b": 2, "a": 1})));
        assert!(!equal(&json!([1, 2]), &json!([2, 1])));
        assert!(render(&d, 1).ends_with("… and 1 more difference(s)"));
    }

    #[test]
    fn x_keys_are_data_among_column_names_and_metadata() {
        // [DUMP-10]: ignored where the dump names members, compared where keys are stored strings.
        let e = json!({"columns": {"x-score": {"sha256": "a"}}, "schema": {"metadata": {"x-k": "v"}}});
        assert!(!equal(&e, &json!({"columns": {}, "schema": {"metadata": {"x-k": "v"}}})));
        assert!(!equal(&e, &json!({"columns": {"x-score": {"sha256": "a"}}, "schema": {"metadata": {}}})));
        assert!(equal(
            &e,
            &json!({"columns": {"x-score": {"sha256": "a", "x-ms": 3}}, "schema": {"metadata": {"x-k": "v"}}, "x-t": 1})
        ));
        // Integers compare exactly, above 2^53 too.
        assert!(!equal(&json!({"v": 9_007_199_254_740_993_u64}), &json!({"v": 9_007_199_254_740_992_u64})));
    }
}
