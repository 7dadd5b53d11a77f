//! Property: structured field mutations of valid datasets are rejected with the class SPEC.md
//! declares for the field, or leave the dump identical, and never make the reader return
//! other data, panic or abort.
//!
//! Each mutation changes one field of one object of a valid fixture and re-seals everything
//! around it (the object's CRC, its new content name, the reference to it, the segment and the
//! manifest), so the reader meets the changed value itself and not a checksum. Values are the
//! edges: 0, the type's maximum, value + 1, value − 1, one flipped bit, another block's offset
//! (overlapping ranges), and flag bits. The reference reads with small `Limits` (LIM-14), so a
//! declared size that slipped through a check would fail an allocation bound instead of
//! aborting the process.
//!
//! 256 cases by default with a fixed seed; `PROPTEST_CASES` runs more.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;
use tessera::datafile::{Block, Footer, TRAILER_LEN};
use tessera::envelope::{self, ObjectKind};
use tessera::manifest::{DeletionVector, Manifest, Segment};
use tessera::{Codec, DType, Limits};
use tessera_conformance::case::{Args, load_cases};
use tessera_conformance::compare;
use tessera_conformance::crc32::crc32;
use tessera_conformance::fixtures_dir;
use tessera_conformance::reference_impl::{self, Outcome};

/// Valid fixtures to mutate: deletion vectors, nullable and ragged columns, every codec,
/// column groups, several segments, superseded and dropped chunks, a merge.
const TARGETS: [&str; 9] = [
    "v-deletion-0001-rows-deleted",
    "v-shape-0006-nullable-columns",
    "v-shape-0002-ragged-one-dim",
    "v-codec-0006-mixed-codecs",
    "v-layout-0004-column-groups",
    "v-layout-0005-many-commits",
    "v-evolve-0004-drop-column",
    "v-evolve-0009-update-column",
    "v-merge-0001-three-way-merge",
];

struct Target {
    id: String,
    input: PathBuf,
    args: Option<Args>,
    mkey: String,
    expected: Value,
}

fn targets() -> &'static [Target] {
    static T: OnceLock<Vec<Target>> = OnceLock::new();
    T.get_or_init(|| {
        let cases = load_cases(&fixtures_dir().join("cases")).unwrap_or_else(|e| panic!("{e}"));
        TARGETS
            .iter()
            .map(|id| {
                let c = cases.iter().find(|c| c.meta.id == *id).unwrap_or_else(|| panic!("no case {id}"));
                let expected = c.expected().unwrap();
                let v = expected["version"].as_u64().unwrap();
                assert_eq!(expected["branch"], "main", "{id}: targets read main");
                Target {
                    id: c.meta.id.clone(),
                    input: c.input(),
                    args: c.meta.args.clone(),
                    mkey: tessera::paths::manifest_key("main", v),
                    expected,
                }
            })
            .collect()
    })
}

/// The limits the mutated datasets are read with: far below the hard maxima, far above what
/// the fixtures need.
fn small_limits() -> Limits {
    Limits::default()
        .with_max_block_raw(1 << 20)
        .with_max_manifest_body(1 << 20)
        .with_max_segment_body(1 << 20)
        .with_max_footer(1 << 20)
}

/// A dataset copy being edited, its chosen manifest, and re-sealing helpers.
struct Work {
    root: PathBuf,
    mkey: String,
}

