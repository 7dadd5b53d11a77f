//! Views: the answer of a query, saved by name as an immutable object bound to one version
//! (SPEC.md §"Views", VIEW-01 to VIEW-10).
//!
//! A view is `views/<name>.tsview`, an enveloped [`View`]: the version it answers (the
//! manifest's key and the SHA-256 of the manifest's bytes, so a view copied from another
//! dataset is refused), the ordered row ids, the query text and a SHA-256 of the row ids.
//! Reading one runs VAL-18 in order; [`Dataset::open_view`] then opens the pinned version.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::dataset::{Dataset, decode_manifest};
use crate::envelope::{self, ObjectKind};
use crate::error::{Error, Result};
use crate::limits::{Limits, hard};
use crate::manifest::{Manifest, VersionRef};
use crate::paths;
use crate::store::{Created, Store};
use crate::writer::WriteOptions;

/// Prefix of view objects.
pub const VIEWS_DIR: &str = "views";
/// Suffix of a view object's key.
pub const VIEW_SUFFIX: &str = ".tsview";

/// A saved query answer `[VIEW-02]`. Field order is the encoding (§6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// The view's name (equals the key's).
    pub name: String,
    /// The answered version: the key of its manifest object, exactly (no base resolution).
    pub target: VersionRef,
    /// SHA-256 of the whole manifest object `target` names.
    pub manifest_sha256: [u8; 32],
    /// Creation time, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// The query text that produced the rows (free text, at most 64 KiB).
    pub query: String,
    /// SHA-256 of `rows`, each as 8 little-endian bytes, concatenated: the answer's content
    /// checksum, the same for every view holding the same rows.
    pub rows_sha256: [u8; 32],
    /// Global (live) row ids of the version, in answer order; no duplicates.
    pub rows: Vec<u64>,
}

impl View {
    /// The SHA-256 of row ids as [`View::rows_sha256`] defines it.
    #[must_use]
    pub fn digest_rows(rows: &[u64]) -> [u8; 32] {
        let mut h = Sha256::new();
        for chunk in rows.chunks(4096) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|r| r.to_le_bytes()).collect();
            h.update(&bytes);
        }
        h.finalize().into()
    }

    /// Opens the version this view pins in `store`, checking the binding (the manifest's
    /// SHA-256 and the rows against its row count) again `[VIEW-05]`: a view read from one
    /// store opens only the same version in another.
    ///
    /// # Errors
    /// `invalid` when the store holds another manifest at the target's key, or none; any
    /// error opening the version.
    pub fn open_dataset(&self, store: &Store, limits: Limits) -> Result<Dataset> {
        let (manifest, crc) = bind(store, self, &limits)?;
        Dataset::from_manifest(store.clone(), manifest, crc, limits)
    }
}

/// The key of a view object.
#[must_use]
pub fn view_key(name: &str) -> String {
    format!("{VIEWS_DIR}/{name}{VIEW_SUFFIX}")
}

/// Checks a view name supplied by a caller: the branch and tag grammar `[VIEW-01]`.
fn check_name(name: &str) -> Result<()> {
    paths::validate_ref_name(name).map_err(|_| {
        Error::usage(format!("{name:?} is not a valid view name (1..=64 of [A-Za-z0-9._-], not starting with '.')"))
    })
}

/// The hard and configured body limit of a view: the segment body limit `[VIEW-03]`.
fn max_body(limits: &Limits) -> u64 {
    limits.max_segment_body()
}

/// Reads view `name` and runs VAL-18 on it; returns it with its target manifest and that
/// manifest's envelope CRC.
fn read_view(store: &Store, name: &str, limits: &Limits) -> Result<(View, Manifest, u32)> {
    check_name(name)?;
    let key = view_key(name);
    let bytes = store.get_bounded(&key, envelope::max_object_len(max_body(limits)))?;
    let view: View = envelope::open(ObjectKind::View, &bytes, max_body(limits), &key)?;
    if view.name != name {
        return Err(Error::invalid(&key, format!("view record names {:?} [VIEW-04]", view.name)));
    }
    if paths::validate_ref_name(&view.target.branch).is_err() || view.target.version == 0 {
        return Err(Error::invalid(&key, "target is not a valid branch and version [VIEW-04]"));
    }
    Error::check_limit(|| format!("{key}: query bytes"), hard::MAX_METADATA_VALUE_BYTES, view.query.len() as u64)?;
    Error::check_limit(|| format!("{key}: rows"), hard::MAX_VIEW_ROWS, view.rows.len() as u64)?;
    if View::digest_rows(&view.rows) != view.rows_sha256 {
        return Err(Error::invalid(&key, "rows_sha256 differs from the SHA-256 of the rows [VIEW-04]"));
    }
    let (manifest, crc) = bind(store, &view, limits)?;
    Ok((view, manifest, crc))
}

