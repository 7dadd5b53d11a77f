//! `tessera ingest` of audio and video files: decoded samples and frames equal an independent
//! decode by the `ffmpeg` and `sox` command-line tools (which also make the test media), frame
//! sampling and resizing, class folders of clips, and corrupt, truncated and hostile media.
//!
//! The tools come from `scripts/setup.d/20-media.sh`. Without them these tests fail in CI
//! (`CI` set) and are skipped with a message elsewhere.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use tessera::{DType, Dataset, Dim, Kind};

/// Whether `ffmpeg` and `sox` run; panics in CI when they do not.
fn have_tools() -> bool {
    let runs = |tool: &str, arg: &str| Command::new(tool).arg(arg).output().is_ok_and(|o| o.status.success());
    if runs("ffmpeg", "-version") && runs("sox", "--version") {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(!ci, "ffmpeg and sox are required in CI (scripts/setup.d/20-media.sh installs them)");
    eprintln!("skipping: ffmpeg or sox is missing (run scripts/setup.d/20-media.sh)");
    false
}

/// Runs a tool, asserts success, returns stdout.
fn tool(cmd: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd} runs: {e}"));
    assert!(out.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// `ffmpeg -y -loglevel error ARGS...`.
fn ffmpeg(args: &[&str]) -> Vec<u8> {
    let mut a = vec!["-hide_banner", "-loglevel", "error", "-y"];
    a.extend_from_slice(args);
    tool("ffmpeg", &a)
}

/// One second of stereo audio at 16 kHz (440 Hz left, 660 Hz right) in `dir`, encoded as
/// WAV and MP3 by ffmpeg and FLAC by sox, Ogg/Vorbis and AAC (M4A) by ffmpeg.
fn audio_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let wav = dir.join("a.wav");
    #[rustfmt::skip]
    ffmpeg(&[
        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000:duration=1",
        "-f", "lavfi", "-i", "sine=frequency=660:sample_rate=16000:duration=1",
        "-filter_complex", "amerge", "-c:a", "pcm_s16le", s(&wav),
    ]);
    let flac = dir.join("b.flac");
    tool("sox", &[s(&wav), s(&flac)]);
    let mut files = vec![wav.clone(), flac];
    for (name, codec) in [("c.mp3", "libmp3lame"), ("d.ogg", "libvorbis"), ("e.m4a", "aac")] {
        let path = dir.join(name);
        ffmpeg(&["-i", s(&wav), "-c:a", codec, s(&path)]);
        files.push(path);
    }
    files
}

/// Little-endian i16 / f32 values.
fn i16s(b: &[u8]) -> Vec<i16> {
    b.chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]])).collect()
}
fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// The rows of one column, with their shapes, in row order.
fn rows(ds: &Path, column: &str) -> Vec<(Vec<u64>, Vec<u8>)> {
    let d = Dataset::open(s(ds)).unwrap();
    let batch = d.read_rows(0..d.row_count(), Some(&[column])).unwrap();
    let c = batch.get(column).unwrap();
    (0..d.row_count() as usize).map(|i| (c.row_shape(i), c.row(i).to_vec())).collect()
}