impl Work {
    fn path(&self, key: &str) -> PathBuf {
        key.split('/').fold(self.root.clone(), |p, s| p.join(s))
    }
    fn read(&self, key: &str) -> Vec<u8> {
        std::fs::read(self.path(key)).unwrap_or_else(|e| panic!("{key}: {e}"))
    }
    fn write(&self, key: &str, b: &[u8]) {
        let p = self.path(key);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b).unwrap();
    }
    fn manifest(&self) -> Manifest {
        envelope::open(ObjectKind::Manifest, &self.read(&self.mkey), u64::MAX, "m").unwrap()
    }
    fn put_manifest(&self, m: &Manifest) {
        self.write(&self.mkey, &envelope::seal(ObjectKind::Manifest, m).unwrap());
    }
    fn segment(&self, i: usize) -> Segment {
        let m = self.manifest();
        envelope::open(ObjectKind::Segment, &self.read(&m.segments[i].path), u64::MAX, "s").unwrap()
    }
    /// Stores segment bytes under their content name and points segment ref `i` at them.
    fn put_segment_bytes(&self, i: usize, bytes: &[u8]) {
        let key = tessera::paths::content_key("index", "tsi", bytes);
        self.write(&key, bytes);
        let mut m = self.manifest();
        m.segments[i].path = key;
        m.segments[i].size = bytes.len() as u64;
        m.segments[i].crc32 = envelope::stored_crc(bytes);
        self.put_manifest(&m);
    }
    fn put_segment(&self, i: usize, s: &Segment) {
        self.put_segment_bytes(i, &envelope::seal(ObjectKind::Segment, s).unwrap());
    }
    /// (segment, fragment) positions of every listed fragment.
    fn fragments(&self) -> Vec<(usize, usize)> {
        let m = self.manifest();
        (0..m.segments.len()).flat_map(|si| (0..self.segment(si).fragments.len()).map(move |fi| (si, fi))).collect()
    }
    /// (segment, fragment, file) positions of every data file reference.
    fn files(&self) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        for (si, fi) in self.fragments() {
            for ri in 0..self.segment(si).fragments[fi].files.len() {
                out.push((si, fi, ri));
            }
        }
        out
    }
    /// Stores data file bytes under their content name and points the reference at them,
    /// with the footer CRC the new trailer records.
    fn put_file(&self, (si, fi, ri): (usize, usize, usize), bytes: &[u8]) {
        let key = tessera::paths::content_key("data", "tsd", bytes);
        self.write(&key, bytes);
        let t = bytes.len() - TRAILER_LEN as usize;
        let mut s = self.segment(si);
        let r = &mut s.fragments[fi].files[ri];
        r.path = key;
        r.size = bytes.len() as u64;
        r.footer_crc32 = u32::from_le_bytes(bytes[t + 8..t + 12].try_into().unwrap());
        self.put_segment(si, &s);
    }
    fn put_deletion(&self, (si, fi): (usize, usize), bytes: &[u8]) {
        let key = tessera::paths::content_key("deletions", "tsx", bytes);
        self.write(&key, bytes);
        let mut s = self.segment(si);
        let d = s.fragments[fi].deletion.as_mut().unwrap();
        d.path = key;
        d.size = bytes.len() as u64;
        d.crc32 = envelope::stored_crc(bytes);
        self.put_segment(si, &s);
    }
}

/// Splits a data file into (bytes before the footer, decoded footer).
fn split(bytes: &[u8]) -> (Vec<u8>, Footer) {
    let t = bytes.len() - TRAILER_LEN as usize;
    let len = u64::from_le_bytes(bytes[t..t + 8].try_into().unwrap()) as usize;
    let footer = envelope::decode_body(&bytes[t - len..t], "footer").unwrap();
    (bytes[..t - len].to_vec(), footer)
}

/// Joins a prefix and a footer with a fresh trailer.
fn join(mut prefix: Vec<u8>, footer: &Footer) -> Vec<u8> {
    let body = envelope::encode_body(footer).unwrap();
    let crc = crc32(&body);
    prefix.extend_from_slice(&body);
    let mut t = Vec::new();
    t.extend_from_slice(&(body.len() as u64).to_le_bytes());
    t.extend_from_slice(&crc.to_le_bytes());
    let tc = crc32(&t);
    t.extend_from_slice(&tc.to_le_bytes());
    t.extend_from_slice(&tessera::datafile::END_MAGIC);
    prefix.extend_from_slice(&t);
    prefix
}

fn fix_envelope_crc(b: &mut [u8]) {
    let n = b.len() - 4;
    let c = crc32(&b[..n]);
    b[n..].copy_from_slice(&c.to_le_bytes());
}

