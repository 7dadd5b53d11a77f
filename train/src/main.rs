//! Trains a small convnet on a Tessera image + label dataset with the tch loader.
//!
//! ```text
//! scripts/train.sh [--epochs 3] [--shuffle block]
//! cargo run --release -p tessera-train -- [--epochs 3] [--shuffle block]   # after set-up
//! ```
//!
//! On first run it writes a deterministic "shapes" dataset (64×64×3 images of circles,
//! squares and triangles in several colours on noise; label = shape) under `--data`
//! (default `./data/shapes`, plus a held-out `./data/shapes-val`) through the reference
//! writer, so nothing is downloaded. It then trains on CUDA when present (else CPU), printing
//! the loss, train/validation accuracy, samples/s and how long the loop waited on the loader,
//! and writes a checkpoint (loader state + weights) that `--resume` continues from, mid-epoch
//! included.
//!
//! Data parallel:
//! * one process per GPU: launch with torchrun-style `RANK`/`WORLD_SIZE`/`LOCAL_RANK`; each
//!   process reads its disjoint shard (same number of batches on every rank) on
//!   `cuda:LOCAL_RANK`. Gradients must then be all-reduced across processes — see
//!   `average_gradients` for where NCCL plugs in.
//! * one process, several GPUs (`--device cuda` with more than one visible): a model replica
//!   per device, each step splits the batch across devices, gradients are averaged on device 0
//!   and the updated weights are copied back to the replicas.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use tch::nn::{self, ModuleT, OptimizerConfig};
use tch::{Device, Kind, Tensor};
use tessera::{
    Batch as Rows, Column, ColumnData, Compression, DType, Dataset, Dim, ImageLayout, Kind as ColKind, Schema,
};
use tessera_loader_tch::sampler::SplitMix64;
use tessera_loader_tch::transform::{ImageToFloat, Normalize, RandomHorizontalFlip};
use tessera_loader_tch::{
    Batch, BatchTransform, ChannelOrder, Elem, EpochIter, Loader, LoaderConfig, LoaderState, ShuffleMode, TchOptions,
    Transform,
};

