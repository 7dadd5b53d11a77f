use tessera::{Column, DType, Dim, ImageLayout, Kind};

use super::pixels::Out as _;
use super::*;

fn col(dtype: DType, shape: &[Dim]) -> Column {
    Column::new("c", dtype, shape)
}

fn image(h: u64, w: u64, c: u64) -> Column {
    col(DType::U8, &[Dim::Fixed(h), Dim::Fixed(w), Dim::Fixed(c)])
}

fn key(row: u64) -> RowKey {
    RowKey { seed: 1, epoch: 0, row }
}

/// Runs `ops` on one row of `dims` holding `src`, returning the output bytes.
fn run(column: &Column, ops: &[Transform], dims: &[u64], src: &[u8], k: RowKey) -> Vec<u8> {
    let elem = crate::assemble::ColumnLayout::new(column, crate::assemble::Unsigned::Stored).unwrap().kind;
    let p = Pipeline::new(column, elem, ops).unwrap();
    let mut out = vec![0xAA; p.row_bytes];
    p.apply(k, src, dims, &mut out, &mut Scratch::default()).unwrap();
    out
}

fn config_err(column: &Column, ops: &[Transform]) -> String {
    let elem = crate::assemble::ColumnLayout::new(column, crate::assemble::Unsigned::Stored).unwrap().kind;
    match Pipeline::new(column, elem, ops) {
        Err(LoaderError::Config(m)) => m,
        other => panic!("{ops:?}: expected a configuration error, got {other:?}"),
    }
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn pipelines_that_cannot_apply_are_configuration_errors() {
    let ragged = col(DType::U8, &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]);
    let flip = Transform::HorizontalFlip { p: 0.5 };
    let norm = Transform::imagenet_normalize(Elem::F32);
    let cases: Vec<(Column, Vec<Transform>, &str)> = vec![
        (col(DType::Utf8, &[]), vec![flip.clone()], "text"),
        (col(DType::F32, &[Dim::Fixed(5)]), vec![flip.clone()], "rank 2"),
        (ragged.clone(), vec![flip.clone()], "depends on the row"),
        (ragged.clone(), vec![Transform::Resize(ResizeTo::ShorterSide(8))], "depends on the row"),
        (image(4, 4, 3), vec![norm.clone(), flip.clone()], "last op"),
        (image(4, 4, 3), vec![Transform::HorizontalFlip { p: 1.5 }], "within [0, 1]"),
        (image(4, 4, 2), vec![norm.clone()], "3 values for 2 channels"),
        (col(DType::U8, &[Dim::Fixed(4), Dim::Fixed(4), Dim::Ragged]), vec![flip.clone()], "fixed size"),
        (
            image(4, 4, 3),
            vec![Transform::Normalize { mean: vec![0.0], std: vec![0.0], dtype: Elem::F32, layout: ChannelOrder::Hwc }],
            "non-zero",
        ),
        (image(4, 4, 3), vec![Transform::ToDtype { dtype: Elem::I16, scale: true }], "u8 and a floating"),
        (image(4, 4, 3), vec![Transform::CropPad { shape: vec![2, 2] }], "2 axes, the rows 3"),
        (col(DType::I16, &[]), vec![Transform::RandomTimeCrop { length: 4, stride: 1 }], "scalar"),
        (image(4, 4, 3), vec![], "empty"),
    ];
    for (c, ops, want) in cases {
        let m = config_err(&c, &ops);
        assert!(m.contains(want), "{ops:?}: {m}");
    }
    let mut chw = image(3, 4, 4);
    chw.kind = Kind::Image { layout: ImageLayout::Chw };
    assert!(config_err(&chw, &[flip]).contains("CHW"));
}