/// VAL-18 steps 9 to 12 for a decoded view: its target manifest, checked, hashed and
/// compared, and its rows checked against that version; returns the manifest and its
/// envelope CRC.
fn bind(store: &Store, view: &View, limits: &Limits) -> Result<(Manifest, u32)> {
    let key = view_key(&view.name);
    let target = paths::manifest_key(&view.target.branch, view.target.version);
    // A view names a stored manifest exactly; a missing one means a damaged or foreign view.
    let manifest_bytes =
        store.get_bounded(&target, envelope::max_object_len(limits.max_manifest_body())).map_err(|e| match e {
            Error::NotFound { .. } => Error::invalid(&key, format!("target {target} does not exist [VIEW-05]")),
            other => other,
        })?;
    let manifest = decode_manifest(&manifest_bytes, &view.target.branch, view.target.version, limits)?;
    if <[u8; 32]>::from(Sha256::digest(&manifest_bytes)) != view.manifest_sha256 {
        return Err(Error::invalid(
            &key,
            format!("{target} is not the manifest the view was saved from (another dataset?) [VIEW-05]"),
        ));
    }
    check_rows(&view.rows, manifest.row_count).map_err(|reason| Error::invalid(&key, reason))?;
    Ok((manifest, envelope::stored_crc(&manifest_bytes)))
}

/// Every row id below `row_count`, none twice `[VIEW-06]`; the reason otherwise.
fn check_rows(rows: &[u64], row_count: u64) -> std::result::Result<(), String> {
    if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| **r >= row_count) {
        return Err(format!("row id {r} at position {i} is not below the version's {row_count} rows [VIEW-06]"));
    }
    let mut sorted = rows.to_vec();
    sorted.sort_unstable();
    if let Some(&[r, _]) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("row id {r} is listed twice [VIEW-06]"));
    }
    Ok(())
}

impl Dataset {
    /// Saves `rows` of this version, in this order, as view `name` `[VIEW-07]`, with the query
    /// that produced them; the clock is the creation time.
    ///
    /// # Errors
    /// As [`Dataset::save_view_with`].
    pub fn save_view(&self, name: &str, rows: &[u64], query: &str) -> Result<View> {
        self.save_view_with(name, rows, query, &WriteOptions::default())
    }

    /// As [`Dataset::save_view`], taking the creation time from `options` (for byte-stable
    /// output).
    ///
    /// # Errors
    /// `usage` for a bad name, a row id out of range or listed twice; `limit` for more than
    /// 2^24 rows or a query over 64 KiB; `conflict` if another view has the name; `unsupported`
    /// for a store without create-if-absent.
    pub fn save_view_with(&self, name: &str, rows: &[u64], query: &str, options: &WriteOptions) -> Result<View> {
        check_name(name)?;
        let key = view_key(name);
        Error::check_limit(|| format!("{key}: rows"), hard::MAX_VIEW_ROWS, rows.len() as u64)?;
        Error::check_limit(|| format!("{key}: query bytes"), hard::MAX_METADATA_VALUE_BYTES, query.len() as u64)?;
        check_rows(rows, self.row_count()).map_err(|reason| Error::usage(format!("view {name:?}: {reason}")))?;
        let target = paths::manifest_key(self.branch(), self.version());
        let manifest_bytes =
            self.store().get_bounded(&target, envelope::max_object_len(self.limits().max_manifest_body()))?;
        if envelope::stored_crc(&manifest_bytes) != self.manifest_crc32() {
            return Err(Error::invalid(&target, "the manifest differs from the one this dataset opened [LAY-06]"));
        }
        let view = View {
            name: name.to_string(),
            target: VersionRef { branch: self.branch().to_string(), version: self.version() },
            manifest_sha256: Sha256::digest(&manifest_bytes).into(),
            timestamp_ms: options.timestamp(),
            query: query.to_string(),
            rows_sha256: View::digest_rows(rows),
            rows: rows.to_vec(),
        };
        let max = max_body(&self.limits().tightest(&options.limits));
        let bytes = Bytes::from(envelope::seal_within(ObjectKind::View, &view, max, &key)?);
        match self.store().put_if_absent(&key, bytes.clone())? {
            Created::New => Ok(view),
            // Our own earlier attempt may have landed before a retry: identical bytes are ours.
            Created::Existed
                if self.store().get_bounded(&key, envelope::max_object_len(max_body(self.limits())))? == bytes =>
            {
                Ok(view)
            }
            Created::Existed => Err(Error::Conflict { what: format!("view {name:?} exists") }),
        }
    }

