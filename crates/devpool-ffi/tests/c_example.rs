//! The C example builds with a C compiler against `devpool.h` and the shared
//! library, and passes its own checks on the mock backend with every listed strategy. The
//! header also compiles as C99 with `-pedantic` and as C++. `devpool_last_error`'s
//! pointer is checked under valgrind. Skipped, with a message, where there is no
//! compiler (or no valgrind).

mod common;

use common::shared_library;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

fn works(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn c_compiler() -> Option<String> {
    std::env::var("CC")
        .ok()
        .into_iter()
        .chain(["cc".to_string()])
        .find(|c| works(c))
}

/// The C compiler and the shared library, or `None` (with a message) where either
/// is missing.
fn toolchain() -> Option<(String, PathBuf)> {
    let Some(cc) = c_compiler() else {
        eprintln!("skipped: no C compiler (set CC, or install cc)");
        return None;
    };
    let Some(lib) = shared_library() else {
        eprintln!("skipped: no libdevpool_ffi.so beside the test binary");
        return None;
    };
    Some((cc, lib))
}

/// A scratch directory of this test run, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("devpool-ffi-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_c_example_builds_and_passes_with_every_strategy() {
    let Some((cc, lib)) = toolchain() else {
        return;
    };
    let scratch = Scratch::new("c-example");
    let exe = scratch.0.join("devpool_example");
    let example = root().join("examples/c/devpool_example.c");
    compile(&cc, &lib, &example, &exe, &["-O1"]);
    // The example allocates up to 64 MiB: every listed strategy serves that (the
    // fixed-size pool, unlisted, refuses what its one block size does not hold).
    for s in devpool::STRATEGIES.iter().filter(|s| s.listed) {
        let run = Command::new(&exe)
            .args(["mock", s.name])
            .env_remove("DEVPOOL_CONFIG")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success() && stdout.contains("ok: every check passed"),
            "{}: {}\nstdout:\n{stdout}\nstderr:\n{}",
            s.name,
            run.status,
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(stdout.contains(&format!("strategy={}", s.name)), "{stdout}");
    }
}

#[test]
fn the_header_compiles_as_strict_c_and_as_cpp() {
    let src = "#include \"devpool.h\"\nint main(void) {\n  void *p = devpool_malloc(1, 0, NULL);\n  devpool_free(p, 1, 0, NULL);\n  return 0;\n}\n";
    for (compiler, args) in [
        (
            "cc",
            &["-std=c99", "-pedantic", "-Wall", "-Werror", "-x", "c"][..],
        ),
        ("c++", &["-std=c++11", "-Wall", "-Werror", "-x", "c++"][..]),
    ] {
        if !works(compiler) {
            eprintln!("skipped: no `{compiler}`");
            continue;
        }
        let mut child = Command::new(compiler)
            .args(args)
            .arg("-fsyntax-only")
            .arg("-I")
            .arg(include_dir())
            .arg("-")
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(src.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{compiler}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Build the C program `tests/c/NAME.c` against the header and the library.
fn build_c(cc: &str, lib: &Path, scratch: &Scratch, name: &str) -> PathBuf {
    let exe = scratch.0.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    compile(cc, lib, &src, &exe, &["-g", "-O0"]);
    exe
}

/// Compile `src` as strict C11 into `exe`, linked against the library `lib`, with
/// the optimisation flags `opt`; the compiler must succeed.
fn compile(cc: &str, lib: &Path, src: &Path, exe: &Path, opt: &[&str]) {
    let lib_dir = lib.parent().unwrap();
    let out = Command::new(cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .args(opt)
        .arg("-I")
        .arg(include_dir())
        .arg(src)
        .arg("-o")
        .arg(exe)
        .arg("-L")
        .arg(lib_dir)
        .arg("-ldevpool_ffi")
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cc} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn last_error_stays_valid_across_later_failures_under_valgrind() {
    let Some((cc, lib)) = toolchain() else {
        return;
    };
    if !works("valgrind") {
        eprintln!("skipped: no valgrind");
        return;
    }
    let scratch = Scratch::new("last-error");
    let exe = build_c(&cc, &lib, &scratch, "last_error");
    let run = Command::new("valgrind")
        .args(["--error-exitcode=99", "--leak-check=no", "-q"])
        .arg(&exe)
        .env_remove("DEVPOOL_CONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success() && stdout.contains("ok: the held message stayed valid"),
        "{}\nstdout:\n{stdout}\nstderr (valgrind):\n{stderr}",
        run.status
    );
    assert!(!stderr.contains("Invalid read"), "{stderr}");
}
