// What the build scripts of ccload (loader/build.rs: the Algo enum, the
// skeletons) and of ccload-intf (bpf/intf/build.rs: bindgen's allowlist)
// share, include!d by both: the one parser of `CCL_ALGOS(X)` in
// bpf/ccload_intf.h, the one list of controllers, and the rerun rule for
// the C sources.

/// One row of `CCL_ALGOS(X)`: X(name, NAME, tel).
#[allow(dead_code)] // each build script reads the fields it needs
struct Row {
    name: String,
    upper: String,
    /// Telemetry union member, also the prefix of the arithmetic core.
    tel: String,
}

/// The rows of the `#define CCL_ALGOS(X)` X-macro in ccload_intf.h: the one
/// list of controllers.
fn algos_of(intf_h: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(intf_h).expect("read ccload_intf.h");
    let start = text
        .find("#define CCL_ALGOS(X)")
        .expect("ccload_intf.h defines CCL_ALGOS(X)");
    let mut rows = Vec::new();
    // The macro body: continuation lines up to the first line without `\`.
    for line in text[start..].lines().skip(1) {
        let row = line.trim().trim_end_matches('\\').trim();
        if let Some(args) = row.strip_prefix("X(").and_then(|r| r.strip_suffix(')')) {
            let f: Vec<&str> = args.split(',').map(str::trim).collect();
            assert_eq!(f.len(), 3, "CCL_ALGOS row `{row}`: want X(name, NAME, tel)");
            rows.push(Row {
                name: f[0].to_string(),
                upper: f[1].to_string(),
                tel: f[2].to_string(),
            });
        }
        if !line.trim_end().ends_with('\\') {
            break;
        }
    }
    assert!(!rows.is_empty(), "CCL_ALGOS has no rows");
    rows
}

/// Rerun the build script when a file under `dir` changes (the committed
/// vmlinux headers aside).
fn rerun_dir(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name() != Some(std::ffi::OsStr::new("vmlinux")) {
                rerun_dir(&path);
            }
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