#[test]
fn audio_decodes_to_the_samples_of_sox_and_ffmpeg() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = audio_files(&dir.path().join("clips"));

    // Lossless sources as i16: exactly sox's decode (FLAC) and ffmpeg's (WAV).
    let ds = dir.path().join("pcm");
    let out = json(&["ingest", s(&ds), s(&files[0]), s(&files[1]), "--audio-dtype", "i16"]);
    assert_eq!((out["rows"].as_u64(), out["format"].as_str()), (Some(2), Some("audio")));
    let d = Dataset::open(s(&ds)).unwrap();
    let col = d.schema().column("audio").unwrap();
    assert_eq!((col.dtype, col.shape.clone()), (DType::I16, vec![Dim::Ragged, Dim::Fixed(2)]));
    assert_eq!(col.kind, Kind::Audio { sample_rate: 16_000 });
    let got = rows(&ds, "audio");
    let wav = i16s(&ffmpeg(&["-i", s(&files[0]), "-f", "s16le", "-"]));
    let flac = i16s(&tool("sox", &[s(&files[1]), "-t", "raw", "-e", "signed", "-b", "16", "-"]));
    assert_eq!(wav.len(), 32_000);
    for ((shape, bytes), want) in got.iter().zip([&wav, &flac]) {
        assert_eq!(shape, &vec![16_000, 2]);
        assert_eq!(&i16s(bytes), want);
    }

    // Every format as f32 against ffmpeg's float decode: exact for WAV and FLAC; the lossy
    // codecs (MP3, Vorbis, AAC) are decoded by two different implementations (symphonia,
    // FFmpeg) whose floating-point inverse transforms round differently, so they must agree
    // in length and to within 1e-3 of full scale per sample (a wrong frame or channel order,
    // a missing priming trim or a decode to noise is off by far more).
    let ds = dir.path().join("all");
    let out = json(&["ingest", s(&ds), s(files[0].parent().unwrap())]);
    assert_eq!(out["rows"], 5);
    let got = rows(&ds, "audio");
    let paths = rows(&ds, "path");
    for (i, file) in files.iter().enumerate() {
        assert_eq!(paths[i].1, s(file).as_bytes());
        let want = f32s(&ffmpeg(&["-i", s(file), "-f", "f32le", "-"]));
        let (shape, bytes) = &got[i];
        let have = f32s(bytes);
        assert_eq!(shape[1], 2);
        if i < 2 {
            assert_eq!(have, want, "{file:?}");
            continue;
        }
        // Symphonia does not trim AAC's encoder delay (its codec table: not gapless), so an
        // M4A clip starts with the encoder's 1024 priming frames that FFmpeg drops.
        let have = if file.extension().unwrap() == "m4a" { &have[2 * 1024..] } else { &have[..] };
        assert_eq!(have.len(), want.len(), "{file:?}: samples");
        let worst = have.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-3, "{file:?}: largest difference {worst}");
    }
}

/// Issue 27: the Speech Commands layout (`yes/*.wav`, `no/*.wav`) gives audio and a class
/// label, as image folders do; it stopped with `no samples in the inputs` (exit 3) before.
/// Needs no tools: the WAV files are written here.
#[test]
fn class_folders_of_clips_give_audio_and_a_label() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("speech_commands");
    let clips: [(&str, &str, Vec<i16>); 3] =
        [("yes", "a.wav", vec![1, -2, 3]), ("no", "b.wav", vec![7; 5]), ("yes", "nested/c.wav", vec![-32768, 32767])];
    for (class, name, samples) in &clips {
        let path = root.join(class).join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, wav(16_000, samples)).unwrap();
    }
    std::fs::write(root.join("yes").join("notes.txt"), "not a clip").unwrap();
    std::fs::write(root.join("testing_list.txt"), "yes/a.wav").unwrap();
    let ds = dir.path().join("ds");
    let summary = json(&["ingest", s(&ds), s(&root), "--mono", "--audio-dtype", "i16"]);
    assert_eq!((summary["rows"].as_u64(), summary["ignored_files"].as_u64()), (Some(3), Some(1)), "{summary}");
    assert_eq!(summary["format"], "audiofolder");

    let d = Dataset::open(s(&ds)).unwrap();
    let names: Vec<&str> = d.schema().columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["audio", "label", "path"]);
    let audio = d.schema().column("audio").unwrap();
    assert_eq!((audio.dtype, &audio.kind), (DType::I16, &Kind::Audio { sample_rate: 16_000 }));
    assert_eq!(d.schema().column("label").unwrap().kind, Kind::ClassLabel { names: vec!["no".into(), "yes".into()] });
    // Class then path order: no/b, yes/a, yes/nested/c.
    let rows = d.read_rows(0..3, Some(&["audio", "label"])).unwrap();
    assert_eq!(rows.get("label").unwrap().to_vec::<i64>().unwrap(), [0, 1, 1]);
    let got: Vec<Vec<i16>> = (0..3).map(|i| i16s(rows.get("audio").unwrap().row(i))).collect();
    assert_eq!(got, [clips[1].2.clone(), clips[0].2.clone(), clips[2].2.clone()]);

    // Appending a folder maps its classes to the dataset's names.
    let more = dir.path().join("more");
    std::fs::create_dir_all(more.join("yes")).unwrap();
    std::fs::write(more.join("yes").join("d.wav"), wav(16_000, &[5, 5])).unwrap();
    ok(&["ingest", s(&ds), s(&more), "--mono", "--audio-dtype", "i16", "-q"]);
    let d = Dataset::open(s(&ds)).unwrap();
    assert_eq!(d.read_rows(3..4, Some(&["label"])).unwrap().get("label").unwrap().to_vec::<i64>().unwrap(), [1]);
}