#[test]
fn crops_flips_and_pads_move_bytes_exactly() {
    // A 3 × 4 RGB image whose pixel (y, x) is (10y + x, 100 + 10y + x, 200 + x).
    let px = |y: u8, x: u8| [10 * y + x, 100 + 10 * y + x, 200 + x];
    let src: Vec<u8> = (0..3).flat_map(|y| (0..4).flat_map(move |x| px(y, x))).collect();
    let c = image(3, 4, 3);
    let flipped = run(&c, &[Transform::HorizontalFlip { p: 1.0 }], &[3, 4, 3], &src, key(0));
    let want: Vec<u8> = (0..3).flat_map(|y| (0..4).rev().flat_map(move |x| px(y, x))).collect();
    assert_eq!(flipped, want);
    // Centre crop 1 × 2 of 3 × 4: top = round(1) = 1, left = round(1) = 1.
    assert_eq!(
        run(&c, &[Transform::CenterCrop { height: 1, width: 2 }], &[3, 4, 3], &src, key(0)),
        [px(1, 1), px(1, 2)].concat()
    );
    // Larger than the image: 5 × 5 pads (5 - 3) // 2 = 1 row above and one below,
    // (5 - 4) // 2 = 0 columns left and one right.
    let padded = run(&c, &[Transform::CenterCrop { height: 5, width: 5 }], &[3, 4, 3], &src, key(0));
    assert_eq!(padded.len(), 75);
    assert!(padded[..15].iter().all(|&b| b == 0), "top row");
    assert_eq!(&padded[15..18], &px(0, 0));
    assert_eq!(&padded[27..30], &[0, 0, 0], "right column");
    // Vertical flip then crop-pad to 4 × 2 (a row of padding at the bottom).
    let out = run(
        &c,
        &[Transform::VerticalFlip { p: 1.0 }, Transform::CropPad { shape: vec![4, 2, 3] }],
        &[3, 4, 3],
        &src,
        key(0),
    );
    let want: Vec<u8> = [px(2, 0), px(2, 1), px(1, 0), px(1, 1), px(0, 0), px(0, 1), [0; 3], [0; 3]].concat();
    assert_eq!(out, want);
    // p = 0 never flips.
    assert_eq!(run(&c, &[Transform::HorizontalFlip { p: 0.0 }], &[3, 4, 3], &src, key(0)), src);
}

#[test]
fn center_crop_offsets_round_like_torchvision() {
    // int(round((size - crop) / 2)) with Python's ties-to-even; padding (crop - size) // 2.
    for (size, crop, want) in
        [(4, 1, 2), (5, 2, 2), (7, 2, 2), (9, 2, 4), (3, 3, 0), (2, 5, -1), (2, 6, -2), (0, 3, -1)]
    {
        assert_eq!(center_begin(size, crop), want, "size {size} crop {crop}");
    }
    assert_eq!(shorter_side(256, 341, 224), (224, 298));
    assert_eq!(shorter_side(500, 300, 256), (426, 256));
}

#[test]
fn normalize_writes_chw_floats() {
    // 1 × 2 RGB: (0, 128, 255), (255, 0, 64).
    let src = [0u8, 128, 255, 255, 0, 64];
    let c = image(1, 2, 3);
    let mean = [0.5f32, 0.25, 0.0];
    let std = [0.5f32, 0.25, 2.0];
    let ops =
        [Transform::Normalize { mean: mean.to_vec(), std: std.to_vec(), dtype: Elem::F32, layout: ChannelOrder::Chw }];
    let out = f32s(&run(&c, &ops, &[1, 2, 3], &src, key(0)));
    let v = |x: u8, ch: usize| (f32::from(x) * (1.0 / 255.0 / std[ch])) + (-mean[ch] / std[ch]);
    assert_eq!(out, [v(0, 0), v(255, 0), v(128, 1), v(0, 1), v(255, 2), v(64, 2)]);
    assert!((out[1] - 1.0).abs() < 1e-6 && (out[0] + 1.0).abs() < 1e-6);
    // f16 output rounds each value once.
    let ops16 =
        [Transform::Normalize { mean: mean.to_vec(), std: std.to_vec(), dtype: Elem::F16, layout: ChannelOrder::Hwc }];
    let out16 = run(&c, &ops16, &[1, 2, 3], &src, key(0));
    let want: Vec<u8> = [v(0, 0), v(128, 1), v(255, 2), v(255, 0), v(0, 1), v(64, 2)]
        .iter()
        .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
        .collect();
    assert_eq!(out16, want);
    // Grayscale [H, W] gains a channel axis in CHW.
    let g = col(DType::U8, &[Dim::Fixed(2), Dim::Fixed(2)]);
    let elem = crate::assemble::ColumnLayout::new(&g, crate::assemble::Unsigned::Stored).unwrap().kind;
    let p = Pipeline::new(
        &g,
        elem,
        &[Transform::Normalize { mean: vec![0.0], std: vec![1.0], dtype: Elem::F32, layout: ChannelOrder::Chw }],
    )
    .unwrap();
    assert_eq!(p.out_dims, [1, 2, 2]);
}

