//! Surgery on a stored dataset: change one thing and re-seal everything around it.
//!
//! Most checks of a reader sit behind a checksum, and most objects are bound to their
//! referrer by size and CRC (data file → fragment's `DataFileRef` → index segment →
//! manifest's `SegmentRef` → manifest). To make a case whose *only* fault is, say, a block
//! offset out of bounds, the footer is decoded, changed, re-encoded, the trailer rewritten, the
//! data file stored under its new content name, and the segment and manifest that reference it
//! re-sealed. [`Ds`] does those chains; the case builders say what to change.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tessera::datafile::{Block, ColumnChunk, END_MAGIC, Footer, TRAILER_LEN};
use tessera::envelope::{self, HEADER_LEN, ObjectKind};
use tessera::manifest::{DataFileRef, DeletionRef, DeletionVector, Manifest, Segment};
use tessera::paths;

use super::{GenError, Result, bail};
use crate::crc32::crc32;

/// Which data file of a manifest: segment index, fragment index, file index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FileLoc {
    /// Index in the manifest's `segments`.
    pub(crate) seg: usize,
    /// Index in the segment's `fragments`.
    pub(crate) frag: usize,
    /// Index in the fragment's `files`.
    pub(crate) file: usize,
}

/// How the reference to a rewritten data file is updated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RefUpdate {
    /// Not at all: the bytes are written in place under the old name.
    Keep,
    /// Stored under its content name; the reference's path and size follow, `footer_crc32`
    /// stays as it was.
    Locate,
    /// As `Locate`, and `footer_crc32` becomes the one the new trailer records.
    Full,
}

/// A dataset root on the local file system, edited object by object.
#[derive(Clone, Debug)]
pub(crate) struct Ds {
    root: PathBuf,
}

impl Ds {
    /// The dataset at `root`.
    pub(crate) fn new(root: &Path) -> Self {
        Self { root: root.to_path_buf() }
    }

    fn path(&self, key: &str) -> PathBuf {
        key.split('/').fold(self.root.clone(), |p, s| p.join(s))
    }

    /// The bytes of an object.
    pub(crate) fn read(&self, key: &str) -> Result<Vec<u8>> {
        std::fs::read(self.path(key)).map_err(|e| GenError(format!("read {key}: {e}")))
    }

