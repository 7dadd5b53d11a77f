"""A DDP training loop fed by Tessera; every rank reads its own shard (RANK / WORLD_SIZE from
torchrun). usage: torchrun --nnodes N --nproc-per-node P torchrun_train.py DATASET_URL"""

import sys

import torch
import torch.distributed as dist

import tessera

dist.init_process_group("gloo" if not torch.cuda.is_available() else "nccl")
loader = tessera.open(sys.argv[1]).pytorch(batch_size=32, shuffle="global", seed=0, columns=["emb"], drop_last=True)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(2):
    loader.set_epoch(epoch)
    for batch in loader:
        loss = model(batch["emb"]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
print(f"rank {dist.get_rank()}/{dist.get_world_size()}: {len(loader)} batches per epoch, last loss {loss.item():.4f}")
dist.destroy_process_group()