/// The random choices of one mutation.
#[derive(Clone, Debug)]
struct Pick {
    kind: u8,
    a: u64,
    b: u64,
    sel: u8,
    rand: u64,
}

/// A position in `0..len` (0 for an empty collection, whose users check it).
fn at(x: u64, len: usize) -> usize {
    if len == 0 { 0 } else { (x % len as u64) as usize }
}

impl Pick {
    /// An edge value for a field holding `old`.
    fn u64(&self, old: u64) -> u64 {
        match self.sel % 6 {
            0 => 0,
            1 => u64::MAX,
            2 => old.wrapping_add(1),
            3 => old.wrapping_sub(1),
            4 => old ^ (1 << (self.rand % 64)),
            _ => self.rand,
        }
    }
    fn u32(&self, old: u32) -> u32 {
        match self.sel % 6 {
            0 => 0,
            1 => u32::MAX,
            2 => old.wrapping_add(1),
            3 => old.wrapping_sub(1),
            4 => old ^ (1 << (self.rand % 32)),
            _ => self.rand as u32,
        }
    }
}

/// What a mutation may lead to: rejection with one of `classes`, or (when `identical`) the
/// unchanged dump.
struct Allowed {
    what: String,
    classes: &'static [&'static str],
    identical: bool,
}

const INVALID: &[&str] = &["invalid"];
const INVALID_LIMIT: &[&str] = &["invalid", "limit"];
const BLOCK: &[&str] = &["invalid", "malformed", "limit"];

fn allowed(what: String, classes: &'static [&'static str]) -> Allowed {
    Allowed { what, classes, identical: true }
}

/// Every block of a footer as (chunk index, block index within the chunk's blocks).
fn block_sites(f: &Footer) -> Vec<(usize, usize)> {
    f.columns.iter().enumerate().flat_map(|(ci, c)| (0..c.blocks().count()).map(move |bi| (ci, bi))).collect()
}

fn block_mut(f: &mut Footer, (ci, bi): (usize, usize)) -> &mut Block {
    let c = &mut f.columns[ci];
    let mut i = bi;
    if let Some(v) = c.validity.as_mut() {
        if i == 0 {
            return v;
        }
        i -= 1;
    }
    if let Some(s) = c.shapes.as_mut() {
        if i == 0 {
            return s;
        }
        i -= 1;
    }
    &mut c.pages[i].block
}

/// Applies mutation `pick` to the dataset in `work`; `None` when it does not apply to this dataset.
fn mutate(work: &Work, pick: &Pick) -> Option<Allowed> {
    let files = work.files();
    let frags = work.fragments();
    let file_site = *files.get(at(pick.a, files.len()))?;
    let frag_site = *frags.get(at(pick.a, frags.len()))?;
    match pick.kind {
        // Data file footer fields.
        0..=13 => mutate_footer(work, pick, file_site),
        // Data file references and fragments (the segment is re-sealed).
        14..=19 => mutate_segment(work, pick, file_site),
        // Deletion references and vectors.
        20..=23 => mutate_deletion(work, pick, frag_site),
        // Manifest fields.
        24..=33 => mutate_manifest(work, pick),
        // Header bytes: minor versions (any minor is read, FLG-02) and reserved fields.
        34 | 35 => Some(mutate_data_file_header(work, pick, file_site)),
        36 | 37 => mutate_segment_header(work, pick),
        _ => None,
    }
}

