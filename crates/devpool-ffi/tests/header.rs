//! `include/devpool.h` matches the library, both ways: the same functions with the
//! same signatures as the `extern "C"` functions of the source, the same symbols as
//! the built shared library exports (when `nm` is there), and the same return codes.

mod common;

use common::shared_library;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The header without its comments.
fn header() -> String {
    let text = read(&crate_dir().join("include/devpool.h"));
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find("*/").expect("unclosed comment") + i + 2;
        rest = &rest[end..];
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A C or Rust type in one spelling, so that the two can be compared.
fn canon(ty: &str) -> String {
    let t: String = ty.split_whitespace().collect::<Vec<_>>().join(" ");
    let t = t.replace(" *", "*").replace("* ", "*");
    match t.as_str() {
        "size_t" | "usize" => "size",
        "int" | "c_int" => "int",
        "cudaStream_t" | "CudaStream" => "stream",
        "void*" | "*mut c_void" => "mut void*",
        "const void*" | "*const c_void" => "const void*",
        "char*" | "*mut c_char" => "mut char*",
        "const char*" | "*const c_char" => "const char*",
        "size_t*" | "*mut usize" => "mut size*",
        "int*" | "*mut c_int" => "mut int*",
        "devpool_device_stats_t*" | "*mut DevpoolDeviceStats" => "mut stats*",
        "void" | "" => "()",
        other => panic!("no canonical form for the type `{other}`"),
    }
    .to_string()
}

type Sigs = BTreeMap<String, (String, Vec<String>)>;

/// name -> (return type, parameter types) of every function the header declares.
fn header_functions() -> Sigs {
    let mut sigs = Sigs::new();
    let text: String = header()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    for decl in text.split(';') {
        let Some(at) = decl.find("devpool_") else {
            continue;
        };
        let Some(open) = decl[at..].find('(').map(|i| i + at) else {
            continue;
        };
        let close = decl.rfind(')').expect("a declaration without `)`");
        let name = decl[at..open].trim().to_string();
        let ret = decl[..at].replace("extern \"C\" {", "").replace('}', "");
        let params = decl[open + 1..close]
            .split(',')
            .map(|p| {
                let p = p.trim();
                if p == "void" {
                    return None;
                }
                // Drop the parameter's name: the last identifier.
                let cut = p
                    .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map_or(0, |i| i + 1);
                Some(canon(&p[..cut]))
            })
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default();
        sigs.insert(name, (canon(&ret), params));
    }
    sigs
}

/// name -> (return type, parameter types) of every `extern "C"` function of the
/// source, each checked to be `#[no_mangle]`.
fn source_functions() -> Sigs {
    let mut sigs = Sigs::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(crate_dir().join("src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    for f in files {
        let text = read(&f);
        let mut rest = text.as_str();
        while let Some(i) = rest.find("extern \"C\" fn ") {
            let before = &rest[..i];
            let attr_ok = before
                .rfind("#[no_mangle]")
                .is_some_and(|a| !before[a..].contains("\n}\n"));
            let sig = &rest[i + "extern \"C\" fn ".len()..];
            let body = sig.find('{').expect("a function body");
            let sig = &sig[..body];
            let open = sig.find('(').unwrap();
            let close = sig.rfind(')').unwrap();
            let name = sig[..open].trim().to_string();
            assert!(attr_ok, "{name} in {} is not #[no_mangle]", f.display());
            let params = sig[open + 1..close]
                .split(',')
                .filter(|p| !p.trim().is_empty())
                .map(|p| canon(p.split_once(':').expect("name: type").1))
                .collect();
            let ret = sig[close + 1..]
                .split_once("->")
                .map_or(String::new(), |(_, r)| r.to_string());
            sigs.insert(name, (canon(&ret), params));
            rest = &rest[i + 1..];
        }
    }
    sigs
}

#[test]
fn the_header_declares_exactly_the_extern_functions() {
    let h = header_functions();
    let s = source_functions();
    assert!(h.len() >= 10, "{h:?}");
    for (name, sig) in &s {
        assert_eq!(
            h.get(name),
            Some(sig),
            "{name}: source {sig:?}, header {:?}",
            h.get(name)
        );
    }
    for (name, sig) in &h {
        assert_eq!(
            s.get(name),
            Some(sig),
            "{name}: header {sig:?}, source {:?}",
            s.get(name)
        );
    }
    // The two signatures PyTorch and CuPy load, spelled out.
    let want = |r: &str, p: &[&str]| (r.to_string(), p.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        h["devpool_malloc"],
        want("mut void*", &["size", "int", "stream"])
    );
    assert_eq!(
        h["devpool_free"],
        want("()", &["mut void*", "size", "int", "stream"])
    );
    assert_eq!(
        h["devpool_cupy_malloc"],
        want("mut void*", &["mut void*", "size", "int"])
    );
    assert_eq!(
        h["devpool_cupy_free"],
        want("()", &["mut void*", "mut void*", "int"])
    );
}

#[test]
fn the_header_codes_are_the_library_codes() {
    let mut header_codes = BTreeMap::new();
    for line in header().lines() {
        let Some(rest) = line.trim().strip_prefix("#define DEVPOOL_") else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let (Some(name), Some(value)) = (it.next(), it.next()) else {
            continue;
        };
        if name != "OK" && !name.starts_with("ERR_") {
            continue; // not a return code
        }
        if let Ok(v) = value.trim_matches(|c| c == '(' || c == ')').parse::<i32>() {
            header_codes.insert(format!("DEVPOOL_{name}"), v);
        }
    }
    let lib: BTreeMap<String, i32> = [
        ("DEVPOOL_OK", devpool_ffi::DEVPOOL_OK),
        ("DEVPOOL_ERR_INVALID", devpool_ffi::DEVPOOL_ERR_INVALID),
        ("DEVPOOL_ERR_TOO_LATE", devpool_ffi::DEVPOOL_ERR_TOO_LATE),
        ("DEVPOOL_ERR_NOT_FOUND", devpool_ffi::DEVPOOL_ERR_NOT_FOUND),
        ("DEVPOOL_ERR_BACKEND", devpool_ffi::DEVPOOL_ERR_BACKEND),
        ("DEVPOOL_ERR_PANIC", devpool_ffi::DEVPOOL_ERR_PANIC),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(header_codes, lib);
    // And the source defines no other code than these.
    let report = read(&crate_dir().join("src/report.rs"));
    let defined = report.matches("pub const DEVPOOL_").count();
    assert_eq!(defined, lib.len());
}

#[test]
fn the_shared_library_exports_what_the_header_declares() {
    let Some(lib) = shared_library() else {
        eprintln!("skipped: no libdevpool_ffi.so beside the test binary");
        return;
    };
    let out = match Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
    {
        Ok(o) if o.status.success() => o,
        _ => {
            eprintln!("skipped: `nm -D` is not available");
            return;
        }
    };
    let exported: std::collections::BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().rev();
            let name = f.next()?;
            let kind = f.next()?;
            (kind == "T" && name.starts_with("devpool_")).then(|| name.to_string())
        })
        .collect();
    let declared: std::collections::BTreeSet<String> = header_functions().into_keys().collect();
    assert_eq!(exported, declared, "exported by {}", lib.display());
}
