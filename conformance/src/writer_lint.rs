//! Writer obligations that show in the bytes of a dataset written from a logical description.
//!
//! Reading a written dataset back (with the reference reader and its full verification)
//! checks everything a reader and a verifier check. A writer owes more: canonical encodings,
//! zero flags and minor versions, the key layout, the lineage and segment list of each commit,
//! canonical block placement, and statistics that hold for the rows. [`lint`] checks those
//! that a dataset written from a `tessera-logical/1` description (create, appends, tags) makes
//! visible; each problem names the requirement it breaks, e.g. `[VER-06] main@3: …`.
//!
//! What no single dataset can show (immutability over time, create-if-absent races, fsync,
//! retries) is listed in `conformance/uncovered.toml` instead.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tessera::datafile::{Block, Footer};
use tessera::envelope::{self, ObjectKind};
use tessera::manifest::{ColumnStats, Manifest, READER_FLAG_FRAGMENT_TREE, Scalar, Segment, SegmentRef, Tag};
use tessera::tree::IndexNode;
use tessera::{At, ColumnData, DType, Dataset, Limits, Schema, Store};

use crate::logical::Logical;

/// Every problem found in the dataset at `root`, written from `logical`. Empty when the
/// writer met every obligation checked here.
#[must_use]
pub fn lint(root: &Path, logical: &Logical) -> Vec<String> {
    let mut l = Lint { root, problems: Vec::new(), seen: BTreeSet::new() };
    l.run(logical);
    l.problems
}

struct Lint<'a> {
    root: &'a Path,
    problems: Vec<String>,
    /// Objects (segments, data files, deletion vectors) already checked.
    seen: BTreeSet<String>,
}

fn align64(x: u64) -> u64 {
    x.div_ceil(64) * 64
}