/// Kinds 0 to 13: one field of a data file footer (the data file is re-sealed).
fn mutate_footer(work: &Work, pick: &Pick, file_site: (usize, usize, usize)) -> Option<Allowed> {
    let (fsi, ffi, fri) = file_site;
    let file_ref = work.segment(fsi).fragments[ffi].files[fri].clone();
    let (mut prefix, mut footer) = split(&work.read(&file_ref.path));
    let sites = block_sites(&footer);
    let site = *sites.get(at(pick.b, sites.len()))?;
    let ci = site.0;
    let what = format!("{} footer of {}: ", pick.kind, file_ref.path);
    let out = match pick.kind {
        0 => {
            footer.row_count = pick.u64(footer.row_count);
            allowed(format!("{what}row_count"), INVALID_LIMIT)
        }
        1 => {
            footer.columns[ci].column_id = pick.u32(footer.columns[ci].column_id);
            allowed(format!("{what}column_id"), INVALID)
        }
        2 => {
            let d = footer.columns[ci].dtype;
            footer.columns[ci].dtype = DType::ALL[(d.code() as usize + 1 + pick.sel as usize % 14) % 15];
            allowed(format!("{what}dtype"), INVALID)
        }
        3 => {
            footer.columns[ci].ragged_dims = pick.u32(footer.columns[ci].ragged_dims);
            allowed(format!("{what}ragged_dims"), INVALID)
        }
        4 => {
            let c = &mut footer.columns[ci];
            c.validity = if c.validity.is_some() { None } else { Some(c.pages.first()?.block) };
            allowed(format!("{what}validity presence"), INVALID)
        }
        5 => {
            let c = &mut footer.columns[ci];
            c.shapes = if c.shapes.is_some() { None } else { Some(c.pages.first()?.block) };
            allowed(format!("{what}shapes presence"), INVALID)
        }
        6 => {
            let c = &mut footer.columns[ci];
            let n = c.pages.len();
            let page = c.pages.get_mut(at(pick.b, n))?;
            page.row_count = pick.u64(page.row_count);
            allowed(format!("{what}page row_count"), INVALID_LIMIT)
        }
        7..=11 => mutate_block(&mut footer, pick, &sites, site, &what),
        12 => {
            let c = &mut footer.columns[ci];
            let page = c.pages.get(at(pick.b, c.pages.len()))?.clone();
            c.pages.push(page);
            allowed(format!("{what}a page listed twice"), INVALID_LIMIT)
        }
        _ => {
            let c = &mut footer.columns[ci];
            if c.pages.is_empty() {
                return None;
            }
            c.pages.remove(at(pick.b, c.pages.len()));
            allowed(format!("{what}a page removed"), INVALID)
        }
    };
    let bytes = join(std::mem::take(&mut prefix), &footer);
    work.put_file(file_site, &bytes);
    Some(out)
}

/// Kinds 7 to 11: one field of the footer's block at `site`.
fn mutate_block(
    footer: &mut Footer,
    pick: &Pick,
    sites: &[(usize, usize)],
    site: (usize, usize),
    what: &str,
) -> Allowed {
    match pick.kind {
        7 => {
            // sel 0 points the block at another block's bytes: overlapping ranges.
            let other = sites[at(pick.rand, sites.len())];
            let other_offset = block_mut(footer, other).offset;
            let b = block_mut(footer, site);
            b.offset = match pick.sel % 4 {
                0 => other_offset,
                1 => b.offset.wrapping_add(64),
                2 => b.offset.wrapping_sub(64),
                _ => pick.u64(b.offset),
            };
            allowed(format!("{what}block offset"), &["invalid", "malformed"])
        }
        8 => {
            let b = block_mut(footer, site);
            b.stored_len = pick.u64(b.stored_len);
            allowed(format!("{what}block stored_len"), BLOCK)
        }
        9 => {
            let b = block_mut(footer, site);
            b.raw_len = pick.u64(b.raw_len);
            allowed(format!("{what}block raw_len"), BLOCK)
        }
        10 => {
            let b = block_mut(footer, site);
            b.codec = [Codec::None, Codec::Lz4, Codec::Zstd][(b.codec as usize + 1 + pick.sel as usize % 2) % 3];
            allowed(format!("{what}block codec"), BLOCK)
        }
        _ => {
            let b = block_mut(footer, site);
            b.crc32 ^= 1 << (pick.rand % 32);
            allowed(format!("{what}block crc32"), &["malformed"])
        }
    }
}

