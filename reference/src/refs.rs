//! Refs: creating branches and tags, listing them, a version's history, and opening a tag
//! (SPEC.md §"Branches and tags", REF-04 and REF-05; §"Tags", REF-02).

use bytes::Bytes;

use crate::blocking::block_on;
use crate::commit::{Published, check_writer_flags, publish};
use crate::dataset::{Dataset, load_manifest};
use crate::envelope::{self, ObjectKind};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::manifest::{Manifest, VersionRef};
use crate::paths;
use crate::store::{Created, Store};
use crate::writer::WriteOptions;

impl Dataset {
    /// Creates a branch at this version `[REF-04]`: its first manifest is this version's, with
    /// the new branch name and `base` pointing here. Commits on the branch continue from here.
    ///
    /// # Errors
    /// `usage` for a bad name; `conflict` if the branch exists.
    pub fn create_branch(&self, name: &str, options: &WriteOptions) -> Result<Dataset> {
        block_on(self.create_branch_async(name, options))
    }

    /// Creates a branch at this version (async).
    ///
    /// # Errors
    /// As [`Dataset::create_branch`].
    pub async fn create_branch_async(&self, name: &str, options: &WriteOptions) -> Result<Dataset> {
        paths::validate_ref_name(name)?;
        check_writer_flags(self.manifest())?;
        let existing = self.store().list_async(&format!("{}/{name}", paths::BRANCHES_DIR)).await?;
        if existing.iter().any(|(n, _)| paths::parse_manifest_name(n).is_some()) {
            return Err(Error::Conflict { what: format!("branch {name:?} exists") });
        }
        let mut m = self.manifest().clone();
        m.base = Some(m.version_ref());
        m.branch = name.to_string();
        m.writer_id = options.writer_id();
        m.timestamp_ms = options.timestamp();
        m.message = format!("branch {name} from {}@{}", self.branch(), self.version());
        match publish(self.store(), &m, self.limits()).await? {
            Published::Ours(crc) => Dataset::from_manifest(self.store().clone(), m, crc, self.limits().clone()).await,
            Published::Theirs => Err(Error::Conflict { what: format!("branch {name:?} exists") }),
        }
    }

    /// Tags this version `[REF-05]`. Tags are immutable: an existing name is a conflict.
    ///
    /// # Errors
    /// `usage` for a bad name; `conflict` if the tag exists.
    pub fn create_tag(&self, name: &str, message: &str, options: &WriteOptions) -> Result<()> {
        block_on(self.create_tag_async(name, message, options))
    }

    /// Tags this version (async).
    ///
    /// # Errors
    /// As [`Dataset::create_tag`].
    pub async fn create_tag_async(&self, name: &str, message: &str, options: &WriteOptions) -> Result<()> {
        paths::validate_ref_name(name)?;
        let tag = crate::manifest::Tag {
            name: name.to_string(),
            target: VersionRef { branch: self.branch().to_string(), version: self.version() },
            manifest_crc32: self.manifest_crc32(),
            timestamp_ms: options.timestamp(),
            message: message.to_string(),
        };
        let key = paths::tag_key(name);
        let max_body = self.limits().tightest(&options.limits).max_tag_body();
        let bytes = Bytes::from(envelope::seal_within(ObjectKind::Tag, &tag, max_body, &key)?);
        match self.store().put_if_absent_async(&key, bytes.clone()).await? {
            Created::New => Ok(()),
            // Our own earlier attempt may have landed before a retry: identical bytes are ours.
            Created::Existed
                if self
                    .store()
                    .get_bounded_async(&key, envelope::max_object_len(crate::limits::hard::MAX_TAG_BODY))
                    .await?
                    == bytes =>
            {
                Ok(())
            }
            Created::Existed => Err(Error::Conflict { what: format!("tag {name:?} exists") }),
        }
    }

    /// The tag names of the dataset, sorted.
    ///
    /// # Errors
    /// Storage errors.
    pub fn tags(&self) -> Result<Vec<String>> {
        let mut v: Vec<String> = self
            .store()
            .list(paths::TAGS_DIR)?
            .into_iter()
            .filter_map(|(n, _)| n.strip_suffix(".tst").map(str::to_string))
            .collect();
        v.sort();
        Ok(v)
    }

    /// The branch names of the dataset, sorted.
    ///
    /// # Errors
    /// Storage errors.
    pub fn branches(&self) -> Result<Vec<String>> {
        let mut v = self.store().list_dirs(paths::BRANCHES_DIR)?;
        v.sort();
        Ok(v)
    }

    /// The manifests of this version's history, newest first, following `parent` links
    /// (across branch bases).
    ///
    /// # Errors
    /// Any error reading a manifest.
    pub fn log(&self) -> Result<Vec<Manifest>> {
        block_on(self.log_async())
    }

    /// The manifests of this version's history, newest first (async).
    ///
    /// # Errors
    /// As [`Dataset::log`].
    pub async fn log_async(&self) -> Result<Vec<Manifest>> {
        let mut out = vec![self.manifest().clone()];
        let mut seen = std::collections::HashSet::from([self.manifest().version_ref()]);
        while let Some(p) = out.last().and_then(|m| m.parent.clone()) {
            // A hostile or damaged store can make parent links loop; never follow one twice.
            if !seen.insert(p.clone()) {
                return Err(Error::invalid(
                    paths::manifest_key(&p.branch, p.version),
                    "parent links form a cycle [MAN-02]",
                ));
            }
            let (m, _) = load_manifest(self.store(), &p.branch, p.version, self.limits()).await?;
            out.push(m);
        }
        Ok(out)
    }

    /// Opens the version a tag names, checking the manifest CRC the tag recorded `[REF-02]`.
    ///
    /// # Errors
    /// `not_found` for an unknown tag, `invalid` if the manifest differs from the tagged one.
    pub fn open_tag(store: &Store, name: &str, limits: Limits) -> Result<Dataset> {
        Dataset::open_at(store, &crate::At::Tag(name.to_string()), limits)
    }
}

/// Reads the tag record `name` and the manifest it names, checked as REF-02 requires; returns
/// the manifest and the CRC of its object.
pub(crate) async fn load_tagged_manifest(store: &Store, name: &str, limits: &Limits) -> Result<(Manifest, u32)> {
    let tag = crate::dataset::read_tag(store, name, limits).await?;
    let key = paths::tag_key(name);
    if tag.target.version == 0 {
        return Err(Error::invalid(&key, "tag targets version 0 [REF-02]"));
    }
    // A tag names a stored manifest exactly (no base resolution); a missing one means the
    // dataset is damaged, not that the caller asked for something absent.
    let (m, crc) = crate::dataset::load_manifest_exact(store, &tag.target.branch, tag.target.version, limits)
        .await
        .map_err(|e| match e {
            Error::NotFound { .. } => Error::invalid(&key, "tagged version does not exist [REF-02]"),
            other => other,
        })?;
    if crc != tag.manifest_crc32 {
        return Err(Error::invalid(&key, "tagged manifest's CRC differs from the tag record [REF-02]"));
    }
    Ok((m, crc))
}