    /// Writes (or overwrites) an object.
    pub(crate) fn write(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let p = self.path(key);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&p, bytes).map_err(|e| GenError(format!("write {key}: {e}")))
    }

    /// Deletes an object.
    pub(crate) fn remove(&self, key: &str) -> Result<()> {
        std::fs::remove_file(self.path(key)).map_err(|e| GenError(format!("remove {key}: {e}")))
    }

    /// Object names directly under a directory key, sorted.
    fn list(&self, dir: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path(dir))
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned())).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// The key of the newest manifest of a branch.
    pub(crate) fn latest(&self, branch: &str) -> Result<String> {
        let dir = format!("{}/{branch}", paths::BRANCHES_DIR);
        match self.list(&dir).iter().filter_map(|n| paths::parse_manifest_name(n)).max() {
            Some(v) => Ok(paths::manifest_key(branch, v)),
            None => bail!("branch {branch} has no manifest"),
        }
    }

    /// The key of the newest manifest of `main`.
    pub(crate) fn main(&self) -> Result<String> {
        self.latest(paths::MAIN)
    }

    /// Every manifest key of every branch.
    fn manifest_keys(&self) -> Vec<String> {
        let mut out = Vec::new();
        for b in self.list(paths::BRANCHES_DIR) {
            for n in self.list(&format!("{}/{b}", paths::BRANCHES_DIR)) {
                if paths::parse_manifest_name(&n).is_some() {
                    out.push(format!("{}/{b}/{n}", paths::BRANCHES_DIR));
                }
            }
        }
        out
    }

    /// Decodes a manifest (envelope checks only).
    pub(crate) fn manifest(&self, key: &str) -> Result<Manifest> {
        Ok(envelope::open(ObjectKind::Manifest, &self.read(key)?, u64::MAX, key)?)
    }

    /// Seals and writes a manifest at `key`.
    pub(crate) fn put_manifest(&self, key: &str, m: &Manifest) -> Result<()> {
        self.write(key, &envelope::seal(ObjectKind::Manifest, m)?)
    }

    /// Changes a manifest and re-seals it at the same key.
    pub(crate) fn edit_manifest(&self, key: &str, f: impl FnOnce(&mut Manifest)) -> Result<()> {
        let mut m = self.manifest(key)?;
        f(&mut m);
        self.put_manifest(key, &m)
    }

    /// Changes the bytes of an object, checksums untouched.
    pub(crate) fn edit_raw(&self, key: &str, f: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        let mut b = self.read(key)?;
        f(&mut b);
        self.write(key, &b)
    }

    /// Changes an enveloped object's body bytes, then fixes `body_len` and the CRC (the header's
    /// magic, versions and reserved field are kept). Returns the new object.
    pub(crate) fn edit_body(&self, key: &str, f: impl FnOnce(&mut Vec<u8>)) -> Result<Vec<u8>> {
        let old = self.read(key)?;
        let mut body = old[HEADER_LEN..old.len() - 4].to_vec();
        f(&mut body);
        let mut out = old[..16].to_vec();
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        self.write(key, &out)?;
        Ok(out)
    }

    /// Changes the envelope header (first 24 bytes) of an object and fixes its CRC.
    pub(crate) fn edit_envelope_header(&self, key: &str, f: impl FnOnce(&mut [u8])) -> Result<Vec<u8>> {
        let mut b = self.read(key)?;
        f(&mut b[..HEADER_LEN]);
        fix_envelope_crc(&mut b);
        self.write(key, &b)?;
        Ok(b)
    }

    /// The decoded segment at a key.
    pub(crate) fn segment(&self, key: &str) -> Result<Segment> {
        Ok(envelope::open(ObjectKind::Segment, &self.read(key)?, u64::MAX, key)?)
    }

    /// The key of segment `idx` of a manifest.
    pub(crate) fn segment_key(&self, mkey: &str, idx: usize) -> Result<String> {
        match self.manifest(mkey)?.segments.get(idx) {
            Some(s) => Ok(s.path.clone()),
            None => bail!("{mkey} has no segment {idx}"),
        }
    }

    /// Changes segment `idx` of a manifest, stores it under its new content name and points
    /// the manifest at it (path, size, CRC; counts unchanged).
    pub(crate) fn edit_segment(&self, mkey: &str, idx: usize, f: impl FnOnce(&mut Segment)) -> Result<()> {
        let key = self.segment_key(mkey, idx)?;
        let mut seg = self.segment(&key)?;
        f(&mut seg);
        self.replace_segment(mkey, idx, &envelope::seal(ObjectKind::Segment, &seg)?)
    }

    /// Stores `bytes` as the new segment `idx` of a manifest under its content name and updates
    /// the manifest's reference (path, size, CRC).
    pub(crate) fn replace_segment(&self, mkey: &str, idx: usize, bytes: &[u8]) -> Result<()> {
        let old = self.segment_key(mkey, idx)?;
        let key = paths::content_key(paths::INDEX_DIR, "tsi", bytes);
        self.write(&key, bytes)?;
        self.edit_manifest(mkey, |m| {
            let r = &mut m.segments[idx];
            r.path.clone_from(&key);
            r.size = bytes.len() as u64;
            r.crc32 = envelope::stored_crc(bytes);
        })?;
        self.remove_if_orphan(&old)
    }

    /// The reference to a data file.
    pub(crate) fn file_ref(&self, mkey: &str, loc: FileLoc) -> Result<DataFileRef> {
        let seg = self.segment(&self.segment_key(mkey, loc.seg)?)?;
        match seg.fragments.get(loc.frag).and_then(|f| f.files.get(loc.file)) {
            Some(r) => Ok(r.clone()),
            None => bail!("{mkey}: no data file at {loc:?}"),
        }
    }

    /// Changes the reference to a data file (re-sealing its segment and the manifest).
    pub(crate) fn edit_file_ref(&self, mkey: &str, loc: FileLoc, f: impl FnOnce(&mut DataFileRef)) -> Result<()> {
        self.edit_segment(mkey, loc.seg, |s| f(&mut s.fragments[loc.frag].files[loc.file]))
    }

    /// A data file's bytes before the footer, its decoded footer and the footer's bytes.
    pub(crate) fn split_data_file(bytes: &[u8]) -> Result<(Vec<u8>, Footer, Vec<u8>)> {
        let t = TRAILER_LEN as usize;
        if bytes.len() < t {
            bail!("data file too short");
        }
        let trailer = &bytes[bytes.len() - t..];
        let mut len8 = [0u8; 8];
        len8.copy_from_slice(&trailer[..8]);
        let footer_len = u64::from_le_bytes(len8) as usize;
        let Some(footer_offset) = (bytes.len() - t).checked_sub(footer_len) else { bail!("bad footer length") };
        let footer_bytes = bytes[footer_offset..bytes.len() - t].to_vec();
        let footer: Footer = envelope::decode_body(&footer_bytes, "footer")?;
        Ok((bytes[..footer_offset].to_vec(), footer, footer_bytes))
    }

    /// Changes the blocks region and footer of a data file; the footer is re-encoded, the
    /// trailer rewritten and the reference chain fixed.
    pub(crate) fn edit_data_file(
        &self,
        mkey: &str,
        loc: FileLoc,
        f: impl FnOnce(&mut Vec<u8>, &mut Footer) -> Result<()>,
    ) -> Result<()> {
        self.edit_footer_bytes(mkey, loc, |prefix, footer_bytes| {
            let mut footer: Footer = envelope::decode_body(footer_bytes, "footer")?;
            f(prefix, &mut footer)?;
            *footer_bytes = envelope::encode_body(&footer)?;
            Ok(())
        })
    }

    /// As [`Ds::edit_data_file`] on the raw footer bytes (to write what the footer type cannot
    /// express: unknown enum variants, trailing bytes).
    pub(crate) fn edit_footer_bytes(
        &self,
        mkey: &str,
        loc: FileLoc,
        f: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        let r = self.file_ref(mkey, loc)?;
        let bytes = self.read(&r.path)?;
        let (mut prefix, _, mut footer_bytes) = Self::split_data_file(&bytes)?;
        f(&mut prefix, &mut footer_bytes)?;
        let mut out = prefix;
        out.extend_from_slice(&footer_bytes);
        out.extend_from_slice(&trailer(footer_bytes.len() as u64, crc32(&footer_bytes)));
        self.store_data_file(mkey, loc, &out, RefUpdate::Full)
    }

    /// Changes a data file's bytes as they are (checksums untouched) and updates its reference
    /// as `update` says.
    pub(crate) fn edit_data_file_raw(
        &self,
        mkey: &str,
        loc: FileLoc,
        update: RefUpdate,
        f: impl FnOnce(&mut Vec<u8>),
    ) -> Result<()> {
        let r = self.file_ref(mkey, loc)?;
        let mut bytes = self.read(&r.path)?;
        f(&mut bytes);
        self.store_data_file(mkey, loc, &bytes, update)
    }

    /// Stores new bytes for a data file and updates the reference chain.
    fn store_data_file(&self, mkey: &str, loc: FileLoc, bytes: &[u8], update: RefUpdate) -> Result<()> {
        let r = self.file_ref(mkey, loc)?;
        if update == RefUpdate::Keep {
            return self.write(&r.path, bytes);
        }
        let key = paths::content_key(paths::DATA_DIR, "tsd", bytes);
        self.write(&key, bytes)?;
        let footer_crc = (bytes.len() >= TRAILER_LEN as usize).then(|| {
            let t = &bytes[bytes.len() - TRAILER_LEN as usize..];
            u32::from_le_bytes([t[8], t[9], t[10], t[11]])
        });
        self.edit_file_ref(mkey, loc, |fr| {
            fr.path.clone_from(&key);
            fr.size = bytes.len() as u64;
            if update == RefUpdate::Full
                && let Some(c) = footer_crc
            {
                fr.footer_crc32 = c;
            }
        })?;
        self.remove_if_orphan(&r.path)
    }

    /// Every object key a manifest reaches (segments and data files), or `None` if some
    /// manifest or segment does not decode.
    fn reachable(&self) -> Option<BTreeSet<String>> {
        let mut out = BTreeSet::new();
        for mkey in self.manifest_keys() {
            let m = self.manifest(&mkey).ok()?;
            for s in &m.segments {
                out.insert(s.path.clone());
                let seg = self.segment(&s.path).ok()?;
                for f in &seg.fragments {
                    out.extend(f.files.iter().map(|r| r.path.clone()));
                    out.extend(f.deletion.iter().map(|d| d.path.clone()));
                }
            }
        }
        Some(out)
    }

    /// Deletes an object no manifest reaches any more (kept when in doubt).
    fn remove_if_orphan(&self, key: &str) -> Result<()> {
        match self.reachable() {
            Some(keys) if !keys.contains(key) && self.path(key).exists() => self.remove(key),
            _ => Ok(()),
        }
    }

    /// Where the latest listing of fragment `id` sits in a manifest's log: (segment index,
    /// fragment index), searching from the newest segment.
    pub(crate) fn find_fragment(&self, mkey: &str, id: u64) -> Result<(usize, usize)> {
        let m = self.manifest(mkey)?;
        for (si, sref) in m.segments.iter().enumerate().rev() {
            let seg = self.segment(&sref.path)?;
            if seg.removed.contains(&id) {
                break;
            }
            if let Some(fi) = seg.fragments.iter().position(|f| f.id == id) {
                return Ok((si, fi));
            }
        }
        bail!("{mkey} does not list fragment {id}")
    }

    /// The deletion reference of fragment `id` in a manifest's log.
    pub(crate) fn deletion_ref(&self, mkey: &str, id: u64) -> Result<DeletionRef> {
        let (si, fi) = self.find_fragment(mkey, id)?;
        let seg = self.segment(&self.segment_key(mkey, si)?)?;
        match &seg.fragments[fi].deletion {
            Some(d) => Ok(d.clone()),
            None => bail!("fragment {id} has no deletion vector"),
        }
    }

    /// Changes the deletion reference of fragment `id` (re-sealing its segment and the manifest).
    pub(crate) fn edit_deletion_ref(&self, mkey: &str, id: u64, f: impl FnOnce(&mut DeletionRef)) -> Result<()> {
        let (si, fi) = self.find_fragment(mkey, id)?;
        self.edit_segment(mkey, si, |s| {
            if let Some(d) = s.fragments[fi].deletion.as_mut() {
                f(d);
            }
        })
    }

    /// Replaces the bytes of fragment `id`'s deletion vector: stored under their content name
    /// (`deletions/<hash>.tsx`), the reference's path, size and CRC follow when `locate` is set;
    /// otherwise the bytes are written in place and the reference is left alone.
    pub(crate) fn replace_deletion(&self, mkey: &str, id: u64, bytes: &[u8], locate: bool) -> Result<()> {
        let old = self.deletion_ref(mkey, id)?;
        if !locate {
            return self.write(&old.path, bytes);
        }
        let key = paths::content_key(paths::DELETIONS_DIR, "tsx", bytes);
        self.write(&key, bytes)?;
        self.edit_deletion_ref(mkey, id, |d| {
            d.path.clone_from(&key);
            d.size = bytes.len() as u64;
            d.crc32 = envelope::stored_crc(bytes);
        })?;
        self.remove_if_orphan(&old.path)
    }

    /// Changes fragment `id`'s deletion vector, re-seals it, stores it under its content name
    /// and points the reference at it (`deleted_count` unchanged).
    pub(crate) fn edit_deletion(&self, mkey: &str, id: u64, f: impl FnOnce(&mut DeletionVector)) -> Result<()> {
        let old = self.deletion_ref(mkey, id)?;
        let mut dv: DeletionVector = envelope::open(ObjectKind::Deletion, &self.read(&old.path)?, u64::MAX, &old.path)?;
        f(&mut dv);
        self.replace_deletion(mkey, id, &envelope::seal(ObjectKind::Deletion, &dv)?, true)
    }

    /// The footers of every data file under `data/`.
    pub(crate) fn footers(&self) -> Result<Vec<Footer>> {
        let mut out = Vec::new();
        for n in self.list(paths::DATA_DIR) {
            let bytes = self.read(&format!("{}/{n}", paths::DATA_DIR))?;
            out.push(Self::split_data_file(&bytes)?.1);
        }
        Ok(out)
    }
}