/// Kinds 14 to 19: a data file reference or a fragment of a segment (the segment is re-sealed).
fn mutate_segment(work: &Work, pick: &Pick, (fsi, ffi, fri): (usize, usize, usize)) -> Option<Allowed> {
    let mut seg = work.segment(fsi);
    let what = format!("{} segment {fsi}: ", pick.kind);
    let out = match pick.kind {
        14 => {
            let r = &mut seg.fragments[ffi].files[fri];
            r.size = pick.u64(r.size);
            allowed(format!("{what}data file size"), INVALID)
        }
        15 => {
            seg.fragments[ffi].files[fri].footer_crc32 ^= 1 << (pick.rand % 32);
            allowed(format!("{what}data file footer_crc32"), INVALID)
        }
        16 => {
            let ids = &mut seg.fragments[ffi].files[fri].column_ids;
            if pick.sel.is_multiple_of(2) && !ids.is_empty() {
                ids.remove(at(pick.b, ids.len()));
            } else {
                ids.push(pick.u32(ids.last().copied().unwrap_or(0)));
            }
            allowed(format!("{what}column_ids"), INVALID)
        }
        17 => {
            let f = &mut seg.fragments[ffi];
            f.row_count = pick.u64(f.row_count);
            allowed(format!("{what}fragment row_count"), INVALID_LIMIT)
        }
        18 => {
            // A new id that no segment of the manifest uses: another id could make the
            // fragment replace a listed one of equal size, a different valid dataset.
            let manifest = work.manifest();
            let new = pick.u64(seg.fragments[ffi].id);
            let used = (0..manifest.segments.len()).any(|i| {
                let g = work.segment(i);
                g.fragments.iter().any(|f| f.id == new) || g.removed.contains(&new)
            });
            if used {
                return None;
            }
            seg.fragments[ffi].id = new;
            allowed(format!("{what}fragment id"), INVALID)
        }
        _ => {
            let id = pick.u64(seg.fragments[ffi].id);
            seg.removed.push(id);
            seg.removed.sort_unstable();
            allowed(format!("{what}removed id {id}"), INVALID)
        }
    };
    work.put_segment(fsi, &seg);
    Some(out)
}

/// Kinds 20 to 23: a deletion reference or a deletion vector body (everything above it is
/// re-sealed).
fn mutate_deletion(work: &Work, pick: &Pick, (si, fi): (usize, usize)) -> Option<Allowed> {
    let mut seg = work.segment(si);
    let d = seg.fragments[fi].deletion.clone()?;
    let what = format!("{} deletion of fragment {}: ", pick.kind, seg.fragments[fi].id);
    match pick.kind {
        20 => {
            seg.fragments[fi].deletion.as_mut()?.deleted_count = pick.u64(d.deleted_count);
            work.put_segment(si, &seg);
            Some(allowed(format!("{what}deleted_count"), INVALID))
        }
        21 => {
            let r = seg.fragments[fi].deletion.as_mut()?;
            if pick.sel.is_multiple_of(2) {
                r.size = pick.u64(r.size);
            } else {
                r.crc32 ^= 1 << (pick.rand % 32);
            }
            work.put_segment(si, &seg);
            Some(allowed(format!("{what}size or crc32"), INVALID))
        }
        _ => {
            let mut dv: DeletionVector =
                envelope::open(ObjectKind::Deletion, &work.read(&d.path), u64::MAX, "dv").ok()?;
            let rows = seg.fragments[fi].row_count;
            if pick.kind == 22 {
                dv.fragment_id = pick.u64(dv.fragment_id);
                if dv.fragment_id == seg.fragments[fi].id {
                    return None;
                }
            } else {
                // Only changes that break DEL-04: moving a deleted row elsewhere while
                // keeping order and count would make another valid dataset.
                match pick.sel % 4 {
                    0 => dv.rows.push(rows),
                    1 if dv.rows.len() > 1 => dv.rows.reverse(),
                    2 => dv.rows.clear(),
                    _ => {
                        let x = *dv.rows.first()?;
                        dv.rows.insert(0, x);
                    }
                }
            }
            work.put_deletion((si, fi), &envelope::seal(ObjectKind::Deletion, &dv).unwrap());
            Some(allowed(format!("{what}deletion vector body"), INVALID))
        }
    }
}