#[test]
fn resize_of_a_ramp_interpolates_and_rounds_back_to_u8() {
    // One row, 1 × 4 → 1 × 8 (upscale, bilinear, half-pixel centres): 0, 40, 80, 120.
    let c = col(DType::U8, &[Dim::Fixed(1), Dim::Fixed(4)]);
    let out =
        run(&c, &[Transform::Resize(ResizeTo::Exact { height: 1, width: 8 })], &[1, 4], &[0, 40, 80, 120], key(0));
    assert_eq!(out, [0, 10, 30, 50, 70, 90, 110, 120]);
    // Downscale by 2: triangle weights (1/8, 3/8, 3/8, 1/8) in the middle.
    let out =
        run(&c, &[Transform::Resize(ResizeTo::Exact { height: 1, width: 2 })], &[1, 4], &[0, 40, 80, 120], key(0));
    // (3·0 + 3·40 + 1·80) / 7 = 28.6 and (0.25·40 + 0.75·80 + 0.75·120) / 1.75 = 91.4.
    assert_eq!(out, [29, 91]);
}

#[test]
fn random_ops_depend_on_the_row_key_only() {
    let c = col(DType::U8, &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]);
    let ops = [Transform::random_resized_crop(8, 8), Transform::HorizontalFlip { p: 0.5 }];
    let src: Vec<u8> = (0..20 * 30 * 3).map(|i| (i * 7 % 251) as u8).collect();
    let a = run(&c, &ops, &[20, 30, 3], &src, key(5));
    assert_eq!(a.len(), 8 * 8 * 3);
    assert_eq!(a, run(&c, &ops, &[20, 30, 3], &src, key(5)));
    let others: Vec<Vec<u8>> = (0..8).map(|r| run(&c, &ops, &[20, 30, 3], &src, key(r))).collect();
    assert!(others.iter().filter(|o| **o != a).count() >= 7);
    let next_epoch = run(&c, &ops, &[20, 30, 3], &src, RowKey { epoch: 1, ..key(5) });
    assert_ne!(a, next_epoch);
}

#[test]
fn random_resized_crop_params_stay_inside_and_fall_back() {
    for (h, w) in [(1, 1), (1, 500), (500, 1), (256, 341), (3, 3)] {
        for row in 0..200 {
            let mut r = OpRng::new(3, 0, row, 0);
            let (top, left, ch, cw) = rrc_params(&mut r, h, w, (0.08, 1.0), (0.75, 4.0 / 3.0));
            assert!(ch >= 1 && cw >= 1, "{h}x{w}");
            assert!(
                top >= 0 && left >= 0 && top as usize + ch <= h && left as usize + cw <= w,
                "{h}x{w}: {top} {left} {ch} {cw}"
            );
        }
    }
    // A 1 × 500 strip can never fit a ratio ≤ 4/3 crop of 8 %+ area: the fallback keeps its
    // height and cuts the centre to the ratio.
    let mut r = OpRng::new(0, 0, 0, 0);
    assert_eq!(rrc_params(&mut r, 1, 500, (0.08, 1.0), (0.75, 4.0 / 3.0)), (0, 249, 1, 1));
}

#[test]
fn time_crops_window_stride_and_pad() {
    let c = col(DType::I16, &[Dim::Ragged]);
    let src: Vec<u8> = (0..10i16).flat_map(i16::to_le_bytes).collect();
    let vals = |b: Vec<u8>| b.chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]])).collect::<Vec<_>>();
    let short = vals(run(&c, &[Transform::RandomTimeCrop { length: 12, stride: 1 }], &[10], &src, key(0)));
    assert_eq!(short, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0]);
    for row in 0..50 {
        let v = vals(run(&c, &[Transform::RandomTimeCrop { length: 3, stride: 2 }], &[10], &src, key(row)));
        assert!(v[0] <= 5 && v[1] == v[0] + 2 && v[2] == v[0] + 4, "{v:?}");
    }
    // Video [T, H, W, C]: frames cropped in time, every frame flipped alike.
    let video = col(DType::U8, &[Dim::Ragged, Dim::Fixed(1), Dim::Fixed(2), Dim::Fixed(1)]);
    let frames: Vec<u8> = (0..8).collect(); // 4 frames of [1, 2, 1]
    let out = run(
        &video,
        &[Transform::RandomTimeCrop { length: 2, stride: 2 }, Transform::HorizontalFlip { p: 1.0 }],
        &[4, 1, 2, 1],
        &frames,
        key(0),
    );
    assert!(out == [1, 0, 5, 4] || out == [3, 2, 7, 6], "{out:?}");
}

