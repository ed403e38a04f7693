//! Tells the benchmark reports how this binary was built: a figure pasted from
//! `rialto bench engine` then says whether it came from a profile-guided build
//! (scripts/build-pgo.sh passes `-Cprofile-use` in RUSTFLAGS) or a plain one.

fn main() {
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let profile_guided = flags.split('\x1f').any(|flag| flag.contains("profile-use"));
    println!(
        "cargo:rustc-env=RIALTO_PROFILE_GUIDED={}",
        u8::from(profile_guided)
    );
}