/// Kinds 24 to 33: one field of the manifest (re-sealed).
fn mutate_manifest(work: &Work, pick: &Pick) -> Option<Allowed> {
    let mut manifest = work.manifest();
    let what = format!("{} manifest: ", pick.kind);
    let si = at(pick.b, manifest.segments.len());
    let out = match pick.kind {
        24 => {
            manifest.row_count = pick.u64(manifest.row_count);
            allowed(format!("{what}row_count"), INVALID)
        }
        25 => {
            manifest.next_fragment_id = pick.u64(manifest.next_fragment_id);
            allowed(format!("{what}next_fragment_id"), INVALID)
        }
        26 => {
            manifest.next_column_id = pick.u32(manifest.next_column_id);
            allowed(format!("{what}next_column_id"), INVALID)
        }
        27 => {
            manifest.reader_flags |= 1 << (pick.rand % 64);
            Allowed { what: format!("{what}reader flag bit"), classes: &["unsupported"], identical: false }
        }
        28 => {
            manifest.writer_flags |= 1 << (pick.rand % 64);
            Allowed { what: format!("{what}writer flag bit"), classes: &[], identical: true }
        }
        29 => {
            let r = manifest.segments.get_mut(si)?;
            if pick.sel.is_multiple_of(2) {
                r.size = pick.u64(r.size);
            } else {
                r.crc32 ^= 1 << (pick.rand % 32);
            }
            allowed(format!("{what}segment ref size or crc32"), INVALID)
        }
        30 => {
            let r = manifest.segments.get_mut(si)?;
            if pick.sel.is_multiple_of(2) {
                r.fragment_count = pick.u64(r.fragment_count);
            } else {
                r.row_count = pick.u64(r.row_count);
            }
            allowed(format!("{what}segment ref counts"), INVALID)
        }
        31 => {
            let i = at(pick.a, manifest.schema.columns.len());
            let c = manifest.schema.columns.get_mut(i)?;
            c.nullable = !c.nullable;
            Allowed { what: format!("{what}nullable of {}", c.name), classes: INVALID, identical: false }
        }
        32 => {
            let i = at(pick.a, manifest.schema.columns.len());
            let c = manifest.schema.columns.get_mut(i)?;
            c.dtype = DType::ALL[(c.dtype.code() as usize + 1 + pick.sel as usize % 14) % 15];
            Allowed { what: format!("{what}dtype of {}", c.name), classes: INVALID_LIMIT, identical: false }
        }
        _ => {
            manifest.version = pick.u64(manifest.version);
            allowed(format!("{what}version"), INVALID)
        }
    };
    work.put_manifest(&manifest);
    Some(out)
}

/// Kinds 34 and 35: the minor version or a reserved byte of a data file header (header CRC
/// re-sealed).
fn mutate_data_file_header(work: &Work, pick: &Pick, file_site: (usize, usize, usize)) -> Allowed {
    let (fsi, ffi, fri) = file_site;
    let file_ref = work.segment(fsi).fragments[ffi].files[fri].clone();
    let mut b = work.read(&file_ref.path);
    if pick.kind == 34 {
        b[10] = b[10].wrapping_add(1 + pick.sel % 200);
    } else {
        b[12 + (pick.rand % 16) as usize] ^= 1 << (pick.sel % 8);
    }
    let c = crc32(&b[..28]);
    b[28..32].copy_from_slice(&c.to_le_bytes());
    work.put_file(file_site, &b);
    if pick.kind == 34 {
        Allowed { what: "data file minor version".into(), classes: &[], identical: true }
    } else {
        Allowed { what: "data file reserved bytes".into(), classes: &["malformed"], identical: false }
    }
}