#[test]
fn empty_and_one_pixel_images() {
    let c = col(DType::U8, &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]);
    let ops = [Transform::random_resized_crop(4, 4)];
    assert_eq!(run(&c, &ops, &[1, 1, 3], &[9, 8, 7], key(0)), [9, 8, 7].repeat(16));
    assert_eq!(run(&c, &ops, &[0, 5, 3], &[], key(0)), vec![0; 48]);
    assert_eq!(run(&c, &[Transform::CenterCrop { height: 2, width: 2 }], &[0, 0, 3], &[], key(0)), vec![0; 12]);
}

#[test]
fn a_row_that_does_not_match_its_shape_is_corrupt() {
    let c = image(2, 2, 3);
    let p = Pipeline::new(&c, Elem::U8, &[Transform::HorizontalFlip { p: 1.0 }]).unwrap();
    let mut out = vec![0; p.row_bytes];
    let e = p.apply(key(0), &[0; 11], &[2, 2, 3], &mut out, &mut Scratch::default()).unwrap_err();
    assert!(matches!(e, LoaderError::Corrupt { .. }), "{e:?}");
}

/// CPU time per image of the bench's pipeline on one thread (a measurement, not a test):
/// `cargo test --release -p tessera-loader --lib transform::tests::cpu_per_image -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement; run it on purpose, in release"]
fn cpu_per_image() {
    let c = col(DType::U8, &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]);
    let elem = crate::assemble::ColumnLayout::new(&c, crate::assemble::Unsigned::Stored).unwrap().kind;
    let cases: [(&str, Vec<Transform>); 3] = [
        (
            "rrc224+flip+norm f16 chw",
            vec![
                Transform::random_resized_crop(224, 224),
                Transform::HorizontalFlip { p: 0.5 },
                Transform::imagenet_normalize(Elem::F16),
            ],
        ),
        ("rrc224 only (u8 out)", vec![Transform::random_resized_crop(224, 224)]),
        (
            "centercrop224 + norm f16",
            vec![Transform::CenterCrop { height: 224, width: 224 }, Transform::imagenet_normalize(Elem::F16)],
        ),
    ];
    let src: Vec<u8> = (0..256 * 341 * 3).map(|i| (i * 7 % 251) as u8).collect();
    let only = std::env::var("TRANSFORM_CASE").ok();
    for (name, ops) in cases {
        if only.as_deref().is_some_and(|o| !name.starts_with(o)) {
            continue;
        }
        let p = Pipeline::new(&c, elem, &ops).unwrap();
        let mut out = vec![0u8; p.row_bytes];
        let mut s = Scratch::default();
        let n = std::env::var("TRANSFORM_N").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
        let t0 = crate::depth::thread_cpu_time().unwrap_or_default();
        for r in 0..n {
            p.apply(key(r), &src, &[256, 341, 3], &mut out, &mut s).unwrap();
        }
        let dt = crate::depth::thread_cpu_time().unwrap_or_default().saturating_sub(t0);
        // The timed loop's last output is the row's, whatever ran before it on this scratch.
        let mut again = vec![0u8; p.row_bytes];
        p.apply(key(n - 1), &src, &[256, 341, 3], &mut again, &mut Scratch::default()).unwrap();
        assert_eq!(again, out, "{name}");
        println!(
            "{name}: {:.3} ms CPU per 256x341 image, {:.0} images per CPU-second",
            dt.as_secs_f64() * 1e3 / n as f64,
            n as f64 / dt.as_secs_f64()
        );
    }
}

#[test]
fn u8_outputs_round_half_to_even_and_saturate() {
    let mut out = [0u8; 10];
    for (i, v) in [0.5f32, 1.5, 2.5, 254.5, 255.7, -3.0, f32::NAN, 3.49, 7.500_000_5, 1e9].into_iter().enumerate() {
        pixels::OutU8::write(&mut out, i, v);
    }
    assert_eq!(out, [0, 2, 2, 254, 255, 0, 0, 3, 8, 255]);
}