impl Lint<'_> {
    fn fail(&mut self, req: &str, msg: impl Into<String>) {
        self.problems.push(format!("[{req}] {}", msg.into()));
    }

    fn read(&self, key: &str) -> Option<Vec<u8>> {
        std::fs::read(key.split('/').fold(self.root.to_path_buf(), |p, s| p.join(s))).ok()
    }

    /// ENV-08 and ENC-01 for an enveloped object: major 1, minor 0, reserved 0, and a body that
    /// is the canonical encoding of what it decodes to.
    fn envelope<T: serde::de::DeserializeOwned + serde::Serialize>(
        &mut self,
        kind: ObjectKind,
        key: &str,
        bytes: &[u8],
    ) -> Option<T> {
        if bytes.len() < 28 {
            self.fail("ENV-01", format!("{key}: {} bytes is shorter than an envelope", bytes.len()));
            return None;
        }
        let (major, minor) = (u16::from_le_bytes([bytes[8], bytes[9]]), u16::from_le_bytes([bytes[10], bytes[11]]));
        if (major, minor) != (1, 0) || bytes[12..16] != [0; 4] {
            self.fail("ENV-08", format!("{key}: major {major}, minor {minor}, reserved {:?}", &bytes[12..16]));
        }
        let value: T = match envelope::open(kind, bytes, u64::MAX, key) {
            Ok(v) => v,
            Err(e) => {
                self.fail("ENV-01", format!("{key}: does not open: {e}"));
                return None;
            }
        };
        match envelope::encode_body(&value) {
            Ok(body) if body == bytes[24..bytes.len() - 4] => {}
            _ => self.fail("ENC-01", format!("{key}: the body is not the canonical encoding of its value")),
        }
        Some(value)
    }

    fn run(&mut self, logical: &Logical) {
        let n = logical.versions();
        let dir = self.root.join("branches").join("main");
        let mut found: Vec<u64> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| {
                    e.ok().and_then(|e| tessera::paths::parse_manifest_name(&e.file_name().to_string_lossy()))
                })
                .collect()
            })
            .unwrap_or_default();
        found.sort_unstable();
        let want: Vec<u64> = (1..=n).collect();
        if found != want {
            self.fail("VER-01", format!("branches/main holds versions {found:?}, the description makes {want:?}"));
        }
        self.stray_files();
        let mut manifests: BTreeMap<u64, (Manifest, u32)> = BTreeMap::new();
        for v in 1..=n {
            let key = tessera::paths::manifest_key("main", v);
            let Some(bytes) = self.read(&key) else {
                self.fail("LAY-02", format!("{key} does not exist"));
                continue;
            };
            let Some(m) = self.envelope::<Manifest>(ObjectKind::Manifest, &key, &bytes) else { continue };
            if let Some(problem) = flags_problem(m.reader_flags, m.writer_flags, &m.schema) {
                self.fail("FLG-05", format!("{key}: {problem}"));
            }
            // Manifests sharing a writer_id are no fault: a caller may fix it [MAN-03].
            if m.schema != logical.schema {
                self.fail(
                    if v == 1 { "VER-12" } else { "VER-06" },
                    format!("{key}: the schema differs from the description's (ids 0, 1, 2, … in order)"),
                );
            }
            if v == 1 {
                self.version_one(&key, &m);
            } else if let Some((base, _)) = manifests.get(&(v - 1)) {
                let base = base.clone();
                self.commit(&key, &base, &m);
            }
            manifests.insert(v, (m, envelope::stored_crc(&bytes)));
        }
        for (v, (m, _)) in &manifests {
            self.objects(*v, m);
        }
        for t in &logical.tags {
            let key = tessera::paths::tag_key(&t.name);
            let Some(bytes) = self.read(&key) else {
                self.fail("REF-05", format!("{key} does not exist"));
                continue;
            };
            let Some(tag) = self.envelope::<Tag>(ObjectKind::Tag, &key, &bytes) else { continue };
            let target_ok = tag.target.branch == "main" && tag.target.version == t.version && tag.name == t.name;
            if !target_ok {
                self.fail(
                    "REF-05",
                    format!("{key}: names {}@{} as {:?}", tag.target.branch, tag.target.version, tag.name),
                );
            }
            if let Some((_, crc)) = manifests.get(&t.version)
                && *crc != tag.manifest_crc32
            {
                self.fail("REF-05", format!("{key}: manifest_crc32 is not the envelope CRC of main@{}", t.version));
            }
        }
    }

    /// VER-12: what creating a dataset writes.
    fn version_one(&mut self, key: &str, m: &Manifest) {
        let next_col = m.schema.columns.iter().map(|c| c.id + 1).max().unwrap_or(0);
        let want_flags = tessera::manifest::required_reader_flags(&m.schema);
        // A writer may index the dataset with a fragment tree from its creation [VER-12, FLG-09].
        if m.reader_flags & !READER_FLAG_FRAGMENT_TREE != want_flags {
            self.fail(
                "VER-12",
                format!(
                    "{key}: reader_flags {:#x}; a created dataset of this schema has {want_flags:#x}",
                    m.reader_flags
                ),
            );
        }
        let ok = m.parent.is_none()
            && m.base.is_none()
            && m.merged.is_none()
            && m.next_column_id == next_col
            && m.next_fragment_id == 0
            && m.row_count == 0
            && m.segments.is_empty()
            && m.stats.is_empty()
            && m.metadata.is_empty();
        if !ok {
            self.fail(
                "VER-12",
                format!(
                    "{key}: a created dataset has no parent, base or merged, next_column_id {next_col}, \
                     next_fragment_id 0, no rows, segments, statistics or metadata"
                ),
            );
        }
    }

    /// Every file of the dataset has a name of §4 (a data file, segment, deletion vector,
    /// version or tag key): a successful write leaves no temporary file behind `[VER-11]`, and
    /// creates nothing but regular files and directories `[LAY-11]`.
    fn stray_files(&mut self) {
        fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, bool)>) {
            let Ok(rd) = std::fs::read_dir(dir) else { return };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let key = if rel.is_empty() { name } else { format!("{rel}/{name}") };
                match e.file_type() {
                    Ok(t) if t.is_dir() => walk(&e.path(), &key, out),
                    Ok(t) => out.push((key, t.is_file())),
                    Err(_) => out.push((key, false)),
                }
            }
        }
        let mut files = Vec::new();
        walk(self.root, "", &mut files);
        files.sort();
        for (key, regular) in files {
            if !regular {
                self.fail("LAY-11", format!("{key} is not a regular file"));
                continue;
            }
            // Keys are case-sensitive [LAY-01]: `.TSD` is not a data file name.
            let parts: Vec<&str> = key.split('/').collect();
            let known = match parts.as_slice() {
                ["data", n] => n.strip_suffix(".tsd").is_some(),
                ["index", n] => n.strip_suffix(".tsi").is_some() || n.strip_suffix(".tsn").is_some(),
                ["deletions", n] => n.strip_suffix(".tsx").is_some(),
                ["branches", b, n] => {
                    tessera::paths::validate_ref_name(b).is_ok() && tessera::paths::parse_manifest_name(n).is_some()
                }
                ["tags", n] => n.strip_suffix(".tst").is_some_and(|t| tessera::paths::validate_ref_name(t).is_ok()),
                _ => false,
            };
            if !known {
                self.fail(
                    "VER-11",
                    format!("{key} is no object of the dataset layout: a temporary or stray file remains"),
                );
            }
        }
    }

    /// VER-06, SEG-09 and MAN-05 for an append committed on top of `base`.
    fn commit(&mut self, key: &str, base: &Manifest, m: &Manifest) {
        let parent_ok = m.parent.as_ref().is_some_and(|p| p.branch == "main" && p.version == base.version)
            && m.base.is_none()
            && m.merged.is_none();
        if !parent_ok {
            self.fail("VER-06", format!("{key}: parent must be main@{}, base and merged absent", base.version));
        }
        // A commit may turn a fragment log into a tree, never a tree into a log [VER-06, TREE-08].
        let tree_added = m.reader_flags & !base.reader_flags == READER_FLAG_FRAGMENT_TREE;
        let flags_ok = m.reader_flags == base.reader_flags || tree_added;
        if !flags_ok || m.writer_flags != base.writer_flags || m.metadata != base.metadata {
            self.fail("VER-06", format!("{key}: flags or metadata differ from the base version's"));
        }
        if m.next_column_id != base.next_column_id {
            self.fail("VER-06", format!("{key}: next_column_id changed in an append"));
        }
        if m.next_fragment_id < base.next_fragment_id {
            self.fail("MAN-05", format!("{key}: next_fragment_id went down"));
        }
        // SEG-09: the base's list, unchanged, then new segments; only a run at the end may be
        // replaced by a merged segment, so no base segment after the common prefix reappears.
        if !is_tree(m) {
            let k = m.segments.iter().zip(&base.segments).take_while(|(a, b)| a == b).count();
            let old_tail: Vec<&SegmentRef> = base.segments[k..].iter().collect();
            if m.segments[k..].iter().any(|s| old_tail.contains(&s)) {
                self.fail("SEG-09", format!("{key}: a base segment reappears after a replaced one"));
            }
        }
        if let (Some(old), Some(new)) = (self.fragment_map(base), self.fragment_map(m)) {
            for (id, f) in &old {
                if new.get(id) != Some(f) {
                    self.fail("VER-06", format!("{key}: an append changed or removed fragment {id}"));
                }
            }
            let added: Vec<u64> = new.keys().filter(|id| !old.contains_key(id)).copied().collect();
            if let Some(problem) = fragment_ids_problem(base.next_fragment_id, m.next_fragment_id, &added) {
                self.fail("VER-06", format!("{key}: {problem}"));
            }
        }
    }

    /// The fragments of a manifest by applying its segments (SEG-08); `None` if a segment
    /// cannot be read (reported elsewhere).
    fn fragment_map(&self, m: &Manifest) -> Option<BTreeMap<u64, tessera::manifest::Fragment>> {
        let mut map = BTreeMap::new();
        if is_tree(m) {
            let mut stack: Vec<String> = m.segments.iter().map(|s| s.path.clone()).collect();
            while let Some(path) = stack.pop() {
                let node: IndexNode = envelope::open(ObjectKind::Node, &self.read(&path)?, u64::MAX, &path).ok()?;
                map.extend(node.fragments.into_iter().map(|f| (f.id, f)));
                stack.extend(node.children.into_iter().map(|c| c.path));
            }
            return Some(map);
        }
        for s in &m.segments {
            let bytes = self.read(&s.path)?;
            let seg: Segment = envelope::open(ObjectKind::Segment, &bytes, u64::MAX, &s.path).ok()?;
            for id in &seg.removed {
                map.remove(id);
            }
            map.extend(seg.fragments.into_iter().map(|f| (f.id, f)));
        }
        Some(map)
    }

    /// Segments or index nodes, data files and statistics of one version.
    fn objects(&mut self, v: u64, m: &Manifest) {
        let tree = is_tree(m);
        let mut stack: Vec<String> = m.segments.iter().map(|s| s.path.clone()).collect();
        while let Some(path) = stack.pop() {
            if !self.seen.insert(path.clone()) {
                continue;
            }
            let fragments = if tree {
                if !placed(&path, "index/", ".tsn") {
                    self.fail("LAY-02", format!("index node {path} is not under index/ with suffix .tsn"));
                }
                let Some(bytes) = self.read(&path) else { continue };
                let Some(node) = self.envelope::<IndexNode>(ObjectKind::Node, &path, &bytes) else { continue };
                stack.extend(node.children.iter().map(|c| c.path.clone()));
                node.fragments
            } else {
                if !placed(&path, "index/", ".tsi") {
                    self.fail("LAY-02", format!("segment {path} is not under index/ with suffix .tsi"));
                }
                let Some(bytes) = self.read(&path) else { continue };
                let Some(seg) = self.envelope::<Segment>(ObjectKind::Segment, &path, &bytes) else { continue };
                seg.fragments
            };
            for f in &fragments {
                for r in &f.files {
                    if !placed(&r.path, "data/", ".tsd") {
                        self.fail("LAY-02", format!("data file {} is not under data/ with suffix .tsd", r.path));
                    }
                    if self.seen.insert(r.path.clone()) {
                        self.data_file(&r.path, &m.schema);
                    }
                }
                if let Some(d) = &f.deletion
                    && !placed(&d.path, "deletions/", ".tsx")
                {
                    self.fail("LAY-02", format!("deletion vector {} is not under deletions/ with suffix .tsx", d.path));
                }
            }
        }
        self.statistics(v, m);
    }

    /// Header versions, canonical block placement (DF-25), zero padding (DF-05) and the
    /// canonical footer encoding (ENC-01) of one data file.
    fn data_file(&mut self, key: &str, schema: &Schema) {
        let Some(b) = self.read(key) else { return };
        if b.len() < 88 {
            return; // the reader reports it
        }
        if b[8..12] != [1, 0, 0, 0] {
            self.fail(
                "FLG-02",
                format!("{key}: the header says major/minor {:?}, writers of 1.0 write 1.0", &b[8..12]),
            );
        }
        let t = b.len() - 24;
        let footer_len = u64::from_le_bytes(b[t..t + 8].try_into().unwrap_or([0; 8])) as usize;
        let Some(footer_offset) = t.checked_sub(footer_len) else { return };
        let Ok(footer) = envelope::decode_body::<Footer>(&b[footer_offset..t], key) else { return };
        match envelope::encode_body(&footer) {
            Ok(enc) if enc == b[footer_offset..t] => {}
            _ => self.fail("ENC-01", format!("{key}: the footer is not the canonical encoding of its value")),
        }
        for chunk in &footer.columns {
            let Some(col) = schema.column_by_id(chunk.column_id) else { continue };
            if let Some(p) = chunk.pages.iter().position(|p| !page_codec_allowed(col.compression, p.block.codec)) {
                self.fail(
                    "CMP-02",
                    format!(
                        "{key}: column {} page {p} has codec {:?}, which its compression {:?} does not allow",
                        chunk.column_id, chunk.pages[p].block.codec, col.compression
                    ),
                );
            }
        }
        let mut order: Vec<&tessera::datafile::ColumnChunk> = footer.columns.iter().collect();
        order.sort_by_key(|c| c.column_id);
        let blocks: Vec<&Block> = order.iter().flat_map(|c| c.blocks()).collect();
        let mut at = 64u64;
        let mut canonical = true;
        let mut covered = vec![false; footer_offset];
        for blk in &blocks {
            canonical &= blk.offset == align64(at);
            at = blk.offset.saturating_add(blk.stored_len);
            for i in blk.offset..at.min(footer_offset as u64) {
                covered[i as usize] = true;
            }
        }
        if !canonical || footer_offset as u64 != align64(at.max(64)) {
            self.fail("DF-25", format!("{key}: blocks or footer are not in canonical block order"));
        }
        if (32..footer_offset).any(|i| !covered[i] && b[i] != 0) {
            self.fail("DF-05", format!("{key}: a padding byte is not zero"));
        }
    }

    /// STAT-01 to STAT-06 on the fragments and the manifest of one version, against the rows.
    fn statistics(&mut self, v: u64, m: &Manifest) {
        let Ok(store) = Store::open(self.root.to_str().unwrap_or_default()) else { return };
        let Ok(ds) = Dataset::open_at(&store, &At::Version(v), Limits::default()) else { return };
        let schema = ds.schema().clone();
        let mut per_column: BTreeMap<u32, Vec<Option<ColumnStats>>> = BTreeMap::new();
        for info in ds.fragments() {
            let f = &info.fragment;
            let what = format!("main@{v} fragment {}", f.id);
            if f.stats.windows(2).any(|w| w[0].column_id >= w[1].column_id) {
                self.fail("STAT-05", format!("{what}: statistics column ids do not ascend"));
            }
            for c in &schema.columns {
                let entry = f.stats.iter().find(|s| s.column_id == c.id);
                per_column.entry(c.id).or_default().push(entry.cloned());
                let Some(s) = entry else { continue };
                let Ok(mut data) = ds.read_fragment_physical(info, &[c]) else { continue };
                let data = data.remove(0);
                self.check_entry(&format!("{what} column {}", c.id), c, s, &data);
            }
        }
        if m.stats.windows(2).any(|w| w[0].column_id >= w[1].column_id) {
            self.fail("STAT-05", format!("main@{v}: manifest statistics column ids do not ascend"));
        }
        for s in m.stats.iter().filter(|s| schema.column_by_id(s.column_id).is_some()) {
            let what = format!("main@{v} manifest statistics of column {}", s.column_id);
            let frags = per_column.get(&s.column_id).cloned().unwrap_or_default();
            if frags.iter().any(Option::is_none) {
                self.fail("STAT-06", format!("{what}: a fragment has no entry for the column"));
                continue;
            }
            let frags: Vec<ColumnStats> = frags.into_iter().flatten().collect();
            let nulls = frags.iter().try_fold(0u64, |a, f| a.checked_add(f.null_count));
            let min = fold(frags.iter().filter_map(|f| f.min), Ordering::Less);
            let max = fold(frags.iter().filter_map(|f| f.max), Ordering::Greater);
            if nulls != Some(s.null_count) || !same(min, s.min) || !same(max, s.max) {
                self.fail("STAT-06", format!("{what}: not the sum, least and greatest of the fragments' entries"));
            }
        }
    }

    /// STAT-01 to STAT-04 for one fragment entry against the fragment's physical rows.
    fn check_entry(&mut self, what: &str, c: &tessera::Column, s: &ColumnStats, data: &ColumnData) {
        let eligible = c.shape.is_empty() && (c.dtype == DType::Bool || c.dtype.is_integer() || c.dtype.is_float());
        let nulls = (0..data.len()).filter(|&i| !data.is_valid(i)).count() as u64;
        if nulls != s.null_count {
            self.fail("STAT-04", format!("{what}: null_count {} but {nulls} null rows", s.null_count));
        }
        if !eligible {
            if s.min.is_some() || s.max.is_some() {
                self.fail("STAT-01", format!("{what}: min/max on a column that is not rank-0 bool or numeric"));
            }
            return;
        }
        let values: Vec<Scalar> =
            (0..data.len()).filter(|&i| data.is_valid(i)).filter_map(|i| scalar(c.dtype, data.row(i))).collect();
        match (s.min, s.max) {
            (None, None) => {
                if !values.is_empty() {
                    self.fail("STAT-03", format!("{what}: min and max absent though the rows have values"));
                }
            }
            (Some(lo), Some(hi)) => {
                let variant_ok = variant(c.dtype, lo) && variant(c.dtype, hi);
                if !variant_ok {
                    self.fail("STAT-02", format!("{what}: min/max use the wrong Scalar variant"));
                    return;
                }
                if is_nan(lo) || is_nan(hi) || cmp(lo, hi) == Some(Ordering::Greater) {
                    self.fail("STAT-03", format!("{what}: min {lo:?} and max {hi:?} are NaN or out of order"));
                }
                if values.is_empty() {
                    self.fail("STAT-03", format!("{what}: min and max present though no row has a value"));
                }
                if values.iter().any(|&x| cmp(x, lo) == Some(Ordering::Less) || cmp(x, hi) == Some(Ordering::Greater)) {
                    self.fail("STAT-04", format!("{what}: a value lies outside [{lo:?}, {hi:?}]"));
                }
            }
            _ => self.fail("STAT-03", format!("{what}: only one of min and max is present")),
        }
    }
}

