//! The ingest pipeline: a producer thread walks the inputs in order and sends work items over
//! a bounded channel; `jobs` decoder threads (`std::thread::scope`) decode them in parallel;
//! the calling thread gets the results back in input order. Bounded channels keep memory
//! bounded whatever the input's size; a consumer that fails stops the others.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::error::IngestResult;
use crate::input::Decoded;
use crate::source::{Decoder, Work};

/// Runs the producer, `jobs` decoders and the in-order consumer (on this thread). When the
/// consumer fails, dropping its receiver makes the decoders and then the producer stop.
pub(crate) fn pipeline<P>(
    jobs: usize,
    producer: P,
    decoder: &Decoder,
    consume: &mut dyn FnMut(Vec<Decoded>) -> IngestResult<()>,
) -> IngestResult<()>
where
    P: FnOnce(&mut dyn FnMut(Work) -> bool) + Send,
{
    std::thread::scope(|s| {
        let (work_tx, work_rx) = mpsc::sync_channel::<(u64, Work)>(jobs * 2);
        let (out_tx, out_rx) = mpsc::sync_channel::<(u64, Vec<Decoded>)>(jobs * 4);
        let work_rx = Arc::new(Mutex::new(work_rx));
        s.spawn(move || {
            let mut seq = 0u64;
            producer(&mut |w| {
                let ok = work_tx.send((seq, w)).is_ok();
                seq += 1;
                ok
            });
        });
        for _ in 0..jobs {
            let rx = Arc::clone(&work_rx);
            let tx = out_tx.clone();
            s.spawn(move || {
                loop {
                    let next = match rx.lock() {
                        Ok(guard) => guard.recv(),
                        Err(_) => return,
                    };
                    let Ok((seq, work)) = next else { return };
                    if tx.send((seq, decoder.decode(work))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(out_tx);
        drop(work_rx);
        consume_in_order(out_rx, consume)
    })
}

/// Feeds results to `consume` in sequence order. Returning drops the receiver.
fn consume_in_order(
    rx: mpsc::Receiver<(u64, Vec<Decoded>)>,
    consume: &mut dyn FnMut(Vec<Decoded>) -> IngestResult<()>,
) -> IngestResult<()> {
    let mut pending: BTreeMap<u64, Vec<Decoded>> = BTreeMap::new();
    let mut next = 0u64;
    for (seq, out) in rx {
        pending.insert(seq, out);
        while let Some(o) = pending.remove(&next) {
            next += 1;
            consume(o)?;
        }
    }
    Ok(())
}