#[test]
fn audio_resampled_and_downmixed() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A 440 Hz sine at amplitude 0.5 on both channels, 44.1 kHz, made by sox.
    let wav = dir.path().join("tone.wav");
    tool("sox", &["-n", "-r", "44100", "-c", "2", "-b", "16", s(&wav), "synth", "1", "sine", "440", "vol", "0.5"]);
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&ds), s(&wav), "--sample-rate", "16000", "--mono", "-q"]);
    let d = Dataset::open(s(&ds)).unwrap();
    let col = d.schema().column("audio").unwrap();
    assert_eq!((col.shape.clone(), col.kind.clone()), (vec![Dim::Ragged], Kind::Audio { sample_rate: 16_000 }));
    let (shape, bytes) = &rows(&ds, "audio")[0];
    assert_eq!(shape, &vec![16_000]);
    // Away from the edges the resampled signal is the same 440 Hz sine sampled at 16 kHz: fit
    // a·sin + b·cos by least squares; the amplitude must be 0.5, the phase shift (the
    // resampler's delay) under half an output sample, and what the fit leaves tiny.
    let have: Vec<f64> = f32s(bytes).into_iter().map(f64::from).collect();
    let w = 2.0 * std::f64::consts::PI * 440.0 / 16_000.0;
    let range = 1_000..15_000;
    let (mut ss, mut sc, mut cc, mut ys, mut yc) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for n in range.clone() {
        let (sn, cn) = (w * n as f64).sin_cos();
        (ss, sc, cc, ys, yc) = (ss + sn * sn, sc + sn * cn, cc + cn * cn, ys + have[n] * sn, yc + have[n] * cn);
    }
    let det = ss * cc - sc * sc;
    let (a, b) = ((ys * cc - yc * sc) / det, (yc * ss - ys * sc) / det);
    assert!((a.hypot(b) - 0.5).abs() < 1e-3, "amplitude {}", a.hypot(b));
    assert!(b.atan2(a).abs() < w / 2.0, "phase shift {} rad", b.atan2(a));
    let residual =
        range.map(|n| (have[n] - a * (w * n as f64).sin() - b * (w * n as f64).cos()).abs()).fold(0.0, f64::max);
    assert!(residual < 1e-3, "largest residual {residual}");

    // A clip at another rate does not fit the column's rate unless resampled.
    let other = dir.path().join("other.wav");
    tool("sox", &["-n", "-r", "8000", "-c", "1", "-b", "16", s(&other), "synth", "0.5", "sine", "300"]);
    // A schema question (exit 2) whose answer is the flag, not a bad input to skip.
    let (code, _, stderr) = fails(&["ingest", s(&ds), s(&other), "--mono", "-q", "--skip-bad"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--sample-rate 16000") && !stderr.contains("use --skip-bad"), "{stderr}");
    ok(&["ingest", s(&ds), s(&other), "--mono", "--sample-rate", "16000", "-q"]);
    assert_eq!(rows(&ds, "audio")[1].0, vec![8_000]);
}

#[test]
fn webdataset_audio_members_decode() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = audio_files(&dir.path().join("clips"));
    let mut b = tar::Builder::new(Vec::new());
    for (key, file) in [("k0", &files[0]), ("k1", &files[1])] {
        let ext = file.extension().unwrap().to_str().unwrap();
        let bytes = std::fs::read(file).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, format!("{key}.{ext}"), bytes.as_slice()).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, format!("{key}.cls"), b"1".as_slice()).unwrap();
    }
    let shard = dir.path().join("shard-0.tar");
    std::fs::write(&shard, b.into_inner().unwrap()).unwrap();
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&ds), s(&shard), "--audio-dtype", "i16", "-q"]);
    let want = i16s(&ffmpeg(&["-i", s(&files[0]), "-f", "s16le", "-"]));
    for (shape, bytes) in rows(&ds, "audio") {
        assert_eq!(shape, vec![16_000, 2]);
        assert_eq!(i16s(&bytes), want);
    }
}