/// Whether a manifest indexes its version with a fragment tree `[FLG-09]`.
fn is_tree(m: &Manifest) -> bool {
    m.reader_flags & READER_FLAG_FRAGMENT_TREE != 0
}

/// FLG-05, FLG-08 and FLG-09: no writer flag, and no reader flag but `ENCODED_IMAGES`, which a
/// manifest of a schema with an `Encoded` column must set (a version without one may keep it),
/// and `FRAGMENT_TREE`.
fn flags_problem(reader_flags: u64, writer_flags: u64, schema: &Schema) -> Option<String> {
    let known = tessera::manifest::READER_FLAG_ENCODED_IMAGES | READER_FLAG_FRAGMENT_TREE;
    let required = tessera::manifest::required_reader_flags(schema);
    let bad = reader_flags & !known != 0 || writer_flags != 0 || required & !reader_flags != 0;
    bad.then(|| {
        format!(
            "reader_flags {:#x}, writer_flags {:#x}; writers set no flag but ENCODED_IMAGES and FRAGMENT_TREE \
             ({known:#x}), and ENCODED_IMAGES, which this schema {} [FLG-08]",
            reader_flags,
            writer_flags,
            if required == 0 { "does not need" } else { "needs" }
        )
    })
}

/// VER-06: the fragments a commit adds take the ids `base_next`, `base_next + 1`, … with no
/// gap, and `next_fragment_id` ends one past the last (`added` ascending).
fn fragment_ids_problem(base_next: u64, next: u64, added: &[u64]) -> Option<String> {
    let consecutive = added.iter().enumerate().all(|(i, &id)| Some(id) == base_next.checked_add(i as u64));
    let end = base_next.checked_add(added.len() as u64);
    (!consecutive || end != Some(next)).then(|| {
        format!(
            "new fragment ids {added:?} and next_fragment_id {next}; from next_fragment_id {base_next} a commit \
             takes consecutive ids and ends one past the last"
        )
    })
}

