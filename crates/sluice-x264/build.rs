//! Finds libx264 with pkg-config and generates FFI bindings with bindgen, so that the
//! layout of `x264_param_t` / `x264_picture_t` always matches the installed header.
//!
//! Build requirements (Debian/Ubuntu): `apt-get install -y libx264-dev pkg-config libclang-dev`.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let lib = match pkg_config::Config::new().atleast_version("0.148").probe("x264") {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!("\nerror: libx264 was not found by pkg-config: {e}");
            eprintln!("       install libx264-dev (Debian/Ubuntu: `apt-get install -y libx264-dev pkg-config`)\n");
            panic!("libx264 not found: install libx264-dev (and pkg-config)");
        }
    };

    let mut builder = bindgen::Builder::default()
        .header_contents("x264_wrapper.h", "#include <stdint.h>\n#include <x264.h>\n")
        .allowlist_function("x264_.*")
        .allowlist_type("x264_.*")
        .allowlist_var("X264_.*")
        .layout_tests(true)
        .derive_default(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for path in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", path.display()));
    }
    let bindings = builder.generate().expect(
        "bindgen failed on x264.h (is libclang-dev installed? `apt-get install -y libclang-dev`)",
    );
    let mut text = bindings.to_string();

    // x264_encoder_open is a macro expanding to x264_encoder_open_<X264_BUILD>; alias it.
    let build: u32 = text
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix("pub const X264_BUILD: u32 = ")
                .and_then(|rest| rest.trim_end_matches(';').trim().parse().ok())
        })
        .expect("X264_BUILD not found in x264.h");
    text.push_str(&format!("\npub use self::x264_encoder_open_{build} as x264_encoder_open;\n"));
    println!("cargo:rustc-env=SLUICE_X264_BUILD={build}");

    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("x264_bindings.rs");
    std::fs::write(&out, text).expect("writing bindings");
}