/// 8 frames of ffmpeg's 64×48 test pattern at 8 fps: FFV1 in Matroska over RGB (lossless,
/// so the decode is exact), H.264 in MP4 and VP9 in `WebM` (both 4:2:0).
fn video_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let src = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=8", "-frames:v", "8"];
    let mut files = Vec::new();
    for (name, codec) in [
        ("a.mkv", &["-c:v", "ffv1", "-pix_fmt", "bgr0"][..]),
        ("b.mp4", &["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
        ("c.webm", &["-c:v", "libvpx-vp9"]),
    ] {
        let path = dir.join(name);
        let mut args = src.to_vec();
        args.extend_from_slice(codec);
        args.push(s(&path));
        ffmpeg(&args);
        files.push(path);
    }
    files
}

/// ffmpeg's own decode of a video to RGB frames (all of them, no frame-rate conversion).
fn ffmpeg_frames(file: &Path) -> Vec<u8> {
    ffmpeg(&[
        "-i",
        s(file),
        "-fps_mode",
        "passthrough",
        "-sws_flags",
        "bilinear",
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgb24",
        "-",
    ])
}

#[test]
fn video_decodes_to_the_frames_of_ffmpeg() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = video_files(&dir.path().join("videos"));
    let ds = dir.path().join("ds");
    let out = json(&["ingest", s(&ds), s(files[0].parent().unwrap())]);
    assert_eq!((out["rows"].as_u64(), out["format"].as_str()), (Some(3), Some("video")));
    let d = Dataset::open(s(&ds)).unwrap();
    let col = d.schema().column("video").unwrap();
    assert_eq!(col.dtype, DType::U8);
    assert_eq!(col.shape, vec![Dim::Ragged, Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]);
    assert_eq!(col.kind, Kind::Video { fps_milli: 8_000 });
    for (file, (shape, pixels)) in files.iter().zip(rows(&ds, "video")) {
        assert_eq!(shape, vec![8, 48, 64, 3], "{file:?}");
        let want = ffmpeg_frames(file);
        if file.extension().unwrap() == "mkv" {
            assert_eq!(pixels, want, "{file:?}: lossless frames");
        } else {
            // 4:2:0 to RGB: the same swscale conversion as ffmpeg's with the same flags.
            let worst = pixels.iter().zip(&want).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
            assert!(worst <= 2, "{file:?}: largest difference {worst}");
        }
    }

    // Sampling: every 2nd frame, 4 fps from 8 (the same frames), at most 3 frames.
    let frame = 48 * 64 * 3;
    let all = ffmpeg_frames(&files[0]);
    let pick = |idx: &[usize]| idx.iter().flat_map(|&i| all[i * frame..(i + 1) * frame].to_vec()).collect::<Vec<u8>>();
    for (flags, fps_milli, want) in [
        (&["--every", "2"][..], 4_000, pick(&[0, 2, 4, 6])),
        (&["--fps", "4"], 4_000, pick(&[0, 2, 4, 6])),
        (&["--fps", "16", "--max-frames", "3"], 16_000, pick(&[0, 0, 1])),
        (&["--max-frames", "3"], 8_000, pick(&[0, 1, 2])),
    ] {
        let ds = dir.path().join(format!("ds-{}", flags.join("")));
        let mut args = vec!["ingest", s(&ds), s(&files[0]), "-q"];
        args.extend_from_slice(flags);
        ok(&args);
        let d = Dataset::open(s(&ds)).unwrap();
        assert_eq!(d.schema().column("video").unwrap().kind, Kind::Video { fps_milli }, "{flags:?}");
        assert_eq!(rows(&ds, "video")[0].1, want, "{flags:?}");
    }

    // --size resizes and centre-crops every frame like an image: fixed [T, 32, 32, 3].
    let ds = dir.path().join("sized");
    ok(&["ingest", s(&ds), s(&files[0]), "--size", "32", "-q"]);
    let d = Dataset::open(s(&ds)).unwrap();
    let col = d.schema().column("video").unwrap();
    assert_eq!(col.shape, vec![Dim::Ragged, Dim::Fixed(32), Dim::Fixed(32), Dim::Fixed(3)]);
    let first = image::RgbImage::from_raw(64, 48, all[..frame].to_vec()).unwrap();
    let want = image::DynamicImage::ImageRgb8(first).resize_exact(43, 32, image::imageops::FilterType::Triangle);
    let want = want.crop_imm(5, 0, 32, 32).to_rgb8();
    assert_eq!(&rows(&ds, "video")[0].1[..32 * 32 * 3], want.as_raw().as_slice());
}

#[test]
fn webdataset_video_members_decode() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = video_files(&dir.path().join("videos"));
    let mut b = tar::Builder::new(Vec::new());
    for (i, file) in files[..2].iter().enumerate() {
        let bytes = std::fs::read(file).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        let ext = file.extension().unwrap().to_str().unwrap();
        b.append_data(&mut h, format!("k{i}.{ext}"), bytes.as_slice()).unwrap();
    }
    let shard = dir.path().join("shard-0.tar");
    std::fs::write(&shard, b.into_inner().unwrap()).unwrap();
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&ds), s(&shard), "-q"]);
    let got = rows(&ds, "video");
    assert_eq!(got[0], (vec![8, 48, 64, 3], ffmpeg_frames(&files[0])), "the lossless member, exactly");
    assert_eq!(got[1].0, vec![8, 48, 64, 3]);
}

