//! A bounded fuzz of what users type: trace files (both parsers), generator specs and run
//! configs, generated and mutated from a fixed-seed PRNG. Zero panics, and nothing accepted
//! beyond the limits (README, "Limits"). An allocation failure would abort the process
//! (catch_unwind cannot catch it): the bounds checked before allocation are what keep this
//! test alive.

use sluice_core::limits;
use sluice_core::link::trace::Trace;
use sluice_core::link::trace_gen::{generate, TraceSpec};
use sluice_core::rng::Rng;
use sluice_core::session::{build_encoder, RunConfig};
use sluice_core::sim::Simulation;
use sluice_core::units::{TimeDelta, Timestamp};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

const INTERESTING: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "12",
    "1e20",
    "1e999",
    "-1e20",
    "1e-300",
    "nan",
    "inf",
    "-inf",
    "NaN",
    "9223372036854",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "86400000",
    "86400001",
    "99999999999999999999",
    "0.5",
    "1.5e3",
    "10000",
    "10000.1",
    "3e9",
    "",
    " ",
    ",",
    "#",
    "@",
    ":",
    "\t",
    "abc",
    "1,2",
    "0x10",
    "+5",
    "1e",
    ".",
    "-0",
    "4294967296",
];

fn pick<'a>(rng: &mut Rng, items: &'a [&'a str]) -> &'a str {
    items[(rng.next_u64() % items.len() as u64) as usize]
}

fn below(rng: &mut Rng, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

/// A mutation of `seed` text: tokens replaced, inserted or deleted, lines duplicated or cut.
fn mutate(rng: &mut Rng, seed: &str) -> String {
    let mut lines: Vec<String> = seed.lines().map(str::to_owned).collect();
    for _ in 0..1 + below(rng, 4) {
        let n = lines.len();
        match below(rng, 6) {
            0 if n > 0 => lines[below(rng, n)] = pick(rng, INTERESTING).to_owned(),
            1 => lines.insert(below(rng, n + 1), pick(rng, INTERESTING).to_owned()),
            2 if n > 0 => {
                lines.remove(below(rng, n));
            }
            3 if n > 0 => {
                let i = below(rng, n);
                let extra = format!("{} {}", lines[i], pick(rng, INTERESTING));
                lines[i] = extra;
            }
            4 if n > 0 => {
                let i = below(rng, n);
                let dup = lines[i].clone();
                lines.insert(i, dup);
            }
            _ => {
                let i = below(rng, n + 1);
                let row = format!("{} {}", pick(rng, INTERESTING), pick(rng, INTERESTING));
                lines.insert(i, row);
            }
        }
    }
    lines.join("\n")
}

fn exercise_trace(t: &Trace) {
    assert!(t.len() as i64 <= limits::MAX_TRACE_OPPORTUNITIES);
    assert!(t.period() <= TimeDelta::from_ms(limits::MAX_TRACE_MS));
    let _ = (t.mean_rate(), t.nominal_rate(), t.to_mahimahi_string().len());
    let series = t.rate_series(TimeDelta::from_secs(1), t.period());
    assert!(series.len() as i64 <= limits::MAX_TRACE_MS / 1000 + 1);
    for ms in [0, 1, 999, 1_000_000, limits::MAX_TRACE_MS * 3] {
        let _ = t.capacity_between(Timestamp::ZERO, Timestamp::from_ms(ms));
    }
}

#[test]
fn trace_parsers_never_panic() {
    let seeds = [
        "1\n2\n3\n1000\n",
        "0\n0\n5\n5\n5\n12\n",
        "# t rate\n0 12\n1 12\n2 0\n3 6.5\n",
        "0, 1\n0.5, 2\n1, 3, 99\n",
        "1\n",
    ];
    let mut rng = Rng::new(16);
    for i in 0..3000 {
        let text = mutate(&mut rng, seeds[i % seeds.len()]);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let parsed = [Trace::parse_mahimahi(&text, "f"), Trace::parse_rate_series(&text, "f")];
            for t in parsed.into_iter().flatten() {
                exercise_trace(&t);
            }
        }));
        assert!(outcome.is_ok(), "panic on trace input {text:?}");
    }
}

