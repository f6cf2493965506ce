//! The vendored TIAGE cases are what `data/topic-shift/derive_cases.py` derives from the raw
//! files, byte for byte (python3 is needed: SKIPPED without it, a failure under `CI=true`).

use std::process::Command;

#[test]
fn derive_cases_regenerates_the_vendored_cases() {
    let test = "derive_cases_regenerates_the_vendored_cases";
    let Some(cases) = test_data::repo(test, test_data::TIAGE_CASES) else {
        return;
    };
    let script = cases.with_file_name("derive_cases.py");
    let out = match Command::new("python3").arg(&script).output() {
        Ok(out) => out,
        Err(e) => {
            let why = format!("cannot run python3 ({e})");
            assert!(
                !test_data::in_ci(),
                "{test}: {why}; under CI=true it must run"
            );
            test_data::skipped(test, &why);
            return;
        }
    };
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = std::fs::read(&cases).expect("the vendored cases");
    assert!(
        out.stdout == expected,
        "{} wrote {} bytes that differ from {} ({} bytes)",
        script.display(),
        out.stdout.len(),
        cases.display(),
        expected.len()
    );
}
