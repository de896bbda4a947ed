//! Unknown and duplicate keys are errors at every depth of a run config (issue 30): every
//! object of every registered scheme's run config (model and x264 encoder), with a key added
//! that no config has, is refused with the key named; and a field given twice is refused.

use serde_json::Value;
use sluice_core::encoder::X264Settings;
use sluice_core::scheme::registry;
use sluice_core::session::{EncoderConfig, RunConfig};

const STRAY: &str = "zz_not_a_field";

/// JSON pointers of every object in `v` (the root is "").
fn objects(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            out.push(at.clone());
            for (k, x) in m {
                objects(x, format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                objects(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn run_configs() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for s in registry() {
        for x264 in [false, true] {
            let mut cfg = RunConfig { scheme: Some(s.config.clone()), ..Default::default() };
            if x264 {
                cfg.encoder = EncoderConfig::X264(X264Settings::default());
            }
            let name = format!("{}{}", s.name, if x264 { " (x264)" } else { "" });
            out.push((name, serde_json::to_value(&cfg).unwrap()));
        }
    }
    out
}

#[test]
fn every_config_round_trips() {
    for (name, v) in run_configs() {
        let back: Result<RunConfig, _> = serde_json::from_value(v);
        assert!(back.is_ok(), "{name}: {:?}", back.err());
    }
}

#[test]
fn an_unknown_key_at_any_depth_is_an_error_naming_it() {
    let mut checked = 0;
    let mut accepted = std::collections::BTreeSet::new();
    for (name, v) in run_configs() {
        let mut at = Vec::new();
        objects(&v, String::new(), &mut at);
        for p in at {
            let mut bad = v.clone();
            bad.pointer_mut(&p).unwrap().as_object_mut().unwrap().insert(STRAY.into(), 1.into());
            // As the front end hands it over: JSON text.
            let text = serde_json::to_string(&bad).unwrap();
            match serde_json::from_str::<RunConfig>(&text) {
                Ok(_) => {
                    let kind = bad.pointer(&format!("{p}/kind")).cloned().unwrap_or_default();
                    let _ = &name;
                    accepted.insert(format!("'{p}' ({kind})"));
                }
                Err(e) => assert!(e.to_string().contains(STRAY), "{name} at '{p}': {e}"),
            }
            checked += 1;
        }
    }
    assert!(accepted.is_empty(), "unknown keys accepted at: {accepted:#?}");
    assert!(checked > 200, "{checked}");
}

#[test]
fn a_key_given_twice_is_an_error() {
    for (name, v) in run_configs() {
        let mut at = Vec::new();
        objects(&v, String::new(), &mut at);
        for p in at {
            let obj = v.pointer(&p).unwrap().as_object().unwrap();
            let Some((key, val)) = obj.iter().find(|(k, _)| k.as_str() != "kind") else {
                continue;
            };
            // The object's text with its first field written twice.
            let inner = serde_json::to_string(obj).unwrap();
            let twice = format!(
                "{{{}:{},{}",
                serde_json::to_string(key).unwrap(),
                serde_json::to_string(val).unwrap(),
                &inner[1..]
            );
            let mut text = serde_json::to_string(&v).unwrap();
            let at = text.find(&inner).unwrap();
            text.replace_range(at..at + inner.len(), &twice);
            let r = serde_json::from_str::<RunConfig>(&text);
            assert!(r.is_err(), "{name}: '{key}' twice at '{p}' was accepted");
        }
    }
}