/// Replaces the first occurrence of `from` in a file by `to` (same length).
fn patch(file: &Path, from: &[u8], to: &[u8]) {
    let mut bytes = std::fs::read(file).unwrap();
    let at =
        bytes.windows(from.len()).position(|w| w == from).unwrap_or_else(|| panic!("{from:x?} in {}", file.display()));
    bytes[at..at + to.len()].copy_from_slice(to);
    std::fs::write(file, bytes).unwrap();
}

/// Keeps the first `keep` bytes of a file.
fn truncate(file: &Path, keep: f64) {
    let bytes = std::fs::read(file).unwrap();
    std::fs::write(file, &bytes[..(bytes.len() as f64 * keep) as usize]).unwrap();
}

#[test]
fn bad_media_is_reported_with_its_path_and_nothing_is_committed() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clips = dir.path().join("clips");
    let files = audio_files(&clips);
    let ds = dir.path().join("audio");
    ok(&["ingest", s(&ds), s(&clips), "-q"]);
    assert_eq!(versions(&ds), 2);

    // Truncated FLAC and WAV (their headers declare more samples), and a file of garbage.
    let more = dir.path().join("more");
    std::fs::create_dir_all(&more).unwrap();
    let mut bad = Vec::new();
    for (i, src) in files[..2].iter().enumerate() {
        let cut = more.join(format!("cut{i}.{}", src.extension().unwrap().to_str().unwrap()));
        std::fs::copy(src, &cut).unwrap();
        truncate(&cut, 0.5);
        bad.push(cut);
    }
    let junk = more.join("junk.mp3");
    std::fs::write(&junk, vec![0x5a; 4_000]).unwrap();
    bad.push(junk);
    std::fs::copy(&files[0], more.join("good.wav")).unwrap();
    for b in &bad {
        let (code, _, stderr) = fails(&["ingest", s(&ds), s(b), "-q"]);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains(s(b)) && stderr.contains("no version was committed"), "{stderr}");
    }
    let (_, _, stderr) = fails(&["ingest", s(&ds), s(&more), "-q"]);
    assert!(stderr.contains("truncated audio stream"), "{stderr}");
    assert_eq!(versions(&ds), 2, "the dataset stays at its previous version");
    let out = json(&["ingest", s(&ds), s(&more), "--skip-bad"]);
    assert_eq!(out["rows"], 1);
    let skipped: Vec<&str> = out["skipped"].as_array().unwrap().iter().map(|b| b["input"].as_str().unwrap()).collect();
    assert_eq!(skipped, bad.iter().map(|b| s(b)).collect::<Vec<_>>());

    // Video: a truncated stream, garbage, and a header declaring a 65535-pixel-wide frame.
    let videos = video_files(&dir.path().join("videos"));
    let ds = dir.path().join("video");
    ok(&["ingest", s(&ds), s(&videos[0]), "-q"]);
    let bad_videos = dir.path().join("bad-videos");
    std::fs::create_dir_all(&bad_videos).unwrap();
    let cut = bad_videos.join("cut.mkv");
    std::fs::copy(&videos[0], &cut).unwrap();
    truncate(&cut, 0.6);
    let junk = bad_videos.join("junk.mp4");
    std::fs::write(&junk, vec![0x11; 4_000]).unwrap();
    // A 320x240 FFV1 frame in Matroska; its PixelWidth element (id 0xB0, two bytes: 320)
    // becomes 65535.
    let huge = bad_videos.join("huge.mkv");
    #[rustfmt::skip]
    ffmpeg(&["-f", "lavfi", "-i", "testsrc=size=320x240:rate=8", "-frames:v", "1", "-c:v", "ffv1", "-pix_fmt", "bgr0", s(&huge)]);
    patch(&huge, &[0xb0, 0x82, 0x01, 0x40], &[0xb0, 0x82, 0xff, 0xff]);
    for (file, says) in [(&cut, "video stream"), (&junk, "not a supported video file"), (&huge, "out of range")] {
        let (code, _, stderr) = fails(&["ingest", s(&ds), s(file), "-q"]);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains(s(file)) && stderr.contains(says), "{file:?}: {stderr}");
    }
    assert_eq!(versions(&ds), 2);
    let out = json(&["ingest", s(&ds), s(&bad_videos), s(&videos[0]), "--skip-bad"]);
    assert_eq!((out["rows"].as_u64(), out["skipped"].as_array().map(Vec::len)), (Some(1), Some(3)));
    assert_eq!(versions(&ds), 3);
}