/// CMP-02: a page's codec is `None` or its column's codec; an `Encoded` column's pages may use
/// any plain codec or an image codec (CMP-06, CMP-10).
fn page_codec_allowed(compression: tessera::Compression, codec: tessera::Codec) -> bool {
    use tessera::{Codec, Compression};
    match compression {
        Compression::Encoded => true,
        Compression::None => codec == Codec::None,
        Compression::Lz4 => matches!(codec, Codec::None | Codec::Lz4),
        Compression::Zstd { .. } => matches!(codec, Codec::None | Codec::Zstd),
    }
}

fn is_nan(s: Scalar) -> bool {
    matches!(s, Scalar::Float(f) if f.is_nan())
}

fn variant(dtype: DType, s: Scalar) -> bool {
    match s {
        Scalar::Bool(_) => dtype == DType::Bool,
        Scalar::Int(_) => matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64),
        Scalar::UInt(_) => matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64),
        Scalar::Float(_) => dtype.is_float(),
    }
}

/// Orders two scalars of one variant (`false < true`, `-0.0 = +0.0`); `None` across variants.
fn cmp(a: Scalar, b: Scalar) -> Option<Ordering> {
    match (a, b) {
        (Scalar::Bool(x), Scalar::Bool(y)) => Some(x.cmp(&y)),
        (Scalar::Int(x), Scalar::Int(y)) => Some(x.cmp(&y)),
        (Scalar::UInt(x), Scalar::UInt(y)) => Some(x.cmp(&y)),
        (Scalar::Float(x), Scalar::Float(y)) => x.partial_cmp(&y),
        _ => None,
    }
}