/// Recomputes the CRC in the last four bytes of an enveloped object.
pub(crate) fn fix_envelope_crc(b: &mut [u8]) {
    let n = b.len() - 4;
    let crc = crc32(&b[..n]);
    b[n..].copy_from_slice(&crc.to_le_bytes());
}

/// Recomputes a data file's header CRC (bytes 28..32, over 0..28).
pub(crate) fn fix_header_crc(b: &mut [u8]) {
    let crc = crc32(&b[..28]);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
}

/// A data file trailer for a footer.
pub(crate) fn trailer(footer_len: u64, footer_crc: u32) -> Vec<u8> {
    let mut t = Vec::with_capacity(TRAILER_LEN as usize);
    t.extend_from_slice(&footer_len.to_le_bytes());
    t.extend_from_slice(&footer_crc.to_le_bytes());
    let c = crc32(&t);
    t.extend_from_slice(&c.to_le_bytes());
    t.extend_from_slice(&END_MAGIC);
    t
}

/// The chunk of a column in a footer.
pub(crate) fn chunk(footer: &mut Footer, column_id: u32) -> Result<&mut ColumnChunk> {
    match footer.columns.iter_mut().find(|c| c.column_id == column_id) {
        Some(c) => Ok(c),
        None => bail!("footer has no column {column_id}"),
    }
}

/// The stored bytes of a block.
pub(crate) fn block_bytes<'a>(prefix: &'a mut [u8], b: &Block) -> &'a mut [u8] {
    &mut prefix[b.offset as usize..(b.offset + b.stored_len) as usize]
}

/// Recomputes a block's CRC from its stored bytes.
pub(crate) fn reseal_block(prefix: &[u8], b: &mut Block) {
    b.crc32 = crc32(&prefix[b.offset as usize..(b.offset + b.stored_len) as usize]);
}

/// Finds where two encodings of the same value differ in exactly one field, returning the
/// offset of the first differing byte (the low byte of a little-endian field).
pub(crate) fn field_offset(a: &[u8], b: &[u8]) -> Result<usize> {
    if a.len() != b.len() {
        bail!("encodings differ in length");
    }
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => Ok(i),
        None => bail!("encodings are equal"),
    }
}