const SIDE: usize = 64;
const SHAPES: [&str; 3] = ["circle", "square", "triangle"];
const COLOURS: [(&str, [u8; 3]); 6] = [
    ("red", [220, 40, 40]),
    ("green", [40, 200, 60]),
    ("blue", [50, 80, 230]),
    ("yellow", [230, 220, 50]),
    ("magenta", [210, 50, 210]),
    ("cyan", [50, 210, 220]),
];

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Shuffle {
    Global,
    Block,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DeviceArg {
    Cpu,
    Cuda,
}

/// Train a small convnet from a Tessera dataset.
#[derive(Parser, Debug)]
struct Args {
    /// Dataset root (generated here if missing); the validation set is `<data>-val`.
    #[arg(long, default_value = "./data/shapes")]
    data: String,
    /// Epochs to train.
    #[arg(long, default_value_t = 3)]
    epochs: u64,
    /// Batch size per process.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Order: exact global permutation, or block shuffle (windows of 4 data files).
    #[arg(long, value_enum, default_value_t = Shuffle::Global)]
    shuffle: Shuffle,
    /// Loader worker threads (libtorch gets the remaining cores, at least one).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Seed of the order, the augmentations and the model initialisation.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Resume from a loader state file written by an earlier run (weights are read from the
    /// `.ot` file next to it).
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Where checkpoints go (`<path>` state JSON and `<path>.ot` weights).
    #[arg(long, default_value = "./data/shapes.ckpt.json")]
    checkpoint: PathBuf,
    /// Checkpoint every this many steps (and at the end of every epoch).
    #[arg(long, default_value_t = 50)]
    checkpoint_every: usize,
    /// Training device; defaults to CUDA when available.
    #[arg(long, value_enum)]
    device: Option<DeviceArg>,
    /// Rows of the generated training set (when it does not exist yet).
    #[arg(long, default_value_t = 6000)]
    rows: usize,
    /// Learning rate (Adam).
    #[arg(long, default_value_t = 2e-3)]
    lr: f64,
    /// Stop (with a checkpoint) after this many steps, as if interrupted; `--resume` the
    /// checkpoint to continue exactly where it stopped.
    #[arg(long)]
    stop_after: Option<usize>,
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let (loader, val_loader) = open_loaders(&args)?;
    let device = loader.options().device;
    let devices: Vec<Device> = match device {
        Device::Cuda(_) if tch::Cuda::device_count() > 1 && loader.config().dist.world_size == 1 => {
            (0..tch::Cuda::device_count() as usize).map(Device::Cuda).collect()
        }
        d => vec![d],
    };
    println!(
        "dataset {} v{}: {} rows, {} batches/epoch of {} on rank {}/{}; device(s) {:?}; shuffle {:?}; {} worker(s)",
        args.data,
        loader.version(),
        loader.row_count(),
        loader.batches_per_epoch(),
        args.batch_size,
        loader.config().dist.rank,
        loader.config().dist.world_size,
        devices,
        loader.config().shuffle,
        args.workers
    );
    let classes = class_count(loader.dataset())?;
    let mut model = Replicas::new(&devices, args.lr, classes)?;
    let (first_epoch, mut resume_state) = load_resume(&args, &loader, &mut model)?;
    let started = Instant::now();
    let mut total_steps = 0usize;
    for epoch in first_epoch..args.epochs {
        let mut it = match resume_state.take() {
            Some(state) => loader.resume(&state)?,
            None => loader.epoch(epoch)?,
        };
        let t0 = Instant::now();
        let mut stats = EpochStats::default();
        loop {
            let parts: Vec<Batch> = if devices.len() > 1 {
                match it.next_for_devices(&devices) {
                    Some(p) => p?,
                    None => break,
                }
            } else {
                match it.next() {
                    Some(b) => vec![b?],
                    None => break,
                }
            };
            stats.add(model.step(&parts)?);
            if stats.steps.is_multiple_of(20) {
                println!("epoch {epoch} step {:4}: {}", stats.steps, stats.summary(t0.elapsed()));
            }
            if stats.steps.is_multiple_of(args.checkpoint_every) {
                checkpoint(&args.checkpoint, &it, &model.stores[0])?;
            }
            total_steps += 1;
            if args.stop_after == Some(total_steps) {
                checkpoint(&args.checkpoint, &it, &model.stores[0])?;
                println!(
                    "stopping after {total_steps} steps (epoch {epoch}, {} batches in); resume with --resume {}",
                    it.consumed(),
                    args.checkpoint.display()
                );
                return Ok(());
            }
        }
        let elapsed = t0.elapsed();
        let waited = it.wait_time();
        checkpoint(&args.checkpoint, &it, &model.stores[0])?;
        drop(it);
        let val = match &val_loader {
            Some(v) => format!("{:.1}%", 100.0 * evaluate(v, &model.nets[0], devices[0])?),
            None => "n/a (no <data>-val dataset)".to_string(),
        };
        println!(
            "epoch {epoch} done: {}  val acc {val}  loader wait {:.2}s of {:.2}s ({:.1}%)",
            stats.summary(elapsed),
            waited.as_secs_f64(),
            elapsed.as_secs_f64(),
            100.0 * waited.as_secs_f64() / elapsed.as_secs_f64().max(1e-9)
        );
    }
    let m = loader.memory_stats();
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    println!(
        "done in {:.1}s; loader memory high-water {:.1} MiB of a {:.0} MiB budget; {} storage reads, {:.1} MiB",
        started.elapsed().as_secs_f64(),
        mib(m.high_water),
        mib(m.budget),
        loader.io_stats().requests,
        mib(loader.io_stats().bytes)
    );
    Ok(())
}

/// Reads `--resume`: weights into the model, and where to continue (first epoch, and the
/// loader state when it is mid-epoch).
fn load_resume(
    args: &Args,
    loader: &Loader,
    model: &mut Replicas,
) -> Result<(u64, Option<LoaderState>), Box<dyn Error>> {
    let Some(path) = &args.resume else { return Ok((0, None)) };
    let state = LoaderState::from_json(&std::fs::read_to_string(path)?)?;
    let weights = weights_path(path);
    if weights.exists() {
        model.stores[0].load(&weights)?;
        model.sync()?;
        println!("resumed weights from {}", weights.display());
    }
    println!("resuming epoch {} after {} samples", state.epoch, state.samples_consumed_global);
    if state.samples_consumed_global >= loader.plan(state.epoch)?.effective_len() {
        // Saved at the end of an epoch: continue with the next one.
        return Ok((state.epoch + 1, None));
    }
    Ok((state.epoch, Some(state)))
}

/// Classes of the `label` column: its class names when it has them (the shapes set, and
/// image folders ingested by `tessera ingest`), else the largest label in its statistics + 1.
fn class_count(ds: &Dataset) -> Result<i64, Box<dyn Error>> {
    let col = ds.schema().column("label").ok_or("the dataset has no `label` column")?;
    if let ColKind::ClassLabel { names } = &col.kind {
        return Ok(names.len() as i64);
    }
    let max = ds.manifest().stats.iter().find(|s| s.column_id == col.id).and_then(|s| s.max);
    match max {
        Some(tessera::manifest::Scalar::Int(m)) if m >= 0 => Ok(m + 1),
        Some(tessera::manifest::Scalar::UInt(m)) => Ok(m as i64 + 1),
        _ => Err("cannot tell the number of classes: give `label` class names (kind class_label)".into()),
    }
}

/// The training and validation loaders. The shapes datasets are generated on first use; a
/// dataset that is already there (for example an image folder ingested with `tessera
/// ingest`) is used as it is, with `<data>-val` as validation set when it exists.
fn open_loaders(args: &Args) -> Result<(Loader, Option<Loader>), Box<dyn Error>> {
    let val_root = format!("{}-val", args.data);
    if ensure_dataset(&args.data, args.rows, 1)? {
        ensure_dataset(&val_root, (args.rows / 6).max(256), 2)?;
    }
    let device = match args.device {
        Some(DeviceArg::Cpu) => Device::Cpu,
        Some(DeviceArg::Cuda) if !tch::Cuda::is_available() => return Err("--device cuda: no CUDA device".into()),
        Some(DeviceArg::Cuda) => Device::Cuda(0),
        None => Device::cuda_if_available(),
    };
    // Leave cores to the loader's workers (they decode); libtorch gets the rest, at least one.
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    tch::set_num_threads(cores.saturating_sub(args.workers).max(1) as i32);
    tch::manual_seed(args.seed as i64);
    let shuffle = match args.shuffle {
        Shuffle::Global => ShuffleMode::Global,
        Shuffle::Block => ShuffleMode::Block { window_fragments: 4 },
    };
    let mut config = LoaderConfig::new(args.data.clone())
        .with_columns(&["image", "label"])
        .with_batch_size(args.batch_size)
        .with_shuffle(shuffle)
        .with_seed(args.seed)
        .with_workers(args.workers)
        .with_memory_budget(256 << 20);
    config = config.with_torchrun_env()?; // RANK / WORLD_SIZE / LOCAL_RANK when launched by torchrun
    let options = TchOptions::on(device).for_rank(&config.dist);
    if options.device == Device::Cpu {
        // On the CPU the loader's threads augment each sample straight into its batch slot:
        // one pass, off the training thread. (On a GPU the uint8 batch crosses PCIe first,
        // a quarter of the bytes of f32, and the tensor ops below run batched on the device.)
        let normalize =
            Transform::Normalize { mean: vec![0.3; 3], std: vec![0.3; 3], dtype: Elem::F32, layout: ChannelOrder::Chw };
        let mut val_config = config.clone().with_transform("image", [normalize.clone()]);
        val_config.location = val_root;
        val_config.shuffle = ShuffleMode::None;
        let val = if Dataset::open(&val_config.location).is_ok() {
            Some(Loader::open_with(val_config, options)?)
        } else {
            None
        };
        let train = config.with_transform("image", [Transform::HorizontalFlip { p: 0.5 }, normalize]);
        return Ok((Loader::open_with(train, options)?, val));
    }
    let to_float: Arc<dyn BatchTransform> = Arc::new(ImageToFloat { column: "image".into() });
    let normalize: Arc<dyn BatchTransform> =
        Arc::new(Normalize { column: "image".into(), mean: vec![0.3; 3], std: vec![0.3; 3] });
    let flip: Arc<dyn BatchTransform> = Arc::new(RandomHorizontalFlip { column: "image".into(), p: 0.5, width_dim: 3 });
    let mut val_config = config.clone();
    val_config.location = val_root;
    val_config.shuffle = ShuffleMode::None;
    let val = if Dataset::open(&val_config.location).is_ok() {
        // No augmentation for evaluation.
        Some(Loader::open_with(val_config, options)?.with_transforms(vec![to_float.clone(), normalize.clone()]))
    } else {
        None
    };
    Ok((Loader::open_with(config, options)?.with_transforms(vec![to_float, flip, normalize]), val))
}

/// Running totals of an epoch.
#[derive(Default)]
struct EpochStats {
    steps: usize,
    seen: usize,
    correct: i64,
    loss_sum: f64,
}

impl EpochStats {
    fn add(&mut self, (loss, correct, seen): (f64, i64, usize)) {
        self.steps += 1;
        self.loss_sum += loss;
        self.correct += correct;
        self.seen += seen;
    }

    fn summary(&self, elapsed: std::time::Duration) -> String {
        format!(
            "loss {:.4}  train acc {:.1}%  {:.0} samples/s",
            self.loss_sum / self.steps.max(1) as f64,
            100.0 * self.correct as f64 / self.seen.max(1) as f64,
            self.seen as f64 / elapsed.as_secs_f64().max(1e-9)
        )
    }
}

/// One model replica per device; replica 0 owns the optimizer.
struct Replicas {
    stores: Vec<nn::VarStore>,
    nets: Vec<nn::SequentialT>,
    opt: nn::Optimizer,
}

impl Replicas {
    fn new(devices: &[Device], lr: f64, classes: i64) -> Result<Self, Box<dyn Error>> {
        let stores: Vec<nn::VarStore> = devices.iter().map(|&d| nn::VarStore::new(d)).collect();
        let nets = stores.iter().map(|vs| convnet(&vs.root(), classes)).collect();
        let opt = nn::Adam::default().build(&stores[0], lr)?;
        let mut r = Self { stores, nets, opt };
        r.sync()?;
        Ok(r)
    }

    /// Forward and backward on every replica's part of the batch, averaged gradients, one
    /// optimizer step, weights copied back to the replicas. Returns (mean loss, correct, rows).
    fn step(&mut self, parts: &[Batch]) -> Result<(f64, i64, usize), Box<dyn Error>> {
        let (mut correct, mut seen, mut losses) = (0i64, 0usize, Vec::with_capacity(parts.len()));
        for (net, batch) in self.nets.iter().zip(parts) {
            let (x, y) = (batch.tensor("image")?, batch.tensor("label")?);
            let logits = net.forward_t(x, true);
            correct += logits.argmax(-1, false).eq_tensor(y).sum(Kind::Int64).int64_value(&[]);
            seen += batch.len();
            losses.push(logits.cross_entropy_for_logits(y));
        }
        self.opt.zero_grad();
        for s in &self.stores[1..] {
            zero_grads(s);
        }
        for l in &losses {
            l.backward();
        }
        average_gradients(&self.stores);
        self.opt.step();
        self.sync()?;
        let loss = losses.iter().map(|l| l.double_value(&[])).sum::<f64>() / losses.len().max(1) as f64;
        Ok((loss, correct, seen))
    }

    /// Copies replica 0's weights to the other replicas.
    fn sync(&mut self) -> Result<(), Box<dyn Error>> {
        if let Some((first, rest)) = self.stores.split_first_mut() {
            for s in rest {
                s.copy(first)?;
            }
        }
        Ok(())
    }
}

/// conv → pool ×3 on a 2× downsampled image, then a linear classifier.
fn convnet(p: &nn::Path, classes: i64) -> nn::SequentialT {
    let conv = |p: nn::Path, i, o| nn::conv2d(p, i, o, 3, nn::ConvConfig { padding: 1, ..Default::default() });
    nn::seq_t()
        .add_fn(|x| x.avg_pool2d([2, 2], [2, 2], [0, 0], false, true, None))
        .add(conv(p / "c1", 3, 16))
        .add_fn(|x| x.relu().max_pool2d_default(2))
        .add(conv(p / "c2", 16, 32))
        .add_fn(|x| x.relu().max_pool2d_default(2))
        .add(conv(p / "c3", 32, 64))
        .add_fn(|x| x.relu().adaptive_avg_pool2d([1, 1]).flatten(1, -1))
        .add(nn::linear(p / "fc", 64, classes, nn::LinearConfig::default()))
}

/// Accuracy on the validation set (sequential order, no augmentation).
fn evaluate(loader: &Loader, net: &nn::SequentialT, device: Device) -> Result<f64, Box<dyn Error>> {
    let _guard = tch::no_grad_guard();
    let (mut seen, mut correct) = (0usize, 0i64);
    for batch in loader.epoch(0)? {
        let batch = batch?.to_device(device)?;
        let logits = net.forward_t(batch.tensor("image")?, false);
        correct += logits.argmax(-1, false).eq_tensor(batch.tensor("label")?).sum(Kind::Int64).int64_value(&[]);
        seen += batch.len();
    }
    Ok(correct as f64 / seen.max(1) as f64)
}

fn zero_grads(vs: &nn::VarStore) {
    for v in vs.trainable_variables() {
        let mut g = v.grad();
        if g.defined() {
            let _ = g.zero_();
        }
    }
}

/// Averages the replicas' gradients into replica 0.
///
/// Multi-node / process-per-GPU: tch has no NCCL or process-group bindings. Replace the
/// body with an all-reduce over processes, e.g. `cudarc::nccl::safe::Comm` (feature
/// `nccl-02028` matches the NCCL 2.28 shipped in the `PyTorch` wheel): build one `Comm` per
/// process from a shared `Id` (exchanged over TCP or a file, like torchrun's rendezvous),
/// then for every trainable variable call `comm.all_reduce_in_place` on the gradient's
/// device pointer (`Tensor::data_ptr()`, contiguous `f32`) with `ReduceOp::Sum` and divide by
/// the world size — the loader already gives each rank a disjoint, equally long shard.
fn average_gradients(stores: &[nn::VarStore]) {
    if stores.len() < 2 {
        return;
    }
    let _guard = tch::no_grad_guard();
    let main = stores[0].trainable_variables();
    let others: Vec<Vec<Tensor>> = stores[1..].iter().map(nn::VarStore::trainable_variables).collect();
    for (i, v) in main.iter().enumerate() {
        let mut sum = v.grad();
        for o in &others {
            sum += o[i].grad().to_device(sum.device());
        }
        let _ = sum.divide_scalar_(stores.len() as f64);
    }
}

fn weights_path(state: &Path) -> PathBuf {
    let mut p = state.as_os_str().to_owned();
    p.push(".ot");
    PathBuf::from(p)
}

/// Writes the loader state (JSON) and the weights next to it.
fn checkpoint(path: &Path, it: &EpochIter, vs: &nn::VarStore) -> Result<(), Box<dyn Error>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    vs.save(weights_path(path))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, it.state().to_json())?;
    std::fs::rename(tmp, path)?;
    Ok(())
}