fn same(a: Option<Scalar>, b: Option<Scalar>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => cmp(x, y) == Some(Ordering::Equal),
        _ => false,
    }
}

fn fold(it: impl Iterator<Item = Scalar>, keep: Ordering) -> Option<Scalar> {
    it.fold(None, |acc, x| match acc {
        Some(a) if cmp(x, a) != Some(keep) => Some(a),
        _ => Some(x),
    })
}

/// Whether an object key lies under `dir` with `suffix` (LAY-02). Keys are compared exactly,
/// case included: `.TSI` is not `.tsi`.
fn placed(key: &str, dir: &str, suffix: &str) -> bool {
    key.starts_with(dir) && key.ends_with(suffix)
}

/// The statistics value of one element (STAT-02), computed here from the bits; `None` for NaN.
fn scalar(dtype: DType, elem: &[u8]) -> Option<Scalar> {
    let mut word = [0u8; 8];
    word[..elem.len().min(8)].copy_from_slice(&elem[..elem.len().min(8)]);
    let bits = u64::from_le_bytes(word);
    let size = dtype.item_size() as u32;
    let value = match dtype {
        DType::Bool => Scalar::Bool(elem[0] != 0),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Scalar::UInt(bits),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => {
            let shift = 64 - 8 * size;
            Scalar::Int((bits << shift).cast_signed() >> shift)
        }
        DType::F16 => Scalar::Float(f16_to_f64(bits as u16)),
        DType::Bf16 => Scalar::Float(f64::from(f32::from_bits((bits as u32) << 16))),
        DType::F32 => Scalar::Float(f64::from(f32::from_bits(bits as u32))),
        DType::F64 => Scalar::Float(f64::from_bits(bits)),
        DType::Utf8 | DType::Bytes => return None,
    };
    (!is_nan(value)).then_some(value)
}