/// `u8` pixels through the [`pixels::Pixels`] trait's defaults, element by element: what
/// the fast paths must equal.
struct Plain<'a>(&'a [u8]);

impl pixels::Pixels for Plain<'_> {
    fn sample(&self, i: isize) -> f32 {
        f32::from(self.0[usize::try_from(i).unwrap()])
    }
}

#[test]
fn spread_gathers_match_the_element_by_element_definition() {
    let bytes: Vec<u8> = (0..50).collect();
    let u8s = pixels::U8s(&bytes);
    for (at, step, n) in
        [(0isize, 1isize, 50usize), (2, 3, 16), (49, -1, 50), (47, -3, 16), (10, 5, 0), (10, -5, 3), (7, 1, 1)]
    {
        let (mut fast, mut slow) = (vec![-1.0f32; 120], vec![-1.0f32; 120]);
        pixels::Pixels::gather_spread(&u8s, at, step, n, &mut fast, 1, 2);
        pixels::Pixels::gather_spread(&Plain(&bytes), at, step, n, &mut slow, 1, 2);
        assert_eq!(fast, slow, "at {at} step {step} n {n}");
    }
}

#[test]
fn row_gathers_match_the_element_by_element_definition() {
    // A 12 × 9 × 3 image (HWC); lines read forward, flipped, as one channel of several, and
    // as fewer lines than a block holds.
    let bytes: Vec<u8> = (0..12 * 9 * 3).map(|i| (i * 31 % 256) as u8).collect();
    let u8s = pixels::U8s(&bytes);
    let cases: [(isize, isize, isize, isize, usize, usize, usize); 6] = [
        (0, 27, 3, 1, 9, 3, 8),        // forward, a whole block
        (3 * 8, 27, -3, 1, 9, 3, 8),   // flipped: each line starts at its last pixel
        (27 + 3, 27, 3, 1, 7, 3, 8),   // a crop inside the lines
        (0, 27, 3, 1, 9, 3, 5),        // a partial block
        (1, 27, 3, 0, 9, 1, 8),        // one channel of three (sx ≠ channels)
        (11, 27 * 2, -3, -1, 4, 3, 6), // every other line, flipped, channels reversed
    ];
    for (at, sy, sx, sc, n, channels, rows) in cases {
        let len = n * channels * 8;
        let (mut fast, mut slow) = (vec![-1.0f32; len], vec![-1.0f32; len]);
        let b = pixels::RowBlock { at, sy, sx, sc, n, channels, rows };
        pixels::Pixels::gather_rows::<8>(&u8s, b, &mut fast);
        pixels::Pixels::gather_rows::<8>(&Plain(&bytes), b, &mut slow);
        assert_eq!(fast, slow, "at {at} sy {sy} sx {sx} sc {sc} n {n} rows {rows}");
    }
}

#[test]
fn f16_outputs_match_the_software_conversion_bit_for_bit() {
    use pixels::Out;
    // Ties, subnormals, overflow, infinities, NaNs with payloads, and pseudo-random bits.
    let mut v: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        65504.0,
        65520.0,
        65519.99,
        1e9,
        -1e9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        6.0e-8,
        2.98e-8,
        2.99e-8,
        5.96e-8,
        1.0e-40,
        1.000_488_3,
        1.000_976_6,
        2049.0,
        2051.0,
    ];
    v.extend([0x7FC0_0001u32, 0x7F80_0001, 0xFFC1_2345, 0x7FFF_FFFF].map(f32::from_bits));
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    v.extend((0..4000).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f32::from_bits(x as u32)
    }));
    // An aligned output (the packed path) and the element-wise software conversion.
    let mut out = vec![0u16; v.len() + 8];
    let bytes: &mut [u8] = zerocopy::IntoBytes::as_mut_bytes(out.as_mut_slice());
    pixels::OutF16::write_slice(bytes, 1, &v);
    for (k, &f) in v.iter().enumerate() {
        let want = half::f16::from_f32_const(f);
        let got = half::f16::from_bits(u16::from_le_bytes([bytes[(k + 1) * 2], bytes[(k + 1) * 2 + 1]]));
        assert_eq!(got.to_bits(), want.to_bits(), "{f:e} ({:#x})", f.to_bits());
    }
}