    /// Reads and validates view `name` of this dataset (VAL-18); the view may pin any
    /// version, not only this one.
    ///
    /// # Errors
    /// `usage` for a bad name, `not_found` for an absent view; `malformed`, `invalid`,
    /// `limit` or `unsupported` for a damaged view or one bound to another dataset.
    pub fn view(&self, name: &str) -> Result<View> {
        read_view(self.store(), name, self.limits()).map(|(v, _, _)| v)
    }

    /// The view names of the dataset, sorted; keys under `views/` that are not
    /// `<valid name>.tsview` are ignored `[VIEW-01]`.
    ///
    /// # Errors
    /// Storage errors.
    pub fn views(&self) -> Result<Vec<String>> {
        let mut v: Vec<String> = self
            .store()
            .list(VIEWS_DIR)?
            .into_iter()
            .filter_map(|(n, _)| n.strip_suffix(VIEW_SUFFIX).map(str::to_string))
            .filter(|n| check_name(n).is_ok())
            .collect();
        v.sort();
        Ok(v)
    }

    /// Deletes view `name` `[VIEW-09]`. No version changes; a loader state bound to the view
    /// cannot be resumed afterwards.
    ///
    /// # Errors
    /// `usage` for a bad name; `not_found` if there is no such view; `io` on failure.
    pub fn delete_view(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let file = format!("{name}{VIEW_SUFFIX}");
        if !self.store().list(VIEWS_DIR)?.iter().any(|(n, _)| *n == file) {
            return Err(Error::NotFound { what: format!("view {name:?}") });
        }
        self.store().delete(&view_key(name))
    }

    /// Opens the version view `name` pins, after validating the view (VAL-18), and returns
    /// it with the view. Later commits do not change what it opens `[VIEW-05]`.
    ///
    /// # Errors
    /// As [`Dataset::view`], and any error opening the version (VAL-07 onwards).
    pub fn open_view(store: &Store, name: &str, limits: Limits) -> Result<(Dataset, View)> {
        let (view, manifest, crc) = read_view(store, name, &limits)?;
        let ds = Dataset::from_manifest(store.clone(), manifest, crc, limits)?;
        Ok((ds, view))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_out_of_range_or_repeated_are_refused() {
        assert!(check_rows(&[2, 0, 1], 3).is_ok());
        assert!(check_rows(&[], 0).is_ok());
        assert!(check_rows(&[3], 3).unwrap_err().contains("not below"));
        assert!(check_rows(&[1, 0, 1], 3).unwrap_err().contains("twice"));
    }

    #[test]
    fn the_row_digest_is_sha256_of_little_endian_ids() {
        let expected: [u8; 32] = Sha256::digest([1u8, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]).into();
        assert_eq!(View::digest_rows(&[1, 2]), expected);
        // Chunking does not change the digest.
        let many: Vec<u64> = (0..10_000).collect();
        let flat: Vec<u8> = many.iter().flat_map(|r| r.to_le_bytes()).collect();
        assert_eq!(View::digest_rows(&many), <[u8; 32]>::from(Sha256::digest(&flat)));
    }
}