/// Kinds 36 and 37: the minor version or the reserved field of a segment envelope (envelope
/// CRC re-sealed).
fn mutate_segment_header(work: &Work, pick: &Pick) -> Option<Allowed> {
    let manifest = work.manifest();
    let si = at(pick.b, manifest.segments.len());
    let key = manifest.segments.get(si)?.path.clone();
    let mut b = work.read(&key);
    if pick.kind == 36 {
        b[11] = b[11].wrapping_add(1 + pick.sel % 200);
    } else {
        b[12 + (pick.rand % 4) as usize] ^= 1 << (pick.sel % 8);
    }
    fix_envelope_crc(&mut b);
    work.put_segment_bytes(si, &b);
    if pick.kind == 36 {
        Some(Allowed { what: "segment minor version".into(), classes: &[], identical: true })
    } else {
        Some(Allowed { what: "segment reserved field".into(), classes: &["malformed"], identical: false })
    }
}

fn run(t: &Target, p: &Pick) -> Option<(String, Allowed, Outcome)> {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("input");
    common::copy_tree(&t.input, &root);
    let w = Work { root: root.clone(), mkey: t.mkey.clone() };
    let a = mutate(&w, p)?;
    let outcome = reference_impl::read_with_limits(&root, t.args.as_ref(), &small_limits());
    Some((a.what.clone(), a, outcome))
}

fn check(t: &Target, what: &str, a: &Allowed, outcome: &Outcome) -> Result<(), String> {
    match outcome {
        Outcome::Crashed(msg) => Err(format!("{}: {what}: the reference panicked: {msg}", t.id)),
        Outcome::Rejected { class, message } => {
            if a.classes.contains(&class.as_str()) {
                Ok(())
            } else {
                Err(format!("{}: {what}: rejected as [{class}], SPEC says {:?}: {message}", t.id, a.classes))
            }
        }
        Outcome::Accepted(dump) => {
            let d = compare::diff(&t.expected, dump);
            if !d.is_empty() {
                Err(format!("{}: {what}: read WRONG DATA:\n{}", t.id, compare::render(&d, 10)))
            } else if !a.identical {
                Err(format!("{}: {what}: accepted, but SPEC requires a rejection {:?}", t.id, a.classes))
            } else {
                Ok(())
            }
        }
    }
}

proptest! {
    #![proptest_config(common::config(256, 0x3D7A_7E00))]

    #[test]
    fn mutated_fields_are_rejected_with_their_class_or_harmless(
        target in any::<Index>(),
        kind in 0u8..38,
        a in any::<u64>(),
        b in any::<u64>(),
        sel in any::<u8>(),
        rand in any::<u64>(),
    ) {
        let t = target.get(targets());
        let p = Pick { kind, a, b, sel, rand };
        if let Some((what, allowed, outcome)) = run(t, &p)
            && let Err(e) = check(t, &what, &allowed, &outcome)
        {
            prop_assert!(false, "{e}\n({p:?})");
        }
    }
}

/// Every mutation kind applies to at least one target (the property does not silently test
/// nothing for a kind), and a few fixed mutations give exactly the class SPEC.md names.
#[test]
fn every_kind_applies_and_fixed_examples_hold() {
    let ts = targets();
    for kind in 0u8..38 {
        let applied = ts.iter().any(|t| {
            let p = Pick { kind, a: 0, b: 0, sel: 2, rand: 5 };
            run(t, &p).is_some()
        });
        assert!(applied, "mutation kind {kind} applies to no target");
    }
    let dv = ts.iter().find(|t| t.id.starts_with("v-deletion")).unwrap();
    for (kind, sel, class) in [(20u8, 0u8, "invalid"), (24, 1, "invalid"), (27, 0, "unsupported"), (11, 0, "malformed")]
    {
        let p = Pick { kind, a: 0, b: 0, sel, rand: 3 };
        let (what, _, outcome) = run(dv, &p).unwrap();
        match outcome {
            Outcome::Rejected { class: c, .. } => assert_eq!(c, class, "{what}"),
            other => panic!("{what}: {}", other.summary()),
        }
    }
}
