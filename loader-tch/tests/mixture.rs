//! The tch adapter over a mixture: tensors carry each source's rows, and `Batch::sources`
//! says which source each sample came from (the order itself is tested in the core's
//! `loader/tests/mixture.rs`).

mod common;

use tessera::WriteOptions;
use tessera_loader_tch::{Loader, LoaderConfig, MixSource, Mixture};

#[test]
fn mixture_batches_name_each_samples_source() {
    let dir = tempfile::tempdir().unwrap();
    let roots: Vec<String> = ["a", "b"].iter().map(|n| dir.path().join(n).to_str().unwrap().to_string()).collect();
    common::id_dataset(&roots[0], 30, &WriteOptions::default());
    common::id_dataset(&roots[1], 12, &WriteOptions::default());
    let mix = Mixture::weighted([MixSource::new(&roots[0]), MixSource::new(&roots[1])], &[2.0, 1.0]);
    let loader = Loader::open(LoaderConfig::for_mixture(mix).with_batch_size(6).with_memory_budget(64 << 20)).unwrap();
    let mut per = [0usize; 2];
    for batch in loader.epoch(0).unwrap() {
        let batch = batch.unwrap();
        let ids = common::ids(&batch);
        assert_eq!(batch.sources().len(), ids.len());
        for ((&s, &row), id) in batch.sources().iter().zip(batch.rows()).zip(ids) {
            assert_eq!(id, row as i64, "the id column holds the source's row");
            per[s as usize] += 1;
        }
    }
    assert_eq!(per, [28, 14], "42 samples, two to one (no padding: 42 = 7 batches of 6)");
}
