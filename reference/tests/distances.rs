//! The golden vectors of SPEC.md §23 (`fixtures/distances.json`, written by the independent
//! Python implementation) reproduced bit for bit by every SIMD level this CPU runs.

#![allow(clippy::float_cmp)] // the bits are the point: every comparison here is exact
use serde_json::Value;
use tessera::distance::{Distance, Level, distance_f32_at, distance_f64_at};

fn hex(v: &Value) -> u64 {
    let s = v.as_str().expect("a hex string");
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex digits")
}

fn cases() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/distances.json");
    let text = std::fs::read_to_string(path).expect("fixtures/distances.json");
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(doc["format"], "tessera-distances/1");
    doc["cases"].as_array().expect("cases").clone()
}

#[test]
fn every_level_reproduces_the_golden_vectors() {
    let cases = cases();
    assert!(cases.len() >= 25, "only {} golden cases", cases.len());
    let functions = [
        ("cosine_distance", Distance::Cosine),
        ("l2_distance", Distance::L2),
        ("inner_product", Distance::InnerProduct),
    ];
    let levels = Level::available();
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let elements = |key: &str| case[key].as_array().expect("elements").iter().map(hex).collect::<Vec<u64>>();
        let (a, b) = (elements("a"), elements("b"));
        for (key, d) in functions {
            let want = hex(&case[key]);
            for &level in &levels {
                let got = match case["element"].as_str() {
                    Some("f32") => {
                        let a: Vec<f32> = a.iter().map(|&x| f32::from_bits(x as u32)).collect();
                        let b: Vec<f32> = b.iter().map(|&x| f32::from_bits(x as u32)).collect();
                        distance_f32_at(level, d, &a, &b)
                    }
                    Some("f64") => {
                        let a: Vec<f64> = a.iter().map(|&x| f64::from_bits(x)).collect();
                        let b: Vec<f64> = b.iter().map(|&x| f64::from_bits(x)).collect();
                        distance_f64_at(level, d, &a, &b)
                    }
                    other => panic!("{name}: element type {other:?}"),
                };
                let got = got.expect("equal lengths").to_bits();
                assert_eq!(
                    got,
                    want,
                    "{name}: {key} on {level:?}: {} ({got:#018x}), golden {} ({want:#018x})",
                    f64::from_bits(got),
                    f64::from_bits(want)
                );
                checked += 1;
            }
        }
    }
    println!("{checked} results checked on {levels:?}");
}

#[test]
fn the_golden_file_holds_the_cases_the_spec_names() {
    let cases = cases();
    let value = |name: &str, key: &str| {
        let case = cases.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no case {name:?}"));
        f64::from_bits(hex(&case[key]))
    };
    // Hand-checkable answers, independent of both implementations.
    assert_eq!(value("identical unit", "cosine_distance"), 0.0);
    assert_eq!(value("768 elements, identical", "cosine_distance"), 0.0);
    assert_eq!(value("opposite", "cosine_distance"), 2.0);
    assert_eq!(value("opposite", "inner_product"), -14.0);
    assert_eq!(value("orthogonal", "cosine_distance"), 1.0);
    assert_eq!(value("3-4-5", "l2_distance"), 5.0);
    assert_eq!(value("zero and zero", "cosine_distance"), 0.0);
    assert_eq!(value("zero and non-zero", "cosine_distance"), 1.0);
    assert_eq!(value("empty", "l2_distance"), 0.0);
    assert_eq!(value("NaN element", "cosine_distance").to_bits(), 0x7FF8_0000_0000_0000);
    assert_eq!(value("opposite infinities", "cosine_distance").to_bits(), 0x7FF8_0000_0000_0000);
    assert_eq!(value("opposite infinities", "inner_product"), f64::NEG_INFINITY);
    assert_eq!(value("f64: lane order (2^53 absorbs a 1)", "inner_product"), 2f64.powi(53) + 32.0);
}
