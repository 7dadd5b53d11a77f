//! Must-reject cases for relative paths stored in manifests and segments
//! (SPEC.md §"Relative paths").

use super::base::{basic, main_key};
use crate::generate::Result;
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::FileLoc;

/// Rewrites a data file path.
type PathEdit = fn(&str) -> String;

pub(super) fn path_cases(em: &mut Emitter) -> Result<()> {
    let seg_paths: [(&str, &str, &str); 4] = [
        ("n-path-0001-segment-path-traversal", "../x.tsi", "a segment path climbs out of the root with `..`"),
        ("n-path-0002-segment-absolute-path", "/etc/passwd", "a segment path is absolute"),
        ("n-path-0003-segment-url-scheme", "s3://b/k", "a segment path is a URL"),
        ("n-path-0004-segment-drive-letter", "C:/index/x.tsi", "a segment path starts with a drive letter"),
    ];
    for (id, path, description) in seg_paths {
        let description = format!("{description} ({path:?})");
        em.reject(Spec::new(id, &["LAY-09", "SEC-02", "MAN-07"], &description), "invalid", "[LAY-09]", |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_manifest(&m, |m| m.segments[0].path = path.to_string())
        })?;
    }
    let file_paths: [(&str, PathEdit, &str); 6] = [
        ("n-path-0005-datafile-path-dotdot", |p| format!("data/../{p}"), "a data file path contains `..`"),
        ("n-path-0006-datafile-backslash", |p| p.replace('/', "\\"), "a data file path uses a backslash"),
        ("n-path-0007-datafile-empty-segment", |p| p.replace('/', "//"), "a data file path has an empty segment"),
        ("n-path-0008-datafile-absolute-path", |p| format!("/{p}"), "a data file path is absolute"),
        ("n-path-0009-datafile-dot-segment", |p| format!("./{p}"), "a data file path has a `.` segment"),
        ("n-path-0010-datafile-non-ascii", |p| p.replace("data", "dätä"), "a data file path has non-ASCII letters"),
    ];
    em.reject(
        Spec::new(
            "n-path-0013-trailing-slash-counts-a-segment",
            &["LIM-12", "LAY-10", "SEG-05"],
            "a data file path is `a/b/c/d/e/f/g/h/`: 8 named segments and the empty one after the last `/` make 9, \
             over LIM-12 (limit, checked before the grammar that also forbids the empty segment)",
        ),
        "limit",
        "path segments",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_file_ref(&m, FileLoc::default(), |r| r.path = "a/b/c/d/e/f/g/h/".into())
        },
    )?;
    for (id, f, description) in file_paths {
        em.reject(Spec::new(id, &["LAY-09", "SEC-02", "SEG-05"], description), "invalid", "[LAY-09]", |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_file_ref(&m, FileLoc::default(), |r| r.path = f(&r.path))
        })?;
    }
    em.reject(
        Spec::new("n-path-0011-missing-data-file", &["VAL-15"], "the data file the fragment references does not exist"),
        "invalid",
        "does not exist",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.remove(&ds.file_ref(&m, FileLoc::default())?.path)
        },
    )?;
    Ok(())
}