/// Writes the shapes dataset at `root` unless a dataset is already there; true if it wrote.
fn ensure_dataset(root: &str, rows: usize, stream: u64) -> Result<bool, Box<dyn Error>> {
    match Dataset::open(root) {
        Ok(ds) if ds.row_count() > 0 => return Ok(false),
        Ok(_) => return Err(format!("{root} holds an empty dataset; remove it to regenerate").into()),
        Err(e) if e.class() == tessera::ErrorClass::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let t = Instant::now();
    let schema = Schema::new([
        Column::new("image", DType::U8, &[Dim::Fixed(SIDE as u64), Dim::Fixed(SIDE as u64), Dim::Fixed(3)])
            .with_kind(ColKind::Image { layout: ImageLayout::Hwc })
            .with_compression(Compression::Lz4),
        Column::new("label", DType::I64, &[])
            .with_kind(ColKind::ClassLabel { names: SHAPES.iter().map(ToString::to_string).collect() }),
        Column::new("colour", DType::I64, &[])
            .with_kind(ColKind::ClassLabel { names: COLOURS.iter().map(|c| c.0.to_string()).collect() }),
        Column::new("caption", DType::Utf8, &[]).with_kind(ColKind::Text),
    ])?;
    // 4 MiB data files: several fragments even for small sets, so block shuffle has windows.
    let opts = tessera::WriteOptions { target_file_bytes: 4 << 20, ..tessera::WriteOptions::default() };
    let ds = Dataset::create(root, schema, &opts)?;
    let mut writer = ds.writer(opts);
    for start in (0..rows).step_by(500) {
        writer.append(&draw_rows(start, 500.min(rows - start), stream)?)?;
    }
    let ds = writer.commit("synthetic shapes")?;
    println!("generated {rows} rows at {root} (version {}) in {:.1}s", ds.version(), t.elapsed().as_secs_f64());
    Ok(true)
}

/// Rows `start..start+n`: a shape of random class, colour, size and position on noise.
fn draw_rows(start: usize, n: usize, stream: u64) -> tessera::Result<Rows> {
    let mut images = Vec::with_capacity(n * SIDE * SIDE * 3);
    let (mut labels, mut colours, mut captions) = (Vec::new(), Vec::new(), Vec::new());
    for i in start..start + n {
        let mut rng = SplitMix64::new((stream << 40) ^ i as u64);
        let mut next = |m: u64| rng.next_u64() % m;
        let shape = next(3) as usize;
        let colour = next(COLOURS.len() as u64) as usize;
        let r = 8.0 + next(12) as f32;
        let cx = 16.0 + next(32) as f32;
        let cy = 16.0 + next(32) as f32;
        let rgb = COLOURS[colour].1;
        for y in 0..SIDE {
            for x in 0..SIDE {
                let (dx, dy) = (x as f32 + 0.5 - cx, y as f32 + 0.5 - cy);
                let inside = match shape {
                    0 => dx * dx + dy * dy <= r * r,
                    1 => dx.abs() <= 0.85 * r && dy.abs() <= 0.85 * r,
                    _ => dy >= -r && dy <= r && dx.abs() <= (dy + r) * 0.55,
                };
                for c in rgb {
                    let noise = next(90) as u8;
                    images.push(if inside { c.saturating_sub(noise / 3) } else { noise });
                }
            }
        }
        labels.push(shape as i64);
        colours.push(colour as i64);
        captions.push(format!("a {} {}", COLOURS[colour].0, SHAPES[shape]));
    }
    Rows::new()
        .with("image", ColumnData::from_fixed(&[SIDE as u64, SIDE as u64, 3], &images)?)?
        .with("label", ColumnData::from_scalars(&labels))?
        .with("colour", ColumnData::from_scalars(&colours))?
        .with("caption", ColumnData::from_strings(&captions))
}
