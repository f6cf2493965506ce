//! The tidy rules on invented crates written to a temporary directory.

use std::path::Path;

use super::source::{Crate, parse_crate};
use super::{cycles, public_api, size};

fn write_crate(root: &Path, name: &str, files: &[(&str, &str)]) -> Crate {
    let dir = root.join(name);
    for (path, text) in files {
        let file = dir.join("src").join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, text).expect("write");
    }
    parse_crate(&dir).expect("parses")
}

#[test]
fn a_reference_back_through_super_or_a_root_reexport_is_a_cycle() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cyclic = write_crate(
        tmp.path(),
        "cyclic",
        &[
            ("lib.rs", "mod alpha;\nmod beta;\npub use beta::Beta;\n"),
            (
                "alpha.rs",
                "pub struct Alpha;\nfn f() -> crate::Beta { todo!() }\n",
            ),
            (
                "beta.rs",
                "use super::alpha::Alpha;\npub struct Beta(Alpha);\n",
            ),
        ],
    );
    let problems = cycles::check(std::slice::from_ref(&cyclic));
    assert_eq!(problems, ["cyclic: module cycle between alpha ↔ beta"]);

    let acyclic = write_crate(
        tmp.path(),
        "acyclic",
        &[
            ("lib.rs", "mod alpha;\nmod beta;\n"),
            (
                "alpha.rs",
                "pub struct Alpha;\n#[cfg(test)]\nmod tests { use crate::beta::Beta; }\n",
            ),
            (
                "beta.rs",
                "use super::alpha::Alpha;\npub struct Beta(Alpha);\n",
            ),
        ],
    );
    assert!(
        cycles::check(&[acyclic]).is_empty(),
        "test code is not a dependency"
    );
}

#[test]
fn a_function_over_the_limit_is_named_and_test_code_does_not_count() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let body = |lines: usize| "    let _x = 1;\n".repeat(lines);
    // `fn` line + body + closing brace: 80 lines is allowed, 81 is not.
    let lib = format!(
        "pub fn fits() {{\n{}}}\n\npub fn too_long() {{\n{}}}\n\n#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{}    }}\n}}\n",
        body(78),
        body(79),
        body(700)
    );
    let krate = write_crate(tmp.path(), "sized", &[("lib.rs", &lib)]);
    let problems = size::check(tmp.path(), &[krate]);
    assert_eq!(
        problems,
        ["sized/src/lib.rs:82: fn `too_long` runs 81 lines (at most 80)"],
        "the 700-line test module is neither a long function nor a long file"
    );
}

#[test]
fn the_listing_has_one_line_per_public_path_and_leaves_out_hidden_and_private_items() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let krate = write_crate(
        tmp.path(),
        "listed",
        &[
            (
                "lib.rs",
                "mod inner;\npub mod open;\n#[doc(hidden)]\npub mod support { pub fn helper() {} }\npub use inner::{Thing, make};\n",
            ),
            (
                "inner.rs",
                "pub struct Thing;\npub fn make() -> Thing { Thing }\npub(crate) fn internal() {}\n",
            ),
            ("open.rs", "pub enum Kind { A }\nconst PRIVATE: u8 = 1;\n"),
        ],
    );
    let listings = public_api::listings(&[krate]);
    assert_eq!(
        listings["listed"].counted,
        [
            "enum listed::open::Kind",
            "fn listed::make",
            "struct listed::Thing"
        ]
    );
}