/// IEEE binary16 to binary64, exactly.
fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let mant = f64::from(h & 0x3ff);
    match exp {
        0 => sign * mant * 2f64.powi(-24),
        31 if mant == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + mant / 1024.0) * 2f64.powi(e - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragment_ids_are_consecutive_from_next_fragment_id() {
        assert_eq!(fragment_ids_problem(3, 3, &[]), None);
        assert_eq!(fragment_ids_problem(3, 6, &[3, 4, 5]), None);
        assert!(fragment_ids_problem(3, 7, &[4, 5, 6]).is_some(), "starts past next_fragment_id");
        assert!(fragment_ids_problem(3, 7, &[3, 4, 6]).is_some(), "a gap");
        assert!(fragment_ids_problem(3, 7, &[3, 4, 5]).is_some(), "next_fragment_id too far");
        assert!(fragment_ids_problem(3, 4, &[]).is_some(), "advanced without a fragment");
        assert!(fragment_ids_problem(u64::MAX, u64::MAX, &[u64::MAX]).is_some(), "no id past 2^64 - 1");
    }

    #[test]
    fn page_codecs_follow_the_column_compression() {
        use tessera::{Codec, Compression};
        assert!(page_codec_allowed(Compression::Zstd { level: 3 }, Codec::None));
        assert!(page_codec_allowed(Compression::Zstd { level: 3 }, Codec::Zstd));
        assert!(!page_codec_allowed(Compression::Zstd { level: 3 }, Codec::Lz4));
        assert!(!page_codec_allowed(Compression::None, Codec::Zstd));
        assert!(!page_codec_allowed(Compression::Lz4, Codec::Png));
        assert!(page_codec_allowed(Compression::Encoded, Codec::Lz4));
        assert!(page_codec_allowed(Compression::Encoded, Codec::Jpeg));
    }

    #[test]
    fn the_encoded_images_and_fragment_tree_flags_are_no_lint_problem() {
        use tessera::Dim::{Fixed, Ragged};
        use tessera::{Column, Compression, ImageLayout, Kind};
        let plain = Schema::new([Column::new("x", DType::U8, &[])]).unwrap();
        let image = Schema::new([Column::new("img", DType::U8, &[Ragged, Ragged, Fixed(3)])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc })
            .with_compression(Compression::Encoded)])
        .unwrap();
        assert_eq!(flags_problem(0, 0, &plain), None);
        assert_eq!(flags_problem(1, 0, &image), None);
        assert_eq!(flags_problem(1, 0, &plain), None, "a version that no longer has the column may keep it");
        assert!(flags_problem(0, 0, &image).is_some());
        assert_eq!(flags_problem(2, 0, &plain), None, "FRAGMENT_TREE is a flag writers may set [FLG-09]");
        assert!(flags_problem(4, 0, &plain).is_some());
        assert!(flags_problem(1, 1, &image).is_some());
    }

    #[test]
    fn scalars_from_bits() {
        assert_eq!(scalar(DType::F16, &0x3c00u16.to_le_bytes()), Some(Scalar::Float(1.0)));
        assert_eq!(scalar(DType::F16, &0x0001u16.to_le_bytes()), Some(Scalar::Float(2f64.powi(-24))));
        assert_eq!(scalar(DType::F16, &0x7e00u16.to_le_bytes()), None);
        assert_eq!(scalar(DType::Bf16, &0xbf80u16.to_le_bytes()), Some(Scalar::Float(-1.0)));
        assert_eq!(scalar(DType::I8, &[0xff]), Some(Scalar::Int(-1)));
        assert_eq!(scalar(DType::I16, &[0x00, 0x80]), Some(Scalar::Int(-32768)));
        assert_eq!(cmp(Scalar::Float(-0.0), Scalar::Float(0.0)), Some(Ordering::Equal));
        assert_eq!(
            fold([Scalar::Int(3), Scalar::Int(-2), Scalar::Int(5)].into_iter(), Ordering::Less),
            Some(Scalar::Int(-2))
        );
        assert_eq!(
            fold([Scalar::Int(3), Scalar::Int(-2), Scalar::Int(5)].into_iter(), Ordering::Greater),
            Some(Scalar::Int(5))
        );
    }
}