#[test]
fn generator_specs_never_panic_and_are_bounded() {
    let kinds = ["constant:", "steps:", "alternating:", "markov:", "poisson:", "bogus:", ""];
    let mut rng = Rng::new(17);
    for _ in 0..2000 {
        let mut spec = pick(&mut rng, &kinds).to_owned();
        for j in 0..below(&mut rng, 6) {
            if j > 0 {
                spec.push(if below(&mut rng, 4) == 0 { '@' } else { ',' });
            }
            spec.push_str(pick(&mut rng, INTERESTING));
        }
        let duration_s = [0.001, 1.0, 30.0, 3600.0, 86_400.0, 86_401.0, 1e9][below(&mut rng, 7)];
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let Ok(parsed) = TraceSpec::parse_cli(&spec) else { return };
            let expected = parsed.max_rate_mbps() * 1e6 * duration_s / 12_000.0;
            // Generating up to the limit is allowed but slow; here only small ones run, and
            // anything beyond the limits must be refused (before allocating).
            let beyond = expected > limits::MAX_TRACE_OPPORTUNITIES as f64
                || duration_s > limits::MAX_SESSION_S;
            if beyond {
                assert!(generate(&parsed, TimeDelta::from_secs_f64(duration_s)).is_err(), "{spec}");
            } else if expected < 2e6 {
                if let Ok(t) = generate(&parsed, TimeDelta::from_secs_f64(duration_s)) {
                    exercise_trace(&t);
                }
            }
        }));
        assert!(outcome.is_ok(), "panic on spec {spec:?} over {duration_s} s");
    }
}

/// Every number in a JSON value, by its position, so one can be replaced.
fn numbers(v: &serde_json::Value, out: &mut Vec<Vec<String>>, path: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, c) in m {
                path.push(k.clone());
                numbers(c, out, path);
                path.pop();
            }
        }
        serde_json::Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                path.push(i.to_string());
                numbers(c, out, path);
                path.pop();
            }
        }
        serde_json::Value::Number(_) | serde_json::Value::Null => out.push(path.clone()),
        _ => {}
    }
}

fn set(v: &mut serde_json::Value, path: &[String], new: serde_json::Value) {
    let mut node = v;
    for k in path {
        node = match node {
            serde_json::Value::Object(m) => m.get_mut(k).expect("path exists"),
            serde_json::Value::Array(a) => &mut a[k.parse::<usize>().expect("index")],
            _ => unreachable!("numbers() only returns paths into objects and arrays"),
        };
    }
    *node = new;
}

#[test]
fn configs_validate_without_panics_and_valid_ones_run() {
    let values: Vec<serde_json::Value> = [
        "0",
        "-1",
        "-1.5",
        "1e-9",
        "1e20",
        "-1e300",
        "1e300",
        "0.5",
        "2",
        "100",
        "1000000",
        "9223372036854775807",
        "18446744073709551615",
        "-9223372036854775808",
        "86400",
        "3",
    ]
    .iter()
    .map(|s| serde_json::from_str(s).expect("number"))
    .collect();
    let registry = sluice_core::scheme::registry();
    let mut rng =
        Rng::new(std::env::var("SLUICE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(18));
    let mut ran = 0;
    let mut failures = Vec::new();
    std::panic::set_hook(Box::new(|_| {})); // the failures are listed at the end
    for i in 0..6000 {
        let info = &registry[i % registry.len()];
        let mut cfg =
            RunConfig { scheme_name: info.name.into(), duration_s: 2.0, ..Default::default() }
                .resolved()
                .expect("registered scheme");
        cfg.scheme = Some(info.config.clone());
        let mut v = serde_json::to_value(&cfg).expect("serialisable");
        let mut paths = Vec::new();
        numbers(&v, &mut paths, &mut Vec::new());
        let mut changed = Vec::new();
        for _ in 0..1 + below(&mut rng, 3) {
            let p = &paths[below(&mut rng, paths.len())];
            if p.first().map(String::as_str) == Some("duration_s") {
                continue; // kept short so the valid ones can run
            }
            let new = values[below(&mut rng, values.len())].clone();
            changed.push(format!("{}={new}", p.join(".")));
            set(&mut v, p, new);
        }
        let text = v.to_string();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let Ok(c) = serde_json::from_str::<RunConfig>(&text) else { return false };
            if c.validate().is_err() {
                return false;
            }
            // Valid: a short run on a small trace must not panic either.
            let trace = Arc::new(
                Trace::parse_mahimahi("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "t").expect("trace"),
            );
            let Ok(encoder) = build_encoder(&c) else { return false };
            let Ok(mut sim) = Simulation::new(&c, Some(trace), None, encoder) else {
                return false;
            };
            sim.run_until(Timestamp::from_ms(500));
            true
        }));
        match outcome {
            Ok(r) => ran += usize::from(r),
            Err(_) => failures.push(format!("{}: {}", info.name, changed.join(", "))),
        }
    }
    let _ = std::panic::take_hook();
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
    assert!(ran > 100, "only {ran} mutated configs were valid: the fuzz ran too little");
}
